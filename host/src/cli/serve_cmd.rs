//! `openclaw-host serve`: the OpenAI-compatible server that records every main turn.

use super::flags::RunFlags;
use crate::buffer::{FsyncPolicy, Log, LogOptions};
use crate::collect::{Recorder, SessionTracker, TrackerOptions};
use crate::config::{resolve, PluginConfigs, RunConfig};
use crate::metrics::Metrics;
use crate::policy::{ModelFiles, PolicyEngine, SchedulerOptions};
use crate::serve::{router, App, ServerOptions};
use anyhow::{bail, Context, Result};
use openclaw_engine::CpuBackend;
use openclaw_plugin_api::TurnType;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a running server holds, so `run` can add the other loops beside it.
pub struct Served {
    /// The served model.
    pub engine: Arc<PolicyEngine<CpuBackend>>,
    /// The shared state of the handlers.
    pub app: Arc<App<CpuBackend>>,
    /// Every record the buffer held when it was opened.
    pub replay: crate::buffer::Replay,
}

/// Builds the server's state from a resolved configuration, serving `cfg.model_path`.
pub fn build(
    cfg: &RunConfig,
    sink: Option<std::sync::mpsc::SyncSender<crate::collect::CollectEvent>>,
    metrics: Arc<Metrics>,
) -> Result<Served> {
    if cfg.model_path.is_empty() {
        bail!("no model: set MODEL_PATH or --model-path to a model directory (config.json, safetensors, tokenizer.json)");
    }
    build_from(cfg, Path::new(&cfg.model_path), 0, sink, metrics)
}

/// Builds the server's state serving the model in `model_dir` (a model or checkpoint
/// directory) as weight version `version`.
pub fn build_from(
    cfg: &RunConfig,
    model_dir: &Path,
    version: u64,
    sink: Option<std::sync::mpsc::SyncSender<crate::collect::CollectEvent>>,
    metrics: Arc<Metrics>,
) -> Result<Served> {
    if cfg.backend != "embedded" {
        bail!(
            "backend `{}` is not available in this build; use --backend embedded",
            cfg.backend
        );
    }
    let files = ModelFiles::<CpuBackend>::load(model_dir, &Default::default())?;
    metrics.weight_version.set(version as i64);
    let engine = Arc::new(PolicyEngine::start(
        files,
        version,
        SchedulerOptions {
            max_batch: cfg.max_batch_size as usize,
            max_inflight: cfg.max_inflight as usize,
        },
        metrics.clone(),
    ));
    let (log, replay) = Log::open(
        Path::new(&cfg.rl_buffer_dir),
        LogOptions {
            fsync: FsyncPolicy::from_millis(cfg.fsync_interval_ms),
            ..Default::default()
        },
    )?;
    for w in &replay.warnings {
        tracing::warn!("{w}");
    }
    let overflow = metrics.clone();
    let recorder = Recorder::new(Arc::new(log), sink).on_dropped(Arc::new(move || {
        overflow
            .queue_overflow
            .get_or_create(&Metrics::label("queue", "collect"))
            .inc();
    }));
    let sessions = Arc::new(Mutex::new(SessionTracker::new(TrackerOptions {
        default_turn_type: if cfg.default_turn_type == "side" {
            TurnType::Side
        } else {
            TurnType::Main
        },
        idle_timeout: Duration::from_secs(cfg.session_idle_timeout),
        max_sessions: cfg.max_sessions as usize,
    })));
    let app = Arc::new(App {
        engine: engine.clone(),
        sessions,
        recorder,
        metrics,
        opts: ServerOptions {
            served_model_name: cfg.served_model_name.clone(),
            api_key: cfg.api_key.clone(),
            max_body_bytes: cfg.max_body_bytes as usize,
            default_max_tokens: cfg.default_max_tokens,
            default_temperature: 1.0,
            record_turns: cfg.enable_rl_intercept,
        },
    });
    Ok(Served {
        engine,
        app,
        replay,
    })
}

/// Serves until Ctrl-C, closing idle sessions every few seconds.
pub async fn serve(app: Arc<App<CpuBackend>>, host: &str, port: u16) -> Result<()> {
    let listener = bind(host, port).await?;
    serve_on(listener, app, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

/// Listens on `host:port` (port 0 picks a free one).
pub async fn bind(host: &str, port: u16) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))
}

/// Serves on `listener` until `shutdown` completes, closing idle sessions every few seconds.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    app: Arc<App<CpuBackend>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener.local_addr()?;
    eprintln!("serving {} on http://{addr}/v1", app.opts.served_model_name);
    let sweeper = app.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            let closed = match sweeper.sessions.lock() {
                Ok(mut t) => t.sweep(Instant::now()),
                Err(_) => return,
            };
            for c in closed {
                if let Err(e) = sweeper
                    .recorder
                    .closed(&c.session_id, c.reason, c.open_turn)
                {
                    tracing::error!("cannot record the end of session {}: {e:#}", c.session_id);
                }
            }
        }
    });
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
        .context("the server stopped")?;
    Ok(())
}

/// `openclaw-host serve`.
pub fn run(flags: &RunFlags) -> Result<i32> {
    let resolved = resolve(&flags.inputs(), &PluginConfigs::default())?;
    let cfg = resolved.config;
    let metrics = Arc::new(Metrics::new());
    let served = build(&cfg, None, metrics)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(serve(served.app, &cfg.host, cfg.port))?;
    Ok(0)
}

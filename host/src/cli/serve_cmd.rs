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
}

/// Builds the server's state from a resolved configuration.
pub fn build(
    cfg: &RunConfig,
    sink: Option<std::sync::mpsc::Sender<crate::collect::CollectEvent>>,
    metrics: Arc<Metrics>,
) -> Result<Served> {
    if cfg.model_path.is_empty() {
        bail!("no model: set MODEL_PATH or --model-path to a model directory (config.json, safetensors, tokenizer.json)");
    }
    if cfg.backend != "embedded" {
        bail!(
            "backend `{}` is not available in this build; use --backend embedded",
            cfg.backend
        );
    }
    let files = ModelFiles::<CpuBackend>::load(Path::new(&cfg.model_path), &Default::default())?;
    let engine = Arc::new(PolicyEngine::start(
        files,
        0,
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
    let recorder = Recorder::new(Arc::new(log), sink);
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
    Ok(Served { engine, app })
}

/// Serves until Ctrl-C, closing idle sessions every few seconds.
pub async fn serve(app: Arc<App<CpuBackend>>, host: &str, port: u16) -> Result<()> {
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
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
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
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

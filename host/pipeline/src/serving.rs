//! The serving loop's parts: the policy engine, the durable buffer, the recorder and the session
//! tracker behind the OpenAI server, and the server itself.

use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_buffer::{FsyncPolicy, Log, LogOptions, Record, Replay};
use openclaw_collect::{CollectEvent, Recorder, SessionTracker, TrackerOptions, TurnDesk};
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_metrics::Metrics;
use openclaw_plugin_api::TurnType;
use openclaw_policy::{scheduler_options, ModelFiles, PolicyEngine};
use openclaw_server::{router, App, ServerOptions};
use std::path::Path;
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server's state, ready to listen.
pub struct Serving<B: Backend> {
    /// The served model.
    pub engine: Arc<PolicyEngine<B>>,
    /// The shared state of the handlers.
    pub app: Arc<App<B>>,
    /// Every record the buffer held when it was opened.
    pub replay: Replay,
}

/// The model id clients see: `--served-model-name`, else the model path's last component as
/// vLLM does with its model argument, a GGUF file's without `.gguf` (`default` for the built-in
/// model).
pub fn served_model_name(cfg: &RunConfig) -> String {
    if !cfg.served_model_name.is_empty() {
        return cfg.served_model_name.clone();
    }
    let path = Path::new(&cfg.model_path);
    // `qwen3-0.6b-q8_0.gguf` is served as `qwen3-0.6b-q8_0`: the extension says how the
    // weights are stored, not which model they are.
    let name = if is_gguf(path) {
        path.file_stem()
    } else {
        path.file_name()
    };
    name.map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// The other ids a request may name for the served model (see
/// [`ServerOptions::aliases`]): `default` always, and a GGUF file's own name when its id left
/// `.gguf` out (the id it was served under before), never the served id itself.
pub fn served_model_aliases(cfg: &RunConfig) -> Vec<String> {
    let served = served_model_name(cfg);
    let mut aliases = vec!["default".to_string()];
    let path = Path::new(&cfg.model_path);
    if cfg.served_model_name.is_empty() && is_gguf(path) {
        if let Some(name) = path.file_name() {
            aliases.push(name.to_string_lossy().into_owned());
        }
    }
    aliases.retain(|a| *a != served);
    aliases
}

/// `--lora-modules`: `name=dir` pairs, separated by commas or spaces. A name is what a request
/// gives as `model` ([`openclaw_engine::adapters::valid_name`]), neither the served model's id
/// nor an alias, given once.
pub fn lora_modules(cfg: &RunConfig) -> Result<Vec<(String, String)>> {
    let served = served_model_name(cfg);
    let aliases = served_model_aliases(cfg);
    let mut out: Vec<(String, String)> = Vec::new();
    let given = &cfg.lora_modules;
    for entry in given
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
    {
        let Some((name, dir)) = entry.split_once('=') else {
            bail!("--lora-modules: `{entry}` is not name=dir");
        };
        if !openclaw_engine::adapters::valid_name(name) {
            bail!(
                "--lora-modules: `{name}` is not a name (1-64 letters, digits, `.`, `_`, `-`, \
                 starting with a letter or digit)"
            );
        }
        if name == served || aliases.iter().any(|a| a == name) || name == "default" {
            bail!("--lora-modules: `{name}` is the served model's id");
        }
        if out.iter().any(|(n, _)| n == name) {
            bail!("--lora-modules: `{name}` is given twice");
        }
        if dir.is_empty() {
            bail!("--lora-modules: `{name}` has no directory");
        }
        out.push((name.to_string(), dir.to_string()));
    }
    Ok(out)
}

/// Whether a model path names a GGUF file, by its extension.
fn is_gguf(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

impl<B: Backend> Serving<B>
where
    Model<B>: Send + Sync,
{
    /// Serves `files` as weight version `version`, recording turns to `cfg.rl_buffer_dir` and
    /// handing them to `sink` (collection) when given.
    pub fn build(
        cfg: &RunConfig,
        files: ModelFiles<B>,
        version: u64,
        sink: Option<SyncSender<CollectEvent>>,
        metrics: Arc<Metrics>,
    ) -> Result<Self> {
        if cfg.backend != "embedded" {
            bail!(
                "backend `{}` is not available in this build; use --backend embedded",
                cfg.backend
            );
        }
        metrics.weight_version.set(version as i64);
        let modules = lora_modules(cfg)?;
        if !modules.is_empty() && sink.is_some() {
            bail!(
                "--lora-modules: this run trains one shared policy, and would train it on replies \
                 its adapters sampled; `run` trains users' own adapters (--adapters per-user), so \
                 serve named adapters with `serve`"
            );
        }
        let per_user = cfg.adapters == "per-user";
        // Under `run`, each user's turns train their adapter; under `serve`, they are kept.
        let adapter_turns = match per_user && sink.is_some() {
            true => openclaw_collect::AdapterTurns::Trained,
            false => openclaw_collect::AdapterTurns::Kept,
        };
        let store = match per_user {
            true => openclaw_engine::adapters::AdapterStore::over_dir(
                Path::new(&cfg.adapters_dir),
                cfg.max_adapters_in_memory as usize,
                &files.model,
            )
            .context("--adapters-dir")?,
            false => Default::default(),
        };
        let engine = Arc::new(PolicyEngine::start_with(
            files,
            version,
            scheduler_options(cfg),
            metrics.clone(),
            Arc::new(store),
        ));
        if !modules.is_empty() {
            let base = engine.weights.current();
            if openclaw_engine::lora::has_adapters(&base.model) {
                bail!(
                    "--lora-modules: the served model carries a LoRA adapter of its own; serve \
                     adapters over a base without one"
                );
            }
            for (name, dir) in &modules {
                engine
                    .adapters
                    .load(name, &base.model, Path::new(dir))
                    .with_context(|| {
                        format!("--lora-modules: cannot load adapter `{name}` from {dir}")
                    })?;
            }
        }
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
        let mut tracker = SessionTracker::new(TrackerOptions {
            default_turn_type: if cfg.default_turn_type == "side" {
                TurnType::Side
            } else {
                TurnType::Main
            },
            idle_timeout: Duration::from_secs(cfg.session_idle_timeout),
            max_sessions: cfg.max_sessions as usize,
            id_pattern: (!cfg.session_id_pattern.is_empty())
                .then(|| regex::Regex::new(&cfg.session_id_pattern))
                .transpose()
                .context("session_id_pattern")?,
        });
        tracker.resume(replay.records.iter().filter_map(|e| match &e.record {
            Record::Turn { turn, .. } => Some((turn.session_id.to_string(), turn.turn_index)),
            _ => None,
        }));
        let sessions = Arc::new(Mutex::new(tracker));
        let user_keys = match cfg.user_keys_file.as_str() {
            "" => Default::default(),
            file => openclaw_server::user_keys::UserKeys::load(Path::new(file))
                .context("--user-keys-file")?,
        };
        let app = Arc::new(App {
            session_keys: Default::default(),
            user_keys,
            engine: engine.clone(),
            turns: TurnDesk {
                sessions,
                recorder,
                record_turns: cfg.enable_rl_intercept,
                recent: Default::default(),
                adapter_turns,
            },
            metrics,
            admission: Arc::new(tokio::sync::Semaphore::new(
                (cfg.max_inflight as usize).max(1),
            )),
            per_client: Arc::default(),
            stopping: tokio::sync::watch::channel(false).0,
            opts: ServerOptions {
                served_model_name: served_model_name(cfg),
                aliases: served_model_aliases(cfg),
                api_key: cfg.api_key.clone(),
                max_body_bytes: cfg.max_body_bytes as usize,
                default_max_tokens: cfg.default_max_tokens,
                default_temperature: 1.0,
                body_timeout: Duration::from_secs(cfg.request_body_timeout.max(1)),
                max_inflight_per_client: (cfg.max_inflight_per_client as usize).max(1),
                max_inflight: (cfg.max_inflight as usize).max(1),
                adapters: modules,
                per_user,
            },
        });
        Ok(Serving {
            engine,
            app,
            replay,
        })
    }

    /// The durable buffer the server records into.
    pub fn log(&self) -> Arc<Log> {
        self.app.turns.recorder.log().clone()
    }
}

/// Warns when the server will answer other machines with no key asked: anyone who can reach
/// the port can then use the model and write to the buffer that trains it.
pub fn warn_if_open(host: &str, api_key: &str) -> bool {
    let open = api_key.is_empty() && !openclaw_config::access::loopback(host);
    if open {
        // Once, on stderr whatever RUST_LOG says: this is about who can reach the model.
        eprintln!(
            "warning: listening on {host} without an API key: any machine that reaches this port can use the model and feed the training buffer; set --api-key (OPENCLAW_API_KEY) or bind 127.0.0.1"
        );
    }
    open
}

/// Listens on `host:port` (port 0 picks a free one).
pub async fn bind(host: &str, port: u16) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))
}

/// Serves `app` on `listener` until `shutdown` completes, closing idle sessions every few
/// seconds.
pub async fn serve_on<B: Backend>(
    listener: tokio::net::TcpListener,
    app: Arc<App<B>>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()>
where
    Model<B>: Send + Sync,
{
    let addr = listener.local_addr()?;
    eprintln!("serving {} on http://{addr}/v1", app.opts.served_model_name);
    eprintln!(
        "dashboard: http://{addr}{}",
        openclaw_server::dashboard::PATH
    );
    let sweeper = app.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            let closed = match sweeper.turns.sessions.lock() {
                Ok(mut t) => t.sweep(Instant::now()),
                Err(_) => return,
            };
            for c in closed {
                if let Err(e) =
                    sweeper
                        .turns
                        .recorder
                        .closed(&c.session_id, c.reason, &c.open_turns)
                {
                    tracing::error!("cannot record the end of session {}: {e:#}", c.session_id);
                }
            }
        }
    });
    // The stop also ends the wait of requests still sending their body (answered 503), so a
    // slow client cannot hold it.
    let stopping = app.stopping.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.send_replace(true);
    };
    axum::serve(
        listener,
        router(app).into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
    .context("the server stopped")?;
    Ok(())
}

/// Completes on Ctrl-C or, on Unix, SIGTERM (`kill`, systemd and container stops).
pub async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lora_modules_are_name_dir_pairs_with_names_of_their_own() {
        let modules = |given: &str| {
            let mut cfg = RunConfig::defaults();
            cfg.model_path = "/models/Qwen3-0.6B".into();
            cfg.lora_modules = given.into();
            lora_modules(&cfg).map_err(|e| e.to_string())
        };
        assert_eq!(
            modules("alice=/a, bob=/b/c").unwrap(),
            [("alice".into(), "/a".into()), ("bob".into(), "/b/c".into())]
        );
        assert!(modules("").unwrap().is_empty());
        for (given, says) in [
            ("alice", "not name=dir"),
            ("a b=/x", "not name=dir"),
            ("al/ice=/x", "not a name"),
            ("Qwen3-0.6B=/x", "served model's id"),
            ("default=/x", "served model's id"),
            ("a=/x,a=/y", "given twice"),
            ("a=", "no directory"),
        ] {
            let e = modules(given).unwrap_err();
            assert!(
                e.contains("--lora-modules") && e.contains(says),
                "{given}: {e}"
            );
        }
    }

    #[test]
    fn a_gguf_files_id_leaves_out_gguf_and_its_file_name_stays_an_alias() {
        let cfg = |model_path: &str, served: &str| {
            let mut cfg = RunConfig::defaults();
            cfg.model_path = model_path.into();
            cfg.served_model_name = served.into();
            cfg
        };
        let gguf = cfg("/models/SmolLM2-135M-Instruct.Q4_1.gguf", "");
        assert_eq!(served_model_name(&gguf), "SmolLM2-135M-Instruct.Q4_1");
        assert_eq!(
            served_model_aliases(&gguf),
            ["default", "SmolLM2-135M-Instruct.Q4_1.gguf"]
        );
        let upper = cfg("models/Tiny.GGUF", "");
        assert_eq!(served_model_name(&upper), "Tiny");
        assert_eq!(served_model_aliases(&upper), ["default", "Tiny.GGUF"]);
        // A directory keeps its whole name, dots included.
        let dir = cfg("/models/Qwen3-0.6B", "");
        assert_eq!(served_model_name(&dir), "Qwen3-0.6B");
        assert_eq!(served_model_aliases(&dir), ["default"]);
        // `--served-model-name` wins, and the file's names are then no aliases.
        let named = cfg("/models/tiny.gguf", "Qwen/Qwen3-0.6B");
        assert_eq!(served_model_name(&named), "Qwen/Qwen3-0.6B");
        assert_eq!(served_model_aliases(&named), ["default"]);
        // The built-in model is `default`, which is then no alias of itself.
        let builtin = cfg("", "default");
        assert_eq!(served_model_name(&builtin), "default");
        assert!(served_model_aliases(&builtin).is_empty());
        assert_eq!(served_model_name(&cfg("", "")), "default");
    }

    #[test]
    fn only_a_public_address_without_a_key_is_warned_about() {
        assert!(warn_if_open("0.0.0.0", ""));
        assert!(warn_if_open("192.168.1.5", ""));
        assert!(!warn_if_open("0.0.0.0", "sk-secret"));
        for local in ["127.0.0.1", "localhost", "::1", "[::1]"] {
            assert!(!warn_if_open(local, ""), "{local}");
        }
    }
}

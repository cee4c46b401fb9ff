//! `openclaw-host run`: the four loops in one process. Serving records every main turn;
//! collection waits for next states; the judge pool scores turns through the method's reward
//! plugin; training steps through its loss plugin and publishes new weights to serving. With
//! no model given, the built-in default: the project's tiny model, simulated users over HTTP
//! and the rule-based judge, printing how the first answers meet the users' preference.

use super::flags::RunFlags;
use super::serve_cmd;
use crate::config::{RunConfig, Source};
use crate::judge::pool::{JudgeJob, JudgePool, PoolOptions};
use crate::metrics::Metrics;
use crate::pipeline::collect::score_request;
use crate::pipeline::{
    replay, Collection, CollectionOptions, ConsumedState, SampleMaker, StepEvent, TrainLoop,
    TrainLoopOptions,
};
use crate::plugin::instance::TracingLog;
use crate::plugin::RunPlugins;
use crate::policy::{ModelFiles, PolicyEngine, SchedulerOptions};
use crate::simulate::{Scoreboard, SimUsers, SimUsersOptions};
use crate::training::session::needs_reference;
use crate::training::{train_config, SessionOptions, TrainSession, RUN_STATE_FILE};
use anyhow::{Context, Result};
use openclaw_engine::CpuBackend;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{HostServices, PluginKind};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Run settings of the built-in default where the user left the general default: the tiny
/// model learns at rates that would wreck a 7B one (AdamW betas 0.9/0.95, no weight decay,
/// small batches of single answers). At lr 3e-4 combine reached the preference in 20 steps but
/// drifted off topic by step 80 here; 1e-4 gets there in about 45 and stays on topic.
const BUILTIN_SETTINGS: [(&str, &str); 6] = [
    ("lr", "1e-4"),
    ("adam_beta2", "0.95"),
    ("weight_decay", "0"),
    ("rollout_batch_size", "8"),
    ("default_max_tokens", "96"),
    ("batch_timeout", "10"),
];

/// Answers in the rolling window the step lines report.
const WINDOW: usize = 48;

fn is_default(run: &RunPlugins, key: &str) -> bool {
    run.resolved
        .values
        .iter()
        .any(|(k, _, src)| k.key == key && *src == Source::Default)
}

fn apply_builtin(run: &RunPlugins, cfg: &mut RunConfig) -> Vec<String> {
    let mut applied = Vec::new();
    for (key, value) in BUILTIN_SETTINGS {
        if !is_default(run, key) {
            continue;
        }
        let v: f64 = value.parse().expect("the table's values are numbers");
        match key {
            "lr" => cfg.lr = v,
            "adam_beta2" => cfg.adam_beta2 = v,
            "weight_decay" => cfg.weight_decay = v,
            "rollout_batch_size" => cfg.rollout_batch_size = v as u32,
            "default_max_tokens" => cfg.default_max_tokens = v as u32,
            "batch_timeout" => cfg.batch_timeout = v as u64,
            _ => unreachable!(),
        }
        applied.push(format!("{key}={value}"));
    }
    if cfg.simulate_users == 0 {
        cfg.simulate_users = 8;
        applied.push("simulate_users=8".into());
    }
    applied
}

/// One line of `score.log`: where training stands and how recent first answers fared.
#[derive(serde::Serialize)]
struct ScoreLine {
    step: u64,
    weight_version: u64,
    elapsed_s: f64,
    train_s: f64,
    loss: f64,
    sample_seqs: Vec<u64>,
    #[serde(flatten)]
    window: crate::simulate::WindowStats,
}

/// The built-in default model's directory, built on first use.
pub fn builtin_model() -> Result<PathBuf> {
    crate::default_model::ensure_default_model(&crate::default_model::default_cache_dir(), true)
}

/// `openclaw-host run`.
pub fn run(flags: &RunFlags) -> Result<i32> {
    let plugins = RunPlugins::load(|| flags.inputs())?;
    let mut cfg = plugins.resolved.config.clone();
    let builtin = cfg.model_path.is_empty();
    if builtin {
        let dir = builtin_model()?;
        cfg.model_path = dir.display().to_string();
        let applied = apply_builtin(&plugins, &mut cfg);
        eprintln!(
            "no MODEL_PATH: the built-in default model {} with simulated users and the rule-based judge ({})",
            dir.display(),
            applied.join(", ")
        );
    }
    let metrics = Arc::new(Metrics::new());

    // Training first: a resumed run serves the checkpoint's weights under its version.
    let loss = plugins.loss(HostServices::standalone())?;
    let mut tc = train_config(&cfg, cfg.max_steps.max(1))?;
    tc.use_reference = needs_reference(&plugins.loss_config());
    let save_dir = PathBuf::from(&cfg.save_dir);
    let mut resume = cfg.resume_from_checkpoint.clone();
    if resume.is_empty() && openclaw_train::list_checkpoints(&save_dir).is_ok_and(|c| !c.is_empty())
    {
        // A restart on the same directories continues where the run stopped.
        resume = "latest".into();
    }
    let session = TrainSession::start(
        tc,
        SessionOptions {
            model_dir: PathBuf::from(&cfg.model_path),
            save_dir: Some(save_dir.clone()),
            save_interval: cfg.save_interval as u64,
            keep: cfg.keep_checkpoints as usize,
            resume,
            log_dir: PathBuf::from(&cfg.log_dir),
            quiet: true,
        },
    )?;
    let consumed: ConsumedState = session
        .run_state
        .as_deref()
        .map(serde_json::from_slice)
        .transpose()
        .with_context(|| format!("the checkpoint's {RUN_STATE_FILE} is malformed"))?
        .unwrap_or_default();
    let (serve_dir, version) = match &session.resumed_from {
        Some(dir) => (dir.clone(), session.trainer.state().weight_version),
        None => (PathBuf::from(&cfg.model_path), 0),
    };
    if let Some(dir) = &session.resumed_from {
        eprintln!(
            "resumed from {} (step {}, weight version {version}, samples through #{} consumed)",
            dir.display(),
            session.trainer.state().step,
            consumed.consumed_through
        );
    }

    // Serving, with the recorder feeding collection.
    let (collect_tx, collect_rx) = sync_channel(4096);
    let served =
        serve_cmd::build_from(&cfg, &serve_dir, version, Some(collect_tx), metrics.clone())?;
    let engine = served.engine.clone();
    let log = served.app.recorder.log().clone();

    // The reward plugin: the judge, and the policy as teacher (frozen: the starting model).
    let teacher: Arc<dyn PolicyService> = if cfg.teacher == "frozen" {
        // The starting model, never updated: its own engine (scoring only).
        Arc::new(PolicyEngine::start(
            ModelFiles::<CpuBackend>::load(Path::new(&cfg.model_path), &Default::default())?,
            0,
            SchedulerOptions {
                max_batch: cfg.max_batch_size as usize,
                max_inflight: cfg.max_inflight as usize,
            },
            metrics.clone(),
        ))
    } else {
        engine.clone()
    };
    let reward_name = plugins
        .plugin_for(PluginKind::Reward)
        .unwrap_or("reward")
        .to_string();
    let reward = Arc::new(
        plugins.reward(
            HostServices::builder()
                .policy(teacher)
                .judge(crate::judge::from_config(&cfg)?)
                .log(TracingLog::new(&reward_name))
                .build(),
        )?,
    );

    // Judge pool → samples → training.
    let (train_tx, train_rx) = sync_channel(cfg.rollout_batch_size as usize * 4);
    let maker = Arc::new(SampleMaker::new(log.clone(), train_tx));
    let on_outcome = maker.clone();
    let pool = Arc::new(JudgePool::start(
        reward,
        PoolOptions {
            workers: cfg.num_judge_workers as usize,
            queue: 256,
            attempts: 3,
            backoff: Duration::from_millis(500),
            slow_after: Duration::from_secs(cfg.judge_timeout),
        },
        metrics.clone(),
        Arc::new(move |o| on_outcome.on_outcome(o)),
    ));
    let judge_settings = crate::judge::settings(&cfg);

    // What the buffer holds unfinished from before a restart.
    let plan = replay(&served.replay.records, &consumed);
    if !plan.to_train.is_empty() || !plan.to_sample.is_empty() || !plan.to_judge.is_empty() {
        eprintln!(
            "buffer replay: {} samples to train, {} judged turns to sample, {} turns to judge ({} samples already trained)",
            plan.to_train.len(),
            plan.to_sample.len(),
            plan.to_judge.len(),
            plan.already_trained
        );
    }
    let replayer = {
        let maker = maker.clone();
        let pool = pool.clone();
        let settings = judge_settings.clone();
        std::thread::spawn(move || -> Result<()> {
            for (seq, s) in plan.to_train {
                maker.forward_recorded(seq, s)?;
            }
            for (turn, score) in plan.to_sample {
                maker.resume_judged(&turn, &score)?;
            }
            for (seq, turn, closed) in plan.to_judge {
                pool.submit(JudgeJob {
                    turn_seq: seq,
                    request: score_request(turn, closed, &settings),
                })
                .map_err(|e| anyhow::anyhow!(e))?;
            }
            Ok(())
        })
    };

    // Collection.
    let collection = Collection::new(
        CollectionOptions {
            max_pending: (cfg.max_sessions as usize).max(1),
            judge: judge_settings,
        },
        metrics.clone(),
    );
    let collect_pool = pool.clone();
    let collector = std::thread::Builder::new()
        .name("collect".into())
        .spawn(move || collection.run(collect_rx, &collect_pool))?;

    // Training.
    let stop = Arc::new(AtomicBool::new(false));
    let train_loop = TrainLoop {
        session,
        loss,
        weights: engine.weights.clone(),
        opts: TrainLoopOptions {
            batch: cfg.rollout_batch_size as usize,
            batch_timeout: Duration::from_secs(cfg.batch_timeout),
            max_staleness: cfg.max_staleness,
            correct_stale: cfg.stale_policy == "correct",
            update_interval: cfg.update_weights_interval as u64,
            max_steps: cfg.max_steps,
        },
        metrics: metrics.clone(),
        consumed,
    };
    let board = Arc::new(Scoreboard::default());
    let started = Instant::now();
    let score_path = Path::new(&cfg.log_dir).join("score.log");
    std::fs::create_dir_all(&cfg.log_dir)?;
    let mut score_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&score_path)
        .with_context(|| format!("cannot open {}", score_path.display()))?;
    let trainer_stop = stop.clone();
    let trainer_board = board.clone();
    let simulated = cfg.simulate_users > 0;
    let trainer = std::thread::Builder::new()
        .name("train".into())
        .spawn(move || {
            let mut train_s = 0.0;
            train_loop.run(train_rx, trainer_stop, |ev: &StepEvent| {
                train_s += ev.report.step_time_s;
                let r = &ev.report;
                let mut line = format!(
                    "step {:>4}  v{:<4} loss {:>8.4}  grad {:.3}  {} samples{}  {:.2} s",
                    r.step,
                    ev.weight_version,
                    r.loss,
                    r.grad_norm,
                    r.samples,
                    if ev.dropped_stale > 0 {
                        format!(" ({} stale dropped)", ev.dropped_stale)
                    } else {
                        String::new()
                    },
                    r.step_time_s
                );
                let window = trainer_board.recent(WINDOW);
                if simulated {
                    line += &format!(
                        "  | first answers (last {}): preferred {:.2}  on-topic {:.2}  distinct {:.2}",
                        window.n, window.preferred, window.on_topic, window.distinct
                    );
                }
                eprintln!("{line}");
                let score = ScoreLine {
                    step: r.step,
                    weight_version: ev.weight_version,
                    elapsed_s: started.elapsed().as_secs_f64(),
                    train_s,
                    loss: r.loss,
                    sample_seqs: ev.sample_seqs.clone(),
                    window,
                };
                if let Ok(mut l) = serde_json::to_string(&score) {
                    l.push('\n');
                    let _ = score_log.write_all(l.as_bytes());
                }
            })
        })?;

    // Serving, and the simulated users once it listens.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = rt.block_on(serve_cmd::bind(&cfg.host, cfg.port))?;
    let addr = listener.local_addr()?;
    let sim = simulated.then(|| {
        SimUsers::start(
            SimUsersOptions {
                base_url: format!("http://{addr}/v1"),
                api_key: cfg.api_key.clone(),
                users: cfg.simulate_users as usize,
                seed: cfg.seed,
                max_tokens: cfg.default_max_tokens,
                tasks: openclaw_sim::TaskSet::standard().train,
            },
            board.clone(),
        )
    });
    let shutdown_stop = stop.clone();
    let trainer_done = Arc::new(AtomicBool::new(false));
    let watch_done = trainer_done.clone();
    let app = served.app.clone();
    let server = rt.spawn(serve_cmd::serve_on(listener, app, async move {
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    if watch_done.load(Ordering::SeqCst) || shutdown_stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
            }
        }
    }));
    // Wait for training to end (max steps) or Ctrl-C (the server then stops by itself).
    let session = loop {
        if trainer.is_finished() {
            trainer_done.store(true, Ordering::SeqCst);
            break trainer
                .join()
                .map_err(|_| anyhow::anyhow!("training panicked"))?;
        }
        if server.is_finished() {
            stop.store(true, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::SeqCst);
    if let Some(s) = sim {
        s.stop();
    }
    let _ = rt.block_on(server);
    let _ = replayer.join();
    drop(collector); // ends with the recorder's channel when the server's state is dropped
    let session = session?;
    eprintln!(
        "stopped after step {}; training log {}, scores {}",
        session.trainer.state().step,
        session.log.path().display(),
        score_path.display()
    );
    if simulated {
        let png = Path::new(&cfg.log_dir).join("learning_curve.png");
        let metrics = ["preferred", "on_topic", "distinct", "loss"].map(String::from);
        match crate::report::learning_curves(std::slice::from_ref(&score_path), &metrics, "step")
            .and_then(|c| {
                let size = crate::report::grid_size(c.charts.len(), crate::report::PANEL_SIZE);
                crate::report::draw_png(&c.charts, &png, size)
            }) {
            Ok(()) => eprintln!("learning curve: {}", png.display()),
            Err(e) => eprintln!("warning: cannot draw the learning curve: {e:#}"),
        }
        let first = board.by_versions(0, 0);
        let last = board.recent(WINDOW);
        eprintln!(
            "first answers meeting the preference: {:.2} with the starting weights (n={}), {:.2} in the last {} (versions {}..{}); on-topic {:.2}, distinct {:.2}",
            first.preferred, first.n, last.preferred, last.n, last.versions.0, last.versions.1, last.on_topic, last.distinct
        );
    }
    Ok(0)
}

//! The run as a library: [`Pipeline`] is built from the resolved configuration and the plugin
//! set, [`Pipeline::start`] starts its loops and returns a [`PipelineHandle`] to observe and
//! stop them. `run` (the four loops), `serve` (serving alone) and `train` (training alone, on a
//! scored trajectory file) are all this type; the command line only parses, reports and, for
//! the built-in default, starts simulated users.

use super::env_episodes::{EnvEpisodes, EnvRunOptions, EpisodeStats, StepJudge};
use super::plugin_samples::{GeneratedGroups, PluginFailure, PluginRollouts};
use super::producer::{Epochs, LiveSessions, Producer, ReplayGate, Replayed, Sinks};
use super::replay::replay;
use super::samples::{QueuedSample, SampleMaker};
use super::serving::{bind, interrupted, serve_on, warn_if_open, Serving};
use super::train_loop::{ConsumedState, StepEvent, TrainLoop, TrainLoopOptions, TrainSummary};
use super::{Collection, CollectionOptions};
use crate::training::{
    last_step, session_options, train_config, SessionOptions, TrainSession, RUN_STATE_FILE,
};
use anyhow::{anyhow, bail, Context, Result};
use burn::prelude::Backend;
use openclaw_buffer::Log;
use openclaw_config::backend::Placement;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_episodes::batch::{run_batch, BatchOptions, BatchSummary, JobOptions};
use openclaw_episodes::policy_agent::PolicyAgentOptions;
use openclaw_episodes::setup::{open_env, read_tasks, run_tasks, EnvFiles};
use openclaw_episodes::{EpisodeOptions, TimedEnv};
use openclaw_judge::pool::{JudgePool, PoolOptions};
use openclaw_judge::stats::JudgeStats;
use openclaw_judge::{JudgeChoice, Judges};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{HostServices, PluginKind, SamplingParams, Task, TrainingSample};
use openclaw_plugins::instance::TracingLog;
use openclaw_plugins::{watch, RunPlugins};
use openclaw_policy::{load_options, scheduler_options, ModelFiles, PolicyEngine};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a resumed run picked up.
#[derive(Clone, Debug)]
pub struct Resumed {
    /// The checkpoint directory.
    pub checkpoint: PathBuf,
    /// Its training step.
    pub step: u64,
    /// The weight version it serves.
    pub weight_version: u64,
    /// Samples up to this sequence number were trained before it.
    pub consumed_through: u64,
}

/// What the buffer held unfinished at start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Recorded samples still to train.
    pub to_train: usize,
    /// Judged turns whose sample was never written.
    pub to_sample: usize,
    /// Turns never judged.
    pub to_judge: usize,
    /// Samples the checkpoint had trained already.
    pub already_trained: usize,
    /// Groups of environment episodes left unfinished (`run --env`).
    pub unfinished_groups: usize,
}

impl ReplayCounts {
    /// Whether anything is left to do.
    pub fn any(&self) -> bool {
        self.to_train + self.to_sample + self.to_judge + self.unfinished_groups > 0
    }
}

/// The loops besides serving: producers, the judge pool, training.
struct Training<B: Backend> {
    train_loop: TrainLoop<B>,
    samples: Receiver<QueuedSample>,
    producers: Vec<Box<dyn Producer>>,
    /// The judge pool the producers feed, closed at shutdown (none for `train`, whose samples
    /// come scored).
    pool: Option<Arc<JudgePool>>,
}

/// A run's loops, built and not yet started.
pub struct Pipeline<B: Backend> {
    cfg: RunConfig,
    metrics: Arc<Metrics>,
    serving: Option<Serving<B>>,
    training: Option<Training<B>>,
    /// Where a resumed run picked up.
    pub resumed: Option<Resumed>,
    /// What the buffer held unfinished.
    pub replay: ReplayCounts,
    /// The step training stops at, when it is known before it starts (`--max-steps`, or the
    /// end of `train`'s data).
    pub last_step: Option<u64>,
    /// The environment of `run --env`: its episode counts and held-out evaluation.
    pub env: Option<EnvRun>,
    /// Why a rollout or generate plugin stopped the run, once it has.
    pub plugin_failure: Option<Arc<PluginFailure>>,
    /// What the judges said since the last step (the four loops).
    pub judge_stats: Option<Arc<JudgeStats>>,
}

/// The environment side of `run --env`, for the command's step lines and evaluations.
pub struct EnvRun {
    /// The environment.
    pub env: TimedEnv,
    /// Counts over the finished training episodes.
    pub stats: Arc<EpisodeStats>,
    /// Tasks of the environment's `eval` split (empty: no evaluation).
    pub eval_tasks: Vec<Task>,
    /// The served policy.
    pub policy: Arc<dyn PolicyService>,
    /// How evaluations run (one greedy episode per task).
    pub eval: BatchOptions,
}

impl EnvRun {
    /// One greedy episode of every eval task with the policy's current weights.
    pub fn evaluate(&self) -> BatchSummary {
        run_batch(
            &self.env,
            &self.eval_tasks,
            self.policy.clone(),
            &self.eval,
            &|_| {},
        )
        .1
    }
}

/// The consumed state a checkpoint recorded (none before any checkpoint).
fn consumed_state<B: Backend>(session: &TrainSession<B>) -> Result<ConsumedState> {
    Ok(session
        .run_state
        .as_deref()
        .map(serde_json::from_slice)
        .transpose()
        .with_context(|| format!("the checkpoint's {RUN_STATE_FILE} is malformed"))?
        .unwrap_or_default())
}

fn resumed<B: Backend>(session: &TrainSession<B>, consumed: &ConsumedState) -> Option<Resumed> {
    session.resumed_from.as_ref().map(|dir| Resumed {
        checkpoint: dir.clone(),
        step: session.trainer.state().step,
        weight_version: session.trainer.state().weight_version,
        consumed_through: consumed.consumed_through,
    })
}

impl<B: Backend> Pipeline<B>
where
    Model<B>: Send + Sync,
{
    /// Serving alone (`serve`): the OpenAI server recording every main turn to the buffer.
    pub fn serving(cfg: &RunConfig, placement: &Placement<B>) -> Result<Self> {
        let metrics = Arc::new(Metrics::new());
        let files = ModelFiles::<B>::load(&cfg.model_path, &load_options(cfg), &placement.serve)?;
        let serving = Serving::build(cfg, files, 0, None, metrics.clone())?;
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: Some(serving),
            training: None,
            resumed: None,
            replay: ReplayCounts::default(),
            last_step: None,
            env: None,
            plugin_failure: None,
            judge_stats: None,
        })
    }

    /// Training alone (`train`): the samples of one pass over a scored trajectory file
    /// ([`super::Dataset`]), `epochs` passes in file order, in batches of
    /// `--rollout-batch-size` through the loss plugin, until the data ends or `--max-steps`.
    /// Nothing serves and nothing is recorded to the buffer; `--resume-from-checkpoint`
    /// continues after the samples the checkpoint consumed, so a run cut short and resumed ends
    /// with the weights of one that ran straight through.
    pub fn offline(
        cfg: &RunConfig,
        plugins: &RunPlugins,
        placement: &Placement<B>,
        samples: Vec<TrainingSample>,
        epochs: u64,
    ) -> Result<Self> {
        if samples.is_empty() {
            bail!("{}: no trainable samples", cfg.data_path);
        }
        for kind in [PluginKind::Rollout, PluginKind::Generate] {
            if let Some(p) = plugins.plugin_for(kind) {
                bail!(
                    "plugin `{p}` provides kind `{kind}`, but `train` trains on a scored trajectory \
                     file and has no policy to generate with; run it with `run` (which serves and \
                     trains)"
                );
            }
        }
        let metrics = Arc::new(Metrics::new());
        let loss = plugins.loss(HostServices::standalone())?;
        let batch = (cfg.rollout_batch_size as usize).max(1);
        let schedule_steps = (samples.len() as u64 * epochs).div_ceil(batch as u64);
        let last_step = last_step(cfg, schedule_steps);
        let mut tc = train_config(cfg, schedule_steps)?;
        tc.use_reference = plugins.loss_inputs()?.reference_logprobs;
        let session = TrainSession::<B>::start(tc, session_options(cfg), &placement.train)?;
        // Checkpoints of `train` record how many samples were consumed both ways; the data
        // position alone is what older ones have.
        let consumed = ConsumedState {
            consumed_through: consumed_state(&session)?
                .consumed_through
                .max(session.trainer.state().data_position),
        };
        let resumed = resumed(&session, &consumed);
        let (to_train, rx) = sync_channel(batch * 4);
        let producers: Vec<Box<dyn Producer>> = vec![Box::new(Epochs {
            samples,
            epochs,
            start_after: consumed.consumed_through,
            to_train,
        })];
        let train_loop = TrainLoop {
            session,
            loss,
            weights: None,
            serve_device: placement.serve.clone(),
            opts: TrainLoopOptions {
                batch,
                // Samples come as fast as they are taken: batches are always whole (the last
                // may be short), so a resumed run sees the same batches as a straight one.
                batch_timeout: Duration::MAX,
                // File samples were scored as given, whatever weights sampled them.
                max_staleness: u64::MAX,
                correct_stale: false,
                update_interval: 1,
                max_steps: last_step,
                max_failed_steps: cfg.max_failed_steps,
            },
            metrics: metrics.clone(),
            consumed,
        };
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: None,
            training: Some(Training {
                train_loop,
                samples: rx,
                producers,
                pool: None,
            }),
            resumed,
            replay: ReplayCounts::default(),
            last_step: Some(last_step),
            env: None,
            plugin_failure: None,
            judge_stats: None,
        })
    }

    /// The training log, to show its lines above a progress bar (none when nothing trains).
    pub fn train_log(&mut self) -> Option<&mut openclaw_trainer::TrainLog> {
        self.training
            .as_mut()
            .map(|t| &mut t.train_loop.session.log)
    }

    /// The four loops (`run`): serving, collection, the judge pool running the method's reward
    /// plugin, and training through its loss plugin, publishing new weights to serving. A run
    /// restarted on the same directories resumes from the newest checkpoint (serving its weights
    /// under its version) and replays what the buffer holds unfinished.
    pub fn four_loops(
        cfg: &RunConfig,
        plugins: &RunPlugins,
        placement: &Placement<B>,
    ) -> Result<Self> {
        let metrics = Arc::new(Metrics::new());
        // Samples made elsewhere than from live turns: episodes, a rollout or generate plugin.
        let made = !cfg.env.is_empty()
            || plugins.plugin_for(PluginKind::Rollout).is_some()
            || plugins.plugin_for(PluginKind::Generate).is_some();
        // The judges are chosen before anything starts or is written: a run refused for want
        // of one leaves nothing behind.
        let judges_turns = !made || cfg.prm_step_coef > 0.0;
        let choice = JudgeChoice::resolve(cfg, judges_turns, &openclaw_judge::is_classifier)?;
        eprintln!("{}", choice.describe());

        // Training first: a resumed run serves the checkpoint's weights under its version.
        let loss = plugins.loss(HostServices::standalone())?;
        let mut tc = train_config(cfg, cfg.max_steps.max(1))?;
        let inputs = plugins.loss_inputs()?;
        tc.use_reference = inputs.reference_logprobs;
        if !cfg.env.is_empty() && inputs.teacher_logprobs {
            bail!(
                "--env trains on the outcome advantages of episodes, but the method's loss reads a \
                 teacher's log-probabilities per turn (on-policy distillation), which episodes do not \
                 have: use a method that learns from rewards (--plugin binary-rl)"
            );
        }
        // The environment before anything heavy starts: a wrong name or configuration fails
        // here.
        let env = if cfg.env.is_empty() {
            None
        } else {
            let path = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
            let env = open_env(
                &cfg.env,
                &EnvFiles {
                    config: path(&cfg.env_config),
                    tools: path(&cfg.tools_config),
                    pool_urls: pool_urls(&cfg.env_pool_url),
                    pool_key: cfg.env_pool_api_key.clone(),
                },
            )?;
            let call = Duration::from_secs(cfg.env_call_timeout);
            let tasks = run_tasks(&env, &cfg.data_path, &cfg.env_split, call)?;
            let eval_tasks = if cfg.env_eval_interval > 0 {
                let mut t = env.tasks("eval", call).with_context(|| {
                    "--env-eval-interval evaluates the environment's `eval` split"
                })?;
                if t.is_empty() {
                    bail!(
                        "--env-eval-interval: environment `{}` has no tasks in its `eval` split",
                        env.plugin()
                    );
                }
                t.truncate(cfg.env_eval_tasks as usize);
                t
            } else {
                Vec::new()
            };
            Some((env, tasks, eval_tasks))
        };
        let save_dir = PathBuf::from(&cfg.save_dir);
        let mut resume = cfg.resume_from_checkpoint.clone();
        if resume.is_empty()
            && openclaw_model_store::list_checkpoints(&save_dir).is_ok_and(|c| !c.is_empty())
        {
            // A restart on the same directories continues where the run stopped.
            resume = "latest".into();
        }
        let session = TrainSession::<B>::start(
            tc,
            SessionOptions {
                save_dir: Some(save_dir.clone()),
                resume,
                ..session_options(cfg)
            },
            &placement.train,
        )?;
        let consumed = consumed_state(&session)?;
        let resumed = resumed(&session, &consumed);
        let (serve_path, version) = match &resumed {
            Some(r) => (r.checkpoint.display().to_string(), r.weight_version),
            None => (cfg.model_path.clone(), 0),
        };

        // Serving, with the recorder feeding collection. When samples are made elsewhere than
        // from live turns (episodes, a rollout or generate plugin), live turns are served and
        // recorded but not collected: they wait in the buffer, and the next run that collects
        // replays them. (Work the buffer held at start is replayed either way; training keeps
        // samples with and without advantages in separate batches.)
        let (collect_tx, collect_rx) = sync_channel(4096);
        let collect_tx = (!made).then_some(collect_tx);
        let mut files = ModelFiles::<B>::load(&serve_path, &load_options(cfg), &placement.serve)?;
        // A fresh run serves the starting model, which is also the frozen teacher: one copy of
        // its weights for both, and for the trainer too when LoRA trains over quantised blocks
        // on the same device (publications then add only adapters to that base).
        // A resumed one serves the trainer's adapters beside that base.
        if placement.serve == placement.train {
            let shared = if resumed.is_none() {
                session.quantised_base()
            } else {
                session.quantised_weights()
            };
            if let Some(model) = shared {
                files.model = model;
            }
        }
        let mut starting = resumed.is_none().then(|| files.clone());
        let serving = Serving::build(cfg, files, version, collect_tx, metrics.clone())?;
        let engine = serving.engine.clone();

        // The reward plugin: the judges, and the policy as teacher (frozen: the starting model,
        // kept only when the loss reads teacher log-probabilities). The starting model, never
        // updated, is its own engine (which also judges under `--judge self`), over the served
        // weights of a fresh run.
        let mut frozen_engine: Option<Arc<dyn PolicyService>> = None;
        let mut frozen = || -> Result<Arc<dyn PolicyService>> {
            if let Some(e) = &frozen_engine {
                return Ok(e.clone());
            }
            let files = match starting.take() {
                Some(files) => files,
                None => {
                    ModelFiles::<B>::load(&cfg.model_path, &load_options(cfg), &placement.serve)?
                }
            };
            let e: Arc<dyn PolicyService> = Arc::new(PolicyEngine::start(
                files,
                0,
                scheduler_options(cfg),
                metrics.clone(),
            ));
            frozen_engine = Some(e.clone());
            Ok(e)
        };
        let teacher: Arc<dyn PolicyService> = if cfg.teacher == "frozen" && inputs.teacher_logprobs
        {
            frozen()?
        } else {
            engine.clone()
        };
        let judges = Judges::load::<B>(&choice, cfg, &placement.judge, &mut frozen)?;
        let reward_name = plugins
            .plugin_for(PluginKind::Reward)
            .unwrap_or("reward")
            .to_string();
        let reward = Arc::new(
            plugins.reward(
                judges
                    .give(HostServices::builder())
                    .policy(teacher)
                    .log(TracingLog::new(&reward_name))
                    .build(),
            )?,
        );

        // Judge pool → samples → training.
        // Made samples are produced no further ahead than a batch, so they are not stale by the
        // time they train; live turns come when users send them.
        let queue = cfg.rollout_batch_size as usize * if made { 1 } else { 4 };
        let (train_tx, train_rx) = sync_channel(queue);
        let judge_stats = Arc::new(JudgeStats::new(metrics.clone()));
        let maker =
            Arc::new(SampleMaker::new(serving.log(), train_tx).with_stats(judge_stats.clone()));
        let on_outcome = maker.clone();
        let pool = Arc::new(JudgePool::start(
            reward.clone(),
            PoolOptions {
                workers: cfg.num_judge_workers as usize,
                queue: 256,
                attempts: 3,
                backoff: Duration::from_millis(500),
                timeout: Duration::from_secs(cfg.judge_timeout),
            },
            metrics.clone(),
            Arc::new(move |o| on_outcome.on_outcome(o)),
        ));
        let settings = openclaw_judge::settings(cfg);
        let sinks = Sinks {
            judge: pool.clone(),
            samples: maker,
            settings: settings.clone(),
        };

        // Producers: what the buffer holds unfinished, then the live sessions or the episodes.
        let mut plan = replay(&serving.replay.records, &consumed);
        let episode_plan = std::mem::take(&mut plan.episodes);
        let next_generated_group = plan.next_generated_group;
        let next_rollout_id = plan.next_rollout_id;
        if env.is_none() && !episode_plan.groups.is_empty() {
            tracing::warn!(
                "{} unfinished groups of environment episodes wait in the buffer for a run with --env",
                episode_plan.groups.len()
            );
        }
        let counts = ReplayCounts {
            to_train: plan.to_train.len(),
            to_sample: plan.to_sample.len(),
            to_judge: plan.to_judge.len(),
            already_trained: plan.already_trained,
            // Groups of this environment (another's are left as they are).
            unfinished_groups: env.as_ref().map_or(0, |(e, _, _)| {
                episode_plan
                    .groups
                    .iter()
                    .filter(|g| g.episodes.iter().all(|x| x.env == e.plugin()))
                    .count()
            }),
        };
        let gate = Arc::new(ReplayGate::default());
        let mut producers: Vec<Box<dyn Producer>> = vec![Box::new(Replayed {
            plan,
            sinks: sinks.clone(),
            gate: gate.clone(),
        })];
        let mut env_run = None;
        let failure = Arc::new(PluginFailure::default());
        let plugin_host = || {
            HostServices::builder()
                .policy(engine.clone() as Arc<dyn PolicyService>)
                .log(TracingLog::new("plugin"))
                .build()
        };
        let rollout = plugins.rollout(plugin_host())?;
        let generate = plugins.generate(plugin_host())?;
        match env {
            None if rollout.is_some() => producers.push(Box::new(PluginRollouts {
                rollout: rollout.expect("checked"),
                batch_size: cfg.rollout_batch_size,
                samples_per_prompt: cfg.num_rollouts_per_prompt.max(1),
                first_id: next_rollout_id,
                samples: sinks.samples.clone(),
                failure: failure.clone(),
                gate: gate.clone(),
            })),
            None if generate.is_some() => {
                if cfg.data_path.is_empty() {
                    bail!("a generate plugin needs --data-path: the prompts (a task file, JSONL) it generates for");
                }
                let tasks = read_tasks(Path::new(&cfg.data_path))?;
                producers.push(Box::new(GeneratedGroups {
                    generate: generate.expect("checked"),
                    tasks,
                    group_size: cfg.group_size() as usize,
                    parallel: cfg.parallel_envs as usize,
                    sampling: SamplingParams {
                        max_tokens: cfg.default_max_tokens,
                        seed: Some(cfg.seed).into(),
                        ..SamplingParams::default()
                    },
                    first_group: next_generated_group,
                    samples: sinks.samples.clone(),
                    failure: failure.clone(),
                    gate: gate.clone(),
                }))
            }
            None => producers.push(Box::new(LiveSessions {
                events: collect_rx,
                collection: Collection::new(
                    CollectionOptions {
                        max_pending: (cfg.max_sessions as usize).max(1),
                        judge: settings.clone(),
                    },
                    metrics.clone(),
                ),
                sinks,
            })),
            Some((env, tasks, eval_tasks)) => {
                let policy: Arc<dyn PolicyService> = engine.clone();
                let call = Duration::from_secs(cfg.env_call_timeout);
                let jobs = JobOptions {
                    parallel: cfg.parallel_envs as usize,
                    episode: EpisodeOptions {
                        max_steps: cfg.max_episode_steps,
                        call_timeout: call,
                        evaluate_timeout: call.saturating_mul(10),
                        full_wait: call.saturating_mul(10),
                        env_retries: 2,
                    },
                    agent: PolicyAgentOptions {
                        sampling: SamplingParams {
                            max_tokens: cfg.default_max_tokens,
                            ..SamplingParams::default()
                        },
                        context: engine.context(),
                        min_reply_tokens: 16,
                    },
                };
                let stats = Arc::new(EpisodeStats::default());
                tracing::info!(
                    "environment `{}`: {} tasks, groups of {}, {} episodes at once, at most {} steps each",
                    env.plugin(),
                    tasks.len(),
                    cfg.group_size(),
                    cfg.parallel_envs,
                    cfg.max_episode_steps
                );
                env_run = Some(EnvRun {
                    env: env.clone(),
                    stats: stats.clone(),
                    eval_tasks,
                    policy: policy.clone(),
                    eval: BatchOptions {
                        per_task: 1,
                        parallel: cfg.parallel_envs as usize,
                        episode: jobs.episode.clone(),
                        agent: PolicyAgentOptions {
                            sampling: SamplingParams {
                                temperature: 0.0,
                                ..jobs.agent.sampling.clone()
                            },
                            ..jobs.agent.clone()
                        },
                        seed: cfg.seed,
                    },
                });
                producers.push(Box::new(EnvEpisodes {
                    env,
                    tasks,
                    policy,
                    opts: EnvRunOptions {
                        group_size: cfg.group_size() as usize,
                        jobs,
                        seed: cfg.seed,
                    },
                    samples: sinks.samples.clone(),
                    resume: episode_plan,
                    stats,
                    step_judge: (cfg.prm_step_coef > 0.0).then(|| StepJudge {
                        reward: reward.clone(),
                        settings: settings.clone(),
                        coef: cfg.prm_step_coef as f32,
                        timeout: Duration::from_secs(cfg.judge_timeout),
                    }),
                    gate: gate.clone(),
                }));
            }
        }

        let train_loop = TrainLoop {
            session,
            loss,
            weights: Some(engine.weights.clone()),
            serve_device: placement.serve.clone(),
            opts: TrainLoopOptions {
                batch: cfg.rollout_batch_size as usize,
                batch_timeout: Duration::from_secs(cfg.batch_timeout),
                max_staleness: cfg.max_staleness,
                correct_stale: cfg.stale_policy == "correct",
                update_interval: cfg.update_weights_interval as u64,
                max_steps: cfg.max_steps,
                max_failed_steps: cfg.max_failed_steps,
            },
            metrics: metrics.clone(),
            consumed,
        };
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: Some(serving),
            training: Some(Training {
                train_loop,
                samples: train_rx,
                producers,
                pool: Some(pool),
            }),
            resumed,
            replay: counts,
            last_step: (cfg.max_steps > 0).then_some(cfg.max_steps),
            env: env_run,
            plugin_failure: Some(failure),
            judge_stats: Some(judge_stats),
        })
    }

    /// Starts every loop and listens on the configured address; `on_step` runs on the training
    /// thread after each step. Returns once the server listens.
    pub fn start(self, on_step: impl FnMut(&StepEvent) + Send + 'static) -> Result<PipelineHandle> {
        // Listen first: a port in use fails here, before any thread starts.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = match &self.serving {
            Some(_) => {
                warn_if_open(&self.cfg.host, &self.cfg.api_key);
                Some(rt.block_on(bind(&self.cfg.host, self.cfg.port))?)
            }
            None => None,
        };
        let addr = listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut producers = Vec::new();
        let mut trainer = None;
        let mut pool = None;
        if let Some(t) = self.training {
            for p in t.producers {
                let stop = stop.clone();
                producers.push(std::thread::Builder::new().name(p.name().into()).spawn(
                    move || {
                        // A producer that fails leaves nothing to train: the run stops.
                        let r = p.run(stop.clone());
                        if r.is_err() {
                            stop.store(true, Ordering::SeqCst);
                        }
                        r
                    },
                )?);
            }
            pool = t.pool;
            let train_stop = stop.clone();
            let (train_loop, rx) = (t.train_loop, t.samples);
            trainer = Some(
                std::thread::Builder::new()
                    .name("train".into())
                    .spawn(move || train_loop.run(rx, train_stop, on_step))?,
            );
        }
        let limits = Limits {
            started: Instant::now(),
            plugin_timeout: Duration::from_secs(self.cfg.plugin_timeout.max(1)),
            grace: Duration::from_secs(self.cfg.shutdown_grace.max(1)),
            unwritable_timeout: (self.cfg.buffer_unwritable_timeout > 0)
                .then(|| Duration::from_secs(self.cfg.buffer_unwritable_timeout)),
            log: self.serving.as_ref().map(|s| s.log()),
            save_dir: PathBuf::from(&self.cfg.save_dir),
        };
        let watch = stop.clone();
        // One signal listener for the whole run, so no signal falls between two polls; it
        // ends on Ctrl-C or SIGTERM, or once the loops are asked to stop.
        let until_stopped = async move {
            let signal = interrupted();
            tokio::pin!(signal);
            loop {
                tokio::select! {
                    _ = &mut signal => {
                        // `wait` returns now and the stop is bounded by --shutdown-grace, not
                        // by the server's drain (which a slow client could hold).
                        watch.store(true, Ordering::SeqCst);
                        break;
                    }
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {
                        if watch.load(Ordering::SeqCst) {
                            break;
                        }
                    }
                }
            }
        };
        let server = match (listener, self.serving) {
            (Some(listener), Some(serving)) => {
                rt.spawn(serve_on(listener, serving.app.clone(), until_stopped))
            }
            // Nothing serves: the signal alone ends the run (`wait` sees this task end).
            _ => rt.spawn(async move {
                until_stopped.await;
                Ok(())
            }),
        };
        Ok(PipelineHandle {
            addr,
            metrics: self.metrics,
            stop,
            limits,
            failure: Mutex::new(None),
            rt: Some(rt),
            server: Some(server),
            trainer,
            producers,
            pool,
        })
    }
}

/// The bounds a started pipeline keeps.
struct Limits {
    /// When the pipeline started: calls an earlier one left behind are not its own.
    started: Instant,
    /// How long a loss, rollout or generate call may take (`--plugin-timeout`).
    plugin_timeout: Duration,
    /// How long a stop waits for the loops (`--shutdown-grace`).
    grace: Duration,
    /// How long the buffer may fail to write before the run stops (`--buffer-unwritable-timeout`).
    unwritable_timeout: Option<Duration>,
    /// The buffer serving writes.
    log: Option<Arc<Log>>,
    /// Where checkpoints go, to say what a stop left saved.
    save_dir: PathBuf,
}

impl Limits {
    /// Why the run must stop now, if it must.
    fn breached(&self) -> Option<String> {
        let kinds = [PluginKind::Loss, PluginKind::Rollout, PluginKind::Generate];
        if let Some(call) = watch::overdue(&kinds, self.started, self.plugin_timeout) {
            return Some(format!(
                "{call}, past --plugin-timeout ({} s)",
                self.plugin_timeout.as_secs()
            ));
        }
        let (limit, log) = (self.unwritable_timeout?, self.log.as_ref()?);
        let (since, why) = log.unwritable()?;
        (since >= limit).then(|| {
            format!(
                "the buffer has not been able to record for {:.0} s (--buffer-unwritable-timeout {} s): {why}",
                since.as_secs_f64(),
                limit.as_secs()
            )
        })
    }
}

/// A started pipeline.
pub struct PipelineHandle {
    addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    limits: Limits,
    /// Why the run was stopped by a breached limit.
    failure: Mutex<Option<String>>,
    /// Taken by `shutdown`, which ends it without waiting on a hung task.
    rt: Option<tokio::runtime::Runtime>,
    server: Option<tokio::task::JoinHandle<Result<()>>>,
    trainer: Option<JoinHandle<Result<TrainSummary>>>,
    producers: Vec<JoinHandle<Result<()>>>,
    pool: Option<Arc<JudgePool>>,
}

impl PipelineHandle {
    /// The address the server listens on (none when nothing serves: `train`).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The OpenAI base URL clients use (`http://ADDR/v1`), when something serves.
    pub fn base_url(&self) -> Option<String> {
        self.addr.map(|a| format!("http://{a}/v1"))
    }

    /// The run's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether the loops were asked to stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Asks every loop to stop (the server drains its requests; training saves a checkpoint).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Blocks until the run is over: training reached `--max-steps` or failed, the server
    /// stopped (Ctrl-C or SIGTERM), [`PipelineHandle::stop`] was called, or a limit was
    /// breached (a plugin call past `--plugin-timeout`, a buffer unable to write for
    /// `--buffer-unwritable-timeout`), which [`PipelineHandle::shutdown`] then reports.
    pub fn wait(&self) {
        loop {
            let trainer_done = self.trainer.as_ref().is_some_and(|t| t.is_finished());
            let server_done = self.server.as_ref().is_none_or(|s| s.is_finished());
            if trainer_done || server_done || self.stopping() {
                self.stop();
                return;
            }
            if let Some(why) = self.limits.breached() {
                tracing::error!("stopping: {why}");
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                self.stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What a stop that left training mid-step did not save: the step it was in and the
    /// newest whole checkpoint, which stays.
    fn unsaved(&self) -> String {
        let taken = self.metrics.train_steps.get();
        let kept = openclaw_model_store::checkpoints::latest_checkpoint(&self.limits.save_dir)
            .ok()
            .map(|c| c.display().to_string());
        format!(
            " without a final checkpoint: training was in a step after the {taken} it took in this run; {}",
            match kept {
                Some(c) => format!(
                    "the newest whole checkpoint, {c}, stays, and what was trained after it is trained again from the buffer at the next start"
                ),
                None => "no checkpoint was written yet: the next start trains from the beginning of the buffer".into(),
            }
        )
    }

    /// Stops every loop and waits for them, at most `--shutdown-grace` in all: training saves
    /// its final checkpoint, the server drains, producers end, the judge workers finish their
    /// calls. What has not ended by then (a plugin call that hangs) is left behind with an
    /// error naming it, so the process can exit. Returns how training ended (none for serving
    /// alone); a training error, or the limit that stopped the run, is returned after
    /// everything has stopped.
    pub fn shutdown(mut self) -> Result<Option<TrainSummary>> {
        self.stop();
        let deadline = Instant::now() + self.limits.grace;
        let grace = self.limits.grace.as_secs();
        let mut stuck: Vec<String> = Vec::new();
        let trained = self.trainer.take().and_then(|t| {
            if join_by(&t, deadline) {
                Some(
                    t.join()
                        .map_err(|_| anyhow!("training panicked"))
                        .and_then(|r| r),
                )
            } else {
                stuck.push("training".into());
                None
            }
        });
        let rt = self.rt.take().expect("the runtime is taken once");
        let served = self.server.take().and_then(|server| {
            let left = deadline.saturating_duration_since(Instant::now());
            match rt.block_on(async { tokio::time::timeout(left, server).await }) {
                Ok(r) => Some(
                    r.map_err(|e| anyhow!("the server task failed: {e}"))
                        .and_then(|r| r),
                ),
                Err(_) => {
                    stuck.push("the server's requests in flight".into());
                    None
                }
            }
        });
        for p in self.producers.drain(..) {
            let name = p.thread().name().unwrap_or("producer").to_string();
            if !join_by(&p, deadline) {
                stuck.push(name);
                continue;
            }
            match p.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("{name} stopped: {e:#}"),
                Err(_) => tracing::error!("{name} panicked"),
            }
        }
        // The producers are gone, so this handle holds the pool's last reference: closing it
        // lets the judge workers finish and stop before the buffer is left to a next run.
        if let Some(pool) = self.pool.take() {
            match Arc::try_unwrap(pool) {
                Ok(pool) => {
                    let closing = std::thread::spawn(move || pool.close());
                    if !join_by(&closing, deadline) {
                        stuck.push("the judge workers".into());
                    }
                }
                Err(_) => tracing::warn!("the judge pool is still shared; its workers end with it"),
            }
        }
        // Tasks still running (a request whose client never reads) are not waited for.
        rt.shutdown_timeout(Duration::from_millis(100));
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if !stuck.is_empty() {
            let calls: Vec<String> = watch::in_flight().iter().map(|c| c.to_string()).collect();
            let why = format!(
                "{} did not stop within --shutdown-grace ({grace} s){}; left behind{}",
                stuck.join(", "),
                if calls.is_empty() {
                    String::new()
                } else {
                    format!(": {}", calls.join("; "))
                },
                if stuck.iter().any(|s| s == "training") {
                    self.unsaved()
                } else {
                    String::new()
                }
            );
            tracing::error!("{why}");
            return Err(match failure {
                Some(f) => anyhow!("the run stopped: {f}; {why}"),
                None => anyhow!("{why}"),
            });
        }
        if let Some(f) = failure {
            return Err(anyhow!("the run stopped: {f}"));
        }
        if let Some(r) = served {
            r?;
        }
        trained.transpose()
    }
}

impl Drop for PipelineHandle {
    /// A handle dropped without [`PipelineHandle::shutdown`] still stops the loops.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until the thread has finished or `deadline` has passed; whether it finished.
fn join_by<T>(t: &JoinHandle<T>, deadline: Instant) -> bool {
    while !t.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The pools of `--env-pool-url`: comma-separated, blanks dropped.
fn pool_urls(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

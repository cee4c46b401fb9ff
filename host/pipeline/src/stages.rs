//! The stages of `run` (the four loops), in the order they run, each a function of what the
//! stages before it made:
//!
//! 1. [`resolve`]: what the run does (which judges, which loss inputs, where samples come from),
//!    decided before anything starts or is written, so a refused run leaves nothing behind;
//! 2. [`open_environment`]: the environment of `--env` and its tasks, before anything heavy;
//! 3. [`restore`]: the training session, resumed from the newest checkpoint of the save
//!    directory, and which weights serving starts from;
//! 4. [`serve`]: the policy engine, the buffer and the server, the recorder feeding collection;
//! 5. [`judge`]: the reward plugin over the judges, the judge pool, and the sample maker that
//!    records verdicts and samples before training sees them;
//! 6. [`produce`]: the producers: what the buffer held unfinished ([`replay`]), then live
//!    sessions (collection), the episodes of an environment, or a rollout or generate plugin;
//! 7. [`train`]: the training loop that steps through the loss plugin and publishes weights.

use super::env_episodes::{EnvEpisodes, EnvRunOptions, EpisodeStats, StepJudge};
use super::plugin_samples::{GeneratedGroups, PluginFailure, PluginRollouts};
use super::producer::{LiveSessions, Producer, ReplayGate, Replayed, Sinks};
use super::replay::{replay, EpisodePlan, ReplayPlan};
use super::run::{
    consumed_state, pool_urls, resumed, EnvRun, Pipeline, ReplayCounts, Resumed, Training,
};
use super::samples::{QueuedSample, SampleMaker};
use super::serving::Serving;
use super::train_loop::{ConsumedState, TrainLoop, TrainLoopOptions};
use super::{Collection, CollectionOptions};
use crate::training::UserAdapters;
use crate::training::{plugin_lock, session_options, train_config, SessionOptions, TrainSession};
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_collect::CollectEvent;
use openclaw_config::backend::Placement;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_episodes::batch::{BatchOptions, JobOptions};
use openclaw_episodes::policy_agent::PolicyAgentOptions;
use openclaw_episodes::setup::{open_env, read_tasks, run_tasks, EnvFiles};
use openclaw_episodes::{EpisodeOptions, TimedEnv};
use openclaw_judge::pool::{JudgePool, PoolOptions};
use openclaw_judge::stats::JudgeStats;
use openclaw_judge::{FeedbackMode, FeedbackRule, JudgeChoice, Judges};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{
    HostServices, JudgeSettings, LossInputs, PluginKind, SamplingParams, Task,
};
use openclaw_plugins::instance::TracingLog;
use openclaw_plugins::lockfile::Lockfile;
use openclaw_plugins::{LossHandle, RewardHandle, RunPlugins};
use openclaw_policy::{load_options, scheduler_options, ModelFiles, PolicyEngine};
use openclaw_trainer::TrainConfig;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::Duration;

impl<B: Backend> Pipeline<B>
where
    Model<B>: Send + Sync,
{
    /// The four loops (`run`): serving, collection, the judge pool running the method's reward
    /// plugin, and training through its loss plugin, publishing new weights to serving. A run
    /// restarted on the same directories resumes from the newest checkpoint (serving its weights
    /// under its version) and replays what the buffer holds unfinished.
    pub fn four_loops(
        cfg: &RunConfig,
        plugins: &RunPlugins,
        placement: &Placement<B>,
    ) -> Result<Self> {
        say_how_tools_reach_the_model(cfg)?;
        let metrics = super::run::new_metrics(cfg)?;
        let (plan, train_config) = resolve(cfg, plugins)?;
        let env = open_environment(cfg)?;
        if cfg.adapters == "per-user" && plan.made {
            bail!(
                "--adapters per-user trains each user's adapter on their live turns; samples \
                 made by an environment or a rollout or generate plugin have no user"
            );
        }
        let lock = plugin_lock::of_run(cfg, plugins)?;
        let restored = restore(cfg, train_config, placement, &lock)?;
        let mut served = serve(cfg, placement, plan.made, &restored, metrics.clone())?;
        let judged = judge(cfg, plugins, placement, &plan, &served, &metrics)?;
        let produced = produce(
            cfg,
            plugins,
            &restored.consumed,
            &mut served,
            &judged,
            env,
            &metrics,
        )?;
        let resumed = restored.resumed.clone();
        let train_loop = train(cfg, placement, plan.loss, restored, &served, &metrics);
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: Some(served.serving),
            training: Some(Training {
                train_loop,
                samples: judged.to_train,
                producers: produced.producers,
                pool: Some(judged.sinks.judge),
            }),
            resumed,
            replay: produced.counts,
            last_step: (cfg.max_steps > 0).then_some(cfg.max_steps),
            env: produced.env,
            plugin_failure: Some(produced.failure),
            judge_stats: Some(judged.stats),
        })
    }
}

/// Before anything else, a run with an environment says on its first line how the
/// environment's tools reach the model: through its chat template's tools section, or in the
/// system prompt when the template has none, so that episodes without a tool call are not
/// read as the model's choice when the template dropped the tools.
fn say_how_tools_reach_the_model(cfg: &RunConfig) -> Result<()> {
    if !cfg.env.is_empty() {
        eprintln!(
            "{}",
            openclaw_policy::tools_line(&cfg.model_path, &load_options(cfg))?
        );
    }
    Ok(())
}

/// What a run does, decided from the configuration and the plugins alone.
struct RunPlan {
    /// Samples are made elsewhere than from live turns: episodes, a rollout or generate plugin.
    made: bool,
    /// Which judge answers which prompt.
    choice: JudgeChoice,
    /// The method's loss.
    loss: LossHandle,
    /// The extra inputs the loss reads (a reference, a teacher).
    inputs: LossInputs,
}

/// Stage 1: the judges, the loss and its inputs, refused together before anything starts; with
/// the trainer's settings, which the training session takes.
fn resolve(cfg: &RunConfig, plugins: &RunPlugins) -> Result<(RunPlan, TrainConfig)> {
    let made = !cfg.env.is_empty()
        || plugins.plugin_for(PluginKind::Rollout).is_some()
        || plugins.plugin_for(PluginKind::Generate).is_some();
    // The judges are chosen before anything starts or is written: a run refused for want of
    // one leaves nothing behind.
    let judges_turns = !made || cfg.prm_step_coef > 0.0;
    let choice = JudgeChoice::resolve(cfg, judges_turns, &openclaw_judge::is_classifier)?;
    eprintln!("{}", choice.describe());
    let loss = plugins.loss(HostServices::standalone())?;
    let mut train = train_config(cfg, cfg.max_steps.max(1))?;
    let inputs = plugins.loss_inputs()?;
    train.use_reference = inputs.reference_logprobs;
    if !cfg.env.is_empty() && inputs.teacher_logprobs {
        bail!(
            "--env trains on the outcome advantages of episodes, but the method's loss reads a \
             teacher's log-probabilities per turn (on-policy distillation), which episodes do not \
             have: use a method that learns from rewards (--plugin binary-rl)"
        );
    }
    Ok((
        RunPlan {
            made,
            choice,
            loss,
            inputs,
        },
        train,
    ))
}

/// The environment of `run --env`, opened, with the tasks it trains and evaluates on.
struct OpenedEnv {
    env: TimedEnv,
    tasks: Vec<Task>,
    eval_tasks: Vec<Task>,
}

/// Stage 2: the environment before anything heavy starts, so a wrong name or configuration
/// fails here.
fn open_environment(cfg: &RunConfig) -> Result<Option<OpenedEnv>> {
    if cfg.env.is_empty() {
        return Ok(None);
    }
    let path = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
    let env = open_env(
        &cfg.env,
        &EnvFiles {
            config: path(&cfg.env_config),
            tools: path(&cfg.tools_config),
            pool_urls: pool_urls(&cfg.env_pool_url),
            pool_key: cfg.env_pool_api_key.clone(),
            pool_dialect: cfg.env_pool_dialect.clone(),
            swe_bench_path: path(&cfg.swe_bench_path),
            screenshot_backend: (!cfg.screenshot_backend.is_empty())
                .then(|| cfg.screenshot_backend.clone()),
        },
    )?;
    let call = Duration::from_secs(cfg.env_call_timeout);
    let tasks = run_tasks(&env, &cfg.data_path, &cfg.env_split, call)?;
    let eval_tasks = if cfg.env_eval_interval > 0 {
        let mut t = env
            .tasks("eval", call)
            .with_context(|| "--env-eval-interval evaluates the environment's `eval` split")?;
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
    Ok(Some(OpenedEnv {
        env,
        tasks,
        eval_tasks,
    }))
}

/// The training session and the weights serving starts from.
struct Restored<B: Backend> {
    session: TrainSession<B>,
    /// Which samples the checkpoint's training consumed.
    consumed: ConsumedState,
    /// One adapter per user (`--adapters per-user`), where each stands.
    users: Option<UserAdapters<B>>,
    resumed: Option<Resumed>,
    /// The model serving loads: the checkpoint of a resumed run, else `--model-path`.
    serve_path: String,
    /// The weight version it serves under.
    version: u64,
}

/// Stage 3: training first, so a resumed run serves the checkpoint's weights under its
/// version; a restart on the same directories continues where the run stopped.
fn restore<B: Backend>(
    cfg: &RunConfig,
    train: TrainConfig,
    placement: &Placement<B>,
    lock: &Lockfile,
) -> Result<Restored<B>> {
    let save_dir = PathBuf::from(&cfg.save_dir);
    let mut resume = cfg.resume_from_checkpoint.clone();
    if resume.is_empty()
        && openclaw_model_store::list_checkpoints(&save_dir).is_ok_and(|c| !c.is_empty())
    {
        resume = "latest".into();
    }
    let session = TrainSession::<B>::start(
        train,
        SessionOptions {
            save_dir: Some(save_dir),
            resume,
            extras: vec![plugin_lock::extra_file(lock)],
            ..session_options(cfg)
        },
        &placement.train,
    )?;
    if let Some(dir) = &session.resumed_from {
        plugin_lock::warn_of_changes(dir, lock);
    }
    let mut consumed = consumed_state(&session)?;
    let users = match cfg.adapters == "per-user" {
        true => {
            let dir = Path::new(&cfg.adapters_dir);
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--adapters-dir: cannot create {}", dir.display()))?;
            let users = UserAdapters::open(
                dir,
                session.trainer.model(),
                session.trainer.config().clone(),
                cfg.max_adapters_in_memory as usize,
            )
            .context("--adapters per-user")?;
            consumed.adapters = users.consumed();
            Some(users)
        }
        false => None,
    };
    let resumed = resumed(&session, &consumed);
    let (serve_path, version) = match &resumed {
        Some(r) => (r.checkpoint.display().to_string(), r.weight_version),
        None => (cfg.model_path.clone(), 0),
    };
    Ok(Restored {
        session,
        consumed,
        users,
        resumed,
        serve_path,
        version,
    })
}

/// Serving, started.
struct Served<B: Backend> {
    serving: Serving<B>,
    /// The served model.
    engine: Arc<PolicyEngine<B>>,
    /// What the recorder tells collection, until live sessions take it.
    to_collect: Option<Receiver<CollectEvent>>,
    /// The starting model's files (a fresh run's), for the frozen engine if one is asked.
    starting: Option<ModelFiles<B>>,
}

/// Stage 4: the policy engine, the buffer and the server. When samples are made elsewhere
/// than from live turns (episodes, a rollout or generate plugin), live turns are served and
/// recorded but not collected: they wait in the buffer, and the next run that collects replays
/// them. (Work the buffer held at start is replayed either way; training keeps samples with
/// and without advantages in separate batches.)
fn serve<B: Backend>(
    cfg: &RunConfig,
    placement: &Placement<B>,
    made: bool,
    restored: &Restored<B>,
    metrics: Arc<Metrics>,
) -> Result<Served<B>>
where
    Model<B>: Send + Sync,
{
    let (collect_tx, to_collect) = sync_channel(4096);
    let collect_tx = (!made).then_some(collect_tx);
    let mut files =
        ModelFiles::<B>::load(&restored.serve_path, &load_options(cfg), &placement.serve)?;
    // A fresh run serves the starting model, which is also the frozen teacher: one copy of its
    // weights for both, and for the trainer too when LoRA trains over quantised blocks on the
    // same device (publications then add only adapters to that base). A resumed one serves the
    // trainer's adapters beside that base.
    if placement.serve == placement.train {
        let shared = if restored.resumed.is_none() {
            restored.session.quantised_base()
        } else {
            restored.session.quantised_weights()
        };
        if let Some(model) = shared {
            files.model = model;
        }
    }
    let starting = restored.resumed.is_none().then(|| files.clone());
    let serving = Serving::build(cfg, files, restored.version, collect_tx, metrics)?;
    Ok(Served {
        engine: serving.engine.clone(),
        serving,
        to_collect: Some(to_collect),
        starting,
    })
}

/// The judging side, started.
struct Judged {
    /// The method's reward plugin.
    reward: Arc<RewardHandle>,
    /// Where producers send turns and samples.
    sinks: Sinks,
    /// What the judges said since the last step.
    stats: Arc<JudgeStats>,
    /// Samples, in buffer order, for training.
    to_train: Receiver<QueuedSample>,
}

/// Stage 5: the reward plugin with the judges and the policy as teacher (frozen: the starting
/// model, kept only when the loss reads teacher log-probabilities; never updated, it is its own
/// engine, which also judges under `--judge self`), the judge pool, and the sample maker.
fn judge<B: Backend>(
    cfg: &RunConfig,
    plugins: &RunPlugins,
    placement: &Placement<B>,
    plan: &RunPlan,
    served: &Served<B>,
    metrics: &Arc<Metrics>,
) -> Result<Judged>
where
    Model<B>: Send + Sync,
{
    let mut starting = served.starting.clone();
    let mut frozen_engine: Option<Arc<dyn PolicyService>> = None;
    let mut frozen = || -> Result<Arc<dyn PolicyService>> {
        if let Some(e) = &frozen_engine {
            return Ok(e.clone());
        }
        let files = match starting.take() {
            Some(files) => files,
            None => ModelFiles::<B>::load(&cfg.model_path, &load_options(cfg), &placement.serve)?,
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
    let teacher: Arc<dyn PolicyService> = if cfg.teacher == "frozen" && plan.inputs.teacher_logprobs
    {
        frozen()?
    } else {
        served.engine.clone()
    };
    let judges = Judges::load::<B>(&plan.choice, cfg, &placement.judge, &mut frozen)?;
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

    // Made samples are produced no further ahead than a batch, so they are not stale by the
    // time they train; live turns come when users send them.
    let queue = cfg.rollout_batch_size as usize * if plan.made { 1 } else { 4 };
    let (train_tx, to_train) = sync_channel(queue);
    let stats = Arc::new(JudgeStats::new(metrics.clone()));
    let maker =
        Arc::new(SampleMaker::new(served.serving.log(), train_tx).with_stats(stats.clone()));
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
    Ok(Judged {
        reward,
        sinks: Sinks {
            judge: pool,
            samples: maker,
            settings: openclaw_judge::settings(cfg),
            feedback: FeedbackRule {
                mode: FeedbackMode::parse(&cfg.feedback)?,
                reads_text: plan.inputs.teacher_logprobs,
            },
        },
        stats,
        to_train,
    })
}

/// The producers, and what the command reports of them.
struct Produced {
    producers: Vec<Box<dyn Producer>>,
    counts: ReplayCounts,
    env: Option<EnvRun>,
    failure: Arc<PluginFailure>,
}

/// Stage 6: what the buffer holds unfinished first, then the live sessions, the episodes of
/// an environment, or a rollout or generate plugin.
fn produce<B: Backend>(
    cfg: &RunConfig,
    plugins: &RunPlugins,
    consumed: &ConsumedState,
    served: &mut Served<B>,
    judged: &Judged,
    env: Option<OpenedEnv>,
    metrics: &Arc<Metrics>,
) -> Result<Produced>
where
    Model<B>: Send + Sync,
{
    let mut plan = replay(&served.serving.replay.records, consumed);
    let episode_plan = std::mem::take(&mut plan.episodes);
    let next_generated_group = plan.next_generated_group;
    let next_rollout_id = plan.next_rollout_id;
    if env.is_none() && !episode_plan.groups.is_empty() {
        tracing::warn!(
            "{} unfinished groups of environment episodes wait in the buffer for a run with --env",
            episode_plan.groups.len()
        );
    }
    let counts = replay_counts(&plan, &episode_plan, env.as_ref());
    let gate = Arc::new(ReplayGate::default());
    let sinks = judged.sinks.clone();
    let mut producers: Vec<Box<dyn Producer>> = vec![Box::new(Replayed {
        plan,
        sinks: sinks.clone(),
        gate: gate.clone(),
    })];
    let failure = Arc::new(PluginFailure::default());
    let plugin_host = || {
        HostServices::builder()
            .policy(served.engine.clone() as Arc<dyn PolicyService>)
            .log(TracingLog::new("plugin"))
            .build()
    };
    let rollout = plugins.rollout(plugin_host())?;
    let generate = plugins.generate(plugin_host())?;
    let mut env_run = None;
    match (env, rollout, generate) {
        (None, Some(rollout), _) => producers.push(Box::new(PluginRollouts {
            rollout,
            batch_size: cfg.rollout_batch_size,
            samples_per_prompt: cfg.num_rollouts_per_prompt.max(1),
            first_id: next_rollout_id,
            samples: sinks.samples.clone(),
            failure: failure.clone(),
            gate,
        })),
        (None, None, Some(generate)) => {
            if cfg.data_path.is_empty() {
                bail!("a generate plugin needs --data-path: the prompts (a task file, JSONL) it generates for");
            }
            producers.push(Box::new(GeneratedGroups {
                generate,
                tasks: read_tasks(Path::new(&cfg.data_path))?,
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
                gate,
            }))
        }
        (None, None, None) => producers.push(Box::new(LiveSessions {
            events: served.to_collect.take().expect("taken once"),
            collection: Collection::new(
                CollectionOptions {
                    max_pending: (cfg.max_sessions as usize).max(1),
                    judge: sinks.settings.clone(),
                    feedback: sinks.feedback,
                },
                metrics.clone(),
            ),
            sinks,
        })),
        (Some(opened), _, _) => {
            let (run, episodes) =
                environment(cfg, opened, served, judged, episode_plan, gate, metrics);
            env_run = Some(run);
            producers.push(Box::new(episodes));
        }
    }
    Ok(Produced {
        producers,
        counts,
        env: env_run,
        failure,
    })
}

/// How much unfinished work the buffer held, for the command's first lines.
fn replay_counts(
    plan: &ReplayPlan,
    episodes: &EpisodePlan,
    env: Option<&OpenedEnv>,
) -> ReplayCounts {
    ReplayCounts {
        to_train: plan.to_train.len(),
        to_sample: plan.to_sample.len(),
        to_judge: plan.to_judge.len(),
        already_trained: plan.already_trained,
        // Groups of this environment (another's are left as they are).
        unfinished_groups: env.map_or(0, |e| {
            episodes
                .groups
                .iter()
                .filter(|g| g.episodes.iter().all(|x| x.env == e.env.plugin()))
                .count()
        }),
    }
}

/// The episodes of `run --env` with the served policy, and the evaluation beside them.
fn environment<B: Backend>(
    cfg: &RunConfig,
    opened: OpenedEnv,
    served: &Served<B>,
    judged: &Judged,
    resume: EpisodePlan,
    gate: Arc<ReplayGate>,
    metrics: &Arc<Metrics>,
) -> (EnvRun, EnvEpisodes)
where
    Model<B>: Send + Sync,
{
    let OpenedEnv {
        env,
        tasks,
        eval_tasks,
    } = opened;
    let policy: Arc<dyn PolicyService> = served.engine.clone();
    let call = Duration::from_secs(cfg.env_call_timeout);
    let jobs = JobOptions {
        parallel: cfg.parallel_envs as usize,
        episode: EpisodeOptions::new(cfg.max_episode_steps, call),
        agent: PolicyAgentOptions {
            sampling: SamplingParams {
                max_tokens: cfg.default_max_tokens,
                ..SamplingParams::default()
            },
            context: served.engine.context(),
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
    let run = EnvRun {
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
    };
    let settings: &JudgeSettings = &judged.sinks.settings;
    let episodes = EnvEpisodes {
        env,
        tasks,
        policy,
        opts: EnvRunOptions {
            group_size: cfg.group_size() as usize,
            jobs,
            seed: cfg.seed,
        },
        samples: judged.sinks.samples.clone(),
        resume,
        stats,
        step_judge: (cfg.prm_step_coef > 0.0).then(|| StepJudge {
            reward: judged.reward.clone(),
            settings: settings.clone(),
            coef: cfg.prm_step_coef as f32,
            timeout: Duration::from_secs(cfg.judge_timeout),
        }),
        gate,
        metrics: metrics.clone(),
    };
    (run, episodes)
}

/// Stage 7: the training loop over the restored session, publishing to the served engine.
fn train<B: Backend>(
    cfg: &RunConfig,
    placement: &Placement<B>,
    loss: LossHandle,
    restored: Restored<B>,
    served: &Served<B>,
    metrics: &Arc<Metrics>,
) -> TrainLoop<B>
where
    Model<B>: Send + Sync,
{
    let users = restored.users.map(|mut u| {
        u.serve_with(served.engine.adapters.clone());
        u
    });
    TrainLoop {
        users,
        session: restored.session,
        loss,
        weights: Some(served.engine.weights.clone()),
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
        consumed: restored.consumed,
    }
}

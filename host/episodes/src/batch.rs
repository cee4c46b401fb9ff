//! Many episodes at once with the policy: `parallel` workers take (task, sample) pairs in order,
//! each running one episode with its own [`PolicyAgent`]; the policy's scheduler batches their
//! generations together.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use openclaw_plugin_api::host::{Generation, PolicyService};
use openclaw_plugin_api::Task;
use serde::Serialize;

use super::policy_agent::{PolicyAgent, PolicyAgentOptions};
use super::{Ending, Episode, EpisodeOptions, TimedEnv};
use burn::prelude::Backend;
use openclaw_buffer::record::EpisodeEntry;
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_engine::Model;
use openclaw_metrics::Metrics;
use openclaw_policy::{scheduler_options, LoadOptions, ModelFiles, PolicyEngine};

/// Settings of [`run_batch`].
#[derive(Clone, Debug)]
pub struct BatchOptions {
    /// Episodes per task (a group, for group-normalised advantages).
    pub per_task: usize,
    /// Episodes running at once (`PARALLEL_ENVS`).
    pub parallel: usize,
    /// Limits of each episode.
    pub episode: EpisodeOptions,
    /// How the policy is asked.
    pub agent: PolicyAgentOptions,
    /// Base seed: episode `i` of the batch uses `seed + i` for its environment and its sampling.
    pub seed: u64,
}

/// One episode to run: its task, its place in its group, and its seed (of the environment's
/// reset and of the policy's sampling).
#[derive(Clone, Debug)]
pub struct Job {
    /// The task.
    pub task: Task,
    /// The group it belongs to.
    pub group: u64,
    /// Which of its group it is.
    pub sample: usize,
    /// The seed.
    pub seed: u64,
}

/// One episode with the policy's generations.
#[derive(Clone, Debug)]
pub struct EpisodeRecord {
    /// What was run.
    pub job: Job,
    /// The episode.
    pub episode: Episode,
    /// Each agent step's generation (exact prompt and sampled tokens).
    pub steps: Vec<Generation>,
}

impl EpisodeRecord {
    /// The episode as the buffer records it, in a group of `group_size` of environment `env`.
    pub fn entry(&self, env: &str, group_size: u32) -> EpisodeEntry {
        let ep = &self.episode;
        EpisodeEntry {
            episode_id: format!("ep-{}-{}", self.job.group, self.job.sample),
            env: env.to_string(),
            group: self.job.group,
            group_size,
            sample: self.job.sample as u32,
            task: self.job.task.clone(),
            conversation: ep.conversation.clone(),
            action_at: ep.action_at.iter().map(|&i| i as u32).collect(),
            tools_json: ep.tools_json.clone(),
            steps: self.steps.clone(),
            step_rewards: ep.step_rewards.clone(),
            tool_steps: ep.tool_steps,
            ending: ep.ending.name().to_string(),
            failure: match &ep.ending {
                Ending::Failed(why) => why.clone(),
                _ => String::new(),
            },
            reward: ep.outcome.as_ref().map(|o| o.reward),
            step_scores: Vec::new(),
            outcome: None,
            solved: ep.outcome.as_ref().and_then(|o| o.solved),
            evaluated: ep.outcome.as_ref().is_some_and(|o| o.evaluated),
            details_json: ep
                .outcome
                .as_ref()
                .map_or_else(|| "{}".to_string(), |o| o.details_json.clone()),
        }
    }
}

/// Shares and rates over a batch.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BatchSummary {
    /// Episodes run.
    pub episodes: usize,
    /// Episodes that failed (an env call or the policy).
    pub failed: usize,
    /// Share of scored episodes the environment calls solved.
    pub solve_rate: f64,
    /// Mean outcome reward of scored episodes.
    pub mean_reward: f64,
    /// Share of agent steps that called a tool.
    pub tool_call_rate: f64,
    /// Mean agent steps per episode.
    pub mean_steps: f64,
    /// Share of episodes with an answer in the expected format (the environment's details
    /// name an `answer`, as the tool-call environment's do when it found a boxed one).
    pub answer_rate: f64,
    /// Episodes finished per minute of wall-clock time.
    pub episodes_per_minute: f64,
}

/// Whether an episode's evaluation details name an answer (`"answer"` present and not null).
pub fn answered(details_json: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(details_json)
        .ok()
        .and_then(|v| v.get("answer").cloned())
        .is_some_and(|a| !a.is_null())
}

/// How [`run_jobs`] runs its episodes.
#[derive(Clone, Debug)]
pub struct JobOptions {
    /// Episodes running at once (`PARALLEL_ENVS`).
    pub parallel: usize,
    /// Limits of each episode.
    pub episode: EpisodeOptions,
    /// How the policy is asked (the job's seed replaces the sampling seed).
    pub agent: PolicyAgentOptions,
}

/// Whether a failed episode's reason is the environment's (a reset, step or evaluate call that
/// failed or hung, a full or unreachable pool) rather than the policy's or the task's.
pub fn environment_failure(why: &str) -> bool {
    !(why.starts_with("the agent failed")
        || why.starts_with("the task does not fit")
        || why.starts_with("the episode panicked"))
}

/// Runs the jobs `next` hands out, `parallel` at a time, until it hands out none; `on_done` gets
/// each episode as it ends (on the worker that ran it). A panic in one episode (the policy, the
/// agent) fails that episode alone.
pub fn run_jobs(
    env: &TimedEnv,
    policy: Arc<dyn PolicyService>,
    opts: &JobOptions,
    next: &(dyn Fn() -> Option<Job> + Sync),
    on_done: &(dyn Fn(EpisodeRecord) + Sync),
) {
    std::thread::scope(|s| {
        for _ in 0..opts.parallel.max(1) {
            s.spawn(|| {
                while let Some(job) = next() {
                    let attempts = opts.episode.env_retries + 1;
                    let mut attempt = 0;
                    let (episode, agent) = loop {
                        attempt += 1;
                        let mut agent_opts = opts.agent.clone();
                        agent_opts.sampling.seed = Some(job.seed).into();
                        let mut agent = PolicyAgent::new(Arc::clone(&policy), agent_opts);
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            env.episode(&job.task, job.seed, &mut agent, &opts.episode)
                        }));
                        let mut episode = run.unwrap_or_else(|p| {
                            let why = p
                                .downcast_ref::<String>()
                                .map(String::as_str)
                                .or_else(|| p.downcast_ref::<&str>().copied())
                                .unwrap_or("(no message)");
                            Episode::new(
                                &job.task.id,
                                Ending::Failed(format!("the episode panicked: {why}")),
                            )
                        });
                        // An episode the environment failed (a pool gone, an env error) says
                        // nothing of the policy: it is run again, up to `env_retries` times.
                        if let Ending::Failed(why) = &mut episode.ending {
                            if environment_failure(why) {
                                if attempt < attempts {
                                    tracing::warn!(
                                        "task {}: the environment failed the episode (attempt {attempt} of {attempts}), running it again: {why}",
                                        job.task.id
                                    );
                                    continue;
                                }
                                if attempts > 1 {
                                    why.push_str(&format!(" (the environment failed all {attempts} attempts)"));
                                }
                            }
                        }
                        break (episode, agent);
                    };
                    on_done(EpisodeRecord {
                        job,
                        episode,
                        steps: agent.steps,
                    });
                }
            });
        }
    });
}

/// Runs `per_task` episodes of every task (task `i` is group `i`), `parallel` at a time;
/// `on_done` sees each episode as it ends (from the worker that ran it). Returns the records in
/// (task, sample) order.
pub fn run_batch(
    env: &TimedEnv,
    tasks: &[Task],
    policy: Arc<dyn PolicyService>,
    opts: &BatchOptions,
    on_done: &(dyn Fn(&EpisodeRecord) + Sync),
) -> (Vec<EpisodeRecord>, BatchSummary) {
    let jobs = tasks.len() * opts.per_task;
    let taken = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, EpisodeRecord)>> = Mutex::new(Vec::with_capacity(jobs));
    let started = Instant::now();
    let next = || {
        let job = taken.fetch_add(1, Ordering::SeqCst);
        (job < jobs).then(|| Job {
            task: tasks[job / opts.per_task].clone(),
            group: (job / opts.per_task) as u64,
            sample: job % opts.per_task,
            seed: opts.seed.wrapping_add(job as u64),
        })
    };
    let per_task = opts.per_task;
    let record = |r: EpisodeRecord| {
        on_done(&r);
        let job = r.job.group as usize * per_task + r.job.sample;
        done.lock().expect("no worker panics").push((job, r));
    };
    run_jobs(
        env,
        policy,
        &JobOptions {
            parallel: opts.parallel.clamp(1, jobs.max(1)),
            episode: opts.episode.clone(),
            agent: opts.agent.clone(),
        },
        &next,
        &record,
    );
    let mut done = done.into_inner().expect("no worker panics");
    done.sort_by_key(|(job, _)| *job);
    let records: Vec<EpisodeRecord> = done.into_iter().map(|(_, r)| r).collect();
    let summary = summarise(&records, started.elapsed().as_secs_f64());
    (records, summary)
}

/// The shares and rates of `records`, which took `seconds`.
pub fn summarise(records: &[EpisodeRecord], seconds: f64) -> BatchSummary {
    let scored: Vec<_> = records
        .iter()
        .filter_map(|r| r.episode.outcome.as_ref())
        .collect();
    let steps: usize = records.iter().map(|r| r.steps.len()).sum();
    let tool_steps: usize = records.iter().map(|r| r.episode.tool_steps as usize).sum();
    let share = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
    BatchSummary {
        episodes: records.len(),
        failed: records
            .iter()
            .filter(|r| matches!(r.episode.ending, Ending::Failed(_)))
            .count(),
        solve_rate: share(
            scored.iter().filter(|o| o.solved == Some(true)).count(),
            scored.len(),
        ),
        mean_reward: if scored.is_empty() {
            0.0
        } else {
            scored.iter().map(|o| o.reward as f64).sum::<f64>() / scored.len() as f64
        },
        tool_call_rate: share(tool_steps, steps),
        mean_steps: share(steps, records.len()),
        answer_rate: share(
            scored.iter().filter(|o| answered(&o.details_json)).count(),
            records.len(),
        ),
        episodes_per_minute: if seconds > 0.0 {
            records.len() as f64 * 60.0 / seconds
        } else {
            0.0
        },
    }
}

/// Runs `tasks` as episodes of `env` with the model `model` names (loaded with `load`) on the
/// generation device, calling `on_done` as each ends; every episode and the batch's summary.
pub fn run_with_model(
    model: &str,
    load: &LoadOptions,
    env: &TimedEnv,
    tasks: &[Task],
    opts: BatchOptions,
    on_done: &(dyn Fn(&EpisodeRecord) + Sync),
) -> anyhow::Result<(Vec<EpisodeRecord>, BatchSummary)> {
    struct On<'a> {
        model: &'a str,
        load: &'a LoadOptions,
        env: &'a TimedEnv,
        tasks: &'a [Task],
        opts: BatchOptions,
        on_done: &'a (dyn Fn(&EpisodeRecord) + Sync),
    }
    impl OnBackend for On<'_> {
        type Output = (Vec<EpisodeRecord>, BatchSummary);
        fn run<B: Backend>(mut self, p: Placement<B>) -> anyhow::Result<Self::Output>
        where
            Model<B>: Send + Sync,
        {
            let files = ModelFiles::<B>::load(self.model, self.load, &p.serve)?;
            let engine = PolicyEngine::start(
                files,
                0,
                // The run's defaults (batch size, in-flight limit, prefix cache).
                scheduler_options(&openclaw_config::RunConfig::defaults()),
                Arc::new(Metrics::new()),
            );
            self.opts.agent.context = engine.context();
            let policy: Arc<dyn PolicyService> = Arc::new(engine);
            Ok(run_batch(
                self.env,
                self.tasks,
                policy,
                &self.opts,
                self.on_done,
            ))
        }
    }
    openclaw_config::backend::dispatch_generation(On {
        model,
        load,
        env,
        tasks,
        opts,
        on_done,
    })
}

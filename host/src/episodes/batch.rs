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

/// One episode with the policy's generations.
#[derive(Clone, Debug)]
pub struct EpisodeRecord {
    /// Which of its task's group it is.
    pub sample: usize,
    /// The episode.
    pub episode: Episode,
    /// Each agent step's generation (exact prompt and sampled tokens).
    pub steps: Vec<Generation>,
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
    /// Episodes finished per minute of wall-clock time.
    pub episodes_per_minute: f64,
}

/// Runs `per_task` episodes of every task, `parallel` at a time; `on_done` sees each episode as
/// it ends (from the worker that ran it). Returns the records in (task, sample) order.
pub fn run_batch(
    env: &TimedEnv,
    tasks: &[Task],
    policy: Arc<dyn PolicyService>,
    opts: &BatchOptions,
    on_done: &(dyn Fn(&EpisodeRecord) + Sync),
) -> (Vec<EpisodeRecord>, BatchSummary) {
    let jobs = tasks.len() * opts.per_task;
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, EpisodeRecord)>> = Mutex::new(Vec::with_capacity(jobs));
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..opts.parallel.clamp(1, jobs.max(1)) {
            s.spawn(|| loop {
                let job = next.fetch_add(1, Ordering::SeqCst);
                if job >= jobs {
                    break;
                }
                let (task, sample) = (&tasks[job / opts.per_task], job % opts.per_task);
                let mut agent_opts = opts.agent.clone();
                let seed = opts.seed.wrapping_add(job as u64);
                agent_opts.sampling.seed = Some(seed).into();
                let mut agent = PolicyAgent::new(Arc::clone(&policy), agent_opts);
                // A panic (the policy, the agent) fails this episode, not the batch.
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    env.episode(task, seed, &mut agent, &opts.episode)
                }));
                let episode = run.unwrap_or_else(|p| {
                    let why = p
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| p.downcast_ref::<&str>().copied())
                        .unwrap_or("(no message)");
                    Episode::new(
                        &task.id,
                        Ending::Failed(format!("the episode panicked: {why}")),
                    )
                });
                let record = EpisodeRecord {
                    sample,
                    episode,
                    steps: agent.steps,
                };
                on_done(&record);
                done.lock().expect("no worker panics").push((job, record));
            });
        }
    });
    let mut done = done.into_inner().expect("no worker panics");
    done.sort_by_key(|(job, _)| *job);
    let records: Vec<EpisodeRecord> = done.into_iter().map(|(_, r)| r).collect();
    let summary = summarise(&records, started.elapsed().as_secs_f64());
    (records, summary)
}

fn summarise(records: &[EpisodeRecord], seconds: f64) -> BatchSummary {
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
        episodes_per_minute: if seconds > 0.0 {
            records.len() as f64 * 60.0 / seconds
        } else {
            0.0
        },
    }
}

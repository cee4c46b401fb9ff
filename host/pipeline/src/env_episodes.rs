//! The environment producer of `run --env`: groups of episodes with the current policy, each
//! episode recorded in the buffer as it ends, and each group's step samples (with one outcome
//! advantage per trajectory, [`crate::training::episodes`]) recorded and handed to training
//! once the group is whole.
//!
//! Groups are numbered across the life of the buffer: group `g` runs task `g mod n` of a
//! per-pass shuffle of the `n` tasks, `group_size` times with the seeds
//! `seed + g·group_size + k`. A restart goes on at the first number no recorded episode uses;
//! a group the crash left short of episodes first runs its missing ones, and a whole group
//! whose samples were not all written gets the rest, so no finished episode is lost and none
//! is trained twice.

use super::producer::ReplayGate;
use super::replay::{EpisodePlan, PendingGroup};
use super::samples::SampleMaker;
use super::Producer;
use crate::training::episodes::{group_samples, EPISODE_GROUP_NORM};
use abi_stable::std_types::ROption;
use anyhow::{bail, Result};
use openclaw_buffer::record::EpisodeEntry;
use openclaw_buffer::Record;
use openclaw_episodes::batch::{run_jobs, EpisodeRecord, Job, JobOptions};
use openclaw_episodes::TimedEnv;
use openclaw_judge::pool::score_within;
use openclaw_judge::score_request;
use openclaw_metrics::progress::Progress;
use openclaw_metrics::{EpisodeView, Metrics};
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{JudgeSettings, Message, NextState, Task, Turn, TurnType};
use openclaw_plugins::RewardHandle;
use openclaw_trainer::rng::SplitMix;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings of [`EnvEpisodes`].
#[derive(Clone, Debug)]
pub struct EnvRunOptions {
    /// Episodes per task in a group (`--num-rollouts-per-prompt`).
    pub group_size: usize,
    /// How episodes run (`PARALLEL_ENVS`, limits, sampling).
    pub jobs: JobOptions,
    /// Seeds the task order and every episode.
    pub seed: u64,
}

/// Step scores from the method's reward plugin (§6.1 of the original: a PRM judges each step
/// from what the environment answered; the scalar an episode trains on is its outcome plus
/// `coef` times the mean step score).
#[derive(Clone)]
pub struct StepJudge {
    /// The method's reward plugin, with the run's judge.
    pub reward: Arc<RewardHandle>,
    /// The judge settings of every request.
    pub settings: JudgeSettings,
    /// `prm_step_coef`.
    pub coef: f32,
    /// `--judge-timeout`, which bounds each call (see `judge::pool::score_within`).
    pub timeout: Duration,
}

impl StepJudge {
    /// Scores every step of `e` and adds `coef` times their mean to its reward. A step whose
    /// judging fails (after the plugin's own retries) is logged and left out of the mean.
    fn judge(&self, e: &mut EpisodeEntry) {
        let Some(outcome) = e.reward else {
            return;
        };
        let mut scores = Vec::with_capacity(e.steps.len());
        for (i, (&at, g)) in e.action_at.iter().zip(&e.steps).enumerate() {
            let at = at as usize;
            let end = e
                .action_at
                .get(i + 1)
                .map_or(e.conversation.len(), |&n| n as usize);
            let observed: Vec<Message> = e.conversation[(at + 1).min(end)..end].to_vec();
            let next_state = (!observed.is_empty()).then(|| NextState {
                role: observed[0].role.clone(),
                content: observed
                    .iter()
                    .map(|m| m.content.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
                    .into(),
                messages: observed.clone().into(),
            });
            let turn = Turn {
                session_id: e.episode_id.as_str().into(),
                turn_index: i as u32,
                turn_type: TurnType::Main,
                prompt_messages: e.conversation[..at].to_vec().into(),
                tools_json: e.tools_json.as_str().into(),
                response: e.conversation[at].clone(),
                prompt_ids: g.prompt_ids.clone(),
                response_ids: g.response_ids.clone(),
                response_logprobs: g.logprobs.clone(),
                weight_version: g.weight_version,
                next_state: next_state.into(),
                trainable: true,
            };
            let closed = turn.next_state.is_none();
            let request = score_request(turn, closed, &self.settings);
            match score_within(&self.reward, &request, self.timeout, None)
                .and_then(|s| openclaw_judge::pool::vote_given(s).map_err(str::to_string))
            {
                Ok(s) if s.value.is_finite() => scores.push(s.value),
                Ok(s) => tracing::warn!(
                    "episode {} step {i}: the judge gave the score {}",
                    e.episode_id,
                    s.value
                ),
                Err(err) => {
                    tracing::warn!("episode {} step {i}: judging failed: {err}", e.episode_id)
                }
            }
        }
        if !scores.is_empty() {
            let mean = scores.iter().sum::<f32>() / scores.len() as f32;
            e.outcome = Some(outcome);
            e.reward = Some(outcome + self.coef * mean);
        }
        e.step_scores = scores;
    }
}

/// Counts over the episodes a run has finished, for its step lines and curve.
#[derive(Debug, Default)]
pub struct EpisodeStats {
    recent: Mutex<VecDeque<EpisodeSummary>>,
    fatal: Mutex<Option<String>>,
}

/// What the step lines show of one episode.
#[derive(Clone, Copy, Debug)]
struct EpisodeSummary {
    solved: Option<bool>,
    reward: Option<f32>,
    steps: usize,
    tool_steps: u32,
    failed: bool,
    answered: bool,
}

/// Shares over the most recent episodes.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct EpisodeWindow {
    /// Episodes in the window.
    pub episodes: usize,
    /// Share of scored episodes solved.
    pub solve_rate: f64,
    /// Mean outcome reward of scored episodes.
    pub mean_reward: f64,
    /// Share of agent steps that called a tool.
    pub tool_call_rate: f64,
    /// Share of episodes that failed.
    pub failed: f64,
    /// Mean agent steps per episode.
    pub mean_steps: f64,
    /// Share of episodes with an answer in the expected format (the environment's details
    /// name an `answer`).
    pub answer_rate: f64,
}

impl EpisodeStats {
    fn push(&self, e: &EpisodeEntry) {
        let mut r = self.recent.lock().expect("stats lock");
        r.push_back(EpisodeSummary {
            solved: e.solved,
            reward: e.reward,
            steps: e.steps.len(),
            tool_steps: e.tool_steps,
            failed: e.ending == "failed",
            answered: openclaw_episodes::batch::answered(&e.details_json),
        });
        if r.len() > 4096 {
            r.pop_front();
        }
    }

    /// Why the producer stopped the run, when it did (every episode failing).
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().expect("stats lock").clone()
    }

    /// Shares over the last `n` episodes.
    pub fn recent(&self, n: usize) -> EpisodeWindow {
        let r = self.recent.lock().expect("stats lock");
        let w: Vec<EpisodeSummary> = r.iter().rev().take(n).copied().collect();
        let share = |a: f64, b: f64| if b == 0.0 { 0.0 } else { a / b };
        let scored: Vec<f32> = w.iter().filter_map(|e| e.reward).collect();
        let steps: usize = w.iter().map(|e| e.steps).sum();
        EpisodeWindow {
            episodes: w.len(),
            solve_rate: share(
                w.iter().filter(|e| e.solved == Some(true)).count() as f64,
                w.iter().filter(|e| e.reward.is_some()).count() as f64,
            ),
            mean_reward: share(scored.iter().map(|&x| x as f64).sum(), scored.len() as f64),
            tool_call_rate: share(w.iter().map(|e| e.tool_steps as f64).sum(), steps as f64),
            failed: share(w.iter().filter(|e| e.failed).count() as f64, w.len() as f64),
            mean_steps: share(steps as f64, w.len() as f64),
            answer_rate: share(
                w.iter().filter(|e| e.answered).count() as f64,
                w.len() as f64,
            ),
        }
    }
}

/// Episodes of an environment with the served policy, as training samples.
pub struct EnvEpisodes {
    /// The environment.
    pub env: TimedEnv,
    /// The tasks groups cycle through.
    pub tasks: Vec<Task>,
    /// The policy (the engine serving publishes new weights to).
    pub policy: Arc<dyn PolicyService>,
    /// Settings.
    pub opts: EnvRunOptions,
    /// Where episodes and samples are recorded and sent.
    pub samples: Arc<SampleMaker>,
    /// What the buffer held: the next group number and unfinished groups.
    pub resume: EpisodePlan,
    /// Counts for the step lines.
    pub stats: Arc<EpisodeStats>,
    /// Step scores added to the outcome (`--prm-step-coef` above 0).
    pub step_judge: Option<StepJudge>,
    /// Waited for before the first sample (replayed samples train first).
    pub gate: Arc<ReplayGate>,
    /// The run's metrics: the dashboard shows the latest episodes.
    pub metrics: Arc<Metrics>,
}

/// The groups in flight and the jobs not yet handed out.
struct Plan {
    open: HashMap<u64, PendingGroup>,
    queue: VecDeque<Job>,
    next_group: u64,
    order: (u64, Vec<usize>),
}

/// An episode as the dashboard shows it: the conversation as `role: text` paragraphs.
fn episode_view(e: &EpisodeEntry, step: u64) -> EpisodeView {
    let mut transcript = String::new();
    for m in &e.conversation {
        transcript += &format!("{}: {}\n", m.role, m.content);
        if let ROption::RSome(calls) = &m.tool_calls_json {
            transcript += &format!("  tool calls: {calls}\n");
        }
    }
    if !e.failure.is_empty() {
        transcript += &format!("(failed: {})\n", e.failure);
    }
    EpisodeView {
        step,
        task: e.task.id.to_string(),
        reward: e.reward.map_or(0.0, f64::from),
        solved: e.solved == Some(true),
        transcript,
    }
}

impl EnvEpisodes {
    /// Task of group `g`: its place in the shuffle of its pass.
    fn task_for(&self, plan: &mut Plan, g: u64) -> Task {
        let n = self.tasks.len() as u64;
        let pass = g / n;
        if plan.order.0 != pass || plan.order.1.is_empty() {
            let mut idx: Vec<usize> = (0..self.tasks.len()).collect();
            SplitMix::new(self.opts.seed ^ pass.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .shuffle(&mut idx);
            plan.order = (pass, idx);
        }
        self.tasks[plan.order.1[(g % n) as usize]].clone()
    }

    fn seed(&self, group: u64, sample: usize) -> u64 {
        self.opts
            .seed
            .wrapping_add(group.wrapping_mul(self.opts.group_size as u64))
            .wrapping_add(sample as u64)
    }

    /// Records the samples of a whole group that the buffer does not have yet; `None` when
    /// training has stopped.
    fn finish_group(&self, g: &PendingGroup) -> Result<Option<usize>> {
        let mut episodes = g.episodes.clone();
        episodes.sort_by_key(|e| e.sample);
        let missing: Vec<_> = group_samples(&episodes, EPISODE_GROUP_NORM)
            .into_iter()
            .filter(|s| {
                !g.sampled
                    .contains(&(s.session_id.to_string(), s.turn_index))
            })
            .collect();
        let n = missing.len();
        if n > 0 && self.samples.record_samples(missing)?.is_none() {
            return Ok(None);
        }
        Ok(Some(n))
    }

    /// Stops the run with `why` (every episode failing, the buffer failing).
    fn fail(&self, stop: &AtomicBool, why: String) {
        tracing::error!("{why}");
        *self.stats.fatal.lock().expect("stats lock") = Some(why);
        stop.store(true, Ordering::SeqCst);
    }
}

impl Producer for EnvEpisodes {
    fn name(&self) -> &'static str {
        "episodes"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        if self.tasks.is_empty() {
            bail!("environment `{}` has no tasks", self.env.plugin());
        }
        // Replayed samples train first (see [`ReplayGate`]).
        if !self.gate.wait(&stop) {
            return Ok(());
        }
        let env_name = self.env.plugin().to_string();
        let mut plan = Plan {
            open: HashMap::new(),
            queue: VecDeque::new(),
            next_group: self.resume.next_group,
            order: (u64::MAX, Vec::new()),
        };
        // Unfinished groups first: whole ones get their samples, short ones their episodes.
        for g in &self.resume.groups {
            if g.episodes.iter().any(|e| e.env != env_name) {
                tracing::warn!(
                    "group {} in the buffer is of another environment; left as it is",
                    g.group
                );
                continue;
            }
            if g.complete() {
                match self.finish_group(g) {
                    Ok(Some(n)) => {
                        tracing::info!("group {}: {n} samples written after a restart", g.group)
                    }
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        let why = format!("cannot record the samples of group {}: {e:#}", g.group);
                        self.fail(&stop, why.clone());
                        bail!(why);
                    }
                }
                continue;
            }
            let task = g.episodes[0].task.clone();
            for k in 0..g.size as usize {
                if !g.episodes.iter().any(|e| e.sample as usize == k) {
                    plan.queue.push_back(Job {
                        task: task.clone(),
                        group: g.group,
                        sample: k,
                        seed: self.seed(g.group, k),
                    });
                }
            }
            plan.open.insert(g.group, g.clone());
        }
        let plan = Mutex::new(plan);
        let size = self.opts.group_size;
        // Lines, not a bar: the training steps print their own lines between episodes.
        let progress = Progress::start_on(&format!("episodes of `{env_name}`"), None, false);
        // A run whose episodes all fail (a task that does not fit the context, a broken
        // environment) stops instead of spinning: this many failures in a row end it.
        let fail_limit = (2 * self.opts.jobs.parallel).max(8);
        let failed_in_a_row = std::sync::atomic::AtomicUsize::new(0);
        let fatal: Mutex<Option<String>> = Mutex::new(None);
        let next = || -> Option<Job> {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let mut p = plan.lock().expect("plan lock");
            if p.queue.is_empty() {
                let g = p.next_group;
                p.next_group += 1;
                let task = self.task_for(&mut p, g);
                for k in 0..size {
                    let seed = self.seed(g, k);
                    p.queue.push_back(Job {
                        task: task.clone(),
                        group: g,
                        sample: k,
                        seed,
                    });
                }
                p.open.insert(
                    g,
                    PendingGroup {
                        group: g,
                        size: size as u32,
                        episodes: Vec::new(),
                        sampled: Default::default(),
                    },
                );
            }
            p.queue.pop_front()
        };
        let on_done = |r: EpisodeRecord| {
            let mut entry = r.entry(&env_name, size as u32);
            if let Some(j) = &self.step_judge {
                j.judge(&mut entry);
            }
            if let openclaw_episodes::Ending::Failed(why) = &r.episode.ending {
                tracing::warn!("episode {} failed: {why}", entry.episode_id);
                if failed_in_a_row.fetch_add(1, Ordering::SeqCst) + 1 >= fail_limit {
                    *fatal.lock().expect("fatal lock") = Some(format!(
                        "{fail_limit} episodes in a row failed; the last: {why}"
                    ));
                    stop.store(true, Ordering::SeqCst);
                }
            } else {
                failed_in_a_row.store(0, Ordering::SeqCst);
            }
            if let Err(e) = self.samples.append(&Record::Episode {
                episode: Box::new(entry.clone()),
            }) {
                self.fail(
                    &stop,
                    format!("cannot record episode {}: {e:#}", entry.episode_id),
                );
                return;
            }
            self.stats.push(&entry);
            self.metrics
                .history
                .episode(episode_view(&entry, self.metrics.train_steps.get()));
            let w = self.stats.recent(32);
            progress.advance(
                1,
                &format!(
                    "(last {}: solved {:.2}, reward {:+.2})",
                    w.episodes, w.solve_rate, w.mean_reward
                ),
            );
            let whole = {
                let mut p = plan.lock().expect("plan lock");
                let Some(g) = p.open.get_mut(&entry.group) else {
                    return;
                };
                g.episodes.push(entry.clone());
                if g.complete() {
                    p.open.remove(&entry.group)
                } else {
                    None
                }
            };
            if let Some(g) = whole {
                match self.finish_group(&g) {
                    Ok(Some(_)) => {}
                    // Training stopped: the samples are recorded; the next start trains them.
                    Ok(None) => stop.store(true, Ordering::SeqCst),
                    Err(e) => self.fail(
                        &stop,
                        format!("cannot record the samples of group {}: {e:#}", g.group),
                    ),
                }
            }
        };
        run_jobs(
            &self.env,
            Arc::clone(&self.policy),
            &self.opts.jobs,
            &next,
            &on_done,
        );
        if let Some(why) = fatal.into_inner().expect("fatal lock") {
            let why = format!("environment `{env_name}`: {why}");
            *self.stats.fatal.lock().expect("stats lock") = Some(why.clone());
            bail!(why);
        }
        if let Some(why) = self.stats.fatal() {
            bail!(why);
        }
        Ok(())
    }
}

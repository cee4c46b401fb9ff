//! Episodes of an environment plugin: reset, the agent's steps, the score after the loop, and
//! close, with every environment call under a timeout.
//!
//! The rules, as the original keeps them and a user of a shared machine needs them:
//!
//! - **One episode fails, nothing else.** An env call that errors, panics (the ABI guard turns
//!   that into an error) or does not return within its timeout fails that episode, with the
//!   reason recorded in its [`Ending::Failed`]; a hung call is abandoned on its thread (a plugin
//!   call cannot be killed from outside) and the runtime goes on.
//! - **Scored after the loop, also when cut off.** `evaluate` is called when the episode ended
//!   on its own, was truncated by the environment, or was cut off by the host at `max_steps` or
//!   when the context is full;
//!   an environment that does not evaluate is scored by the sum of its step rewards. A failed
//!   episode is not scored (its reward would say nothing of the agent).
//! - **Always closed**, failed or not, so the environment frees its sandbox.

pub mod batch;
pub mod policy_agent;
pub mod pool;
pub mod setup;

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Result};
use openclaw_plugin_api::{Action, Evaluation, Message, Observation, StepOutcome, Task};

use openclaw_plugins::EnvHandle;

/// Limits of one episode.
#[derive(Clone, Debug)]
pub struct EpisodeOptions {
    /// Agent steps before the host cuts the episode off.
    pub max_steps: u32,
    /// Time one `reset`, `step` or `close` may take.
    pub call_timeout: Duration,
    /// Time `evaluate` may take (running a task's tests takes longer than a step).
    pub evaluate_timeout: Duration,
    /// How long an episode waits for a slot when every environment pool is full before it
    /// fails (a pool smaller than `PARALLEL_ENVS` is a queue, not an error).
    pub full_wait: Duration,
    /// Times an episode the environment failed is run again before it counts as failed.
    pub env_retries: u32,
}

impl Default for EpisodeOptions {
    fn default() -> Self {
        EpisodeOptions::new(16, Duration::from_secs(60))
    }
}

impl EpisodeOptions {
    /// `max_steps` agent steps and `call` per environment call, with what follows from them:
    /// ten calls' time to evaluate or to wait for a full pool, and two retries.
    pub fn new(max_steps: u32, call: Duration) -> Self {
        EpisodeOptions {
            max_steps,
            call_timeout: call,
            evaluate_timeout: call.saturating_mul(10),
            full_wait: call.saturating_mul(10),
            env_retries: 2,
        }
    }
}

/// Every environment pool answered that its slots are taken: the episode may wait for one.
#[derive(Debug)]
pub struct PoolsFull(pub String);

impl std::fmt::Display for PoolsFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PoolsFull {}

/// The agent's side of an episode: the conversation so far and the tools offered in, its next
/// message out (the runtime's policy, or a scripted agent in tests).
pub trait Agent {
    /// The next assistant message.
    fn act(&mut self, conversation: &[Message], tools_json: &str) -> Result<Action>;
}

/// What an [`Agent`] answers when the conversation leaves no room for a reply: the episode is
/// then cut off and still scored, not failed.
#[derive(Debug)]
pub struct ContextFull(pub String);

impl std::fmt::Display for ContextFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ContextFull {}

/// How an episode's loop ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// The environment said it was done.
    Done,
    /// The environment ended it at a limit of its own.
    Truncated,
    /// The host cut it off at `max_steps`.
    MaxSteps,
    /// The conversation left the policy no room for another reply.
    ContextFull,
    /// An env call or the agent failed; the reason.
    Failed(String),
}

impl Ending {
    /// Its name in records and summaries: `done`, `truncated`, `max_steps`, `context_full` or
    /// `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::Truncated => "truncated",
            Ending::MaxSteps => "max_steps",
            Ending::ContextFull => "context_full",
            Ending::Failed(_) => "failed",
        }
    }
}

/// The episode's outcome score.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The reward.
    pub reward: f32,
    /// Whether it counts as solved (`None` when the environment does not say).
    pub solved: Option<bool>,
    /// The environment's details, as JSON text.
    pub details_json: String,
    /// Whether the reward came from `evaluate` (else from the step rewards).
    pub evaluated: bool,
}

/// One finished episode.
#[derive(Clone, Debug)]
pub struct Episode {
    /// The task's id.
    pub task_id: String,
    /// The whole conversation: the first observation, then each action and what it brought.
    pub conversation: Vec<Message>,
    /// Where each agent step's action is in `conversation`.
    pub action_at: Vec<usize>,
    /// The tools offered at the first step (an OpenAI `tools` JSON array; empty for none).
    pub tools_json: String,
    /// The reward of each step, in order.
    pub step_rewards: Vec<f32>,
    /// Steps the environment answered with tool results (the agent called a tool, in whatever
    /// form the environment reads).
    pub tool_steps: u32,
    /// How the loop ended.
    pub ending: Ending,
    /// The score (`None` when the episode failed).
    pub outcome: Option<Outcome>,
}

impl Episode {
    /// An episode of `task_id` with nothing recorded yet, ending as `ending` so far.
    pub fn new(task_id: &str, ending: Ending) -> Episode {
        Episode {
            task_id: task_id.to_string(),
            conversation: Vec::new(),
            action_at: Vec::new(),
            tools_json: String::new(),
            step_rewards: Vec::new(),
            tool_steps: 0,
            ending,
            outcome: None,
        }
    }
}

/// The calls of an environment, wherever it runs: a plugin loaded here ([`EnvHandle`]) or a
/// remote pool ([`crate::pool::RemoteEnv`]).
pub trait EnvCalls: Send + Sync {
    /// Its name, for messages.
    fn plugin(&self) -> &str;
    /// The tasks of a split.
    fn tasks(&self, split: &str) -> Result<Vec<Task>>;
    /// Starts an episode.
    fn reset(&self, task: &Task, seed: u64) -> Result<(u64, Observation)>;
    /// Applies an action.
    fn step(&self, episode: u64, action: &Action) -> Result<StepOutcome>;
    /// Scores an episode after its loop (`Ok(None)`: it scores by step rewards).
    fn evaluate(&self, episode: u64) -> Result<Option<Evaluation>>;
    /// Ends an episode.
    fn close(&self, episode: u64) -> Result<()>;
    /// A task's reference solution (`Ok(None)`: the environment has none).
    fn reference(&self, task: &Task) -> Result<Option<Vec<Action>>> {
        let _ = task;
        Ok(None)
    }
    /// The tasks the environment could not load, one line each.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
}

impl EnvCalls for EnvHandle {
    fn plugin(&self) -> &str {
        EnvHandle::plugin(self)
    }
    fn tasks(&self, split: &str) -> Result<Vec<Task>> {
        EnvHandle::tasks(self, split)
    }
    fn reset(&self, task: &Task, seed: u64) -> Result<(u64, Observation)> {
        EnvHandle::reset(self, task, seed)
    }
    fn step(&self, episode: u64, action: &Action) -> Result<StepOutcome> {
        EnvHandle::step(self, episode, action)
    }
    fn evaluate(&self, episode: u64) -> Result<Option<Evaluation>> {
        EnvHandle::evaluate(self, episode)
    }
    fn close(&self, episode: u64) -> Result<()> {
        EnvHandle::close(self, episode)
    }
    fn reference(&self, task: &Task) -> Result<Option<Vec<Action>>> {
        EnvHandle::reference(self, task)
    }
    fn problems(&self) -> Vec<String> {
        EnvHandle::problems(self)
    }
}

/// An environment whose every call has a deadline.
#[derive(Clone)]
pub struct TimedEnv {
    env: Arc<dyn EnvCalls>,
}

impl TimedEnv {
    /// Wraps a constructed environment.
    pub fn new(env: EnvHandle) -> Self {
        TimedEnv { env: Arc::new(env) }
    }

    /// Wraps an environment reached some other way (a remote pool).
    pub fn with_calls(env: Arc<dyn EnvCalls>) -> Self {
        TimedEnv { env }
    }

    /// Starts an episode within `timeout`; one that starts after it is closed at once.
    pub fn reset(&self, task: &Task, seed: u64, timeout: Duration) -> Result<(u64, Observation)> {
        let t = task.clone();
        let (tx, rx) = mpsc::channel();
        let env = Arc::clone(&self.env);
        std::thread::Builder::new()
            .name("env-reset".into())
            .spawn(move || {
                if let Err(mpsc::SendError(Ok((id, _)))) = tx.send(env.reset(&t, seed)) {
                    // Nobody waits for it any more: nobody would close it.
                    if let Err(e) = env.close(id) {
                        tracing::warn!(plugin = env.plugin(), "closing late episode {id}: {e:#}");
                    }
                }
            })?;
        self.answer("reset", timeout, rx)
    }

    /// Applies an action within `timeout`.
    pub fn step(&self, episode: u64, action: &Action, timeout: Duration) -> Result<StepOutcome> {
        let a = action.clone();
        self.call("step", timeout, move |e| e.step(episode, &a))
    }

    /// Scores an episode within `timeout`.
    pub fn evaluate(&self, episode: u64, timeout: Duration) -> Result<Option<Evaluation>> {
        self.call("evaluate", timeout, move |e| e.evaluate(episode))
    }

    /// Ends an episode within `timeout`.
    pub fn close(&self, episode: u64, timeout: Duration) -> Result<()> {
        self.call("close", timeout, move |e| e.close(episode))
    }

    /// A task's reference solution, when the environment has one (read from the plugin
    /// directly: it is the plugin's own data, no work is done).
    pub fn reference(&self, task: &Task) -> Result<Option<Vec<Action>>> {
        self.env.reference(task)
    }

    /// The tasks the environment could not load, one line each.
    pub fn problems(&self) -> Vec<String> {
        self.env.problems()
    }

    /// Its name, for messages.
    pub fn plugin(&self) -> &str {
        self.env.plugin()
    }

    /// The tasks of a split.
    pub fn tasks(&self, split: &str, timeout: Duration) -> Result<Vec<Task>> {
        let split = split.to_string();
        self.call("tasks", timeout, move |e| e.tasks(&split))
    }

    /// Runs `f` on its own thread; an error when it does not return within `timeout`.
    fn call<T: Send + 'static>(
        &self,
        what: &str,
        timeout: Duration,
        f: impl FnOnce(&dyn EnvCalls) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let env = Arc::clone(&self.env);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("env-{what}"))
            .spawn(move || {
                let _ = tx.send(f(env.as_ref()));
            })?;
        self.answer(what, timeout, rx)
    }

    /// The answer on `rx` within `timeout`, or an error saying what did not return.
    fn answer<T>(&self, what: &str, timeout: Duration, rx: mpsc::Receiver<Result<T>>) -> Result<T> {
        match rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(anyhow!(
                "environment `{}`: {what} did not return within {:.1} s",
                self.plugin(),
                timeout.as_secs_f64()
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(anyhow!(
                "environment `{}`: {what} ended without an answer",
                self.plugin()
            )),
        }
    }

    /// Runs one episode of `task` with `agent` (see the module doc for the rules).
    pub fn episode(
        &self,
        task: &Task,
        seed: u64,
        agent: &mut dyn Agent,
        opts: &EpisodeOptions,
    ) -> Episode {
        let t = task.clone();
        let waited_until = std::time::Instant::now() + opts.full_wait;
        let mut pause = Duration::from_millis(250);
        let (id, first) = loop {
            match self.reset(&t, seed, opts.call_timeout) {
                Ok(r) => break r,
                // Full pools: wait for a slot, backing off, up to `full_wait`.
                Err(e)
                    if e.downcast_ref::<PoolsFull>().is_some()
                        && std::time::Instant::now() + pause < waited_until =>
                {
                    tracing::debug!("task {}: {e}; waiting {pause:?} for a slot", task.id);
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    let why = if e.downcast_ref::<PoolsFull>().is_some() {
                        format!("{e:#} (waited {} s for a slot)", opts.full_wait.as_secs())
                    } else {
                        format!("{e:#}")
                    };
                    return Episode::new(&task.id, Ending::Failed(why));
                }
            }
        };
        // Cut off at `max_steps` unless the loop ends otherwise.
        let mut ep = Episode::new(&task.id, Ending::MaxSteps);
        ep.conversation.extend(first.messages.iter().cloned());
        let mut tools = first.tools_json.to_string();
        ep.tools_json = tools.clone();
        for _ in 0..opts.max_steps {
            let action = match agent.act(&ep.conversation, &tools) {
                Ok(a) => a,
                Err(e) if e.downcast_ref::<ContextFull>().is_some() => {
                    // Cut off after steps, it is scored; a task that does not fit at all says
                    // nothing of the agent.
                    ep.ending = if ep.action_at.is_empty() {
                        Ending::Failed(format!("the task does not fit: {e}"))
                    } else {
                        Ending::ContextFull
                    };
                    break;
                }
                Err(e) => {
                    ep.ending = Ending::Failed(format!("the agent failed: {e:#}"));
                    break;
                }
            };
            ep.action_at.push(ep.conversation.len());
            ep.conversation.push(action.message.clone());
            let out = match self.call("step", opts.call_timeout, move |e| e.step(id, &action)) {
                Ok(o) => o,
                Err(e) => {
                    ep.ending = Ending::Failed(format!("{e:#}"));
                    break;
                }
            };
            if out
                .observation
                .messages
                .iter()
                .any(|m| m.role.as_str() == "tool")
            {
                ep.tool_steps += 1;
            }
            ep.conversation
                .extend(out.observation.messages.iter().cloned());
            if !out.observation.tools_json.is_empty() {
                tools = out.observation.tools_json.to_string();
            }
            ep.step_rewards.push(out.reward);
            if out.done {
                ep.ending = if out.info.truncated {
                    Ending::Truncated
                } else {
                    Ending::Done
                };
                break;
            }
        }
        if !matches!(ep.ending, Ending::Failed(_)) {
            match self.call("evaluate", opts.evaluate_timeout, move |e| e.evaluate(id)) {
                Ok(Some(Evaluation {
                    reward,
                    solved,
                    details_json,
                })) if reward.is_finite() => {
                    ep.outcome = Some(Outcome {
                        reward,
                        solved: Some(solved),
                        details_json: details_json.to_string(),
                        evaluated: true,
                    })
                }
                Ok(Some(e)) => {
                    ep.ending = Ending::Failed(format!(
                        "environment `{}`: evaluate gave the reward {}",
                        self.plugin(),
                        e.reward
                    ))
                }
                Ok(None) => {
                    ep.outcome = Some(Outcome {
                        reward: ep.step_rewards.iter().sum(),
                        solved: None,
                        details_json: "{}".into(),
                        evaluated: false,
                    })
                }
                Err(e) => ep.ending = Ending::Failed(format!("{e:#}")),
            }
        }
        if let Err(e) = self.call("close", opts.call_timeout, move |e| e.close(id)) {
            tracing::warn!(plugin = self.plugin(), "closing episode {id}: {e:#}");
        }
        ep
    }
}

//! The environment kind: tasks an agent works through step by step, with rewards.

use crate::conversation::Message;
use abi_stable::std_types::{RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// One task of an environment's task set.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// A stable id, unique within the environment.
    pub id: RString,
    /// The instruction the agent receives.
    pub instruction: RString,
    /// Task data the environment needs, as JSON text.
    pub data_json: RString,
}

/// What the agent sees after a reset or a step: the messages to append to its conversation.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Messages to append (a user instruction, tool results, ...).
    pub messages: RVec<Message>,
    /// The tools the agent may call now, as an OpenAI `tools` JSON array (empty for none).
    pub tools_json: RString,
}

/// The agent's move: its assistant message, with tool calls in `tool_calls_json`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The assistant message the policy produced.
    pub message: Message,
}

/// Extra facts about a step.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvInfo {
    /// The episode ended because a limit was hit, not because the task was finished.
    pub truncated: bool,
    /// Anything else, as JSON text.
    pub metadata_json: RString,
}

/// The result of one step.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    /// What the agent sees next.
    pub observation: Observation,
    /// The reward of this step.
    pub reward: f32,
    /// Whether the episode is over.
    pub done: bool,
    /// Extra facts.
    pub info: EnvInfo,
}

/// The score of an episode, given after its loop ended (finished, truncated, or cut off by the
/// host at a limit or a timeout).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The outcome reward (±1 for a right or wrong answer, the share of tests passed, ...).
    pub reward: f32,
    /// Whether the task counts as solved (for solve rates and pass@k).
    pub solved: bool,
    /// Details for logs and the buffer (the answer found, test names, output tails), as JSON
    /// text.
    pub details_json: RString,
}

/// An environment, written in plain Rust. Episodes are addressed by the id `reset` returns,
/// so one environment object serves many parallel workers.
pub trait Env: Send + Sync + 'static {
    /// Builds the environment from its configuration and the host's services.
    fn new(config: &str, host: crate::HostServices) -> crate::PluginResult<Self>
    where
        Self: Sized;

    /// The tasks of a split (`train`, `eval`, ...).
    fn tasks(&self, split: &str) -> crate::PluginResult<Vec<Task>>;

    /// Starts an episode on a task; returns its id and the first observation.
    fn reset(&self, task: &Task, seed: u64) -> crate::PluginResult<(u64, Observation)>;

    /// Applies the agent's action to an episode.
    fn step(&self, episode: u64, action: &Action) -> crate::PluginResult<StepOutcome>;

    /// Ends an episode and frees what it holds.
    fn close(&self, episode: u64) -> crate::PluginResult<()>;

    /// Scores an episode after its loop, before `close`; called even when the episode did not
    /// end on its own (API 1.2). Environments that score only step by step keep this default,
    /// and the host then uses their step rewards.
    fn evaluate(&self, episode: u64) -> crate::PluginResult<Evaluation> {
        let _ = episode;
        Err(crate::env::NO_EVALUATE.into())
    }

    /// The task's reference solution as the agent's moves, stepped in order from `reset` (API
    /// 1.4): what `env check` runs to show the task can be solved and is scored right. Never
    /// shown to the agent.
    fn reference(&self, task: &Task) -> crate::PluginResult<Vec<Action>> {
        let _ = task;
        Err(crate::env::NO_REFERENCE.into())
    }

    /// The tasks that could not be loaded, one line each, naming the task and why (API 1.4): a
    /// broken task is reported and left out, never fatal to the set.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What an environment without reference solutions answers.
pub const NO_REFERENCE: &str = "this environment has no reference solutions";

/// What an environment without its own `evaluate` answers (the host falls back to the episode's
/// step rewards when it sees this).
pub const NO_EVALUATE: &str = "this environment does not evaluate episodes";

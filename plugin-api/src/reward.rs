//! The reward kind: a judge or reward model that scores a turn from what followed it.

use crate::conversation::{TopKEntries, Turn};
use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// What a reward plugin is asked to score.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreRequest {
    /// The turn, with its prompt, response, exact tokens and (when known) next state.
    pub turn: Turn,
    /// The response as the chat template renders it (reasoning and tool-call markup included),
    /// which is what a judge reads.
    pub response_text: RString,
    /// Whether the session ended without a next state for this turn (an idle timeout or an
    /// explicit end): the method decides what such a turn is worth.
    pub session_closed: bool,
}

/// A reward plugin's verdict on one turn.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Score {
    /// The reward (binary RL uses -1, 0 or +1).
    pub value: f32,
    /// Whether the turn becomes a training sample.
    pub trainable: bool,
    /// Every valid vote, in the order the judge returned them.
    pub votes: RVec<f32>,
    /// Votes that could not be parsed or whose call failed.
    pub invalid_votes: u32,
    /// The hint the judge extracted (on-policy distillation), if any.
    pub hint: ROption<RString>,
    /// A representative judge output, for the record.
    pub judge_text: RString,
    /// The teacher's log-probability of each response token, when the method computed it.
    pub teacher_logprobs: ROption<RVec<f32>>,
    /// The teacher's top-k distribution at each response position, when asked for.
    pub teacher_topk: ROption<TopKEntries>,
    /// Per-token advantages, when the method computes them itself.
    pub advantages: ROption<RVec<f32>>,
    /// Anything else worth recording, as JSON text.
    pub metadata_json: RString,
}

/// A reward model or judge, written in plain Rust.
pub trait Reward: Send + Sync + 'static {
    /// Builds the reward plugin from its configuration and the host's services.
    fn new(config: &str, host: crate::HostServices) -> crate::PluginResult<Self>
    where
        Self: Sized;

    /// Scores one turn.
    fn score(&self, request: &ScoreRequest) -> crate::PluginResult<Score>;
}

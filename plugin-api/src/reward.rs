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
    /// How the run wants the judge used.
    pub judge: JudgeSettings,
}

/// The run's judge settings (`--majority-vote-n`, `--majority-vote-threshold`,
/// `--judge-temperature`, `--judge-max-tokens`, `--distill-topk`).
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgeSettings {
    /// Judge calls per turn (votes).
    pub votes: u32,
    /// The share of valid votes a value needs to win; below it (or on a tie) the score is 0.
    pub threshold: f32,
    /// Judge sampling temperature.
    pub temperature: f32,
    /// Judge output cap, in tokens.
    pub max_tokens: u32,
    /// Teacher top-k entries per response token for top-k distillation (0: none).
    pub topk: u32,
}

impl Default for JudgeSettings {
    fn default() -> Self {
        JudgeSettings {
            votes: 3,
            threshold: 0.5,
            temperature: 0.6,
            max_tokens: 4096,
            topk: 0,
        }
    }
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

/// Merges valid votes: the most common value wins when its share of the votes is at least
/// `threshold` and no other value has as many votes; otherwise (and with no votes) 0.
///
/// `[1, 1, -1]` with 0.5 gives 1; `[1, -1, 0]` gives 0 (a tie); `[1, 1, -1]` with 0.7 gives 0.
/// Non-finite entries are not votes and are skipped.
pub fn majority_vote(valid: &[f32], threshold: f32) -> f32 {
    let votes: Vec<f32> = valid.iter().copied().filter(|v| v.is_finite()).collect();
    if votes.is_empty() {
        return 0.0;
    }
    let mut counts: Vec<(f32, usize)> = Vec::new();
    for v in &votes {
        match counts.iter_mut().find(|(value, _)| value == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((*v, 1)),
        }
    }
    let top = counts.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let mut leaders = counts.iter().filter(|&&(_, n)| n == top);
    let (winner, _) = *leaders.next().expect("at least one value was counted");
    if leaders.next().is_some() {
        return 0.0;
    }
    // IEEE division is correctly rounded, so a share exactly equal to the threshold compares
    // equal (3 of 5 against 0.6).
    if (top as f32) / (votes.len() as f32) >= threshold {
        winner
    } else {
        0.0
    }
}

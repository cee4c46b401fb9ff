//! Conversations as the host records them, and the training samples made from them.

use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// One chat message. Tool calls and other structured parts travel as JSON text so the type
/// stays plain.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: RString,
    /// The text content (parts of an array content joined).
    pub content: RString,
    /// Reasoning text (`<think>` content) of an assistant message, if any.
    #[serde(default)]
    pub reasoning_content: ROption<RString>,
    /// The OpenAI `tool_calls` array of an assistant message, as JSON text.
    #[serde(default)]
    pub tool_calls_json: ROption<RString>,
    /// The `tool_call_id` a tool message answers.
    #[serde(default)]
    pub tool_call_id: ROption<RString>,
    /// The `name` field, when present.
    #[serde(default)]
    pub name: ROption<RString>,
}

impl Message {
    /// A message with a role and text content only.
    pub fn new(role: &str, content: &str) -> Self {
        Message {
            role: role.into(),
            content: content.into(),
            ..Default::default()
        }
    }
}

/// Whether a turn is the agent's own step (trainable) or a side call (heartbeat, memory
/// maintenance) that is recorded but never trained.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnType {
    /// A step of the agent that the next state evaluates.
    Main,
    /// A call outside the agent's task; never trained.
    Side,
}

/// What followed a main turn: the user's reply or the tool results, with their role.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NextState {
    /// `user` or `tool` (several tool results keep the role `tool`).
    pub role: RString,
    /// Everything the next main request added after the turn, flattened to text.
    pub content: RString,
    /// The added messages themselves, in order.
    #[serde(default)]
    pub messages: RVec<Message>,
}

/// One recorded model call, with the exact tokens it sampled.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The session this turn belongs to.
    pub session_id: RString,
    /// 0-based index of the turn in its session.
    pub turn_index: u32,
    /// Main or side.
    pub turn_type: TurnType,
    /// The request's messages, as the client sent them.
    pub prompt_messages: RVec<Message>,
    /// The tool definitions of the request, as JSON text (empty when none).
    #[serde(default)]
    pub tools_json: RString,
    /// The reply, as returned to the client.
    pub response: Message,
    /// The exact prompt token ids the engine consumed.
    pub prompt_ids: RVec<u32>,
    /// The exact token ids the engine sampled.
    pub response_ids: RVec<u32>,
    /// The log-probability of each sampled token under the distribution it was sampled from.
    pub response_logprobs: RVec<f32>,
    /// The version of the weights that produced the response.
    pub weight_version: u64,
    /// What followed the turn, once known.
    #[serde(default)]
    pub next_state: ROption<NextState>,
    /// Whether the turn may be trained on.
    pub trainable: bool,
}

/// A session: its turns in order.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// The session id.
    pub session_id: RString,
    /// The turns, in the order they happened.
    pub turns: RVec<Turn>,
}

/// The teacher's top-k log-probabilities at each response position, flat `[tokens * k]`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopKEntries {
    /// Entries per position.
    pub k: u32,
    /// Token ids, `[tokens * k]`, row-major by position.
    pub token_ids: RVec<u32>,
    /// Log-probabilities, `[tokens * k]`, matching `token_ids`.
    pub logprobs: RVec<f32>,
}

/// One training sample: a prompt, a sampled response and the signal to train it with.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingSample {
    /// The session the sample came from (or the environment episode id).
    pub session_id: RString,
    /// The turn index within the session (or the step within the episode).
    pub turn_index: u32,
    /// Samples with one group id are normalised together by group-relative advantages.
    pub group_id: u64,
    /// Prompt token ids.
    pub prompt_ids: RVec<u32>,
    /// Response token ids, exactly as sampled.
    pub response_ids: RVec<u32>,
    /// Behaviour log-probabilities of the response tokens, as sampled.
    pub rollout_logprobs: RVec<f32>,
    /// 1 for tokens to train, 0 for tokens to skip (tool output inside a response, say).
    pub loss_mask: RVec<f32>,
    /// The weight version that sampled the response.
    pub weight_version: u64,
    /// The scalar reward of the sample.
    pub reward: f32,
    /// Per-token advantages, when the reward plugin computed them itself.
    #[serde(default)]
    pub advantages: ROption<RVec<f32>>,
    /// The teacher's log-probability of each response token (on-policy distillation).
    #[serde(default)]
    pub teacher_logprobs: ROption<RVec<f32>>,
    /// The teacher's top-k distribution at each response position.
    #[serde(default)]
    pub teacher_topk: ROption<TopKEntries>,
    /// Free-form metadata as JSON text (judge votes, hint, environment info, ...).
    #[serde(default)]
    pub metadata_json: RString,
}

/// Sampling parameters for a generation the host runs on a plugin's behalf.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy.
    pub temperature: f32,
    /// Nucleus sampling mass (1.0 disables it).
    pub top_p: f32,
    /// Keep only the k most likely tokens (0 disables it).
    pub top_k: u32,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// Strings that end the generation.
    pub stop: RVec<RString>,
    /// A seed for reproducible sampling.
    pub seed: ROption<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            max_tokens: 512,
            stop: RVec::new(),
            seed: ROption::RNone,
        }
    }
}

//! What the buffer records: turns with their exact tokens, the next states that arrive later,
//! judgements, training samples and session ends. In memory a record holds the values the host
//! exchanges with plugins; on disk it is written in the buffer's own format ([`disk`]), so the
//! ABI and the disk format change apart.

use openclaw_plugin_api::host::Generation;
use openclaw_plugin_api::{Message, NextState, Score, Task, TrainingSample, Turn};

pub mod disk;
mod join;

pub use join::{Joined, TurnRefs};

/// One durable record.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A model call as served: prompt, response, exact token ids, logprobs, weight version.
    Turn {
        /// The turn.
        turn: Box<Turn>,
        /// What the reply was decoded under when a grammar narrowed it (`json_object`,
        /// `json_schema`, `tool_call`): its logprobs are those of the masked distribution, not
        /// the policy's, and the turn is recorded as not trainable.
        constraint: Option<String>,
        /// The LoRA adapter the reply was sampled with over the base (`--lora-modules`): its
        /// logprobs are that adapter's, not the shared policy's.
        adapter: Option<String>,
    },
    /// What the next main request of a session added after a turn.
    NextState {
        /// The session.
        session_id: String,
        /// The turn the next state follows.
        turn_index: u32,
        /// The sequence number of that turn's record: what replay and export join by
        /// (absent in records written before it was kept, or when the turn was not recorded
        /// by this process).
        turn_seq: Option<u64>,
        /// The next state.
        next_state: NextState,
    },
    /// A session ended (explicitly, by idle timeout, or by eviction).
    SessionClosed {
        /// The session.
        session_id: String,
        /// Why: `done`, `idle`, `evicted`.
        reason: String,
    },
    /// The judge's verdict on a turn.
    Judgement {
        /// The session.
        session_id: String,
        /// The turn judged.
        turn_index: u32,
        /// The sequence number of the turn's record (see `NextState`).
        turn_seq: Option<u64>,
        /// The verdict.
        score: Box<Score>,
    },
    /// A training sample made from a judged turn or an environment episode.
    Sample {
        /// The sample.
        sample: Box<TrainingSample>,
        /// The sequence number of the turn it was made from (none for episode steps and
        /// plugins' samples, which are keyed by their own unique ids).
        turn_seq: Option<u64>,
    },
    /// What a user said of a turn themselves (`POST /v1/feedback`): a reward in [-1, 1] and
    /// perhaps a text. Recorded before collection is told, so a restart judges the turn by it.
    Feedback {
        /// The session.
        session_id: String,
        /// The turn.
        turn_index: u32,
        /// The sequence number of the turn's record.
        turn_seq: Option<u64>,
        /// The reward, in [-1, 1] (thumbs up is 1, down -1).
        reward: f32,
        /// What the user wrote, if anything.
        text: Option<String>,
    },
    /// A finished environment episode, recorded before its group's samples are made.
    Episode {
        /// The episode.
        episode: Box<EpisodeEntry>,
    },
}

/// An environment episode as the buffer keeps it: enough to make its step samples again after
/// a restart (exact tokens of every step) and to show it (the whole conversation).
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeEntry {
    /// `ep-<group>-<sample>`, unique in the buffer; the session id of its step samples.
    pub episode_id: String,
    /// The environment plugin's name.
    pub env: String,
    /// The group: the run-wide number of its (task, attempt) group, counted from 0.
    pub group: u64,
    /// Episodes in the group.
    pub group_size: u32,
    /// Which of its group it is.
    pub sample: u32,
    /// The task.
    pub task: Task,
    /// The conversation: the first observation, each action and what it brought.
    pub conversation: Vec<Message>,
    /// Where each agent step's action is in `conversation`.
    pub action_at: Vec<u32>,
    /// The tools offered at the first step (an OpenAI `tools` JSON array; empty for none).
    pub tools_json: String,
    /// Each agent step's generation: the exact prompt tokens, sampled tokens, their
    /// log-probabilities and the weight version.
    pub steps: Vec<Generation>,
    /// The environment's reward of each step.
    pub step_rewards: Vec<f32>,
    /// Steps answered with tool results.
    pub tool_steps: u32,
    /// How the loop ended: `done`, `truncated`, `max_steps`, `context_full` or `failed`.
    pub ending: String,
    /// Why it failed, when it did.
    pub failure: String,
    /// The reward its steps train on (`None` when the episode failed: it is not trained): the
    /// environment's outcome, plus `prm_step_coef` times the mean step score when steps are
    /// judged.
    pub reward: Option<f32>,
    /// The judge's score of each step (empty when steps are not judged; a step whose judging
    /// failed is left out).
    pub step_scores: Vec<f32>,
    /// The environment's outcome reward, when step scores were added to it.
    pub outcome: Option<f32>,
    /// Whether the environment calls it solved, when it says.
    pub solved: Option<bool>,
    /// Whether the reward came from `evaluate` (else the sum of the step rewards).
    pub evaluated: bool,
    /// The environment's evaluation details, as JSON text.
    pub details_json: String,
}

impl Record {
    /// The record's kind, as in its JSON `kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Record::Turn { .. } => "turn",
            Record::NextState { .. } => "next_state",
            Record::SessionClosed { .. } => "session_closed",
            Record::Judgement { .. } => "judgement",
            Record::Sample { .. } => "sample",
            Record::Episode { .. } => "episode",
            Record::Feedback { .. } => "feedback",
        }
    }
}

/// A record with its place in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The record's sequence number: increasing, never reused, the key consumers store.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when it was appended.
    pub at_ms: u64,
    /// The record.
    pub record: Record,
}

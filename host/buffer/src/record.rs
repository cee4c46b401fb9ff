//! What the buffer records: turns with their exact tokens, the next states that arrive later,
//! judgements, training samples and session ends.

use openclaw_plugin_api::host::Generation;
use openclaw_plugin_api::{Message, NextState, Score, Task, TrainingSample, Turn};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// One durable record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A model call as served: prompt, response, exact token ids, logprobs, weight version.
    Turn {
        /// The turn.
        turn: Box<Turn>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_seq: Option<u64>,
    },
    /// A finished environment episode, recorded before its group's samples are made.
    Episode {
        /// The episode.
        episode: Box<EpisodeEntry>,
    },
}

/// An environment episode as the buffer keeps it: enough to make its step samples again after
/// a restart (exact tokens of every step) and to show it (the whole conversation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    #[serde(default, skip_serializing_if = "String::is_empty")]
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
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failure: String,
    /// The reward its steps train on (`None` when the episode failed: it is not trained): the
    /// environment's outcome, plus `prm_step_coef` times the mean step score when steps are
    /// judged.
    pub reward: Option<f32>,
    /// The judge's score of each step (empty when steps are not judged; a step whose judging
    /// failed is left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_scores: Vec<f32>,
    /// The environment's outcome reward, when step scores were added to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
        }
    }
}

/// Finds the turn a later record (next state, judgement, sample) belongs to, reading the buffer
/// in order. A record that carries its turn's sequence number joins by it; one that does not
/// (written before they were kept) joins the latest earlier turn with the same session and index,
/// which is the turn it was written for unless ids collided across restarts.
#[derive(Debug, Default)]
pub struct TurnRefs {
    latest: HashMap<(String, u32), u64>,
    known: HashSet<u64>,
}

impl TurnRefs {
    /// Notes the turn recorded under `seq`.
    pub fn add(&mut self, seq: u64, turn: &Turn) {
        self.latest
            .insert((turn.session_id.to_string(), turn.turn_index), seq);
        self.known.insert(seq);
    }

    /// The sequence number of the turn a record refers to, if that turn was seen.
    pub fn resolve(&self, turn_seq: Option<u64>, session_id: &str, turn_index: u32) -> Option<u64> {
        match turn_seq {
            Some(q) => self.known.contains(&q).then_some(q),
            None => self
                .latest
                .get(&(session_id.to_string(), turn_index))
                .copied(),
        }
    }
}

/// A record as a pass over the buffer reads it: a turn under its sequence number, or what
/// follows a turn joined to that turn's sequence number (`None` when the turn was not seen).
pub enum Joined<'a> {
    /// A turn, recorded under `seq`.
    Turn {
        /// Its sequence number.
        seq: u64,
        /// The turn.
        turn: &'a Turn,
    },
    /// A next state, and the turn it follows.
    NextState {
        /// The turn's sequence number.
        turn: Option<u64>,
        /// The next state.
        next_state: &'a NextState,
    },
    /// A verdict, and the turn it judged.
    Judgement {
        /// The turn's sequence number.
        turn: Option<u64>,
        /// The verdict.
        score: &'a Score,
    },
    /// Any other record.
    Other(&'a Envelope),
}

impl TurnRefs {
    /// Reads `e` in log order, joining next states and verdicts to their turns: the one join
    /// every pass over the buffer (replay, export, judge agreement) goes through.
    pub fn join<'a>(&mut self, e: &'a Envelope) -> Joined<'a> {
        match &e.record {
            Record::Turn { turn } => {
                self.add(e.seq, turn);
                Joined::Turn { seq: e.seq, turn }
            }
            Record::NextState {
                session_id,
                turn_index,
                turn_seq,
                next_state,
            } => Joined::NextState {
                turn: self.resolve(*turn_seq, session_id, *turn_index),
                next_state,
            },
            Record::Judgement {
                session_id,
                turn_index,
                turn_seq,
                score,
            } => Joined::Judgement {
                turn: self.resolve(*turn_seq, session_id, *turn_index),
                score,
            },
            _ => Joined::Other(e),
        }
    }
}

/// A record with its place in the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The record's sequence number: increasing, never reused, the key consumers store.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when it was appended.
    pub at_ms: u64,
    /// The record.
    pub record: Record,
}

//! What the buffer records: turns with their exact tokens, the next states that arrive later,
//! judgements, training samples and session ends.

use openclaw_plugin_api::{NextState, Score, TrainingSample, Turn};
use serde::{Deserialize, Serialize};

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
        /// The verdict.
        score: Box<Score>,
    },
    /// A training sample made from a judged turn or an environment episode.
    Sample {
        /// The sample.
        sample: Box<TrainingSample>,
    },
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

//! The one join of what follows a turn (next states, verdicts) to the turn, by sequence number.

use super::{Envelope, Record};
use openclaw_plugin_api::{NextState, Score, Turn};
use std::collections::{HashMap, HashSet};

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
            Record::Turn { turn, .. } => {
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

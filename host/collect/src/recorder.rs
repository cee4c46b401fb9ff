//! The recorder: what serving hands to collection. Every turn, next state and session end is
//! appended to the durable buffer first, then passed on to the collection loop (when one runs).
//!
//! Overflow: the channel to collection is bounded and serving never waits on it. When it is
//! full the event is counted (`openclaw_queue_overflow_total{queue="collect"}`) and not passed
//! on; it is still in the buffer, and the next start's replay judges and trains it.

use anyhow::Result;
use openclaw_buffer::{Log, Record};
use openclaw_plugin_api::{NextState, Turn, TurnType};
use std::collections::HashMap;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// What collection hears, each already durable under its buffer sequence number.
#[derive(Clone, Debug)]
pub enum CollectEvent {
    /// A turn was served.
    Turn {
        /// Its buffer sequence number.
        seq: u64,
        /// The turn.
        turn: Box<Turn>,
        /// The adapter that answered it, when the turn trains that adapter.
        adapter: Option<String>,
    },
    /// A turn got its next state.
    NextState {
        /// The session.
        session_id: String,
        /// The turn.
        turn_index: u32,
        /// What followed it.
        next_state: NextState,
    },
    /// Turns that will get no next state: their session ended, or its client went on from a
    /// sibling choice.
    Closed {
        /// The session.
        session_id: String,
        /// The main turns left without a next state.
        open_turns: Vec<u32>,
    },
    /// A user gave a turn feedback of their own.
    Feedback {
        /// The session.
        session_id: String,
        /// The turn.
        turn_index: u32,
        /// The reward, in [-1, 1].
        reward: f32,
        /// What the user wrote.
        text: Option<String>,
        /// Told whether the turn was still waiting to be judged (and now is, by the feedback).
        reply: SyncSender<bool>,
    },
}

/// What became of a feedback the buffer took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackFate {
    /// The turn was waiting to be judged: the feedback is its verdict, and it trains.
    Judges,
    /// The turn was already judged (or is being judged): the feedback is kept, not trained on.
    TooLate,
    /// Nothing collects turns here (`serve` alone, or collection stopped): the feedback is
    /// kept in the buffer, and a run that collects it judges the turn by it.
    Kept,
    /// Collection did not answer in time: the feedback is recorded, and judges the turn if it
    /// still waits when collection gets to it.
    Pending,
    /// Collection's queue is full: nothing was recorded; ask again shortly.
    Busy,
}

/// The most recent main turns of a session a next state may follow: a request's choices
/// (`n`, at most 8 at the server).
const MAX_AWAITED: usize = 16;

/// What a turn's reply was sampled under, besides the base policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sampled<'a> {
    /// The grammar that narrowed it (structured outputs), by kind.
    pub constraint: Option<&'a str>,
    /// The LoRA adapter it was sampled with, by name.
    pub adapter: Option<&'a str>,
}

/// A session's latest main turns: (index, sequence number).
type Latest = Vec<(u32, u64)>;

/// Writes through the buffer and notifies collection.
#[derive(Clone)]
pub struct Recorder {
    log: Arc<Log>,
    sink: Option<SyncSender<CollectEvent>>,
    dropped: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Each live session's latest main turns (index, sequence number; several when a request
    /// had several choices): the turn a next state follows, so its record can name the turn's
    /// sequence number.
    awaiting: Arc<Mutex<HashMap<String, Latest>>>,
}

impl Recorder {
    /// A recorder on `log`; `sink` receives each event after it is durable.
    pub fn new(log: Arc<Log>, sink: Option<SyncSender<CollectEvent>>) -> Self {
        Recorder {
            log,
            sink,
            dropped: None,
            awaiting: Arc::default(),
        }
    }

    /// Calls `count` for every event the full channel could not take.
    pub fn on_dropped(mut self, count: Arc<dyn Fn() + Send + Sync>) -> Self {
        self.dropped = Some(count);
        self
    }

    /// The buffer.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn notify(&self, ev: CollectEvent) {
        if let Some(s) = &self.sink {
            // A stopped or full collection loop loses nothing: the buffer has the record.
            if let Err(TrySendError::Full(_)) = s.try_send(ev) {
                if let Some(count) = &self.dropped {
                    count();
                }
            }
        }
    }

    /// Records a served turn, with what its reply was sampled under.
    pub fn turn(&self, turn: Turn, sampled: Sampled<'_>) -> Result<u64> {
        let seq = self.log.append(&Record::Turn {
            turn: Box::new(turn.clone()),
            constraint: sampled.constraint.map(str::to_owned),
            adapter: sampled.adapter.map(str::to_owned),
        })?;
        if turn.turn_type == TurnType::Main {
            if let Ok(mut a) = self.awaiting.lock() {
                let latest = a.entry(turn.session_id.to_string()).or_default();
                // Sibling choices arrive in any order; older turns are never followed.
                if latest.len() >= MAX_AWAITED {
                    latest.remove(0);
                }
                latest.push((turn.turn_index, seq));
            }
        }
        // Only a trainable turn's adapter matters to collection: it names what the turn trains.
        let adapter = sampled
            .adapter
            .filter(|_| turn.trainable)
            .map(str::to_owned);
        self.notify(CollectEvent::Turn {
            seq,
            turn: Box::new(turn),
            adapter,
        });
        Ok(seq)
    }

    /// Records a turn's next state.
    pub fn next_state(
        &self,
        session_id: &str,
        turn_index: u32,
        next_state: NextState,
    ) -> Result<()> {
        let turn_seq = self.awaiting.lock().ok().and_then(|mut a| {
            let latest = a.remove(session_id)?;
            latest
                .iter()
                .find(|(index, _)| *index == turn_index)
                .map(|(_, seq)| *seq)
        });
        self.log.append(&Record::NextState {
            session_id: session_id.to_string(),
            turn_index,
            turn_seq,
            next_state: next_state.clone(),
        })?;
        self.notify(CollectEvent::NextState {
            session_id: session_id.to_string(),
            turn_index,
            next_state,
        });
        Ok(())
    }

    /// A user's feedback on a turn: collection is asked first whether it judges the turn by it
    /// (waiting at most a few seconds), and the feedback is recorded unless it came too late
    /// (or collection was too busy to be asked: nothing is recorded, and the caller retries).
    pub fn feedback(
        &self,
        session_id: &str,
        turn_index: u32,
        turn_seq: u64,
        reward: f32,
        text: Option<String>,
    ) -> Result<FeedbackFate> {
        let record = |text: Option<String>| {
            self.log.append(&Record::Feedback {
                session_id: session_id.to_string(),
                turn_index,
                turn_seq: Some(turn_seq),
                reward,
                text,
            })
        };
        let Some(sink) = &self.sink else {
            record(text)?;
            return Ok(FeedbackFate::Kept);
        };
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let ev = CollectEvent::Feedback {
            session_id: session_id.to_string(),
            turn_index,
            reward,
            text: text.clone(),
            reply,
        };
        match sink.try_send(ev) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                if let Some(count) = &self.dropped {
                    count();
                }
                return Ok(FeedbackFate::Busy);
            }
            // Collection has stopped: the buffer keeps it for the next start.
            Err(TrySendError::Disconnected(_)) => {
                record(text)?;
                return Ok(FeedbackFate::Kept);
            }
        }
        match answer.recv_timeout(std::time::Duration::from_secs(5)) {
            Ok(false) => Ok(FeedbackFate::TooLate),
            Ok(true) => {
                record(text)?;
                Ok(FeedbackFate::Judges)
            }
            Err(_) => {
                record(text)?;
                Ok(FeedbackFate::Pending)
            }
        }
    }

    /// Tells collection that sibling choices will get no next state: the client went on from
    /// another. Nothing is recorded: a turn without a next state is judged as the last of its
    /// branch on replay too.
    pub fn unfollowed(&self, session_id: &str, turns: &[u32]) {
        if turns.is_empty() {
            return;
        }
        self.notify(CollectEvent::Closed {
            session_id: session_id.to_string(),
            open_turns: turns.to_vec(),
        });
    }

    /// Records the end of a session.
    pub fn closed(&self, session_id: &str, reason: &str, open_turns: &[u32]) -> Result<()> {
        if let Ok(mut a) = self.awaiting.lock() {
            a.remove(session_id);
        }
        self.log.append(&Record::SessionClosed {
            session_id: session_id.to_string(),
            reason: reason.to_string(),
        })?;
        self.notify(CollectEvent::Closed {
            session_id: session_id.to_string(),
            open_turns: open_turns.to_vec(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_buffer::LogOptions;

    /// A next state names the sequence number of the turn it follows; a session's end forgets
    /// it, so a later next state for an unknown turn names none rather than a wrong one.
    #[test]
    fn next_states_name_their_turns_sequence_number() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        let rec = Recorder::new(Arc::new(log), None);
        let ns = || NextState {
            role: "user".into(),
            content: "ok".into(),
            messages: vec![].into(),
        };
        rec.turn(
            openclaw_buffer::testing::test_turn("s", 0),
            Sampled::default(),
        )
        .unwrap();
        let second = rec
            .turn(
                openclaw_buffer::testing::test_turn("s", 1),
                Sampled::default(),
            )
            .unwrap();
        rec.next_state("s", 1, ns()).unwrap();
        rec.turn(
            openclaw_buffer::testing::test_turn("t", 0),
            Sampled::default(),
        )
        .unwrap();
        rec.closed("t", "done", &[0]).unwrap();
        rec.next_state("t", 0, ns()).unwrap();
        let read = Log::read_all(dir.path()).unwrap();
        let named: Vec<(String, Option<u64>)> = read
            .records
            .iter()
            .filter_map(|e| match &e.record {
                Record::NextState {
                    session_id,
                    turn_seq,
                    ..
                } => Some((session_id.clone(), *turn_seq)),
                _ => None,
            })
            .collect();
        assert_eq!(
            named,
            vec![("s".to_string(), Some(second)), ("t".to_string(), None)]
        );
    }
}

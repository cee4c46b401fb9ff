//! The recorder: what serving hands to collection. Every turn, next state and session end is
//! appended to the durable buffer first, then passed on to the collection loop (when one runs).
//!
//! Overflow: the channel to collection is bounded and serving never waits on it. When it is
//! full the event is counted (`openclaw_queue_overflow_total{queue="collect"}`) and not passed
//! on; it is still in the buffer, and the next start's replay judges and trains it.

use crate::buffer::{Log, Record};
use anyhow::Result;
use openclaw_plugin_api::{NextState, Turn};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;

/// What collection hears, each already durable under its buffer sequence number.
#[derive(Clone, Debug)]
pub enum CollectEvent {
    /// A turn was served.
    Turn {
        /// Its buffer sequence number.
        seq: u64,
        /// The turn.
        turn: Box<Turn>,
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
    /// A session ended; `open_turn` never got a next state.
    Closed {
        /// The session.
        session_id: String,
        /// The last main turn without a next state.
        open_turn: Option<u32>,
    },
}

/// Writes through the buffer and notifies collection.
#[derive(Clone)]
pub struct Recorder {
    log: Arc<Log>,
    sink: Option<SyncSender<CollectEvent>>,
    dropped: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Recorder {
    /// A recorder on `log`; `sink` receives each event after it is durable.
    pub fn new(log: Arc<Log>, sink: Option<SyncSender<CollectEvent>>) -> Self {
        Recorder {
            log,
            sink,
            dropped: None,
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

    /// Records a served turn.
    pub fn turn(&self, turn: Turn) -> Result<u64> {
        let seq = self.log.append(&Record::Turn {
            turn: Box::new(turn.clone()),
        })?;
        self.notify(CollectEvent::Turn {
            seq,
            turn: Box::new(turn),
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
        self.log.append(&Record::NextState {
            session_id: session_id.to_string(),
            turn_index,
            next_state: next_state.clone(),
        })?;
        self.notify(CollectEvent::NextState {
            session_id: session_id.to_string(),
            turn_index,
            next_state,
        });
        Ok(())
    }

    /// Records the end of a session.
    pub fn closed(&self, session_id: &str, reason: &str, open_turn: Option<u32>) -> Result<()> {
        self.log.append(&Record::SessionClosed {
            session_id: session_id.to_string(),
            reason: reason.to_string(),
        })?;
        self.notify(CollectEvent::Closed {
            session_id: session_id.to_string(),
            open_turn,
        });
        Ok(())
    }
}

//! The recorder: what serving hands to collection. Every turn, next state and session end is
//! appended to the durable buffer first, then passed on to the collection loop (when one runs).

use crate::buffer::{Log, Record};
use anyhow::Result;
use openclaw_plugin_api::{NextState, Turn};
use std::sync::mpsc::Sender;
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
    sink: Option<Sender<CollectEvent>>,
}

impl Recorder {
    /// A recorder on `log`; `sink` receives each event after it is durable.
    pub fn new(log: Arc<Log>, sink: Option<Sender<CollectEvent>>) -> Self {
        Recorder { log, sink }
    }

    /// The buffer.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    fn notify(&self, ev: CollectEvent) {
        if let Some(s) = &self.sink {
            // A stopped collection loop loses nothing: the buffer has the record.
            let _ = s.send(ev);
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

//! Collection: holds each recorded main turn until its next state arrives or its session
//! ends, then sends it to the judge pool.

use openclaw_collect::CollectEvent;
use openclaw_judge::pool::{JudgeJob, JudgePool};
use openclaw_judge::{score_request, Feedback, FeedbackRule};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::{JudgeSettings, Turn, TurnType};
use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Settings of collection.
#[derive(Clone, Debug)]
pub struct CollectionOptions {
    /// Most turns waiting for a next state; past it the oldest is judged without one.
    pub max_pending: usize,
    /// The judge settings each score request carries.
    pub judge: JudgeSettings,
    /// What a user's explicit feedback does (`--feedback`).
    pub feedback: FeedbackRule,
}

/// A turn waiting for its next state: its sequence number, the turn and the adapter it trains.
type Pending = (u64, Turn, Option<String>);

/// The collection loop's state.
pub struct Collection {
    opts: CollectionOptions,
    pending: HashMap<(String, u32), Pending>,
    metrics: Arc<Metrics>,
}

impl Collection {
    /// An empty table.
    pub fn new(opts: CollectionOptions, metrics: Arc<Metrics>) -> Self {
        Collection {
            opts,
            pending: HashMap::new(),
            metrics,
        }
    }

    /// Turns waiting for a next state.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Adds a turn found waiting by replay, with the adapter it trains.
    pub fn restore(&mut self, seq: u64, turn: Turn, adapter: Option<String>) {
        self.pending.insert(
            (turn.session_id.to_string(), turn.turn_index),
            (seq, turn, adapter),
        );
    }

    /// Handles one event; returns the jobs it makes ready.
    pub fn on_event(&mut self, ev: CollectEvent) -> Vec<JudgeJob> {
        let mut ready = Vec::new();
        match ev {
            CollectEvent::Turn { seq, turn, adapter } => {
                if turn.turn_type == TurnType::Main && turn.trainable {
                    self.pending.insert(
                        (turn.session_id.to_string(), turn.turn_index),
                        (seq, *turn, adapter),
                    );
                    if self.pending.len() > self.opts.max_pending {
                        // The oldest turn is judged as if its session had ended, so the table
                        // stays bounded and nothing recorded is forgotten.
                        let oldest = self
                            .pending
                            .iter()
                            .min_by_key(|(_, (s, _, _))| *s)
                            .map(|(k, _)| k.clone())
                            .expect("the table is not empty");
                        let (seq, turn, adapter) = self.pending.remove(&oldest).expect("present");
                        self.metrics
                            .queue_overflow
                            .get_or_create(&Metrics::label("queue", "pending_turns"))
                            .inc();
                        ready.push(JudgeJob {
                            turn_seq: seq,
                            request: score_request(turn, true, &self.opts.judge),
                            feedback: None,
                            adapter,
                        });
                    }
                }
            }
            CollectEvent::NextState {
                session_id,
                turn_index,
                next_state,
            } => {
                if let Some((seq, mut turn, adapter)) =
                    self.pending.remove(&(session_id, turn_index))
                {
                    turn.next_state = Some(next_state).into();
                    ready.push(JudgeJob {
                        turn_seq: seq,
                        request: score_request(turn, false, &self.opts.judge),
                        feedback: None,
                        adapter,
                    });
                }
            }
            CollectEvent::Feedback {
                session_id,
                turn_index,
                reward,
                text,
                reply,
            } => {
                // The feedback is the verdict of a turn still waiting; a turn already judged (or
                // in the judge pool's queue) keeps its verdict.
                let waiting = self.pending.remove(&(session_id, turn_index));
                let _ = reply.try_send(waiting.is_some());
                if let Some((seq, turn, adapter)) = waiting {
                    ready.push(JudgeJob {
                        adapter,
                        ..self.opts.feedback.job(
                            seq,
                            turn,
                            Feedback { reward, text },
                            &self.opts.judge,
                        )
                    });
                }
            }
            CollectEvent::Closed {
                session_id,
                open_turns,
            } => {
                for i in open_turns {
                    if let Some((seq, turn, adapter)) =
                        self.pending.remove(&(session_id.clone(), i))
                    {
                        ready.push(JudgeJob {
                            turn_seq: seq,
                            request: score_request(turn, true, &self.opts.judge),
                            feedback: None,
                            adapter,
                        });
                    }
                }
            }
        }
        self.metrics
            .queue_depth
            .get_or_create(&Metrics::label("queue", "pending_turns"))
            .set(self.pending.len() as i64);
        ready
    }

    /// Runs until the recorder's channel closes, submitting ready turns to `pool` (waiting
    /// while its queue is full).
    pub fn run(mut self, rx: Receiver<CollectEvent>, pool: &JudgePool) {
        while let Ok(ev) = rx.recv() {
            for job in self.on_event(ev) {
                if let Err(e) = pool.submit(job) {
                    tracing::warn!("collection stops: {e}");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::{Message, NextState};

    fn turn(session: &str, i: u32, main: bool) -> Box<Turn> {
        Box::new(Turn {
            session_id: session.into(),
            turn_index: i,
            turn_type: if main { TurnType::Main } else { TurnType::Side },
            prompt_messages: vec![Message::new("user", "q")].into(),
            response: Message::new("assistant", "a"),
            tools_json: "".into(),
            prompt_ids: vec![1, 2].into(),
            response_ids: vec![3].into(),
            response_logprobs: vec![-0.5].into(),
            weight_version: 0,
            next_state: None.into(),
            trainable: main,
        })
    }

    fn collection(max_pending: usize) -> Collection {
        Collection::new(
            CollectionOptions {
                max_pending,
                judge: JudgeSettings::default(),
                feedback: FeedbackRule::default(),
            },
            Arc::new(Metrics::new()),
        )
    }

    fn next(session: &str, i: u32, text: &str) -> CollectEvent {
        CollectEvent::NextState {
            session_id: session.into(),
            turn_index: i,
            next_state: NextState {
                role: "user".into(),
                content: text.into(),
                messages: vec![Message::new("user", text)].into(),
            },
        }
    }

    #[test]
    fn a_turn_is_judged_when_its_next_state_arrives() {
        let mut c = collection(10);
        assert!(c
            .on_event(CollectEvent::Turn {
                seq: 1,
                turn: turn("s", 0, true),
                adapter: None,
            })
            .is_empty());
        let jobs = c.on_event(next("s", 0, "thanks"));
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].turn_seq, 1);
        let r = &jobs[0].request;
        assert!(!r.session_closed);
        assert_eq!(
            r.turn.next_state.as_ref().unwrap().content.as_str(),
            "thanks"
        );
        assert_eq!(c.pending(), 0);
        // A next state for a turn nobody waits for is ignored.
        assert!(c.on_event(next("s", 0, "again")).is_empty());
    }

    #[test]
    fn side_turns_wait_for_nothing_and_closed_sessions_flush_their_open_turn() {
        let mut c = collection(10);
        c.on_event(CollectEvent::Turn {
            seq: 1,
            turn: turn("s", 0, false),
            adapter: None,
        });
        assert_eq!(c.pending(), 0);
        c.on_event(CollectEvent::Turn {
            seq: 2,
            turn: turn("s", 1, true),
            adapter: None,
        });
        let jobs = c.on_event(CollectEvent::Closed {
            session_id: "s".into(),
            open_turns: vec![1],
        });
        assert_eq!(jobs.len(), 1);
        assert!(jobs[0].request.session_closed);
        assert!(jobs[0].request.turn.next_state.is_none());
    }

    #[test]
    fn the_table_is_capped_by_judging_the_oldest_turn() {
        let mut c = collection(2);
        let mut flushed = Vec::new();
        for (seq, s) in [(5, "a"), (6, "b"), (7, "c"), (8, "d")] {
            flushed.extend(c.on_event(CollectEvent::Turn {
                seq,
                turn: turn(s, 0, true),
                adapter: None,
            }));
        }
        assert_eq!(c.pending(), 2);
        let seqs: Vec<u64> = flushed.iter().map(|j| j.turn_seq).collect();
        assert_eq!(seqs, vec![5, 6]);
        assert!(flushed.iter().all(|j| j.request.session_closed));
    }
}

//! Producers: what turns conversations, environment episodes and plugins' work into samples
//! for training. Each runs on its own thread. The live ones write through the same [`Sinks`],
//! so every producer's samples are recorded durably and trained in buffer order alike.
//!
//! Here: [`LiveSessions`] (the server's recorded turns, held by collection until their next
//! state, judged by the method's reward plugin), [`Replayed`] (what the buffer held unfinished
//! at start) and [`Epochs`] (`train`'s scored trajectory file, pass after pass, straight to
//! training). Elsewhere: [`super::env_episodes::EnvEpisodes`] (`run --env`) and
//! [`super::plugin_samples`] (rollout and generate plugins), which wait at the [`ReplayGate`].

use super::collect::Collection;
use super::replay::ReplayPlan;
use super::samples::{QueuedSample, SampleMaker};
use anyhow::{anyhow, Result};
use openclaw_collect::CollectEvent;
use openclaw_judge::pool::{JudgeJob, JudgePool};
use openclaw_judge::{score_request, FeedbackRule};
use openclaw_plugin_api::{JudgeSettings, TrainingSample};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::Duration;

/// Where a producer's work goes.
#[derive(Clone)]
pub struct Sinks {
    /// Turns to score through the method's reward plugin.
    pub judge: Arc<JudgePool>,
    /// Verdicts and samples: recorded durably, then handed to training in buffer order.
    pub samples: Arc<SampleMaker>,
    /// The judge settings every score request carries.
    pub settings: JudgeSettings,
    /// What a user's explicit feedback does (`--feedback`).
    pub feedback: FeedbackRule,
}

/// A source of turns or samples for the judge and training path.
pub trait Producer: Send {
    /// Its name, for its thread and its log lines.
    fn name(&self) -> &'static str;

    /// Produces until its input ends or `stop` is set.
    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()>;
}

/// The live sessions of the server: each recorded main turn waits in collection for its next
/// state (or its session's end), then goes to the judge.
pub struct LiveSessions {
    /// What the recorder sends.
    pub events: Receiver<CollectEvent>,
    /// The table of turns waiting for a next state.
    pub collection: Collection,
    /// Where judged turns go.
    pub sinks: Sinks,
}

impl Producer for LiveSessions {
    fn name(&self) -> &'static str {
        "collect"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        let LiveSessions {
            events,
            mut collection,
            sinks,
        } = *self;
        while !stop.load(Ordering::SeqCst) {
            let ev = match events.recv_timeout(Duration::from_millis(100)) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => continue,
                // The server is gone: turns still waiting are in the buffer for the next start.
                Err(RecvTimeoutError::Disconnected) => break,
            };
            for job in collection.on_event(ev) {
                if let Err(e) = sinks.judge.submit(job) {
                    tracing::warn!("collection stops: {e}");
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Opened once the replayed samples are handed to training: producers that make samples at
/// once (episodes, rollout and generate plugins) wait for it, so training receives the
/// replayed samples before any new one. (A checkpoint records the highest sample it trained;
/// a new sample trained before an older replayed one would mark that one trained.)
#[derive(Debug, Default)]
pub struct ReplayGate {
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl ReplayGate {
    /// Opens the gate.
    pub fn open(&self) {
        *self.open.lock().expect("gate lock") = true;
        self.opened.notify_all();
    }

    /// Waits until the gate is open or `stop` is set; returns whether it opened.
    pub fn wait(&self, stop: &AtomicBool) -> bool {
        let mut open = self.open.lock().expect("gate lock");
        while !*open {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            open = self
                .opened
                .wait_timeout(open, Duration::from_millis(100))
                .expect("gate lock")
                .0;
        }
        true
    }
}

/// What the buffer held unfinished when the run started: samples to train, judged turns
/// without their sample, turns never judged.
pub struct Replayed {
    /// The plan.
    pub plan: ReplayPlan,
    /// Where the work goes.
    pub sinks: Sinks,
    /// Opened once the recorded samples are handed to training.
    pub gate: Arc<ReplayGate>,
}

impl Producer for Replayed {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        let Replayed { plan, sinks, gate } = *self;
        for (seq, s) in plan.to_train {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            sinks.samples.forward_recorded(seq, s)?;
        }
        gate.open();
        for (seq, turn, score, adapter) in plan.to_sample {
            sinks
                .samples
                .resume_judged(seq, &turn, &score, adapter.as_deref())?;
        }
        for (seq, turn, closed, feedback, adapter) in plan.to_judge {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            let job = match feedback {
                Some(f) => JudgeJob {
                    adapter,
                    ..sinks.feedback.job(seq, turn, f, &sinks.settings)
                },
                None => JudgeJob {
                    turn_seq: seq,
                    request: score_request(turn, closed, &sinks.settings),
                    feedback: None,
                    adapter,
                },
            };
            sinks.judge.submit(job).map_err(|e| anyhow!(e))?;
        }
        Ok(())
    }
}

/// `train`'s samples (a trajectory file, already scored), handed to training pass after pass.
/// The sequence number of a sample is its position over all passes, counted from 1, so "every
/// sample up to N was consumed" in a checkpoint says where a resumed run goes on.
pub struct Epochs {
    /// The samples of one pass, in file order.
    pub samples: Vec<TrainingSample>,
    /// Passes over them.
    pub epochs: u64,
    /// Positions already trained (a resumed run starts after them).
    pub start_after: u64,
    /// Training's queue.
    pub to_train: SyncSender<QueuedSample>,
}

impl Epochs {
    /// Positions in all passes.
    pub fn total(&self) -> u64 {
        self.samples.len() as u64 * self.epochs
    }
}

impl Producer for Epochs {
    fn name(&self) -> &'static str {
        "epochs"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        let n = self.samples.len() as u64;
        for pos in self.start_after..self.total() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let sample = self.samples[(pos % n) as usize].clone();
            if self.to_train.send((pos + 1, sample)).is_err() {
                break; // training reached --max-steps
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::sample_from;
    use crate::training::samples::given_score;
    use std::sync::mpsc::sync_channel;

    fn sample(i: u32) -> TrainingSample {
        let turn = openclaw_buffer::testing::test_turn("s", i);
        sample_from(&turn, &given_score(1.0), u64::from(i))
    }

    #[test]
    fn epochs_number_positions_over_all_passes_and_resume_after_the_trained_ones() {
        let samples: Vec<TrainingSample> = (0..3).map(sample).collect();
        let (tx, rx) = sync_channel(16);
        let p = Epochs {
            samples,
            epochs: 2,
            start_after: 2,
            to_train: tx,
        };
        Box::new(p).run(Arc::new(AtomicBool::new(false))).unwrap();
        let got: Vec<(u64, u64)> = rx.iter().map(|(seq, s)| (seq, s.group_id)).collect();
        assert_eq!(got, vec![(3, 2), (4, 0), (5, 1), (6, 2)]);
    }
}

//! Producers: what turns conversations (or, next, environment episodes) into work for the
//! judge and training path. Each runs on its own thread and writes through the same sinks, so
//! every producer's turns are judged by the method's reward plugin, recorded durably and
//! trained in buffer order alike.
//!
//! Today: [`LiveSessions`] (the server's recorded turns, held by collection until their next
//! state) and [`Replayed`] (what the buffer held unfinished at start).

use super::collect::{score_request, Collection};
use super::replay::ReplayPlan;
use super::samples::SampleMaker;
use crate::collect::CollectEvent;
use crate::judge::pool::{JudgeJob, JudgePool};
use anyhow::{anyhow, Result};
use openclaw_plugin_api::JudgeSettings;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
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
}

/// A source of turns or samples for the judge and training path.
pub trait Producer: Send {
    /// Its name, for its thread and its log lines.
    fn name(&self) -> &'static str;

    /// Produces into `sinks` until its input ends or `stop` is set.
    fn run(self: Box<Self>, sinks: Sinks, stop: Arc<AtomicBool>) -> Result<()>;
}

/// The live sessions of the server: each recorded main turn waits in collection for its next
/// state (or its session's end), then goes to the judge.
pub struct LiveSessions {
    /// What the recorder sends.
    pub events: Receiver<CollectEvent>,
    /// The table of turns waiting for a next state.
    pub collection: Collection,
}

impl Producer for LiveSessions {
    fn name(&self) -> &'static str {
        "collect"
    }

    fn run(self: Box<Self>, sinks: Sinks, stop: Arc<AtomicBool>) -> Result<()> {
        let LiveSessions {
            events,
            mut collection,
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

/// What the buffer held unfinished when the run started: samples to train, judged turns
/// without their sample, turns never judged.
pub struct Replayed {
    /// The plan.
    pub plan: ReplayPlan,
}

impl Producer for Replayed {
    fn name(&self) -> &'static str {
        "replay"
    }

    fn run(self: Box<Self>, sinks: Sinks, stop: Arc<AtomicBool>) -> Result<()> {
        let plan = self.plan;
        for (seq, s) in plan.to_train {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            sinks.samples.forward_recorded(seq, s)?;
        }
        for (turn, score) in plan.to_sample {
            sinks.samples.resume_judged(&turn, &score)?;
        }
        for (seq, turn, closed) in plan.to_judge {
            if stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            sinks
                .judge
                .submit(JudgeJob {
                    turn_seq: seq,
                    request: score_request(turn, closed, &sinks.settings),
                })
                .map_err(|e| anyhow!(e))?;
        }
        Ok(())
    }
}

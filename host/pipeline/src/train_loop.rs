//! Training in the background: ready samples are batched (`--rollout-batch-size`, or a partial
//! batch after `--batch-timeout`), admitted by staleness, trained through the loss plugin, and
//! the new weights published to serving every `--update-weights-interval` steps. Checkpoints
//! record the last consumed sample's sequence number, so a restart trains nothing twice.

use super::samples::{adapter_of, QueuedSample};
use crate::training::{TrainSession, UserAdapters};
use anyhow::{bail, Result};
use burn::prelude::Backend;
use openclaw_engine::{Model, Published};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::TrainingSample;
use openclaw_plugins::LossHandle;
use openclaw_trainer::StepReport;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a checkpoint of a run records besides the trainer's own state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumedState {
    /// Every sample with a sequence number up to this one was trained or dropped.
    pub consumed_through: u64,
    /// The data file `train` read (none for live runs, and in checkpoints written before
    /// files were recorded): a resumed run whose file changed would skip the wrong samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataFile>,
    /// Per user adapter (`--adapters per-user`), the highest sample trained: each adapter's
    /// own checkpoint records it ([`UserAdapters`]), not this file.
    #[serde(skip)]
    pub adapters: std::collections::BTreeMap<String, u64>,
}

impl ConsumedState {
    /// Every sample of `adapter` (none: the shared policy) up to this one was consumed.
    pub fn through(&self, adapter: Option<&str>) -> u64 {
        match adapter {
            None => self.consumed_through,
            Some(a) => self.adapters.get(a).copied().unwrap_or(0),
        }
    }
}

/// Which data file a `train` checkpoint consumed, enough to tell that it changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// The path as given.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// CRC-32 of its bytes.
    pub crc32: u32,
    /// Training samples in one pass over it.
    pub samples: u64,
}

impl DataFile {
    /// Fingerprints the file at `path`, which gave `samples` samples per pass.
    pub fn read(path: &std::path::Path, samples: u64) -> Result<Self> {
        use anyhow::Context;
        let data =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(DataFile {
            path: path.display().to_string(),
            bytes: data.len() as u64,
            crc32: crc32fast::hash(&data),
            samples,
        })
    }

    /// Whether the contents are the same (the path may differ: a moved file is the same data).
    pub fn same_contents(&self, other: &DataFile) -> bool {
        (self.bytes, self.crc32, self.samples) == (other.bytes, other.crc32, other.samples)
    }
}

/// Settings of the training loop.
#[derive(Clone, Debug)]
pub struct TrainLoopOptions {
    /// Samples per step.
    pub batch: usize,
    /// A partial batch trains after waiting this long for the rest.
    pub batch_timeout: Duration,
    /// Weight versions a sample may lag.
    pub max_staleness: u64,
    /// Samples over `max_staleness`: dropped (`false`) or trained with the importance
    /// correction of their recorded behaviour logprobs (`true`).
    pub correct_stale: bool,
    /// Steps between weight publications.
    pub update_interval: u64,
    /// Stop after this many steps in all (0: run until stopped).
    pub max_steps: u64,
    /// Training stops, naming the cause, after this many steps failed one after another.
    pub max_failed_steps: u64,
}

/// What the loop reports after each step.
#[derive(Clone, Debug)]
pub struct StepEvent {
    /// The step's report.
    pub report: StepReport,
    /// The version now serving.
    pub weight_version: u64,
    /// Samples dropped as too stale in this step's admission.
    pub dropped_stale: usize,
    /// Buffer sequence numbers of the samples trained.
    pub sample_seqs: Vec<u64>,
    /// The checkpoint this step wrote, if it was due one.
    pub saved: Option<PathBuf>,
    /// The user whose adapter the step trained (`--adapters per-user`); none: the shared
    /// policy. `weight_version` is then the version serving gives that adapter.
    pub adapter: Option<String>,
}

/// How a training loop ended.
#[derive(Clone, Debug)]
pub struct TrainSummary {
    /// The last step taken.
    pub step: u64,
    /// `training.log`.
    pub training_log: PathBuf,
    /// The newest checkpoint this loop wrote (the final one unless its step was saved already).
    pub checkpoint: Option<PathBuf>,
}

/// The training loop, training on backend `B`.
pub struct TrainLoop<B: Backend> {
    /// The session (trainer, log, checkpoints).
    pub session: TrainSession<B>,
    /// The run's loss.
    pub loss: LossHandle,
    /// Where new weights are published (none when nothing serves them: `train`).
    pub weights: Option<Arc<Published<Model<B>>>>,
    /// The device serving reads the published weights on.
    pub serve_device: B::Device,
    /// Settings.
    pub opts: TrainLoopOptions,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// What has been consumed.
    pub consumed: ConsumedState,
    /// One adapter per user (`run --adapters per-user`), trained on their own samples.
    pub users: Option<UserAdapters<B>>,
}

impl<B: Backend> TrainLoop<B> {
    fn run_state(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.consumed).expect("plain data serialises")
    }

    /// Steps taken in all: the shared policy's and every user adapter's.
    fn steps_total(&self) -> u64 {
        self.session.trainer.state().step + self.users.as_ref().map_or(0, |u| u.total_steps())
    }

    /// The weight version a queue's samples are measured against: the shared policy's, or the
    /// version serving gives its user's adapter.
    fn version_of(&self, adapter: Option<&str>) -> u64 {
        match (adapter, &self.users) {
            (Some(u), Some(users)) => users.progress(u).version,
            _ => self.session.trainer.state().weight_version,
        }
    }

    /// Records the lag of each sample of a batch about to train (stale ones left it before,
    /// in [`Self::drop_stale`]).
    fn observe_lag(&self, batch: &[QueuedSample], adapter: Option<&str>) {
        let v = self.version_of(adapter);
        for (_, s) in batch {
            let lag = v.saturating_sub(s.weight_version);
            self.metrics.sample_staleness.observe(lag as f64);
        }
    }

    /// Removes the samples over `max_staleness` from `ready` (none when stale samples train
    /// with the importance correction); how many. The lag of those kept is observed when their
    /// batch is taken, so each sample is counted once.
    fn drop_stale(&self, ready: &mut Vec<QueuedSample>, adapter: Option<&str>) -> usize {
        if self.opts.correct_stale {
            return 0;
        }
        let v = self.version_of(adapter);
        let before = ready.len();
        ready.retain(|(_, s)| v.saturating_sub(s.weight_version) <= self.opts.max_staleness);
        let dropped = before - ready.len();
        self.metrics.stale_dropped.inc_by(dropped as u64);
        dropped
    }

    /// Whether this run trains what a sample of `adapter` trains: the shared policy, unless
    /// users' adapters are trained (the policy is then their frozen base); a user's adapter
    /// only then.
    fn trains(&self, adapter: Option<&str>) -> bool {
        adapter.is_some() == self.users.is_some()
    }

    /// One step on `samples` of `adapter` (none: the shared policy), logged; the checkpoint of
    /// a user's adapter the step wrote.
    fn step(
        &mut self,
        adapter: Option<&str>,
        samples: &mut [TrainingSample],
        last_seq: u64,
    ) -> Result<(StepReport, Option<PathBuf>)> {
        let (Some(user), Some(users)) = (adapter, self.users.as_mut()) else {
            return Ok((self.session.rl_step(samples, &self.loss)?, None));
        };
        let (mut report, saved) = users.step(user, samples, last_seq, &self.loss)?;
        let own_step = report.step;
        report.step = self.steps_total();
        let mut fields = serde_json::Map::new();
        fields.insert("adapter".into(), user.into());
        fields.insert("adapter_step".into(), own_step.into());
        self.session.log.record_with(&report, fields)?;
        Ok((report, Some(saved)))
    }

    /// Trains until `stop` is set, the channel closes or `max_steps` is reached; calls
    /// `on_step` after every step. Saves a checkpoint at the end.
    pub fn run(
        mut self,
        rx: Receiver<QueuedSample>,
        stop: Arc<AtomicBool>,
        mut on_step: impl FnMut(&StepEvent),
    ) -> Result<TrainSummary> {
        let mut checkpoint = None;
        // Samples waiting, one queue per adapter trained (the shared policy's first), each in
        // buffer order.
        let mut queues: Vec<Queue> = Vec::new();
        let mut closed = false;
        let mut failed_in_a_row = 0u64;
        let mut failure = None;
        let mut poisoned = false;
        // Stale samples dropped since the last step, reported with the next one.
        let mut dropped_waiting = 0usize;
        // Samples for what this run does not train, left in the buffer (said once).
        let mut set_aside = 0u64;
        loop {
            let done_steps = self.opts.max_steps > 0 && self.steps_total() >= self.opts.max_steps;
            if stop.load(Ordering::SeqCst) || done_steps {
                break;
            }
            queues.retain(|q| !q.samples.is_empty());
            let Some(qi) = due(&queues, self.opts.batch, self.opts.batch_timeout, closed) else {
                if closed {
                    break;
                }
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(item) => {
                        let adapter = adapter_of(&item.1);
                        if !self.trains(adapter.as_deref()) {
                            // Recorded by a run of the other mode (replayed from the buffer):
                            // left there for a run that trains it.
                            if set_aside == 0 {
                                tracing::warn!(
                                    "sample #{} trains {}, which this run does not train; such samples stay in the buffer for a run that does",
                                    item.0,
                                    match &adapter {
                                        Some(u) => format!("user `{u}`'s adapter (--adapters per-user)"),
                                        None => "the shared policy (the frozen base of every user's adapter here)".into(),
                                    }
                                );
                            }
                            set_aside += 1;
                            continue;
                        }
                        match queues.iter_mut().find(|q| q.adapter == adapter) {
                            Some(q) => q.samples.push(item),
                            None => queues.push(Queue {
                                adapter,
                                samples: vec![item],
                                since: Instant::now(),
                            }),
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => closed = true,
                }
                self.metrics
                    .queue_depth
                    .get_or_create(&Metrics::label("queue", "train"))
                    .set(queues.iter().map(|q| q.samples.len()).sum::<usize>() as i64);
                continue;
            };
            let mut queue = std::mem::take(&mut queues[qi].samples);
            let adapter = queues[qi].adapter.clone();
            // Stale samples leave before a batch is taken, so a step trains a full batch of
            // samples that may train, not what is left of one: a step of 1 sample after 15
            // were dropped took a whole step's learning rate on one episode and collapsed a run.
            // A dropped sample's seq is not marked consumed here (others before it may still
            // wait); a resumed run drops it again.
            let dropped = self.drop_stale(&mut queue, adapter.as_deref());
            if dropped > 0 {
                dropped_waiting += dropped;
                queues[qi].since = Instant::now();
                if !closed {
                    queues[qi].samples = queue;
                    continue;
                }
            }
            let (same_kind, _) = next_batch(&queue, self.opts.batch);
            let take = same_kind.min(self.opts.batch);
            let batch: Vec<QueuedSample> = queue.drain(..take).collect();
            queues[qi].samples = queue;
            queues[qi].since = Instant::now();
            let last_seq = batch.last().map(|(s, _)| *s).unwrap_or(0);
            self.observe_lag(&batch, adapter.as_deref());
            if batch.is_empty() {
                if adapter.is_none() {
                    self.consumed.consumed_through = self.consumed.consumed_through.max(last_seq);
                }
                continue;
            }
            let sample_seqs: Vec<u64> = batch.iter().map(|(q, _)| *q).collect();
            let mut samples: Vec<TrainingSample> = batch.into_iter().map(|(_, s)| s).collect();
            let (report, adapter_saved) = match self.step(
                adapter.as_deref(),
                &mut samples,
                last_seq,
            ) {
                Ok(r) => r,
                Err(e) => {
                    // A failed step (a loss plugin error, a non-finite gradient) skips the
                    // batch; the weights are unchanged and serving goes on, unless steps keep
                    // failing: then nothing will ever train and the run stops, saying why.
                    tracing::error!("training step failed, its samples are skipped: {e:#}");
                    if adapter.is_none() {
                        self.consumed.consumed_through =
                            self.consumed.consumed_through.max(last_seq);
                    }
                    failed_in_a_row += 1;
                    self.metrics
                        .train_failed_in_a_row
                        .set(failed_in_a_row as i64);
                    *self
                        .metrics
                        .train_failing
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(format!("{e:#}"));
                    if failed_in_a_row >= self.opts.max_failed_steps.max(1) {
                        failure = Some(format!(
                            "{failed_in_a_row} training steps in a row failed (--max-failed-steps); the last: {e:#}"
                        ));
                        break;
                    }
                    continue;
                }
            };
            if failed_in_a_row > 0 {
                failed_in_a_row = 0;
                self.metrics.train_failed_in_a_row.set(0);
                *self
                    .metrics
                    .train_failing
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = None;
            }
            self.metrics.train_steps.inc();
            self.metrics.trained_samples.inc_by(report.samples as u64);
            self.metrics.train_loss.set(report.loss);
            // The training log's numbers, for the dashboard and TensorBoard.
            if let Ok(values) = serde_json::to_value(&report) {
                self.metrics.record("train", report.step, &values);
            }
            // The dashboard's KL curve, whatever the loss plugin calls it.
            if let Some(kl) = ["kl", "ppo_kl", "kl_loss"]
                .iter()
                .find_map(|k| report.metrics.get(*k))
            {
                self.metrics
                    .record("train", report.step, &serde_json::json!({ "kl": kl }));
            }
            if let Some(user) = &adapter {
                // The user's adapter is saved and served by its step; the shared policy and
                // its checkpoints are untouched.
                let version = self.users.as_ref().map_or(0, |u| u.progress(user).version);
                if let Some(dir) = &adapter_saved {
                    self.metrics
                        .history
                        .checkpoint(report.step, &dir.display().to_string());
                }
                on_step(&StepEvent {
                    report,
                    weight_version: version,
                    dropped_stale: std::mem::take(&mut dropped_waiting),
                    sample_seqs,
                    saved: adapter_saved,
                    adapter: Some(user.clone()),
                });
                continue;
            }
            self.consumed.consumed_through = self.consumed.consumed_through.max(last_seq);
            let step = self.session.trainer.state().step;
            // The data position counts what was consumed, so a resumed `train` goes on
            // with the next sample of the file.
            self.session
                .trainer
                .set_data_position(self.consumed.consumed_through);
            if let Some(weights) = self
                .weights
                .as_ref()
                .filter(|_| step.is_multiple_of(self.opts.update_interval.max(1)))
            {
                match self.session.trainer.publish_on(weights, &self.serve_device) {
                    Ok(v) => {
                        self.metrics.weight_version.set(v as i64);
                    }
                    Err(e) => {
                        // Serving keeps the last whole weights, and no checkpoint is written
                        // of these.
                        *self
                            .metrics
                            .train_failing
                            .lock()
                            .unwrap_or_else(|p| p.into_inner()) = Some(format!("{e:#}"));
                        failure = Some(format!("step {step}: {e:#}"));
                        poisoned = true;
                        break;
                    }
                }
            }
            let state = self.run_state();
            let saved = self.session.maybe_save(Some(&state)).unwrap_or_else(|e| {
                tracing::error!("cannot save a checkpoint: {e:#}");
                None
            });
            if let Some(dir) = &saved {
                self.metrics
                    .history
                    .checkpoint(step, &dir.display().to_string());
                checkpoint.clone_from(&saved);
            }
            on_step(&StepEvent {
                report,
                weight_version: self
                    .weights
                    .as_ref()
                    .map_or(self.session.trainer.state().weight_version, |w| w.version()),
                dropped_stale: std::mem::take(&mut dropped_waiting),
                sample_seqs,
                saved,
                adapter: None,
            });
        }
        if set_aside > 0 {
            tracing::warn!(
                "{set_aside} samples for what this run does not train were left in the buffer"
            );
        }
        self.session
            .trainer
            .set_data_position(self.consumed.consumed_through);
        let state = self.run_state();
        if poisoned {
            tracing::error!("no final checkpoint: the weights are not finite; the last one saved stays the newest");
        } else if let Some(dir) = self.session.save(Some(&state))? {
            self.metrics.history.checkpoint(
                self.session.trainer.state().step,
                &dir.display().to_string(),
            );
            checkpoint = Some(dir);
        }
        if let Some(why) = failure {
            bail!(why);
        }
        Ok(TrainSummary {
            step: self.steps_total(),
            training_log: self.session.log.path().to_path_buf(),
            checkpoint,
        })
    }
}

/// Samples waiting to train one adapter (none: the shared policy), in buffer order.
struct Queue {
    adapter: Option<String>,
    samples: Vec<QueuedSample>,
    /// When the queue last started waiting for a batch.
    since: Instant,
}

/// Which queue trains next: of those due (a whole batch, a kind switch, waited
/// `timeout`, or the input closed), the one whose oldest sample is oldest.
fn due(queues: &[Queue], batch: usize, timeout: Duration, closed: bool) -> Option<usize> {
    queues
        .iter()
        .enumerate()
        .filter(|(_, q)| {
            !q.samples.is_empty()
                && (next_batch(&q.samples, batch).1 || closed || q.since.elapsed() >= timeout)
        })
        .min_by_key(|(_, q)| q.samples[0].0)
        .map(|(i, _)| i)
}

/// The next batch of `ready` (samples in buffer order): how many it takes, and whether it is
/// due now without waiting for the timeout. A batch holds samples of one kind, all with
/// advantages given (episodes, generated trajectories) or all without (live turns, whose loss
/// derives them), as a step needs: it takes the leading samples of the first one's kind, at
/// most `batch`, and is due when it is full or the next sample is of the other kind. Batches
/// stay in buffer order, so "every sample up to N was consumed" still holds.
pub fn next_batch(ready: &[QueuedSample], batch: usize) -> (usize, bool) {
    let Some((_, first)) = ready.first() else {
        return (0, false);
    };
    let same_kind = ready
        .iter()
        .take_while(|(_, s)| s.advantages.is_some() == first.advantages.is_some())
        .count();
    (
        same_kind.min(batch),
        same_kind >= batch || same_kind < ready.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::samples::given_score;

    fn sample(seq: u64, advantages: bool) -> QueuedSample {
        let turn = openclaw_buffer::testing::test_turn("s", seq as u32);
        let mut s = crate::training::sample_from(&turn, &given_score(1.0), 0);
        if advantages {
            s.advantages = Some(vec![0.5].into()).into();
        }
        (seq, s)
    }

    #[test]
    fn a_batch_holds_one_kind_of_sample_in_buffer_order() {
        let ready: Vec<QueuedSample> = [false, false, true, true, true, false]
            .iter()
            .enumerate()
            .map(|(i, &a)| sample(i as u64 + 1, a))
            .collect();
        // Two live samples, then episodes: the live ones go now, on their own.
        assert_eq!(next_batch(&ready, 4), (2, true));
        assert_eq!(next_batch(&ready[2..], 4), (3, true));
        assert_eq!(next_batch(&ready[2..], 2), (2, true));
        // One kind, not full: it waits for more (or the timeout).
        assert_eq!(next_batch(&ready[2..5], 4), (3, false));
        assert_eq!(next_batch(&[], 4), (0, false));
    }
}

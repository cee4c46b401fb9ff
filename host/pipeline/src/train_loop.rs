//! Training in the background: ready samples are batched (`--rollout-batch-size`, or a partial
//! batch after `--batch-timeout`), admitted by staleness, trained through the loss plugin, and
//! the new weights published to serving every `--update-weights-interval` steps. Checkpoints
//! record the last consumed sample's sequence number, so a restart trains nothing twice.

use super::samples::QueuedSample;
use crate::training::TrainSession;
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
}

impl<B: Backend> TrainLoop<B> {
    fn run_state(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.consumed).expect("plain data serialises")
    }

    /// Records the lag of each sample of a batch about to train (stale ones left it before,
    /// in [`Self::drop_stale`]).
    fn observe_lag(&self, batch: &[QueuedSample]) {
        let v = self.session.trainer.state().weight_version;
        for (_, s) in batch {
            let lag = v.saturating_sub(s.weight_version);
            self.metrics.sample_staleness.observe(lag as f64);
        }
    }

    /// Removes the samples over `max_staleness` from `ready` (none when stale samples train
    /// with the importance correction); how many. The lag of those kept is observed when their
    /// batch is taken, so each sample is counted once.
    fn drop_stale(&self, ready: &mut Vec<QueuedSample>) -> usize {
        if self.opts.correct_stale {
            return 0;
        }
        let v = self.session.trainer.state().weight_version;
        let before = ready.len();
        ready.retain(|(_, s)| v.saturating_sub(s.weight_version) <= self.opts.max_staleness);
        let dropped = before - ready.len();
        self.metrics.stale_dropped.inc_by(dropped as u64);
        dropped
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
        let mut ready: Vec<QueuedSample> = Vec::new();
        let mut first_ready: Option<Instant> = None;
        let mut closed = false;
        let mut failed_in_a_row = 0u64;
        let mut failure = None;
        let mut poisoned = false;
        // Stale samples dropped since the last step, reported with the next one.
        let mut dropped_waiting = 0usize;
        loop {
            let done_steps =
                self.opts.max_steps > 0 && self.session.trainer.state().step >= self.opts.max_steps;
            if stop.load(Ordering::SeqCst) || done_steps {
                break;
            }
            let (_, full) = next_batch(&ready, self.opts.batch);
            let timed_out = first_ready.is_some_and(|t| t.elapsed() >= self.opts.batch_timeout)
                && !ready.is_empty();
            if !(full || timed_out || (closed && !ready.is_empty())) {
                if closed {
                    break;
                }
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(item) => {
                        first_ready.get_or_insert_with(Instant::now);
                        ready.push(item);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => closed = true,
                }
                self.metrics
                    .queue_depth
                    .get_or_create(&Metrics::label("queue", "train"))
                    .set(ready.len() as i64);
                continue;
            }
            // Stale samples leave before a batch is taken, so a step trains a full batch of
            // samples that may train, not what is left of one: a step of 1 sample after 15
            // were dropped took a whole step's learning rate on one episode and collapsed a run.
            // A dropped sample's seq is not marked consumed here (others before it may still
            // wait); a resumed run drops it again.
            let dropped = self.drop_stale(&mut ready);
            if dropped > 0 {
                dropped_waiting += dropped;
                first_ready = (!ready.is_empty()).then(Instant::now);
                if !closed {
                    continue;
                }
            }
            let (same_kind, _) = next_batch(&ready, self.opts.batch);
            let take = same_kind.min(self.opts.batch);
            let batch: Vec<QueuedSample> = ready.drain(..take).collect();
            first_ready = (!ready.is_empty()).then(Instant::now);
            let last_seq = batch.last().map(|(s, _)| *s).unwrap_or(0);
            self.observe_lag(&batch);
            if batch.is_empty() {
                self.consumed.consumed_through = self.consumed.consumed_through.max(last_seq);
                continue;
            }
            let sample_seqs: Vec<u64> = batch.iter().map(|(q, _)| *q).collect();
            let mut samples: Vec<TrainingSample> = batch.into_iter().map(|(_, s)| s).collect();
            let report = match self.session.rl_step(&mut samples, &self.loss) {
                Ok(r) => r,
                Err(e) => {
                    // A failed step (a loss plugin error, a non-finite gradient) skips the
                    // batch; the weights are unchanged and serving goes on, unless steps keep
                    // failing: then nothing will ever train and the run stops, saying why.
                    tracing::error!("training step failed, its samples are skipped: {e:#}");
                    self.consumed.consumed_through = self.consumed.consumed_through.max(last_seq);
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
            self.consumed.consumed_through = self.consumed.consumed_through.max(last_seq);
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
            });
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
            step: self.session.trainer.state().step,
            training_log: self.session.log.path().to_path_buf(),
            checkpoint,
        })
    }
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

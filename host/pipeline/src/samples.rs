//! Verdicts become durable records and training samples: the judgement is appended, and for a
//! trainable turn the sample too, before the sample is handed to training. Appending and
//! handing over happen under one lock, so training receives samples in buffer order and "every
//! sample up to sequence number N was consumed" describes what a checkpoint has trained.

use crate::training::sample_from;
use anyhow::Result;
use openclaw_buffer::{Log, Record};
use openclaw_judge::pool::JudgeOutcome;
use openclaw_judge::stats::JudgeStats;
use openclaw_plugin_api::{Score, TrainingSample, Turn};
use std::hash::{Hash, Hasher};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

/// A sample on its way to training, with its buffer sequence number.
pub type QueuedSample = (u64, TrainingSample);

/// Records verdicts and samples and forwards samples to training.
pub struct SampleMaker {
    log: Arc<Log>,
    to_train: Mutex<SyncSender<QueuedSample>>,
    stats: Option<Arc<JudgeStats>>,
}

/// The group of a turn's sample: the session and the exact prompt tokens. The choices of one
/// request (`n` > 1) are rollouts of one prompt and share it, as group-relative baselines want;
/// a single turn is a group of its own (a session's prompts grow turn by turn).
pub fn group_of(turn: &Turn) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    turn.session_id.as_str().hash(&mut h);
    turn.prompt_ids.as_slice().hash(&mut h);
    h.finish()
}

/// The user adapter a sample trains (`run --adapters per-user`), named in its metadata so the
/// recorded sample says it too; `None`: it trains the shared policy.
pub fn adapter_of(sample: &TrainingSample) -> Option<String> {
    if !sample.metadata_json.contains("\"adapter\"") {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_str(&sample.metadata_json).ok()?;
    meta.get("adapter")?.as_str().map(str::to_owned)
}

/// Names the user adapter `sample` trains in its metadata.
pub fn set_adapter(sample: &mut TrainingSample, adapter: &str) {
    let mut meta: serde_json::Value =
        serde_json::from_str(&sample.metadata_json).unwrap_or_else(|_| serde_json::json!({}));
    if !meta.is_object() {
        meta = serde_json::json!({});
    }
    meta["adapter"] = adapter.into();
    sample.metadata_json = meta.to_string().into();
}

impl SampleMaker {
    /// Writes to `log`, hands samples to `to_train` (waiting while it is full).
    pub fn new(log: Arc<Log>, to_train: SyncSender<QueuedSample>) -> Self {
        SampleMaker {
            log,
            to_train: Mutex::new(to_train),
            stats: None,
        }
    }

    /// The queue to training, held so that what is appended meanwhile is handed over in
    /// buffer order.
    fn queue(&self) -> Result<std::sync::MutexGuard<'_, SyncSender<QueuedSample>>> {
        self.to_train
            .lock()
            .map_err(|_| anyhow::anyhow!("the sample queue lock is poisoned"))
    }

    /// Counts each new verdict in `stats` as well.
    pub fn with_stats(self, stats: Arc<JudgeStats>) -> Self {
        SampleMaker {
            stats: Some(stats),
            ..self
        }
    }

    /// Records a verdict on `turn` (recorded under `turn_seq`); returns the sample's sequence
    /// number when it trains. A turn a user's adapter answered trains that `adapter`.
    pub fn record(
        &self,
        turn_seq: u64,
        turn: &Turn,
        score: &Score,
        adapter: Option<&str>,
    ) -> Result<Option<u64>> {
        let tx = self.queue()?;
        self.log.append(&Record::Judgement {
            session_id: turn.session_id.to_string(),
            turn_index: turn.turn_index,
            turn_seq: Some(turn_seq),
            score: Box::new(score.clone()),
        })?;
        if let Some(stats) = &self.stats {
            stats.add(turn, score);
        }
        if !score.trainable {
            return Ok(None);
        }
        Ok(Some(self.forward_new(&tx, turn_seq, turn, score, adapter)?))
    }

    /// Records the sample of a turn judged before a restart whose sample was never written.
    pub fn resume_judged(
        &self,
        turn_seq: u64,
        turn: &Turn,
        score: &Score,
        adapter: Option<&str>,
    ) -> Result<Option<u64>> {
        if !score.trainable {
            return Ok(None);
        }
        let tx = self.queue()?;
        Ok(Some(self.forward_new(&tx, turn_seq, turn, score, adapter)?))
    }

    fn forward_new(
        &self,
        tx: &SyncSender<QueuedSample>,
        turn_seq: u64,
        turn: &Turn,
        score: &Score,
        adapter: Option<&str>,
    ) -> Result<u64> {
        let mut sample = sample_from(turn, score, group_of(turn));
        if let Some(a) = adapter {
            set_adapter(&mut sample, a);
        }
        let seq = self.log.append(&Record::Sample {
            sample: Box::new(sample.clone()),
            turn_seq: Some(turn_seq),
        })?;
        if tx.send((seq, sample)).is_err() {
            // Shutting down: the sample is durable and the next start trains it.
            tracing::debug!("training has stopped; sample #{seq} waits in the buffer");
        }
        Ok(seq)
    }

    /// Records samples made elsewhere (an environment episode group's steps, a plugin's) and
    /// hands them to training, all under the lock so they train in buffer order. Returns their
    /// sequence numbers, or `None` when training has stopped (every sample is recorded all the
    /// same: the next start trains them); an error when one cannot be recorded.
    pub fn record_samples(&self, samples: Vec<TrainingSample>) -> Result<Option<Vec<u64>>> {
        let tx = self.queue()?;
        let mut seqs = Vec::with_capacity(samples.len());
        let mut stopped = false;
        for sample in samples {
            let seq = self.log.append(&Record::Sample {
                sample: Box::new(sample.clone()),
                turn_seq: None,
            })?;
            seqs.push(seq);
            if !stopped && tx.send((seq, sample)).is_err() {
                stopped = true;
            }
        }
        Ok((!stopped).then_some(seqs))
    }

    /// Appends a record that is not a sample (an episode) to the buffer.
    pub fn append(&self, record: &Record) -> Result<u64> {
        self.log.append(record)
    }

    /// Hands an already recorded sample (found by replay) to training.
    pub fn forward_recorded(&self, seq: u64, sample: TrainingSample) -> Result<()> {
        let tx = self.queue()?;
        tx.send((seq, sample))
            .map_err(|_| anyhow::anyhow!("training has stopped"))
    }

    /// What the judge pool calls with each outcome: failures are logged and the turn is
    /// skipped (the pool has counted it).
    pub fn on_outcome(&self, outcome: JudgeOutcome) {
        let turn = &outcome.job.request.turn;
        // Failures were logged and counted by the pool; the turn is skipped.
        if let Ok(score) = outcome.result {
            if let Err(e) = self.record(
                outcome.job.turn_seq,
                turn,
                &score,
                outcome.job.adapter.as_deref(),
            ) {
                tracing::error!(
                    session = turn.session_id.as_str(),
                    turn = turn.turn_index,
                    "cannot record the verdict: {e:#}"
                );
            }
        }
    }
}

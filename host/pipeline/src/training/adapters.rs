//! One LoRA adapter per user over one frozen base (`run --adapters per-user`): each user's
//! samples train that user's adapter with its own AdamW moments, and each step saves it, whole
//! and crash-safe, where serving loads it.
//!
//! On disk, under `--adapters-dir DIR`: `DIR/.trained/<user>/checkpoint-<step>/` (the PEFT
//! adapter files, the optimizer moments and the trainer state, whose data position is the
//! highest sample of that user trained), and `DIR/<user>`, a link to that user's
//! `checkpoint-latest`, which is what the serving store reads. A step writes a new checkpoint
//! and swaps the `checkpoint-latest` link, so serving never reads a half-written adapter, and a
//! restart resumes each user where their last checkpoint stands.
//!
//! At most `cap` trainers are held in memory; the least recently trained goes first. Its
//! checkpoint is already whole (every step saves), so eviction loses nothing; the trainers
//! share the base's tensors, so each costs its adapter and its moments.

use anyhow::{bail, Context, Result};
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::prelude::Backend;
use openclaw_engine::adapters::{valid_name, AdapterStore};
use openclaw_engine::Model;
use openclaw_plugin_api::TrainingSample;
use openclaw_plugins::LossHandle;
use openclaw_trainer::checkpoint::{is_complete, read_saved_state};
use openclaw_trainer::{StepReport, TrainConfig, Trainer, CHECKPOINT_LATEST};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where each user's checkpoints go, under the adapters directory.
pub const TRAINED_DIR: &str = ".trained";

/// Checkpoints kept per user: the newest and the one before, which a reader may still be
/// loading when the link moves on.
const KEEP: usize = 2;

/// The users' adapters being trained.
pub struct UserAdapters<B: Backend> {
    dir: PathBuf,
    base: Model<Autodiff<B>>,
    config: TrainConfig,
    cap: usize,
    held: BTreeMap<String, HeldTrainer<B>>,
    /// Each user's steps and the highest sample trained, held or not.
    progress: BTreeMap<String, Progress>,
    /// Serving's store: told of each new adapter so the next request gets it.
    store: Option<Arc<AdapterStore<B>>>,
    clock: u64,
}

struct HeldTrainer<B: Backend> {
    trainer: Trainer<Autodiff<B>>,
    last_used: u64,
}

/// Where a user's adapter stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Steps it has taken.
    pub steps: u64,
    /// Every sample of this user up to this sequence number was trained or dropped.
    pub consumed_through: u64,
    /// The version serving gives its latest weights: its step (0: none yet).
    pub version: u64,
}

impl<B: Backend> UserAdapters<B> {
    /// Opens `dir` and reads where each user's adapter stands. `base` is the frozen policy
    /// (its own adapters, if any, are taken off), `config` the run's training settings, which
    /// must train LoRA.
    pub fn open(
        dir: &Path,
        base: &Model<Autodiff<B>>,
        config: TrainConfig,
        cap: usize,
    ) -> Result<Self> {
        if config.lora.is_none() {
            bail!(
                "--adapters per-user trains one LoRA adapter per user over a frozen base: add \
                 --use-lora (with --lora-rank and --lora-alpha as you want them)"
            );
        }
        std::fs::create_dir_all(dir.join(TRAINED_DIR))
            .with_context(|| format!("cannot create {}", dir.join(TRAINED_DIR).display()))?;
        let mut progress = BTreeMap::new();
        for entry in std::fs::read_dir(dir.join(TRAINED_DIR))? {
            let entry = entry?;
            let user = entry.file_name().to_string_lossy().to_string();
            if !valid_name(&user) {
                continue;
            }
            let latest = entry.path().join(CHECKPOINT_LATEST);
            if !is_complete(&latest) {
                continue;
            }
            let saved = read_saved_state(&latest)
                .with_context(|| format!("user `{user}`'s adapter checkpoint"))?;
            progress.insert(
                user,
                Progress {
                    steps: saved.state.step,
                    consumed_through: saved.state.data_position,
                    // Serving gives a trained adapter its step as its version.
                    version: saved.state.step,
                },
            );
        }
        Ok(UserAdapters {
            dir: dir.to_path_buf(),
            base: openclaw_engine::lora::stripped(base),
            config,
            cap: cap.max(1),
            held: BTreeMap::new(),
            progress,
            store: None,
            clock: 0,
        })
    }

    /// Tells `store` (serving's) of every adapter a step saves.
    pub fn serve_with(&mut self, store: Arc<AdapterStore<B>>) {
        self.store = Some(store);
    }

    /// Each user's highest sample trained, as checkpointed.
    pub fn consumed(&self) -> BTreeMap<String, u64> {
        self.progress
            .iter()
            .map(|(u, p)| (u.clone(), p.consumed_through))
            .collect()
    }

    /// Where `user`'s adapter stands.
    pub fn progress(&self, user: &str) -> Progress {
        self.progress.get(user).copied().unwrap_or_default()
    }

    /// Steps taken by every user's adapter together.
    pub fn total_steps(&self) -> u64 {
        self.progress.values().map(|p| p.steps).sum()
    }

    /// Trainers held in memory now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// One RL step of `user`'s adapter on `samples` (all of that user, in buffer order, the
    /// last with sequence number `last_seq`) through `loss`; saves the adapter and tells
    /// serving. Returns the step's report (its `step` is the user's own count) and the
    /// checkpoint written. A step that fails leaves the user where their last checkpoint
    /// stands: their trainer is dropped, and the next step resumes from that checkpoint.
    pub fn step(
        &mut self,
        user: &str,
        samples: &[TrainingSample],
        last_seq: u64,
        loss: &LossHandle,
    ) -> Result<(StepReport, PathBuf)> {
        let stepped = self.try_step(user, samples, last_seq, loss);
        if stepped.is_err() {
            self.held.remove(user);
        }
        stepped
    }

    fn try_step(
        &mut self,
        user: &str,
        samples: &[TrainingSample],
        last_seq: u64,
        loss: &LossHandle,
    ) -> Result<(StepReport, PathBuf)> {
        if !valid_name(user) {
            bail!("`{user}` cannot name an adapter");
        }
        self.clock += 1;
        let now = self.clock;
        if !self.held.contains_key(user) {
            self.link(user)?;
            let trainer = self.load(user)?;
            self.held.insert(
                user.to_string(),
                HeldTrainer {
                    trainer,
                    last_used: now,
                },
            );
            while self.held.len() > self.cap {
                let oldest = self
                    .held
                    .iter()
                    .min_by_key(|(_, h)| h.last_used)
                    .map(|(k, _)| k.clone())
                    .expect("over the cap means non-empty");
                self.held.remove(&oldest);
            }
        }
        let held = self.held.get_mut(user).expect("just loaded");
        held.last_used = now;
        let report = held.trainer.train_step(samples, &|b| loss.compute(b))?;
        let consumed = self
            .progress
            .get(user)
            .map_or(0, |p| p.consumed_through)
            .max(last_seq);
        held.trainer.set_data_position(consumed);
        let model = held.trainer.model().valid();
        if let Some(name) = model.non_finite_weight() {
            bail!("user `{user}`'s adapter has non-finite values in `{name}`; not saved");
        }
        let saved = held
            .trainer
            .save_adapter_checkpoint(&self.dir.join(TRAINED_DIR).join(user), KEEP, &[])
            .with_context(|| format!("cannot save user `{user}`'s adapter"))?;
        tracing::debug!("user `{user}`'s adapter saved in {}", saved.display());
        // Where the user stands moves only with a checkpoint that says so.
        let p = self.progress.entry(user.to_string()).or_default();
        p.steps = held.trainer.state().step;
        p.consumed_through = consumed;
        p.version = p.version.max(p.steps);
        held.trainer.set_weight_version(p.version);
        if let Some(store) = &self.store {
            // The store sees the new weights file and loads it as the next version.
            match store.get(user) {
                Ok(Some(a)) => {
                    p.version = a.version;
                    held.trainer.set_weight_version(a.version);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("serving cannot load user `{user}`'s new adapter: {e:#}"),
            }
        }
        Ok((report, saved))
    }

    /// `user`'s trainer: resumed from their last checkpoint, or a fresh adapter (zero B: the
    /// base's outputs) over the base.
    fn load(&self, user: &str) -> Result<Trainer<Autodiff<B>>> {
        let latest = self
            .dir
            .join(TRAINED_DIR)
            .join(user)
            .join(CHECKPOINT_LATEST);
        let mut trainer = if is_complete(&latest) {
            Trainer::resume_adapter(&latest, self.config.clone(), self.base.clone())
                .with_context(|| format!("cannot resume user `{user}`'s adapter"))?
        } else {
            Trainer::new(self.base.clone(), self.config.clone())?
        };
        trainer.set_weight_version(self.progress(user).version);
        Ok(trainer)
    }

    /// Points `DIR/<user>` at the user's newest checkpoint (once: the link goes through
    /// `checkpoint-latest`, which each save swaps).
    fn link(&self, user: &str) -> Result<()> {
        let link = self.dir.join(user);
        let target = Path::new(TRAINED_DIR).join(user).join(CHECKPOINT_LATEST);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if m.file_type().is_symlink() && std::fs::read_link(&link)? == target => {
                return Ok(())
            }
            Ok(_) => bail!(
                "{} is not a link this run made: `run --adapters per-user` keeps each user's \
                 adapter there; move it away (to start that user from it, give it to `serve \
                 --lora-modules` instead)",
                link.display()
            ),
            Err(_) => {}
        }
        // A new link under a temporary name renamed over the old one: never a moment without.
        let tmp = self.dir.join(format!(".{user}.link"));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&target, &tmp)
            .with_context(|| format!("cannot link {}", link.display()))?;
        std::fs::rename(&tmp, &link).with_context(|| format!("cannot link {}", link.display()))
    }
}

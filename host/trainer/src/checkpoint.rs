//! Checkpoints: `checkpoint-<step>/` with the model (HF safetensors + `config.json`), the LoRA
//! adapters, the optimizer moments and the trainer state; written to a temporary directory,
//! fsynced, then renamed into place, after which the `checkpoint-latest` symlink is replaced
//! (the layout is [`openclaw_model_store::checkpoints`]). A directory
//! without its completion marker is never resumed from.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::tensor::backend::AutodiffBackend;
use openclaw_engine::{save_model, SaveOptions};
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::lora::{self, LoraConfig};
use crate::optim::AdamW;
use crate::rng::SplitMix;
use crate::step::{Trainer, TrainerState};

use openclaw_model_store::checkpoints::{checkpoint_name, parse_step, point_latest};
pub use openclaw_model_store::checkpoints::{
    is_complete, latest_checkpoint, list_checkpoints, resolve_checkpoint, CHECKPOINT_LATEST,
    COMPLETE_MARKER, TRAINER_STATE,
};
/// The optimizer moments inside a checkpoint.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";

const FORMAT: u32 = 1;

/// `trainer_state.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// Layout version of the checkpoint.
    pub format: u32,
    /// Step counters and the caller's data position.
    pub state: TrainerState,
    /// The trainer RNG's state.
    pub rng_state: u64,
    /// Learning rate of the next step (the schedule position is `state.step`).
    pub next_lr: f64,
    /// The settings the checkpoint was trained with.
    pub config: TrainConfig,
}

/// A file the caller adds to a checkpoint.
#[derive(Clone, Debug)]
pub struct ExtraFile {
    /// Its name inside the checkpoint directory (no path separators).
    pub name: String,
    /// Its bytes.
    pub contents: Vec<u8>,
}

impl ExtraFile {
    /// Reads `path` into an extra file of the same name.
    pub fn copy_of(path: &Path) -> Result<Self> {
        let name = path
            .file_name()
            .with_context(|| format!("{} has no file name", path.display()))?
            .to_string_lossy()
            .to_string();
        let contents =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(ExtraFile { name, contents })
    }
}

/// Reads `trainer_state.json` of a checkpoint.
pub fn read_saved_state(dir: &Path) -> Result<SavedState> {
    let path = dir.join(TRAINER_STATE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let s: SavedState = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid trainer state", path.display()))?;
    if s.format != FORMAT {
        bail!(
            "{}: checkpoint format {} is not supported (expected {FORMAT})",
            path.display(),
            s.format
        );
    }
    Ok(s)
}

fn sync_file(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(|| format!("cannot sync {}", path.display()))
}

/// Syncs every file of `dir`, then `dir` itself.
fn sync_dir_tree(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let p = entry?.path();
        if p.is_file() {
            sync_file(&p)?;
        }
    }
    sync_file(dir)
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

impl<B: AutodiffBackend> Trainer<B> {
    /// Saves `save_dir/checkpoint-<step>/` and points `checkpoint-latest` at it, then deletes
    /// all but the newest `keep` complete checkpoints (0 keeps all). The checkpoint is written
    /// under a temporary name, synced and renamed, so a crash leaves either the old state or
    /// the new one. Returns the checkpoint's path.
    pub fn save_checkpoint(&self, save_dir: &Path, keep: usize) -> Result<PathBuf> {
        self.save_checkpoint_with(save_dir, keep, &[])
    }

    /// [`Trainer::save_checkpoint`] with `extras` written into the checkpoint before it is
    /// marked complete (the caller's own state, tokenizer files), so they are as crash-safe as
    /// the weights.
    pub fn save_checkpoint_with(
        &self,
        save_dir: &Path,
        keep: usize,
        extras: &[ExtraFile],
    ) -> Result<PathBuf> {
        self.write_checkpoint(save_dir, keep, extras, Contents::Whole)
    }

    /// [`Trainer::save_checkpoint_with`] without the base weights: the LoRA adapters, the
    /// optimizer moments and the state, as crash-safe. One of many adapters trained over one
    /// base (a user's) is saved this way; [`Trainer::resume_adapter`] reads it back over that
    /// base.
    pub fn save_adapter_checkpoint(
        &self,
        save_dir: &Path,
        keep: usize,
        extras: &[ExtraFile],
    ) -> Result<PathBuf> {
        if self.config.lora.is_none() {
            bail!("an adapter checkpoint needs LoRA adapters to save");
        }
        self.write_checkpoint(save_dir, keep, extras, Contents::AdaptersOnly)
    }

    fn write_checkpoint(
        &self,
        save_dir: &Path,
        keep: usize,
        extras: &[ExtraFile],
        contents: Contents,
    ) -> Result<PathBuf> {
        let step = self.state.step;
        std::fs::create_dir_all(save_dir)
            .with_context(|| format!("cannot create {}", save_dir.display()))?;
        // Leftovers of writes that crashed.
        for entry in std::fs::read_dir(save_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with(".checkpoint-") && name.ends_with(".tmp") {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let name = checkpoint_name(step);
        let final_dir = save_dir.join(&name);
        let tmp = save_dir.join(format!(".{name}.tmp"));
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;

        let model = self.model();
        // The engine writes base weights only: adapters are saved beside them, unmerged.
        if contents == Contents::Whole {
            save_model(model, &tmp, &SaveOptions::default())?;
        }
        if let Some(l) = &self.config.lora {
            lora::save_adapters(model, l, &self.config.base_model, &tmp)?;
        }
        self.optimizer.save(&tmp.join(OPTIMIZER_FILE))?;
        let saved = SavedState {
            format: FORMAT,
            state: self.state.clone(),
            rng_state: self.rng.state(),
            next_lr: self.next_lr(),
            config: self.config.clone(),
        };
        std::fs::write(
            tmp.join(TRAINER_STATE),
            serde_json::to_string_pretty(&saved)?,
        )?;
        for e in extras {
            if e.name.contains(['/', '\\']) || e.name.starts_with('.') || e.name.is_empty() {
                bail!(
                    "checkpoint extra file name `{}` is not a plain file name",
                    e.name
                );
            }
            std::fs::write(tmp.join(&e.name), &e.contents)
                .with_context(|| format!("cannot write {} into the checkpoint", e.name))?;
        }
        openclaw_model_store::checkpoints::write_checksums(&tmp)?;
        fault_pause();
        sync_dir_tree(&tmp)?;
        write_synced(&tmp.join(COMPLETE_MARKER), format!("{step}\n").as_bytes())?;
        sync_file(&tmp)?;

        if final_dir.exists() {
            std::fs::remove_dir_all(&final_dir)
                .with_context(|| format!("cannot replace {}", final_dir.display()))?;
        }
        std::fs::rename(&tmp, &final_dir)
            .with_context(|| format!("cannot move {} into place", tmp.display()))?;
        sync_file(save_dir)?;

        point_latest(save_dir, &name)?;

        retain(save_dir, keep, step)?;
        Ok(final_dir)
    }

    /// Rebuilds a trainer from a complete checkpoint directory (see [`resolve_checkpoint`] for
    /// `latest`): weights, adapters, optimizer moments, step counters, RNG and data position.
    /// `config` gives the hyper-parameters from here on; its LoRA settings must match the
    /// checkpoint's. With `use_reference` and no LoRA, call [`Trainer::set_reference`] with the
    /// initial model before the next step.
    pub fn resume(checkpoint: &Path, config: TrainConfig, device: &B::Device) -> Result<Self> {
        Self::resume_over(checkpoint, config, device, None)
    }

    /// [`Trainer::resume`], with the LoRA adapters put on `base` instead of the base weights the
    /// checkpoint holds, when the checkpoint trained adapters over that same model (its
    /// `base_model` is `config.base_model`): a run over a GGUF file's quantised blocks resumes
    /// over them (the checkpoint holds them decoded to f32). Otherwise `base` is not used.
    pub fn resume_over(
        checkpoint: &Path,
        config: TrainConfig,
        device: &B::Device,
        base: Option<openclaw_engine::Model<B>>,
    ) -> Result<Self> {
        let saved = read_complete(checkpoint, &config)?;
        let has_adapters = checkpoint.join(lora::ADAPTER_CONFIG).is_file();
        let same_base = has_adapters
            && config.lora.is_some()
            && !config.base_model.is_empty()
            && saved.config.base_model == config.base_model;
        let base = match base.filter(|_| same_base) {
            Some(b) => b,
            None => openclaw_engine::load_model::<B>(checkpoint, device)
                .with_context(|| format!("cannot load the weights of {}", checkpoint.display()))?,
        };
        Self::resumed(checkpoint, config, device, base, saved)
    }

    /// Rebuilds a trainer from an adapter checkpoint ([`Trainer::save_adapter_checkpoint`])
    /// over `base`, the frozen model (without adapters) it was trained over.
    pub fn resume_adapter(
        checkpoint: &Path,
        config: TrainConfig,
        base: openclaw_engine::Model<B>,
    ) -> Result<Self> {
        let saved = read_complete(checkpoint, &config)?;
        if config.lora.is_none() || !checkpoint.join(lora::ADAPTER_CONFIG).is_file() {
            bail!(
                "{} is not an adapter checkpoint, or LoRA is off",
                checkpoint.display()
            );
        }
        let device = base.device();
        Self::resumed(checkpoint, config, &device, base, saved)
    }

    fn resumed(
        checkpoint: &Path,
        config: TrainConfig,
        device: &B::Device,
        base: openclaw_engine::Model<B>,
        saved: SavedState,
    ) -> Result<Self> {
        let has_adapters = checkpoint.join(lora::ADAPTER_CONFIG).is_file();
        let model = match (&config.lora, has_adapters) {
            (Some(want), true) => {
                let (model, got) = lora::load_adapters(base, checkpoint)?;
                check_lora_match(want, &got)?;
                model
            }
            (None, false) => base,
            (Some(_), false) => bail!(
                "{} has no LoRA adapters but the config asks for LoRA",
                checkpoint.display()
            ),
            (None, true) => bail!(
                "{} holds LoRA adapters but the config does not enable LoRA",
                checkpoint.display()
            ),
        };
        if let Some(name) = model.non_finite_weight() {
            bail!(
                "checkpoint {} has non-finite values (NaN or infinity) in `{name}`; refusing to resume from it (an earlier checkpoint may be whole)",
                checkpoint.display()
            );
        }
        let optimizer = AdamW::load(
            &checkpoint.join(OPTIMIZER_FILE),
            config.optimizer.clone(),
            device,
        )?;
        optimizer.check::<B, _>(&model)?;
        Ok(Trainer {
            model: Some(model),
            optimizer,
            reference: None,
            rng: {
                let mut r = SplitMix::new(0);
                r.set_state(saved.rng_state);
                r
            },
            config,
            state: saved.state,
        })
    }
}

/// What a checkpoint holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Contents {
    /// The model's weights with its adapters.
    Whole,
    /// The adapters alone (many trained over one base).
    AdaptersOnly,
}

/// The state of a complete checkpoint whose files match their checksums.
fn read_complete(checkpoint: &Path, config: &TrainConfig) -> Result<SavedState> {
    config.validate()?;
    if !is_complete(checkpoint) {
        bail!(
            "checkpoint {} is incomplete (no {COMPLETE_MARKER})",
            checkpoint.display()
        );
    }
    openclaw_model_store::checkpoints::verify_checksums(checkpoint)?;
    read_saved_state(checkpoint)
}

fn check_lora_match(want: &LoraConfig, got: &LoraConfig) -> Result<()> {
    if want.rank != got.rank || want.alpha != got.alpha || {
        let mut a = want.target_modules.clone();
        let mut b = got.target_modules.clone();
        a.sort();
        b.sort();
        a != b
    } {
        bail!(
            "the checkpoint's LoRA (r {}, alpha {}, targets {}) differs from the config's (r {}, alpha {}, targets {})",
            got.rank,
            got.alpha,
            got.target_modules.join(","),
            want.rank,
            want.alpha,
            want.target_modules.join(",")
        );
    }
    if want.dropout != got.dropout {
        bail!(
            "the checkpoint's lora_dropout {} differs from the config's {}",
            got.dropout,
            want.dropout
        );
    }
    Ok(())
}

/// Deletes all but the newest `keep` complete checkpoints (never `current`), and incomplete
/// `checkpoint-N` directories with `N <= current` (remains of interrupted writes).
fn retain(save_dir: &Path, keep: usize, current: u64) -> Result<()> {
    for entry in std::fs::read_dir(save_dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(step) = parse_step(&name) {
            let p = entry.path();
            if p.is_dir() && step <= current && !is_complete(&p) {
                let _ = std::fs::remove_dir_all(&p);
            }
        }
    }
    if keep == 0 {
        return Ok(());
    }
    let all = list_checkpoints(save_dir)?;
    let excess = all.len().saturating_sub(keep);
    for (step, p) in all.into_iter().take(excess) {
        if step != current {
            std::fs::remove_dir_all(&p)
                .with_context(|| format!("cannot delete old checkpoint {}", p.display()))?;
        }
    }
    Ok(())
}

/// A fault-injection point: with `OPENCLAW_FAULT_CHECKPOINT_PAUSE_MS` set, a checkpoint write
/// pauses that long with its files written and not yet marked complete, so the fault tests can
/// signal or kill a process in the middle of one. Unset, it does nothing.
fn fault_pause() {
    if let Some(ms) = std::env::var("OPENCLAW_FAULT_CHECKPOINT_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

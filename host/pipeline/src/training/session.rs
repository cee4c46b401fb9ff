//! A training session: a trainer started fresh or resumed from a checkpoint, with its log,
//! periodic checkpoints that carry the tokenizer files and the caller's own state, and the
//! missing behaviour logprobs of hand-written samples filled in before a step.

use anyhow::{bail, Context, Result};
use burn::backend::Autodiff;
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use openclaw_engine::{score, GgufWeights, ScoreOptions, ScoreRequest};
use openclaw_plugin_api::TrainingSample;
use openclaw_plugins::LossHandle;
use openclaw_trainer::{resolve_checkpoint, ExtraFile, StepReport, TrainConfig, TrainLog, Trainer};
use std::path::{Path, PathBuf};

/// The caller's own state inside a checkpoint (e.g. which buffer records were consumed).
pub const RUN_STATE_FILE: &str = "run_state.json";

/// Where a session reads and writes.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// The model to start from (and to take tokenizer files from).
    pub model_dir: PathBuf,
    /// Where checkpoints go (none: no checkpoints).
    pub save_dir: Option<PathBuf>,
    /// Checkpoint every this many steps (0: only when asked).
    pub save_interval: u64,
    /// Checkpoints kept.
    pub keep: usize,
    /// `""` (start fresh), `latest`, or a checkpoint directory.
    pub resume: String,
    /// Where `training.log` goes.
    pub log_dir: PathBuf,
    /// No human line per step (a progress bar or the caller prints instead).
    pub quiet: bool,
    /// Files written into every checkpoint besides the tokenizer's (the plugin lockfile).
    pub extras: Vec<ExtraFile>,
}

/// A trainer on backend `B` (autodiff over it) with its log and checkpoints.
pub struct TrainSession<B: Backend> {
    /// This process's hold on the save directory: one trainer writes its checkpoints.
    _save_lock: Option<openclaw_buffer::dir_lock::DirLock>,
    /// The trainer.
    pub trainer: Trainer<Autodiff<B>>,
    /// The log.
    pub log: TrainLog,
    /// The checkpoint writer.
    pub checkpoints: Checkpointer,
    opts: SessionOptions,
    /// The checkpoint the session resumed from.
    pub resumed_from: Option<PathBuf>,
    /// The caller's state saved in that checkpoint ([`RUN_STATE_FILE`]).
    pub run_state: Option<Vec<u8>>,
}

/// Writes checkpoints on schedule, with the tokenizer files and the caller's state.
pub struct Checkpointer {
    save_dir: Option<PathBuf>,
    interval: u64,
    keep: usize,
    /// The tokenizer's files and the caller's extras, written into each checkpoint.
    files: Vec<ExtraFile>,
    last_saved: u64,
}

impl Checkpointer {
    /// Whether the step just taken is due a checkpoint.
    pub fn due<B: AutodiffBackend>(&self, trainer: &Trainer<B>) -> bool {
        let step = trainer.state().step;
        self.save_dir.is_some()
            && self.interval > 0
            && step > self.last_saved
            && step.is_multiple_of(self.interval)
    }

    /// Saves a checkpoint now (with the tokenizer files and `run_state`), unless this step is
    /// already saved or no save directory is set.
    pub fn save<B: AutodiffBackend>(
        &mut self,
        trainer: &Trainer<B>,
        run_state: Option<&[u8]>,
    ) -> Result<Option<PathBuf>> {
        let Some(save_dir) = self.save_dir.clone() else {
            return Ok(None);
        };
        if trainer.state().step == self.last_saved {
            return Ok(None);
        }
        if let Some(name) = burn::module::AutodiffModule::valid(trainer.model()).non_finite_weight()
        {
            bail!(
                "step {}: the weights have non-finite values (NaN or infinity) in `{name}`; no checkpoint written",
                trainer.state().step
            );
        }
        let mut extras = self.files.clone();
        if let Some(s) = run_state {
            extras.push(ExtraFile {
                name: RUN_STATE_FILE.into(),
                contents: s.to_vec(),
            });
        }
        let dir = trainer.save_checkpoint_with(&save_dir, self.keep, &extras)?;
        self.last_saved = trainer.state().step;
        Ok(Some(dir))
    }
}

impl<B: Backend> TrainSession<B> {
    /// Starts from `opts.model_dir`, or resumes from `opts.resume` (`latest` looks in the save
    /// directory), on `device`. The reference model, when `config.use_reference` is on without
    /// LoRA, is the model directory's weights (the run's starting point), also after a resume.
    pub fn start(config: TrainConfig, opts: SessionOptions, device: &B::Device) -> Result<Self> {
        let mut opts = opts;
        let mut config = config;
        let save_lock = match &opts.save_dir {
            Some(d) => Some(openclaw_buffer::dir_lock::DirLock::acquire(
                d,
                "save directory",
                "--save",
            )?),
            None => None,
        };
        // `latest` with nothing saved yet is a fresh start (launch scripts pass it always).
        let nothing_saved = opts.resume == "latest"
            && opts.save_dir.as_deref().is_none_or(|d| {
                openclaw_trainer::list_checkpoints(d).map_or(true, |c| c.is_empty())
            });
        let fresh = opts.resume.is_empty() || nothing_saved;
        // Any `--model-path` spelling (a save directory, `checkpoint-latest`, ...) to its weights.
        // A resumed run needs the starting model only for its reference and tokenizer files, so
        // a base model that has moved since is a warning there, not an error.
        let save_dir = opts
            .save_dir
            .clone()
            .unwrap_or_else(|| "checkpoints".into());
        let source =
            match openclaw_model_store::resolve(&opts.model_dir.to_string_lossy(), &save_dir) {
                Ok(s) => Some(s),
                Err(e) if !fresh => {
                    tracing::warn!(
                        "the starting model is not readable ({e:#}); resuming without it"
                    );
                    None
                }
                Err(e) => return Err(e),
            };
        if let Some(s) = &source {
            // Checkpoints and adapters name the model itself, not a moving `latest`.
            if config.base_model == opts.model_dir.to_string_lossy() {
                // Absolute: `eval` reads it later, from wherever it runs.
                config.base_model = std::path::absolute(s.path())
                    .unwrap_or_else(|_| s.path().to_path_buf())
                    .display()
                    .to_string();
            }
            opts.model_dir = s.path().to_path_buf();
        }
        let tokenizer_files = match source
            .as_ref()
            .map(|s| openclaw_model_store::tokenizer_files(s, None))
        {
            Some(Ok(files)) => files
                .into_iter()
                .map(|(name, contents)| ExtraFile { name, contents })
                .collect(),
            Some(Err(e)) => {
                tracing::warn!("checkpoints will carry no tokenizer files: {e:#}");
                Vec::new()
            }
            None => Vec::new(),
        };
        let qlora = config.lora.is_some() && openclaw_engine::kernels::flex::is_flex::<B>(device);
        let (mut trainer, resumed_from, run_state) = if fresh {
            let source = source.as_ref().expect("a fresh start has its model");
            // Through the one loader: a LoRA checkpoint given as the model starts merged, as
            // serving and the teacher see it. LoRA trains over a GGUF file's blocks (QLoRA) on
            // the CPU; a GPU keeps f32 weights on the device rather than decode and upload them
            // every forward pass.
            let gguf = if qlora {
                GgufWeights::Blocks
            } else {
                GgufWeights::F32
            };
            let model =
                openclaw_model_store::load::load_weights_with::<Autodiff<B>>(source, device, gguf)
                    .with_context(|| {
                        format!(
                            "cannot load the model to train from {}",
                            source.path().display()
                        )
                    })?;
            (Trainer::<Autodiff<B>>::new(model, config)?, None, None)
        } else {
            if opts.resume == "latest" && opts.save_dir.is_none() {
                bail!("--resume-from-checkpoint latest needs --save-dir to look in");
            }
            // `latest`, a save directory, `checkpoint-latest` or a whole checkpoint.
            let dir = resolve_checkpoint(&save_dir, &opts.resume)
                .with_context(|| format!("--resume-from-checkpoint {}", opts.resume))?;
            // LoRA over a GGUF file resumes over its blocks (the checkpoint holds them decoded).
            let base = match &source {
                Some(s @ openclaw_model_store::ModelSource::Gguf(_)) if qlora => Some(
                    openclaw_model_store::load::load_weights_with::<Autodiff<B>>(
                        s,
                        device,
                        GgufWeights::Blocks,
                    )
                    .with_context(|| {
                        format!("cannot load the base model {}", s.path().display())
                    })?,
                ),
                _ => None,
            };
            let t = Trainer::<Autodiff<B>>::resume_over(&dir, config, device, base)?;
            let state = std::fs::read(dir.join(RUN_STATE_FILE)).ok();
            (t, Some(dir), state)
        };
        if trainer.config().use_reference && trainer.config().lora.is_none() {
            let source = source
                .as_ref()
                .context("the loss reads reference log-probabilities, but the starting model (the reference) cannot be read")?;
            let reference = openclaw_model_store::load::load_weights::<B>(source, device)
                .with_context(|| {
                    format!(
                        "cannot load the reference model {}",
                        source.path().display()
                    )
                })?;
            trainer.set_reference(reference);
        }
        if trainer.model().is_quantised() {
            tracing::info!(
                "LoRA trains over the quantised blocks of {}: one copy of the base for training and serving",
                opts.model_dir.display()
            );
        }
        let log = TrainLog::open(&opts.log_dir)?;
        let log = if opts.quiet { log.quiet() } else { log };
        let checkpoints = Checkpointer {
            save_dir: opts.save_dir.clone(),
            interval: opts.save_interval,
            keep: opts.keep,
            files: tokenizer_files
                .into_iter()
                .chain(opts.extras.iter().cloned())
                .collect(),
            last_saved: trainer.state().step,
        };
        Ok(TrainSession {
            _save_lock: save_lock,
            trainer,
            log,
            checkpoints,
            opts,
            resumed_from,
            run_state,
        })
    }

    /// Replaces how step lines are shown (a progress bar, say).
    pub fn set_log(&mut self, log: TrainLog) {
        self.log = log;
    }

    /// Fills empty behaviour logprobs with the current weights' (hand-written data has none:
    /// the step is then on-policy with ratio 1).
    pub fn fill_logprobs(&self, samples: &mut [TrainingSample]) -> Result<()> {
        let missing: Vec<usize> = samples
            .iter()
            .enumerate()
            .filter(|(_, s)| s.rollout_logprobs.len() != s.response_ids.len())
            .map(|(i, _)| i)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let model = self.trainer.inference_model();
        let requests: Vec<ScoreRequest> = missing
            .iter()
            .map(|&i| {
                ScoreRequest::new(
                    samples[i].prompt_ids.to_vec(),
                    samples[i].response_ids.to_vec(),
                )
            })
            .collect();
        let scored = score(&model, &requests, &ScoreOptions::default())?;
        for (&i, r) in missing.iter().zip(scored) {
            samples[i].rollout_logprobs = r.logprobs.into();
        }
        Ok(())
    }

    /// One RL step through the loss plugin, logged.
    pub fn rl_step(
        &mut self,
        samples: &mut [TrainingSample],
        loss: &LossHandle,
    ) -> Result<StepReport> {
        self.fill_logprobs(samples)?;
        let report = self.trainer.train_step(samples, &|b| loss.compute(b))?;
        self.log.record(&report)?;
        Ok(report)
    }

    /// Checkpoints if the step just taken is due one.
    pub fn maybe_save(&mut self, run_state: Option<&[u8]>) -> Result<Option<PathBuf>> {
        if self.checkpoints.due(&self.trainer) {
            self.checkpoints.save(&self.trainer, run_state)
        } else {
            Ok(None)
        }
    }

    /// Saves a checkpoint now (unless this step is saved already).
    pub fn save(&mut self, run_state: Option<&[u8]>) -> Result<Option<PathBuf>> {
        self.checkpoints.save(&self.trainer, run_state)
    }

    /// The trainer's frozen base without its adapters, on the inference backend, when LoRA
    /// trains over quantised blocks: serving a fresh run's starting model from it keeps one copy
    /// of the base for the trainer, serving and the frozen teacher.
    pub fn quantised_base(&self) -> Option<openclaw_engine::Model<B>> {
        let m = self.trainer.model();
        m.is_quantised()
            .then(|| openclaw_engine::lora::stripped(&burn::module::AutodiffModule::valid(m)))
    }

    /// The weights to serve (adapters beside the blocks) when LoRA trains over quantised
    /// blocks: what a resumed run serves, sharing the trainer's base.
    pub fn quantised_weights(&self) -> Option<openclaw_engine::Model<B>> {
        self.trainer
            .model()
            .is_quantised()
            .then(|| self.trainer.inference_model())
    }

    /// The model directory the session started from.
    pub fn model_dir(&self) -> &Path {
        &self.opts.model_dir
    }
}

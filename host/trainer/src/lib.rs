//! Training for openclaw-host: the RL step around a plugin loss, AdamW, LoRA, checkpoints,
//! export, weight publication, the training log and SFT.
//!
//! The loss is a plain function of per-token numbers ([`LossFn`]): the host passes its loaded
//! loss plugin. A step packs samples into micro-batches within a token budget, runs the policy
//! for the logprobs of the response tokens, hands them to the loss, and backpropagates the
//! surrogate `Σ stopgrad(dL/dlogp) · logp`, whose gradient equals the loss's.
//!
//! - [`config`] — [`TrainConfig`].
//! - [`pack`] — micro-batches under a token budget, and their token layout.
//! - [`logprob`] — per-token logprobs of a micro-batch (differentiable).
//! - [`step`] — [`Trainer`], the RL step, gradients, reports.
//! - [`optim`] — AdamW with PyTorch semantics and path-keyed, saveable state.
//! - [`schedule`] — constant / warmup / cosine learning rates.
//! - [`clip`] — global-norm gradient clipping.
//! - [`lora`] — adapters, merging, PEFT files (from the engine).
//! - [`checkpoint`] — crash-safe checkpoints, retention, resume.
//! - [`export()`] — a checkpoint as a standard HF model directory (from `openclaw-model-store`).
//! - [`log`] — `training.log` and progress bars.
//! - [`sft`] — supervised fine-tuning on chat conversations.
//! - [`bench`] — training throughput.
//!
//! `TrainConfig::data_parallel` runs a step's micro-batches on several threads (the CPU
//! backend's way to use more than one core for element-wise work).

#![warn(missing_docs)]

pub mod bench;
pub mod checkpoint;
pub mod clip;
pub mod config;
pub mod log;
pub mod logprob;
pub mod optim;
pub mod pack;
mod parallel;
pub mod rng;
pub mod schedule;
pub mod sft;
pub mod step;
pub use checkpoint::{list_checkpoints, resolve_checkpoint, ExtraFile, CHECKPOINT_LATEST};
pub use config::TrainConfig;
pub use log::{progress_bar, TrainLog};
pub use lora::LoraConfig;
/// LoRA lives with the model in the engine; re-exported where the trainer's users look.
pub use openclaw_engine::lora;
/// Small f32 safetensors files (adapters, optimizer moments).
pub use openclaw_engine::weights::tensors;
/// Export lives with model loading (`openclaw-model-store`); re-exported for the trainer's users.
pub use openclaw_model_store::export;
pub use optim::{AdamW, AdamWConfig};
pub use schedule::{LrSchedule, ScheduleKind};
pub use sft::{run_sft, SftExample, SftOptions};

pub use step::{LossFn, StepGradients, StepReport, Trainer, TrainerState};

//! The trainer's settings.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::lora::LoraConfig;
use crate::optim::AdamWConfig;
use crate::schedule::LrSchedule;

/// Everything a [`Trainer`](crate::Trainer) needs to know besides the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// The learning rate over steps.
    pub schedule: LrSchedule,
    /// AdamW's other hyper-parameters.
    pub optimizer: AdamWConfig,
    /// Clip the global gradient norm to this (0 turns clipping off).
    pub max_grad_norm: f64,
    /// Token budget of one micro-batch: samples × longest (prompt + response), padding counted.
    pub max_tokens_per_batch: usize,
    /// Positions whose vocabulary-wide logits exist at once in the logprob computation.
    pub logprob_chunk: usize,
    /// Softmax temperature of the trained logprobs; use the sampling temperature so they
    /// compare with the rollout logprobs (0 counts as 1).
    pub temperature: f32,
    /// Train LoRA adapters instead of every weight.
    pub lora: Option<LoraConfig>,
    /// Compute `ref_logp` with the frozen reference model (only when the loss needs it: the
    /// reference costs one more forward pass per micro-batch, and memory unless LoRA is on,
    /// where the reference is the base weights without adapters).
    pub use_reference: bool,
    /// Seeds the adapters' initialisation, the dropout masks and the trainer's RNG.
    pub seed: u64,
    /// Where the base model came from (written into `adapter_config.json`).
    pub base_model: String,
    /// Micro-batches run at once on separate threads (1: one after the other). On the CPU
    /// backend, set it to the number of cores: element-wise ops run on the calling thread, so
    /// this is what keeps every core busy. Activation memory grows with it. SFT steps with a
    /// single micro-batch are split to use the threads; RL steps are not (splitting could cut
    /// sample groups), so give them a token budget that yields several micro-batches. With
    /// LoRA dropout, masks then depend on thread timing and runs stop being bit-reproducible.
    pub data_parallel: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            schedule: LrSchedule::constant(1e-5),
            optimizer: AdamWConfig::default(),
            max_grad_norm: 1.0,
            max_tokens_per_batch: 8192,
            logprob_chunk: 512,
            temperature: 1.0,
            lora: None,
            use_reference: false,
            seed: 0,
            base_model: String::new(),
            data_parallel: 1,
        }
    }
}

impl TrainConfig {
    /// Checks every part; errors name the setting.
    pub fn validate(&self) -> Result<()> {
        self.schedule.validate()?;
        self.optimizer.validate()?;
        if !(self.max_grad_norm >= 0.0 && self.max_grad_norm.is_finite()) {
            bail!("max_grad_norm must be >= 0, got {}", self.max_grad_norm);
        }
        if self.max_tokens_per_batch == 0 {
            bail!("max_tokens_per_batch must be at least 1");
        }
        if self.data_parallel == 0 {
            bail!("data_parallel must be at least 1");
        }
        if self.logprob_chunk == 0 {
            bail!("logprob_chunk must be at least 1");
        }
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            bail!("temperature must be >= 0, got {}", self.temperature);
        }
        if let Some(l) = &self.lora {
            l.validate()?;
        }
        Ok(())
    }
}

//! Training throughput: forward + backward + AdamW on random token batches, through the same
//! SFT step real runs use. The default shape is the tiny Qwen3 of the burn-vs-PyTorch
//! comparison (`bench/torch_train.py` measures PyTorch on the same work).

use std::time::Instant;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use openclaw_engine::{random_model, ModelConfig};
use serde::Serialize;

use crate::config::TrainConfig;
use crate::lora::LoraConfig;
use crate::rng::SplitMix;
use crate::schedule::LrSchedule;
use crate::sft::SftExample;
use crate::step::Trainer;

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The model shape (random weights).
    pub model: ModelConfig,
    /// Sequences per step.
    pub batch: usize,
    /// Tokens per sequence; every position but the first is a target.
    pub seq: usize,
    /// Timed steps (after one warm-up step).
    pub iters: usize,
    /// Train LoRA adapters instead of every weight.
    pub lora: Option<LoraConfig>,
    /// Threads for the step's micro-batches ([`TrainConfig::data_parallel`]).
    pub data_parallel: usize,
}

impl BenchConfig {
    /// vocab 4096, hidden 256, intermediate 768, 4 layers, 8/4 heads of 32, tied; 8 × 256.
    pub fn tiny() -> Self {
        BenchConfig {
            model: ModelConfig::qwen3(4096, 256, 768, 4, 8, 4, 32, true),
            batch: 8,
            seq: 256,
            iters: 3,
            lora: None,
            data_parallel: 1,
        }
    }
}

/// Timings of a run.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    /// Tokens per step (`batch × seq`).
    pub tokens_per_step: usize,
    /// Wall time of each timed step, in milliseconds.
    pub step_ms: Vec<f64>,
    /// Tokens per second of the fastest step.
    pub best_tokens_per_s: f64,
    /// Tokens per second over all timed steps.
    pub mean_tokens_per_s: f64,
}

/// Runs the benchmark on `device`.
pub fn run<B: AutodiffBackend>(cfg: &BenchConfig, device: &B::Device) -> Result<BenchResult> {
    let model = random_model::<B>(cfg.model.clone(), 0, device)?;
    let tokens = cfg.batch * cfg.seq;
    let train = TrainConfig {
        schedule: LrSchedule::constant(1e-4),
        max_grad_norm: 0.0,
        max_tokens_per_batch: tokens,
        logprob_chunk: tokens,
        lora: cfg.lora.clone(),
        data_parallel: cfg.data_parallel,
        ..Default::default()
    };
    let mut trainer = Trainer::new(model, train)?;
    let mut rng = SplitMix::new(1);
    let vocab = cfg.model.vocab_size;
    let examples: Vec<SftExample> = (0..cfg.batch)
        .map(|_| {
            let ids = (0..cfg.seq).map(|_| rng.below(vocab) as u32).collect();
            let mut mask = vec![true; cfg.seq];
            mask[0] = false;
            SftExample { ids, mask }
        })
        .collect();
    trainer.sft_step(&examples)?;
    let mut step_ms = Vec::new();
    for _ in 0..cfg.iters {
        let t = Instant::now();
        trainer.sft_step(&examples)?;
        step_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let best = step_ms.iter().copied().fold(f64::INFINITY, f64::min);
    let mean = step_ms.iter().sum::<f64>() / step_ms.len().max(1) as f64;
    Ok(BenchResult {
        tokens_per_step: tokens,
        best_tokens_per_s: tokens as f64 / (best / 1e3),
        mean_tokens_per_s: tokens as f64 / (mean / 1e3),
        step_ms,
    })
}

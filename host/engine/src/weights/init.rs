//! Random initialisation with transformers' scheme: normal(0, initializer_range) matrices,
//! zero biases, unit norms. Each tensor's values depend only on the seed and its name, so the
//! result is the same on every backend and machine.

use anyhow::Result;
use burn::prelude::*;

use super::WeightSource;
use crate::config::ModelConfig;
use crate::model::Model;
use crate::rng::Rng;

/// A weight source that invents tensors deterministically from a seed.
#[derive(Clone, Debug)]
pub struct RandomSource {
    seed: u64,
    std: f64,
    pad_row: Option<usize>,
}

impl RandomSource {
    /// A source for `config`, seeded.
    pub fn new(config: &ModelConfig, seed: u64) -> Self {
        RandomSource {
            seed,
            std: config.initializer_range,
            pad_row: config
                .pad_token_id
                .map(|p| p as usize)
                .filter(|&p| p < config.vocab_size),
        }
    }
}

fn name_hash(name: &str) -> u64 {
    // FNV-1a: stable across Rust versions, unlike the std hasher.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
    })
}

impl WeightSource for RandomSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let n: usize = shape.iter().product();
        if name.ends_with("norm.weight") {
            return Ok(vec![1.0; n]);
        }
        if name.ends_with(".bias") {
            return Ok(vec![0.0; n]);
        }
        let mut rng = Rng::new(self.seed ^ name_hash(name));
        let mut v: Vec<f32> = (0..n).map(|_| (rng.normal() * self.std) as f32).collect();
        // transformers zeroes the padding row of the embedding.
        if let (Some(p), "model.embed_tokens.weight") = (self.pad_row, name) {
            let d = shape[1];
            v[p * d..(p + 1) * d].iter_mut().for_each(|x| *x = 0.0);
        }
        Ok(v)
    }
}

/// A randomly initialised model for `config`; the same seed always gives the same weights.
pub fn random_model<B: Backend>(
    config: ModelConfig,
    seed: u64,
    device: &B::Device,
) -> Result<Model<B>> {
    let mut src = RandomSource::new(&config, seed);
    Model::from_source(config, &mut src, device)
}

//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use burn::prelude::*;
use openclaw_engine::model::projection::Weight;
use openclaw_engine::{CpuBackend, Model, ModelConfig, Versioned};

pub type B = CpuBackend;

/// SmolLM2-135M-Instruct (Q4_1 GGUF) as `scripts/fetch-smollm2.sh` fetches it (the test
/// command does): `None`, with a line saying the test is skipped, when it is absent, except
/// where `OPENCLAW_REQUIRE_ASSETS=1` (CI sets it), where a missing file fails the test.
pub fn smollm2() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
        "{} is absent and OPENCLAW_REQUIRE_ASSETS=1: run scripts/fetch-smollm2.sh",
        path.display()
    );
    eprintln!(
        "SKIPPED: {} is absent (run scripts/fetch-smollm2.sh)",
        path.display()
    );
    None
}

/// `host/engine/tests/fixtures/qwen3-tiny/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/qwen3-tiny")
        .join(name)
}

/// Tensors of `expected.safetensors`: ids as i64, logits as f32.
pub struct Expected {
    floats: HashMap<String, (Vec<usize>, Vec<f32>)>,
    ints: HashMap<String, (Vec<usize>, Vec<i64>)>,
}

impl Expected {
    pub fn load() -> Self {
        let bytes = std::fs::read(fixture("expected.safetensors")).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut floats = HashMap::new();
        let mut ints = HashMap::new();
        for (name, view) in st.tensors() {
            let shape = view.shape().to_vec();
            match view.dtype() {
                safetensors::Dtype::F32 => {
                    let v = view
                        .data()
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    floats.insert(name, (shape, v));
                }
                safetensors::Dtype::I64 => {
                    let v = view
                        .data()
                        .chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    ints.insert(name, (shape, v));
                }
                d => panic!("unexpected dtype {d:?}"),
            }
        }
        Expected { floats, ints }
    }

    pub fn ids(&self, name: &str) -> (Vec<usize>, Vec<u32>) {
        let (s, v) = &self.ints[name];
        (s.clone(), v.iter().map(|&x| x as u32).collect())
    }

    pub fn floats(&self, name: &str) -> (Vec<usize>, Vec<f32>) {
        self.floats[name].clone()
    }
}

/// `max|a-b| / max|b|`.
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0f32, f32::max);
    diff / scale
}

pub fn device() -> openclaw_engine::CpuDevice {
    Default::default()
}

/// Full-sequence logits of one sequence, flattened `[seq * vocab]`.
pub fn logits_of(model: &Model<B>, ids: &[u32]) -> Vec<f32> {
    let t = Tensor::<B, 2, Int>::from_data(
        TensorData::new(
            ids.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            [1, ids.len()],
        ),
        &device(),
    );
    model
        .forward(t)
        .unwrap()
        .into_data()
        .to_vec::<f32>()
        .unwrap()
}

/// A small random Qwen3 (GQA 4/2, untied) for generation tests.
pub fn tiny_config() -> ModelConfig {
    let mut c = ModelConfig::qwen3(128, 32, 64, 2, 4, 2, 8, false);
    c.max_position_embeddings = 128;
    c
}

/// A seeded random model wrapped as published weights.
pub fn tiny_weights(seed: u64) -> Arc<Versioned<Model<B>>> {
    let model = openclaw_engine::random_model::<B>(tiny_config(), seed, &device()).unwrap();
    // Larger weights than the default init so sampling distributions are not near-uniform.
    Arc::new(Versioned {
        version: 1,
        model: scale_embeddings(model, 40.0),
    })
}

/// Multiplies the embedding (and so the tied/untied logits' spread) to sharpen the distribution.
pub fn scale_embeddings(mut model: Model<B>, k: f32) -> Model<B> {
    if let Some(e) = model.model.embed_tokens.as_mut() {
        e.weight = burn::module::Param::from_tensor(e.weight.val() * k);
    }
    if let Some(Weight::Dense(w)) = model.lm_head.as_mut().map(|h| &mut h.weight) {
        *w = burn::module::Param::from_tensor(w.val() * k);
    }
    model
}

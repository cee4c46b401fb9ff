//! SmolLM2-135M-Instruct (Q4_1 GGUF) through the GGUF loader against numpy reference logits
//! (`fixtures/smollm2_logits.json`, written by `fixtures/make_llama_gguf_reference.py` from
//! gguf-py's dequantisation and an independent numpy Llama forward pass).
//!
//! The test command fetches the model (`scripts/fetch-smollm2.sh`); CI requires it
//! (`OPENCLAW_REQUIRE_ASSETS=1`). The fixture is committed.

mod common;

use std::path::PathBuf;

use burn::prelude::*;
use common::*;
use openclaw_engine::weights::to_f32_vec;
use openclaw_engine::{load_model, Architecture, Model};
use serde_json::Value;

/// Largest allowed |ours - numpy| on a reference logit. Both sides compute in f32 from the same
/// dequantised weights and differ only in summation order; measured 2.1e-5 (the fixture rounds
/// to 1e-5), so 1e-3 leaves room for other SIMD kernels while still catching any real error
/// (a wrong q/k row order moves logits by whole units).
const LOGIT_TOL: f32 = 1e-3;

#[test]
fn smollm2_gguf_logits_match_numpy_reference() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let Some(path) = smollm2() else { return };
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("fixtures/smollm2_logits.json")).unwrap(),
    )
    .unwrap();
    // Through `load_model`, as every command's --model-path goes.
    let model: Model<B> = load_model(&path, &device()).unwrap();
    let cfg = &model.config;
    assert_eq!(cfg.architecture, Architecture::LlamaForCausalLM);
    assert_eq!(
        (cfg.num_hidden_layers, cfg.hidden_size, cfg.head_dim),
        (30, 576, 64)
    );
    assert!(cfg.tie_word_embeddings && !cfg.attention.qk_norm);

    let mut worst = 0f32;
    for seq in fixture["sequences"].as_array().unwrap() {
        let ids: Vec<i64> = seq["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let n = ids.len();
        let tokens =
            Tensor::<B, 2, Int>::from_data(TensorData::new(ids.clone(), [1, n]), &device());
        let logits = to_f32_vec(model.forward(tokens).unwrap());
        let last = &logits[(n - 1) * cfg.vocab_size..];

        let top_ids: Vec<usize> = seq["top_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let mut diff = 0f32;
        for (id, want) in top_ids.iter().zip(seq["top_logits"].as_array().unwrap()) {
            diff = diff.max((last[*id] - want.as_f64().unwrap() as f32).abs());
        }
        let argmax = (0..last.len())
            .max_by(|&a, &b| last[a].total_cmp(&last[b]))
            .unwrap();
        let mean = last.iter().map(|&x| x as f64).sum::<f64>() / last.len() as f64;
        let var = last.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / last.len() as f64;
        let (dmean, dstd) = (
            (mean - seq["mean"].as_f64().unwrap()).abs(),
            (var.sqrt() - seq["std"].as_f64().unwrap()).abs(),
        );
        println!(
            "ids {ids:?}: argmax {argmax} (ref {}), top-20 max |diff| {diff:.2e}, \
             mean diff {dmean:.2e}, std diff {dstd:.2e}",
            top_ids[0]
        );
        assert_eq!(argmax, top_ids[0], "greedy token differs for {ids:?}");
        assert!(
            diff <= LOGIT_TOL,
            "top-20 logits differ by {diff} for {ids:?}"
        );
        assert!(
            dmean <= 1e-3 && dstd <= 1e-3,
            "logit mean/std differ for {ids:?}"
        );
        worst = worst.max(diff);
    }
    println!("max |logit diff| over all sequences: {worst:.2e} (tolerance {LOGIT_TOL:.0e})");
}

//! The model against transformers: logits of the fixtures in tests/fixtures/qwen3-tiny, made by
//! fixtures/make_qwen3_fixture.py.

mod common;

use burn::prelude::*;
use common::*;
use openclaw_engine::model::attention::AttnContext;
use openclaw_engine::{classify, load_model, Model};

const TOL: f32 = 1e-4;

fn check_causal(dir: &str, logits_key: &str) {
    let exp = Expected::load();
    let model: Model<B> = load_model(&fixture(dir), &device()).unwrap();
    for i in 0..2 {
        let (_, ids) = exp.ids(&format!("causal.ids.{i}"));
        let (_, want) = exp.floats(&format!("{logits_key}.{i}"));
        let err = rel_err(&logits_of(&model, &ids), &want);
        eprintln!("{dir} sequence {i}: relative error {err:.2e}");
        assert!(err <= TOL, "{dir} sequence {i}: relative error {err}");
    }
}

#[test]
fn causal_f32_matches_transformers() {
    check_causal("causal", "causal.logits");
}

#[test]
fn causal_bf16_matches_transformers() {
    check_causal("causal-bf16", "causal_bf16.logits");
}

#[test]
fn causal_sharded_matches_transformers() {
    check_causal("causal-sharded", "causal_bf16.logits");
}

#[test]
fn qwen2_tied_with_bias_matches_transformers() {
    let exp = Expected::load();
    let model: Model<B> = load_model(&fixture("qwen2-tied"), &device()).unwrap();
    assert!(
        model.model.embed_tokens.is_none() && model.lm_head.is_some(),
        "one tied matrix"
    );
    let (_, ids) = exp.ids("qwen2.ids.0");
    let (_, want) = exp.floats("qwen2.logits.0");
    let err = rel_err(&logits_of(&model, &ids), &want);
    eprintln!("qwen2: relative error {err:.2e}");
    assert!(err <= TOL, "relative error {err}");
}

#[test]
fn classifier_matches_transformers() {
    let exp = Expected::load();
    let model: Model<B> = load_model(&fixture("classifier"), &device()).unwrap();
    let (shape, flat) = exp.ids("classifier.ids");
    // The padded rows as transformers saw them; the classifier finds the last non-pad token.
    let seqs: Vec<Vec<u32>> = flat.chunks(shape[1]).map(|c| c.to_vec()).collect();
    let got: Vec<f32> = classify(&model, &seqs).unwrap().concat();
    let (_, want) = exp.floats("classifier.logits");
    let err = rel_err(&got, &want);
    eprintln!("classifier: relative error {err:.2e}");
    assert!(err <= TOL, "relative error {err}: {got:?} vs {want:?}");
    // Unpadded sequences give the same answer.
    let trimmed: Vec<Vec<u32>> = seqs
        .iter()
        .map(|s| s[..=s.iter().rposition(|&t| t != 0).unwrap()].to_vec())
        .collect();
    let again: Vec<f32> = classify(&model, &trimmed).unwrap().concat();
    assert!(rel_err(&again, &want) <= TOL);
}

#[test]
fn kv_cache_decode_matches_transformers() {
    // Prefill 5 tokens, then one token at a time through the cache (the grouped decode path).
    let exp = Expected::load();
    let model: Model<B> = load_model(&fixture("causal"), &device()).unwrap();
    let (_, ids) = exp.ids("causal.ids.0");
    let (_, want) = exp.floats("causal.logits.0");
    let vocab = model.config.vocab_size;
    let dev = device();
    let mut cache = model.new_cache();
    let mut got = Vec::new();
    let prefill = 5;
    let mut pos = 0;
    while pos < ids.len() {
        let n = if pos == 0 { prefill } else { 1 };
        let chunk: Vec<i64> = ids[pos..pos + n].iter().map(|&t| t as i64).collect();
        let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(chunk, [1, n]), &dev);
        let positions: Vec<usize> = (pos..pos + n).collect();
        let ctx = AttnContext {
            rope: model.rope_tables(&positions, 1, n, &dev),
            key_mask: None,
        };
        let h = model.hidden(tokens, &ctx, Some(&mut cache));
        let d = h.dims()[2];
        got.extend(
            model
                .lm_logits(h.reshape([n, d]))
                .into_data()
                .to_vec::<f32>()
                .unwrap(),
        );
        pos += n;
    }
    assert_eq!(cache.len(), ids.len());
    assert_eq!(got.len(), ids.len() * vocab);
    let err = rel_err(&got, &want);
    eprintln!("kv-cache decode: relative error {err:.2e}");
    assert!(err <= TOL, "relative error {err}");
}

#[test]
fn fixture_is_sensitive_to_rope_theta() {
    // Control: the same weights with transformers' default theta (10000 instead of the file's
    // 1e6) must miss the reference, or the comparison above would prove little.
    let exp = Expected::load();
    let dir = fixture("causal");
    let mut cfg = openclaw_engine::ModelConfig::from_path(&dir).unwrap();
    assert_eq!(cfg.rope_theta, 1e6);
    cfg.rope_theta = 10_000.0;
    let mut src = openclaw_engine::weights::open_weights(&dir).unwrap();
    let model: Model<B> = Model::from_source(cfg, &mut src, &device()).unwrap();
    let (_, ids) = exp.ids("causal.ids.0");
    let (_, want) = exp.floats("causal.logits.0");
    let err = rel_err(&logits_of(&model, &ids), &want);
    assert!(err > 1e-3, "relative error {err}");
}

//! A whole model's gradients through the trainer's hand-written operations (products,
//! attention, SwiGLU, log-probs) against the same model through burn's ops alone.

use burn::backend::{Autodiff, Flex};
use burn::prelude::*;

use super::flex::BURN_OPS_ONLY;
use super::logprob_gather::log_softmax_gather;
use crate::model::projection::Projection;
use crate::{random_model, ModelConfig};

type Ad = Autodiff<Flex>;

/// The gradients of every projection, norm and the head of a 2-layer Qwen3 with grouped
/// query heads (three per kv head, as SmolLM2) under a log-prob loss on right-padded rows.
fn gradients(burn_only: bool) -> Vec<(String, Vec<f32>)> {
    /// Puts the switch back however the pass ends, so a panic leaves no other test of this
    /// thread on burn's ops.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BURN_OPS_ONLY.with(|c| c.set(false));
        }
    }
    let reset = Reset;
    BURN_OPS_ONLY.with(|c| c.set(burn_only));
    let dev = Default::default();
    let cfg = ModelConfig::qwen3(300, 96, 160, 2, 6, 2, 32, true);
    let model = random_model::<Ad>(cfg, 7, &dev).unwrap();
    let (b, s) = (2, 70);
    let ids: Vec<i64> = (0..b * s).map(|i| ((i * 37 + 11) % 300) as i64).collect();
    let targets: Vec<u32> = (0..b * s).map(|i| ((i * 53 + 5) % 300) as u32).collect();
    let ids = Tensor::<Ad, 2, Int>::from_data(TensorData::new(ids, [b, s]), &dev);
    let hidden = model.hidden_full(ids).reshape([b * s, 96]);
    let logits = model.lm_logits(hidden);
    let lp = log_softmax_gather(logits, &targets, 1, 1.25);
    let weights: Vec<f32> = (0..b * s).map(|i| ((i % 7) as f32 - 3.0) * 0.1).collect();
    let w = Tensor::<Ad, 2>::from_data(TensorData::new(weights, [b * s, 1]), &dev);
    let grads = (lp * w).sum().backward();
    drop(reset);
    let v2 = |t: Tensor<Ad, 2>| t.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();
    let v1 = |t: Tensor<Ad, 1>| t.grad(&grads).unwrap().into_data().to_vec::<f32>().unwrap();
    let weight = |p: &Projection<Ad>| p.dense_weight().expect("f32 weights").val();
    let mut out = vec![(
        "lm_head".to_string(),
        v2(weight(model.lm_head.as_ref().unwrap())),
    )];
    for (i, l) in model.model.layers.iter().enumerate() {
        let a = &l.self_attn;
        for (name, p) in [
            ("q", &a.q_proj),
            ("k", &a.k_proj),
            ("v", &a.v_proj),
            ("o", &a.o_proj),
            ("gate", &l.mlp.gate_proj),
            ("up", &l.mlp.up_proj),
            ("down", &l.mlp.down_proj),
        ] {
            out.push((format!("{i}.{name}"), v2(weight(p))));
        }
        out.push((
            format!("{i}.q_norm"),
            v1(a.q_norm.as_ref().unwrap().gamma.val()),
        ));
        out.push((
            format!("{i}.k_norm"),
            v1(a.k_norm.as_ref().unwrap().gamma.val()),
        ));
        out.push((format!("{i}.input_norm"), v1(l.input_layernorm.gamma.val())));
    }
    out
}

#[test]
fn a_whole_models_gradients_equal_those_through_burns_ops() {
    let (ours, theirs) = (gradients(false), gradients(true));
    for ((name, a), (_, e)) in ours.iter().zip(&theirs) {
        let scale = e.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(scale > 0.0, "{name}: no gradient");
        let worst = a
            .iter()
            .zip(e)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= 1e-3 * scale,
            "{name}: difference {worst} (largest {scale})"
        );
    }
}

//! Per-token logprobs of a laid-out micro-batch: one forward pass, then the vocabulary-wide
//! logits only for the positions that predict a trained token, a chunk of rows at a time.
//! Differentiable on an autodiff backend; the same code gives plain values on the inner one.

use burn::prelude::*;
use openclaw_engine::kernels::logprob_gather::log_softmax_gather;
use openclaw_engine::Model;

use crate::pack::Layout;

/// Logprobs of one micro-batch.
#[derive(Clone, Debug)]
pub struct TokenLogprobs<B: Backend> {
    /// `[targets]`: the logprob of each target token, in layout order.
    pub logp: Tensor<B, 1>,
    /// `[targets, k]`: the logprobs of the requested top-k ids at each target's position.
    pub topk: Option<Tensor<B, 2>>,
}

/// Runs `model` over `layout` and returns `log_softmax(logits / temperature)` at each target
/// (and at `topk_ids`, `[targets * k]` row-major, when given). `chunk_rows` bounds how many
/// positions' vocabulary-wide logits exist at once. A temperature of 0 counts as 1.
pub fn layout_logprobs<B: Backend>(
    model: &Model<B>,
    layout: &Layout,
    topk_ids: Option<(&[u32], usize)>,
    temperature: f32,
    chunk_rows: usize,
) -> TokenLogprobs<B> {
    let device = model.device();
    let n = layout.rows.len();
    let ids = Tensor::<B, 2, Int>::from_data(
        TensorData::new(layout.ids.clone(), [layout.batch, layout.width]),
        &device,
    );
    let hidden = model.hidden_full(ids);
    let d = hidden.dims()[2];
    let hidden = hidden.reshape([layout.batch * layout.width, d]);
    let scale = if temperature > 0.0 {
        1.0 / temperature
    } else {
        1.0
    };
    let k = topk_ids.map_or(0, |(_, k)| k);
    let chunk = chunk_rows.max(1);
    // Over quantised blocks (QLoRA) the head is decoded once for every chunk.
    let head = model.decoded_head();
    let mut logp_parts = Vec::new();
    let mut topk_parts = Vec::new();
    let mut start = 0;
    while start < n {
        let c = chunk.min(n - start);
        let rows = Tensor::<B, 1, Int>::from_data(
            TensorData::new(layout.rows[start..start + c].to_vec(), [c]),
            &device,
        );
        let logits = model.lm_logits_with(hidden.clone().select(0, rows), head.as_ref());
        // Each row's columns: its target, then its top-k ids.
        let mut index = Vec::with_capacity(c * (1 + k));
        for r in start..start + c {
            index.push(layout.targets[r] as u32);
            if let Some((ids, _)) = topk_ids {
                index.extend_from_slice(&ids[r * k..(r + 1) * k]);
            }
        }
        let picked = log_softmax_gather(logits, &index, 1 + k, scale);
        if k > 0 {
            topk_parts.push(picked.clone().slice([0..c, 1..1 + k]));
        }
        logp_parts.push(picked.slice([0..c, 0..1]).reshape([c]));
        start += c;
    }
    let logp = if logp_parts.is_empty() {
        Tensor::zeros([0], &device)
    } else {
        Tensor::cat(logp_parts, 0)
    };
    let topk = topk_ids.map(|(_, k)| {
        if topk_parts.is_empty() {
            Tensor::zeros([0, k], &device)
        } else {
            Tensor::cat(topk_parts, 0)
        }
    });
    TokenLogprobs { logp, topk }
}

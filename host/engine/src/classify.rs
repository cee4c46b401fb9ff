//! Sequence classification (a PRM): the `score` head read at the last non-padding token.

use anyhow::{bail, Result};
use burn::prelude::*;

use crate::model::Model;
use crate::weights::to_f32_vec;

/// Index of the token whose hidden state is classified, chosen like transformers does: the
/// rightmost token that is not the padding id (0 when every token is padding), or the last token
/// when the model has no padding id.
pub fn classified_position(ids: &[u32], pad_token_id: Option<u32>) -> usize {
    match pad_token_id {
        Some(pad) => ids.iter().rposition(|&t| t != pad).unwrap_or(0),
        None => ids.len().saturating_sub(1),
    }
}

/// Classification logits `[num_labels]` of each sequence, computed in one batched forward pass.
pub fn classify<B: Backend>(model: &Model<B>, sequences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
    let cfg = &model.config;
    if model.score.is_none() {
        bail!("{} has no classification head", cfg.architecture.name());
    }
    if sequences.is_empty() {
        return Ok(Vec::new());
    }
    for (i, s) in sequences.iter().enumerate() {
        if s.is_empty() {
            bail!("classify: sequence {i} is empty");
        }
        if s.len() > cfg.max_position_embeddings {
            bail!(
                "classify: sequence {i} has {} tokens, the model's context is {}",
                s.len(),
                cfg.max_position_embeddings
            );
        }
        if let Some(&t) = s.iter().find(|&&t| t as usize >= cfg.vocab_size) {
            bail!(
                "classify: token id {t} in sequence {i} is outside the vocabulary ({})",
                cfg.vocab_size
            );
        }
    }
    let device = model.device();
    let n = sequences.len();
    let width = sequences.iter().map(|s| s.len()).max().expect("non-empty");
    let mut ids = vec![cfg.pad_token_id.unwrap_or(0) as i64; n * width];
    let mut rows = Vec::with_capacity(n);
    for (r, s) in sequences.iter().enumerate() {
        for (j, &t) in s.iter().enumerate() {
            ids[r * width + j] = t as i64;
        }
        rows.push((r * width + classified_position(s, cfg.pad_token_id)) as i64);
    }
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [n, width]), &device);
    let hidden = model.hidden_full(tokens);
    let d = hidden.dims()[2];
    let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [n]), &device);
    let logits = to_f32_vec(model.score_logits(hidden.reshape([n * width, d]).select(0, idx))?);
    Ok(logits
        .chunks_exact(cfg.num_labels)
        .map(|c| c.to_vec())
        .collect())
}

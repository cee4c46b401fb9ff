//! Scoring: logprobs of given response tokens under a given prompt, batched, with the same
//! temperature / top-k / top-p processing as generation, plus a differentiable per-token
//! logprob for training.

use anyhow::{bail, Result};
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use rayon::prelude::*;

use crate::generate::sampling::{Distribution, SamplingParams};
use crate::model::Model;
use crate::weights::to_f32_vec;

/// One response to score under one prompt.
#[derive(Clone, Debug)]
pub struct ScoreRequest {
    /// Prompt token ids (at least one: the first response token is predicted from the last prompt position).
    pub prompt: Vec<u32>,
    /// Response token ids to score.
    pub response: Vec<u32>,
    /// The processing the logprobs are taken under (use the generation's to reproduce its logprobs).
    pub sampling: SamplingParams,
    /// Also return this many most likely tokens with their logprobs at each response position.
    pub top_k: usize,
}

impl ScoreRequest {
    /// Plain temperature-1 logprobs, no top-k list.
    pub fn new(prompt: Vec<u32>, response: Vec<u32>) -> Self {
        ScoreRequest {
            prompt,
            response,
            sampling: SamplingParams::default(),
            top_k: 0,
        }
    }
}

/// Logprobs of one response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScoreResult {
    /// `logprobs[i]` is the logprob of `response[i]` at the position that predicts it.
    pub logprobs: Vec<f32>,
    /// Per response position, the `top_k` most likely `(token, logprob)`, most likely first
    /// (empty when `top_k` is 0).
    pub top_logprobs: Vec<Vec<(u32, f32)>>,
}

/// Memory bounds of a scoring call.
#[derive(Clone, Debug)]
pub struct ScoreOptions {
    /// Positions whose vocabulary-wide logits are materialised at once.
    pub chunk_positions: usize,
    /// Most padded tokens in one forward pass (requests are split into micro-batches).
    pub max_batch_tokens: usize,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions {
            chunk_positions: 128,
            max_batch_tokens: 16_384,
        }
    }
}

/// Scores every request; results come back in request order.
pub fn score<B: Backend>(
    model: &Model<B>,
    requests: &[ScoreRequest],
    opts: &ScoreOptions,
) -> Result<Vec<ScoreResult>> {
    let cfg = &model.config;
    if model.score.is_some() {
        bail!(
            "{} has no language-model head to score with",
            cfg.architecture.name()
        );
    }
    for (i, r) in requests.iter().enumerate() {
        if r.prompt.is_empty() {
            bail!("score request {i}: the prompt is empty");
        }
        let len = r.prompt.len() + r.response.len();
        if len > cfg.max_position_embeddings {
            bail!(
                "score request {i}: {len} tokens exceed the model's context of {}",
                cfg.max_position_embeddings
            );
        }
        if let Some(&t) = r
            .prompt
            .iter()
            .chain(&r.response)
            .find(|&&t| t as usize >= cfg.vocab_size)
        {
            bail!(
                "score request {i}: token id {t} is outside the vocabulary ({})",
                cfg.vocab_size
            );
        }
        r.sampling
            .validate()
            .map_err(|e| anyhow::anyhow!("score request {i}: {e}"))?;
    }
    let mut results = vec![ScoreResult::default(); requests.len()];
    let mut start = 0;
    while start < requests.len() {
        // Grow the micro-batch while its padded size fits.
        let mut end = start + 1;
        let mut width = requests[start].prompt.len() + requests[start].response.len();
        while end < requests.len() {
            let w = width.max(requests[end].prompt.len() + requests[end].response.len());
            if w * (end - start + 1) > opts.max_batch_tokens {
                break;
            }
            width = w;
            end += 1;
        }
        score_batch(
            model,
            &requests[start..end],
            &mut results[start..end],
            width,
            opts.chunk_positions.max(1),
        );
        start = end;
    }
    Ok(results)
}

fn score_batch<B: Backend>(
    model: &Model<B>,
    reqs: &[ScoreRequest],
    out: &mut [ScoreResult],
    width: usize,
    chunk: usize,
) {
    let device = model.device();
    let n = reqs.len();
    let mut ids = vec![0i64; n * width];
    // (request, response index, flat row of the position that predicts it)
    let mut wanted = Vec::new();
    for (r, req) in reqs.iter().enumerate() {
        for (j, &t) in req.prompt.iter().chain(&req.response).enumerate() {
            ids[r * width + j] = t as i64;
        }
        for i in 0..req.response.len() {
            wanted.push((r, i, r * width + req.prompt.len() + i - 1));
        }
        out[r].logprobs = Vec::with_capacity(req.response.len());
    }
    if wanted.is_empty() {
        return;
    }
    // Right padding: causal attention keeps the padding after every real position.
    let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [n, width]), &device);
    let hidden = model.hidden_full(tokens);
    let d = hidden.dims()[2];
    let hidden = hidden.reshape([n * width, d]);
    let vocab = model.config.vocab_size;
    for part in wanted.chunks(chunk) {
        let rows: Vec<i64> = part.iter().map(|w| w.2 as i64).collect();
        let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [part.len()]), &device);
        let logits = to_f32_vec(model.lm_logits(hidden.clone().select(0, idx)));
        // Each row's distribution is a few passes over the vocabulary: the rows go over the
        // rayon pool (on one thread they were a third of a scoring call of a small model).
        let scored: Vec<_> = part
            .par_iter()
            .zip(logits.par_chunks(vocab))
            .map(|(&(r, i, _), row)| {
                let req = &reqs[r];
                let dist = Distribution::new(row, &req.sampling);
                let top = (req.top_k > 0).then(|| dist.top(row, req.top_k));
                (dist.logprob(row, req.response[i]), top)
            })
            .collect();
        for (&(r, _, _), (logprob, top)) in part.iter().zip(scored) {
            out[r].logprobs.push(logprob);
            if let Some(top) = top {
                out[r].top_logprobs.push(top);
            }
        }
    }
}

/// Differentiable logprobs: `out[b, t] = log_softmax(logits[b, t] / temperature)[targets[b, t]]`
/// where `logits[b, t]` is the model's prediction after reading `ids[b, ..=t]`. A temperature of
/// 0 counts as 1, matching what greedy generation records. Runs on any backend, including
/// `Autodiff<_>`; the vocabulary-wide logits are built `chunk` positions at a time.
pub fn token_logprobs<B: Backend>(
    model: &Model<B>,
    ids: Tensor<B, 2, Int>,
    targets: Tensor<B, 2, Int>,
    temperature: f32,
    chunk: usize,
) -> Tensor<B, 2> {
    let [b, s] = ids.dims();
    let hidden = model.hidden_full(ids);
    let d = hidden.dims()[2];
    let inv_t = if temperature > 0.0 {
        1.0 / temperature
    } else {
        1.0
    };
    let chunk = chunk.max(1);
    let mut parts = Vec::new();
    let mut t0 = 0;
    while t0 < s {
        let c = chunk.min(s - t0);
        let h = hidden.clone().narrow(1, t0, c).reshape([b * c, d]);
        let logits = model.lm_logits(h);
        let logits = if inv_t != 1.0 { logits * inv_t } else { logits };
        let tgt = targets.clone().narrow(1, t0, c).reshape([b * c, 1]);
        parts.push(log_softmax(logits, 1).gather(1, tgt).reshape([b, c]));
        t0 += c;
    }
    Tensor::cat(parts, 1)
}

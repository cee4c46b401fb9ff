//! Several sequences decoded together, one token each per [`DecodeBatch::step`].
//!
//! Prompts of different lengths are right-padded into one prefill; the padding slots stay in
//! the cache as holes that a key mask hides from every later query, and each sequence keeps its
//! own RoPE positions, so a sequence computes what it would compute alone. Finished sequences
//! leave the batch (their cache rows are dropped) while the others go on.
//!
//! Sequences may each take a LoRA adapter over the shared base ([`DecodeBatch::with_adapters`]):
//! every forward pass then runs on a view that gives each row its own adapter
//! ([`crate::adapters`]), so sequences of different adapters share every step.

use std::sync::Arc;

use anyhow::{bail, Result};
use burn::prelude::*;
use rayon::prelude::*;

use super::kv_cache::KvCache;
use super::prefix_cache::{AdapterTag, PrefixCache, PrefixHit};
use super::sampling::Distribution;
use super::{
    Allowed, Constraint, ContextLengthExceeded, Detokenizer, FinishReason, GenerateRequest,
    Generation, StopMatch,
};
use crate::adapters::ServedAdapter;
use crate::model::attention::AttnContext;
use crate::model::attention::LayerCache;
use crate::model::Model;
use crate::publish::Versioned;
use crate::rng::Rng;
use crate::weights::to_f32_vec;

/// One sampled token of one sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenEvent {
    /// Index of the sequence in the request list.
    pub index: usize,
    /// The sampled token.
    pub token: u32,
    /// Its logprob under the distribution it was drawn from.
    pub logprob: f32,
    /// Set when this token ended the sequence.
    pub finish: Option<FinishReason>,
    /// The stop token or string this token completed, if that is what ended the sequence. The
    /// engine is the one place stop strings are matched; text stages only cut where it says.
    pub stop: Option<StopMatch>,
    /// The request's `top_logprobs` most likely tokens at this step with their logprobs, most
    /// likely first (empty when it asked for none).
    pub top: Vec<(u32, f32)>,
}

#[derive(Debug)]
struct Seq {
    req: GenerateRequest,
    rng: Rng,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    finish: Option<(FinishReason, Option<StopMatch>)>,
    /// Tokens to decode when looking for stop strings (enough to span the longest one).
    stop_window: usize,
    /// The request's grammar as it stands, and the tokens it allows next.
    grammar: Option<(Box<dyn Constraint>, Allowed)>,
    /// Its adapter, by index in the batch's list.
    adapter: Option<usize>,
}

/// The tokens `c` allows next, an empty set being an error.
fn next_allowed(c: &mut dyn Constraint) -> Result<Allowed> {
    match c.allowed()? {
        Allowed::Only(ids) if ids.is_empty() => bail!("the grammar allows no token here"),
        a => Ok(a),
    }
}

/// A group of sequences decoded together on one fixed set of weights.
pub struct DecodeBatch<B: Backend> {
    weights: Arc<Versioned<Model<B>>>,
    detokenizer: Option<Arc<dyn Detokenizer>>,
    device: B::Device,
    seqs: Vec<Seq>,
    /// Sequence index of each cache row.
    rows: Vec<usize>,
    /// Width of the prefill: row r's slots `prompt_len..padded` are holes.
    padded: usize,
    cache: KvCache<B>,
    /// Next-token logits of each row.
    logits: Vec<Vec<f32>>,
    /// The adapters the sequences take (each once).
    adapters: Vec<Arc<ServedAdapter<B>>>,
    /// The view serving the live rows' adapters, for the rows it was made for.
    view: Option<(Vec<usize>, Model<B>)>,
}

impl<B: Backend> std::fmt::Debug for DecodeBatch<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeBatch")
            .field("weight_version", &self.weights.version)
            .field("sequences", &self.seqs.len())
            .field("live", &self.rows.len())
            .field("cached_positions", &self.cache.len())
            .finish()
    }
}

impl<B: Backend> DecodeBatch<B> {
    /// Validates the requests and runs the prefill of every prompt in one forward pass.
    pub fn new(
        weights: Arc<Versioned<Model<B>>>,
        requests: Vec<GenerateRequest>,
        detokenizer: Option<Arc<dyn Detokenizer>>,
    ) -> Result<Self> {
        Self::with_prefix_cache(weights, requests, detokenizer, None)
    }

    /// [`DecodeBatch::new`], reusing the keys and values of prompt prefixes `prefixes` holds
    /// (each prompt with a cached prefix is then prefilled on its own, from where the prefix
    /// ends) and keeping every prompt's for later requests.
    pub fn with_prefix_cache(
        weights: Arc<Versioned<Model<B>>>,
        requests: Vec<GenerateRequest>,
        detokenizer: Option<Arc<dyn Detokenizer>>,
        prefixes: Option<&mut PrefixCache<B>>,
    ) -> Result<Self> {
        let none = vec![None; requests.len()];
        Self::with_adapters(weights, requests, none, detokenizer, prefixes)
    }

    /// [`DecodeBatch::with_prefix_cache`] with request `i` served with `adapters[i]` over the
    /// base `weights` (which must carry no adapter of their own). A prompt prefilled under an
    /// adapter is cached for that adapter's version only.
    pub fn with_adapters(
        weights: Arc<Versioned<Model<B>>>,
        requests: Vec<GenerateRequest>,
        adapters: Vec<Option<Arc<ServedAdapter<B>>>>,
        detokenizer: Option<Arc<dyn Detokenizer>>,
        prefixes: Option<&mut PrefixCache<B>>,
    ) -> Result<Self> {
        if adapters.len() != requests.len() {
            bail!(
                "{} adapters for {} requests",
                adapters.len(),
                requests.len()
            );
        }
        let mut distinct: Vec<Arc<ServedAdapter<B>>> = Vec::new();
        let taken: Vec<Option<usize>> = adapters
            .into_iter()
            .map(|a| {
                a.map(|a| match distinct.iter().position(|d| Arc::ptr_eq(d, &a)) {
                    Some(i) => i,
                    None => {
                        distinct.push(a);
                        distinct.len() - 1
                    }
                })
            })
            .collect();
        if !distinct.is_empty() && crate::lora::has_adapters(&weights.model) {
            bail!("adapters are served over a base without adapters of its own");
        }
        let model = &weights.model;
        let cfg = &model.config;
        if model.score.is_some() {
            bail!(
                "{} cannot generate text (it is a classifier)",
                cfg.architecture.name()
            );
        }
        for (i, r) in requests.iter().enumerate() {
            if r.prompt.is_empty() {
                bail!("request {i}: the prompt is empty");
            }
            if let Some(&t) = r.prompt.iter().find(|&&t| t as usize >= cfg.vocab_size) {
                bail!(
                    "request {i}: token id {t} is outside the vocabulary ({})",
                    cfg.vocab_size
                );
            }
            if r.prompt.len() >= cfg.max_position_embeddings {
                return Err(ContextLengthExceeded {
                    request: i,
                    prompt_tokens: r.prompt.len(),
                    context: cfg.max_position_embeddings,
                }
                .into());
            }
            r.sampling
                .validate()
                .map_err(|e| anyhow::anyhow!("request {i}: {e}"))?;
            if !r.stop_strings.is_empty() && detokenizer.is_none() {
                bail!("request {i}: stop strings need a detokenizer");
            }
        }
        let mut grammars = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            grammars.push(match &r.constraint {
                Some(f) => {
                    let mut c = f
                        .start()
                        .map_err(|e| anyhow::anyhow!("request {i}: {e:#}"))?;
                    let a = next_allowed(c.as_mut())
                        .map_err(|e| anyhow::anyhow!("request {i}: {e:#}"))?;
                    if let Allowed::Only(ids) = &a {
                        if let Some(&t) = ids.iter().find(|&&t| t as usize >= cfg.vocab_size) {
                            bail!(
                                "request {i}: the grammar allows token {t}, outside the vocabulary"
                            );
                        }
                    }
                    Some((c, a))
                }
                None => None,
            });
        }
        let device = model.device();
        let seqs: Vec<Seq> = requests
            .into_iter()
            .zip(grammars)
            .zip(taken)
            .map(|((req, grammar), adapter)| {
                let longest = req.stop_strings.iter().map(|s| s.len()).max().unwrap_or(0);
                let finish = (req.max_tokens == 0).then_some((FinishReason::Length, None));
                Seq {
                    rng: Rng::new(req.seed),
                    req,
                    tokens: Vec::new(),
                    logprobs: Vec::new(),
                    finish,
                    // A token decodes to at least one byte except for rare empty pieces: leave margin.
                    stop_window: 2 * longest + 4,
                    grammar,
                    adapter,
                }
            })
            .collect();
        let rows: Vec<usize> = (0..seqs.len())
            .filter(|&i| seqs[i].finish.is_none())
            .collect();
        let mut batch = DecodeBatch {
            cache: model.new_cache(),
            weights,
            detokenizer,
            device,
            seqs,
            rows,
            padded: 0,
            logits: Vec::new(),
            adapters: distinct,
            view: None,
        };
        match prefixes.filter(|p| p.enabled()) {
            Some(p) => batch.prefill_with(p),
            None => batch.prefill(),
        }
        Ok(batch)
    }

    /// The prefill through the prefix cache: rows with a cached prefix compute only the rest of
    /// their prompt; then every row's prompt is kept for later requests.
    fn prefill_with(&mut self, prefixes: &mut PrefixCache<B>) {
        let version = self.weights.version;
        let hits: Vec<Option<PrefixHit<B>>> = self
            .rows
            .iter()
            .map(|&i| prefixes.lookup_for(version, self.tag(i), &self.seqs[i].req.prompt))
            .collect();
        if hits.iter().any(Option::is_some) {
            self.prefill_rows(hits);
        } else {
            self.prefill();
        }
        for (r, &i) in self.rows.iter().enumerate() {
            let tag = self.tag(i);
            prefixes.insert_for(version, tag, &self.seqs[i].req.prompt, &self.cache, r);
        }
    }

    /// Sequence `i`'s adapter, as the prefix cache keys it.
    fn tag(&self, i: usize) -> Option<AdapterTag> {
        self.seqs[i]
            .adapter
            .map(|a| (self.adapters[a].name.clone(), self.adapters[a].version))
    }

    /// The view that serves sequences `seqs` in a forward pass (rows in that order) with their
    /// adapters; `None` when none takes one (the base serves them).
    fn view_for(&self, seqs: &[usize]) -> Option<Model<B>> {
        let taken: Vec<Option<usize>> = seqs.iter().map(|&i| self.seqs[i].adapter).collect();
        if taken.iter().all(Option::is_none) {
            return None;
        }
        let view = crate::adapters::rows_view(&self.weights.model, &self.adapters, &taken)
            .expect("adapters were checked against the base when the batch was made");
        Some(view)
    }

    /// Prefills each row on its own, from its cached prefix when it has one, then lays the rows
    /// out as [`prefill`](Self::prefill) does (right-padded to the longest prompt).
    fn prefill_rows(&mut self, hits: Vec<Option<PrefixHit<B>>>) {
        let mut caches = Vec::with_capacity(self.rows.len());
        let mut logits = Vec::with_capacity(self.rows.len());
        let weights = self.weights.clone();
        for (&i, hit) in self.rows.iter().zip(hits) {
            let view = self.view_for(&[i]);
            let model = view.as_ref().unwrap_or(&weights.model);
            let prompt = &self.seqs[i].req.prompt;
            let (mut cache, start) = match hit {
                Some(h) => (h.cache, h.len),
                None => (model.new_cache(), 0),
            };
            let new: Vec<i64> = prompt[start..].iter().map(|&t| t as i64).collect();
            let s = new.len();
            let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(new, [1, s]), &self.device);
            let positions: Vec<usize> = (start..prompt.len()).collect();
            let ctx = AttnContext {
                rope: model.rope_tables(&positions, 1, s, &self.device),
                key_mask: None,
            };
            let hidden = model.hidden(tokens, &ctx, Some(&mut cache));
            let d = hidden.dims()[2];
            let last = hidden.slice([0..1, s - 1..s, 0..d]).reshape([1, d]);
            logits.push(to_f32_vec(model.lm_logits(last)));
            caches.push(cache);
        }
        let width = caches.iter().map(KvCache::len).max().unwrap_or(0);
        let n_layers = caches.first().map_or(0, |c| c.layers().len());
        let pad = |t: &Tensor<B, 4>| {
            let [b, h, len, hd] = t.dims();
            if len == width {
                t.clone()
            } else {
                let zeros = Tensor::<B, 4>::zeros([b, h, width - len, hd], &t.device());
                Tensor::cat(vec![t.clone(), zeros], 2)
            }
        };
        let layers = (0..n_layers)
            .map(|l| {
                let (ks, vs): (Vec<_>, Vec<_>) = caches
                    .iter()
                    .map(|c| {
                        let (k, v) = c.layers()[l].tensors().expect("prefilled");
                        (pad(&k), pad(&v))
                    })
                    .unzip();
                LayerCache::from_tensors(Tensor::cat(ks, 0), Tensor::cat(vs, 0))
            })
            .collect();
        self.cache = KvCache::from_layers(layers, width);
        self.cache.reserve(self.positions_to_reach(width));
        self.padded = width;
        self.logits = logits;
    }

    fn prefill(&mut self) {
        if self.rows.is_empty() {
            return;
        }
        let weights = self.weights.clone();
        let view = self.view_for(&self.rows);
        let model = view.as_ref().unwrap_or(&weights.model);
        let n = self.rows.len();
        let lens: Vec<usize> = self
            .rows
            .iter()
            .map(|&i| self.seqs[i].req.prompt.len())
            .collect();
        let width = *lens.iter().max().expect("rows");
        let mut ids = vec![0i64; n * width];
        for (r, &i) in self.rows.iter().enumerate() {
            for (j, &t) in self.seqs[i].req.prompt.iter().enumerate() {
                ids[r * width + j] = t as i64;
            }
        }
        let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [n, width]), &self.device);
        // Right padding: every real token precedes the padding of its row, so the causal mask
        // alone keeps padding out of real positions.
        let ctx = AttnContext {
            rope: model.rope_from_zero(n, width, &self.device),
            key_mask: None,
        };
        self.cache.reserve(self.positions_to_reach(width));
        let hidden = model.hidden(tokens, &ctx, Some(&mut self.cache));
        let d = hidden.dims()[2];
        let last: Vec<i64> = lens
            .iter()
            .enumerate()
            .map(|(r, &l)| (r * width + l - 1) as i64)
            .collect();
        let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(last, [n]), &self.device);
        let h = hidden.reshape([n * width, d]).select(0, idx);
        self.padded = width;
        self.logits = split_rows(to_f32_vec(model.lm_logits(h)), n);
    }

    /// Cache positions the batch reaches when its longest request runs to `max_tokens` (or
    /// the context's end), after a prefill `width` wide.
    fn positions_to_reach(&self, width: usize) -> usize {
        let max_pos = self.weights.model.config.max_position_embeddings;
        let longest = self
            .rows
            .iter()
            .map(|&i| {
                let r = &self.seqs[i].req;
                r.max_tokens.min(max_pos.saturating_sub(r.prompt.len()))
            })
            .max()
            .unwrap_or(0);
        width + longest
    }

    /// The version of the weights every token of this batch comes from.
    pub fn weight_version(&self) -> u64 {
        self.weights.version
    }

    /// Whether every sequence has finished.
    pub fn is_finished(&self) -> bool {
        self.rows.is_empty()
    }

    /// Number of sequences still generating.
    pub fn live(&self) -> usize {
        self.rows.len()
    }

    /// Tokens generated so far by sequence `index`.
    pub fn tokens(&self, index: usize) -> &[u32] {
        &self.seqs[index].tokens
    }

    /// Samples one token for every live sequence, then (if any is still live) runs the forward
    /// pass that prepares the next step. Returns the new tokens in row order.
    pub fn step(&mut self) -> Vec<TokenEvent> {
        let mut events = Vec::with_capacity(self.rows.len());
        let max_pos = self.weights.model.config.max_position_embeddings;
        // Each row's distribution (a pass over the whole vocabulary) on the pool; the draws
        // after it stay in row order.
        let dists: Vec<Distribution> = {
            // (Each row's sampling settings and grammar mask, taken out first: a grammar's
            // state need not be shared between threads.)
            let rows: Vec<(&super::SamplingParams, Option<&[u32]>)> = self
                .rows
                .iter()
                .map(|&i| {
                    let s = &self.seqs[i];
                    let mask = match &s.grammar {
                        Some((_, Allowed::Only(ids))) => Some(ids.as_slice()),
                        _ => None,
                    };
                    (&s.req.sampling, mask)
                })
                .collect();
            rows.par_iter()
                .zip(&self.logits)
                .map(|(&(sampling, mask), logits)| match mask {
                    Some(ids) => Distribution::masked(logits, sampling, ids),
                    None => Distribution::new(logits, sampling),
                })
                .collect()
        };
        for ((r, &i), dist) in self.rows.iter().enumerate().zip(dists) {
            let logits = &self.logits[r];
            let seq = &mut self.seqs[i];
            let (token, logprob) = dist.sample(logits, &mut seq.rng);
            let top = if seq.req.top_logprobs > 0 {
                dist.top(logits, seq.req.top_logprobs)
            } else {
                Vec::new()
            };
            seq.tokens.push(token);
            seq.logprobs.push(logprob);
            seq.finish = stop_check(seq, self.detokenizer.as_deref()).or_else(|| {
                let full = seq.tokens.len() >= seq.req.max_tokens
                    || seq.req.prompt.len() + seq.tokens.len() >= max_pos;
                full.then_some((FinishReason::Length, None))
            });
            if let (Some((c, allowed)), None) = (&mut seq.grammar, &seq.finish) {
                // The next step's tokens are found now, so a grammar that cannot go on ends
                // the sequence with the token that led it there.
                match c.accept(token).and_then(|()| next_allowed(c.as_mut())) {
                    Ok(a) => *allowed = a,
                    Err(e) => {
                        seq.finish = Some((
                            FinishReason::Stop,
                            Some(StopMatch::Grammar(format!("{e:#}"))),
                        ))
                    }
                }
            }
            events.push(TokenEvent {
                index: i,
                token,
                logprob,
                finish: seq.finish.as_ref().map(|f| f.0),
                stop: seq.finish.as_ref().and_then(|f| f.1.clone()),
                top,
            });
        }

        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&r| self.seqs[self.rows[r]].finish.is_none())
            .collect();
        if keep.len() != self.rows.len() {
            self.cache.retain_rows(&keep);
            self.rows = keep.iter().map(|&r| self.rows[r]).collect();
        }
        if self.rows.is_empty() {
            self.logits.clear();
        } else {
            self.decode_forward();
        }
        events
    }

    /// Feeds each live sequence's last token and stores the next-token logits.
    fn decode_forward(&mut self) {
        // The view is made again only when rows left the batch.
        if self.seqs_have_adapters() && self.view.as_ref().is_none_or(|(r, _)| *r != self.rows) {
            self.view = self.view_for(&self.rows).map(|v| (self.rows.clone(), v));
        }
        let model = match &self.view {
            Some((_, v)) if self.seqs_have_adapters() => v,
            _ => &self.weights.model,
        };
        let n = self.rows.len();
        let seqs: Vec<&Seq> = self.rows.iter().map(|&i| &self.seqs[i]).collect();
        let ids: Vec<i64> = seqs
            .iter()
            .map(|s| *s.tokens.last().expect("sampled") as i64)
            .collect();
        let positions: Vec<usize> = seqs
            .iter()
            .map(|s| s.req.prompt.len() + s.tokens.len() - 1)
            .collect();
        let keys = self.cache.len() + 1;
        let key_mask = if seqs.iter().any(|s| s.req.prompt.len() < self.padded) {
            let mut m = vec![false; n * keys];
            for (r, s) in seqs.iter().enumerate() {
                for j in s.req.prompt.len()..self.padded {
                    m[r * keys + j] = true;
                }
            }
            Some(Tensor::<B, 4, Bool>::from_data(
                TensorData::new(m, [n, 1, 1, keys]),
                &self.device,
            ))
        } else {
            None
        };
        let tokens = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [n, 1]), &self.device);
        let ctx = AttnContext {
            rope: model.rope_tables(&positions, n, 1, &self.device),
            key_mask,
        };
        let cache = &mut self.cache;
        // SAFETY: a forward pass and a copy of its logits: nothing is left on the pool's thread
        // and no thread-local of this one is read.
        let logits = unsafe {
            crate::kernels::small_matmul::decode_scope(|| {
                let hidden = model.hidden(tokens, &ctx, Some(cache));
                let d = hidden.dims()[2];
                to_f32_vec(model.lm_logits(hidden.reshape([n, d])))
            })
        };
        self.logits = split_rows(logits, n);
    }

    /// Whether any live sequence takes an adapter.
    fn seqs_have_adapters(&self) -> bool {
        self.rows.iter().any(|&i| self.seqs[i].adapter.is_some())
    }

    /// The finished (or, if called early, partial) sequences in request order.
    pub fn into_generations(self) -> Vec<Generation> {
        let version = self.weights.version;
        self.seqs
            .into_iter()
            .map(|s| {
                let (finish_reason, stop) = s.finish.unwrap_or((FinishReason::Length, None));
                Generation {
                    prompt_ids: s.req.prompt,
                    token_ids: s.tokens,
                    logprobs: s.logprobs,
                    finish_reason,
                    stop,
                    weight_version: version,
                }
            })
            .collect()
    }
}

fn split_rows(flat: Vec<f32>, n: usize) -> Vec<Vec<f32>> {
    let v = flat.len() / n;
    flat.chunks_exact(v).map(|c| c.to_vec()).collect()
}

fn stop_check(
    seq: &Seq,
    detok: Option<&dyn Detokenizer>,
) -> Option<(FinishReason, Option<StopMatch>)> {
    let last = *seq.tokens.last()?;
    if seq.req.stop_token_ids.contains(&last) {
        return Some((FinishReason::Stop, Some(StopMatch::Token(last))));
    }
    if let (Some(d), false) = (detok, seq.req.stop_strings.is_empty()) {
        // Any match must involve the newest token (older ones were checked before), so decoding
        // a tail window long enough for the longest stop string suffices.
        let from = seq.tokens.len().saturating_sub(seq.stop_window);
        let text = d.decode(&seq.tokens[from..]);
        if let Some(s) = seq
            .req
            .stop_strings
            .iter()
            .find(|s| !s.is_empty() && text.contains(s.as_str()))
        {
            return Some((FinishReason::Stop, Some(StopMatch::String(s.clone()))));
        }
    }
    None
}

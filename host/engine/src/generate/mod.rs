//! Generation with exact tokens: batched decoding with per-sequence KV caches, sampling, stop
//! conditions, and the logprob of every sampled token.

pub mod batch;
pub mod kv_cache;
pub mod prefix_cache;
pub mod sampling;

use std::sync::Arc;

use anyhow::Result;
use burn::prelude::*;

pub use batch::{DecodeBatch, TokenEvent};
pub use prefix_cache::{PrefixCache, PrefixCacheOptions, PrefixCacheStats};
pub use sampling::{Distribution, SamplingParams};

use crate::model::Model;
use crate::publish::Versioned;

/// Turns token ids back into text, for stop strings (implemented by the tokenizer crate).
pub trait Detokenizer: Send + Sync {
    /// The text of `ids`.
    fn decode(&self, ids: &[u32]) -> String;
}

/// A prompt that leaves no room in the model's context (the server answers
/// `context_length_exceeded`); find it with `err.downcast_ref::<ContextLengthExceeded>()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextLengthExceeded {
    /// Index of the request in its batch.
    pub request: usize,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// The model's context length.
    pub context: usize,
}

impl std::fmt::Display for ContextLengthExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request {}: the prompt has {} tokens but the model's context is {}",
            self.request, self.prompt_tokens, self.context
        )
    }
}

impl std::error::Error for ContextLengthExceeded {}

/// One sequence to generate.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// Temperature / top-k / top-p.
    pub sampling: SamplingParams,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Tokens that end the sequence (kept as its last token).
    pub stop_token_ids: Vec<u32>,
    /// Strings that end the sequence once the generated text contains one (needs a detokenizer).
    pub stop_strings: Vec<String>,
    /// Seed of this sequence's own random stream.
    pub seed: u64,
    /// How many of the most likely tokens (with their logprobs) each step reports beside the
    /// sampled one (0: none).
    pub top_logprobs: usize,
    /// A grammar the sequence must follow (structured outputs), started afresh for each try.
    pub constraint: Option<Arc<dyn ConstraintFactory>>,
    /// The LoRA adapter the sequence is served with, by name (the generation thread finds it
    /// in its [`crate::adapters::AdapterStore`]); none: the base.
    pub adapter: Option<Arc<str>>,
}

impl GenerateRequest {
    /// A request with default sampling, no stops, seed 0.
    pub fn new(prompt: Vec<u32>, max_tokens: usize) -> Self {
        GenerateRequest {
            prompt,
            sampling: SamplingParams::default(),
            max_tokens,
            stop_token_ids: Vec::new(),
            stop_strings: Vec::new(),
            seed: 0,
            top_logprobs: 0,
            constraint: None,
            adapter: None,
        }
    }
}

/// The tokens a [`Constraint`] allows at the next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// Every token: the sampling settings alone decide.
    Any,
    /// Only these token ids (ascending, within the vocabulary, at least one).
    Only(Vec<u32>),
}

/// A grammar one sequence follows, step by step: it narrows each step's distribution to the
/// tokens it allows and is told each token sampled. Implemented outside the engine (the grammar
/// crate), which knows what the tokens spell.
pub trait Constraint: Send + std::fmt::Debug {
    /// The tokens allowed next. Once the grammar is complete this is the end-of-sequence
    /// tokens, so the sequence ends as it would unconstrained. An error ends the sequence.
    fn allowed(&mut self) -> Result<Allowed>;
    /// Advances past the sampled `token` (one of those last allowed).
    fn accept(&mut self, token: u32) -> Result<()>;
}

/// Starts a fresh [`Constraint`] for each sequence of a request (a request is cloned and
/// retried, so it carries the recipe rather than the running state).
pub trait ConstraintFactory: Send + Sync + std::fmt::Debug {
    /// A constraint at the start of the grammar.
    fn start(&self) -> Result<Box<dyn Constraint>>;
}

/// Why a sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// A stop token or stop string.
    Stop,
    /// `max_tokens` or the model's context length.
    Length,
}

impl FinishReason {
    /// The OpenAI spelling (`stop` / `length`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// What ended a sequence with [`FinishReason::Stop`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopMatch {
    /// This stop token was sampled.
    Token(u32),
    /// The generated text came to contain this stop string.
    String(String),
    /// The sequence's grammar could not go on (its error): the text so far is kept, and it
    /// does not complete the grammar.
    Grammar(String),
}

impl StopMatch {
    /// The text a reply shows when this ended it: everything before the first occurrence of a
    /// stop string, all of it for a stop token. The engine decided that the string occurred;
    /// this only finds where, so the decision is made once. When the string cannot be found
    /// (the engine decodes a window, and a tokenizer whose pieces depend on context could
    /// disagree) the whole text is kept rather than guessing a cut.
    pub fn visible<'a>(&self, text: &'a str) -> &'a str {
        match self {
            StopMatch::String(s) => text.find(s.as_str()).map_or(text, |cut| &text[..cut]),
            StopMatch::Token(_) | StopMatch::Grammar(_) => text,
        }
    }
}

/// A finished sequence with everything training needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The prompt, exactly as fed to the model.
    pub prompt_ids: Vec<u32>,
    /// Sampled tokens (a stop token, when one ended the sequence, is the last).
    pub token_ids: Vec<u32>,
    /// Logprob of each sampled token under the distribution it was drawn from.
    pub logprobs: Vec<f32>,
    /// Why generation ended.
    pub finish_reason: FinishReason,
    /// The stop token or string that ended it, if any.
    pub stop: Option<StopMatch>,
    /// Version of the weights that produced every token.
    pub weight_version: u64,
}

/// Generates all `requests` together on `weights` and returns them in request order.
pub fn generate<B: Backend>(
    weights: Arc<Versioned<Model<B>>>,
    requests: Vec<GenerateRequest>,
    detokenizer: Option<Arc<dyn Detokenizer>>,
) -> Result<Vec<Generation>> {
    let mut batch = DecodeBatch::new(weights, requests, detokenizer)?;
    while !batch.is_finished() {
        batch.step();
    }
    Ok(batch.into_generations())
}

/// Like [`generate`], but splits the requests into up to `groups` batches decoded on their own
/// threads. On the CPU backend small-batch matmuls use one core, so two groups of 4 sequences
/// finish well before one batch of 8 on two cores. Each sequence owns its random stream and
/// positions, so the tokens do not depend on the grouping. Results are in request order.
pub fn generate_parallel<B: Backend>(
    weights: Arc<Versioned<Model<B>>>,
    requests: Vec<GenerateRequest>,
    detokenizer: Option<Arc<dyn Detokenizer>>,
    groups: usize,
) -> Result<Vec<Generation>> {
    let groups = groups.clamp(1, requests.len().max(1));
    if groups == 1 {
        return generate(weights, requests, detokenizer);
    }
    let per = requests.len().div_ceil(groups);
    let mut chunks: Vec<Vec<GenerateRequest>> = Vec::new();
    let mut it = requests.into_iter().peekable();
    while it.peek().is_some() {
        chunks.push(it.by_ref().take(per).collect());
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (w, d) = (weights.clone(), detokenizer.clone());
                scope.spawn(move || generate(w, chunk, d))
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow::anyhow!("a decode thread panicked"))??;
            out.extend(part);
        }
        Ok(out)
    })
}

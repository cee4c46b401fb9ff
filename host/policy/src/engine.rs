//! A served model: weights (published, swappable), tokenizer, chat template, the generation
//! thread, and the `Policy` service the plugins call.

use super::scheduler::{Scheduler, SchedulerOptions};
use anyhow::Result;
use burn::prelude::Backend;
use openclaw_buffer::messages::{from_abi, to_abi};
use openclaw_chat::{
    ChatMessage, ChatTemplate, OutputParser, ParserOptions, RenderOptions, Tokenizer,
};
use openclaw_engine::adapters::AdapterStore;
use openclaw_engine::{
    score, Detokenizer, GenerateRequest, Model, ModelConfig, Published, SamplingParams,
    ScoreOptions, ScoreRequest,
};
use openclaw_grammar::Grammars;
use openclaw_metrics::Metrics;
use openclaw_plugin_api::host::{Generation as AbiGeneration, PolicyService, TokenScores};
use openclaw_plugin_api::{Message, ScoreTokens, TopKEntries};
use serde_json::Value;
use std::sync::Arc;

/// Text of token ids, for stop strings.
pub struct TokenizerDetok(pub Tokenizer);

impl Detokenizer for TokenizerDetok {
    fn decode(&self, ids: &[u32]) -> String {
        self.0.decode(ids, true).unwrap_or_default()
    }
}

pub use openclaw_model_store::ModelFiles;

/// The ids that end an assistant turn: the tokenizer's eos and ChatML's `<|im_end|>`.
pub fn stop_ids(tokenizer: &Tokenizer) -> Vec<u32> {
    let mut ids: Vec<u32> = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>"]
        .iter()
        .filter_map(|t| tokenizer.token_to_id(t))
        .collect();
    if let Some(eos) = tokenizer.special_tokens().eos.as_ref().and_then(|t| t.id) {
        ids.push(eos);
    }
    ids.sort();
    ids.dedup();
    ids
}

/// A prompt ready for the model.
#[derive(Clone, Debug)]
pub struct Prompt {
    /// The rendered text.
    pub text: String,
    /// Its token ids.
    pub ids: Vec<u32>,
}

/// A served model.
pub struct PolicyEngine<B: Backend> {
    /// The current weights.
    pub weights: Arc<Published<Model<B>>>,
    /// The model's configuration.
    pub config: ModelConfig,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The chat template.
    pub template: ChatTemplate,
    /// Ids that end a turn.
    pub stop_ids: Vec<u32>,
    /// The generation thread.
    pub scheduler: Scheduler,
    /// The LoRA adapters requests may name (`--lora-modules`), served over the base.
    pub adapters: Arc<AdapterStore<B>>,
    detok: Arc<TokenizerDetok>,
    max_token_bytes: std::sync::OnceLock<usize>,
    grammars: std::sync::OnceLock<Result<Arc<Grammars>, String>>,
}

impl<B: Backend> PolicyEngine<B>
where
    Model<B>: Send + Sync,
{
    /// Serves `files` under weight version `version`.
    pub fn start(
        files: ModelFiles<B>,
        version: u64,
        opts: SchedulerOptions,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self::start_with(files, version, opts, metrics, Arc::new(AdapterStore::new()))
    }

    /// [`PolicyEngine::start`] with the LoRA adapters requests may name.
    pub fn start_with(
        files: ModelFiles<B>,
        version: u64,
        opts: SchedulerOptions,
        metrics: Arc<Metrics>,
        adapters: Arc<AdapterStore<B>>,
    ) -> Self {
        let weights = Arc::new(Published::new(files.model, version));
        let detok = Arc::new(TokenizerDetok(files.tokenizer.clone()));
        let scheduler = Scheduler::start(
            weights.clone(),
            adapters.clone(),
            detok.clone(),
            opts,
            metrics,
        );
        PolicyEngine {
            weights,
            adapters,
            stop_ids: stop_ids(&files.tokenizer),
            config: files.config,
            tokenizer: files.tokenizer,
            template: files.template,
            scheduler,
            detok,
            max_token_bytes: std::sync::OnceLock::new(),
            grammars: std::sync::OnceLock::new(),
        }
    }

    /// The model's context length in tokens.
    pub fn context(&self) -> usize {
        self.config.max_position_embeddings
    }

    /// The fewest tokens text of `bytes` bytes can become, when its size alone says more than a
    /// third of the context (below that nothing is proven and nothing is computed). Every token
    /// decodes to at most [`max_token_bytes`](Self::max_token_bytes) bytes, and Unicode
    /// normalisation (NFC) shrinks text by at most a factor of three (Hangul jamo to
    /// syllables), so `bytes / (3 * max)` tokens is a lower bound.
    pub fn tokens_at_least(&self, bytes: usize) -> Option<usize> {
        (bytes >= 3 * self.context()).then(|| bytes / (3 * self.max_token_bytes()))
    }

    /// The most bytes one token of the vocabulary decodes to (computed once, on first use:
    /// decoding the vocabulary takes a moment).
    pub fn max_token_bytes(&self) -> usize {
        *self.max_token_bytes.get_or_init(|| {
            (0..self.tokenizer.vocab_size() as u32)
                .map(|id| self.tokenizer.decode(&[id], false).map_or(0, |t| t.len()))
                .max()
                .unwrap_or(1)
                .max(1)
        })
    }

    /// The grammar engine for structured outputs over this model's tokens (built on first use:
    /// reading every token's bytes takes a moment); an error says why this model has none.
    pub fn grammars(&self) -> Result<Arc<Grammars>, String> {
        self.grammars
            .get_or_init(|| {
                Grammars::new(&self.tokenizer, self.config.vocab_size, &self.stop_ids)
                    .map(Arc::new)
                    .map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    /// Renders OpenAI messages (and tools) with the chat template and tokenizes the result.
    pub fn prompt(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Value>,
        options: &RenderOptions,
    ) -> Result<Prompt> {
        let text = self.template.render(messages, tools, options)?;
        let ids = self.tokenizer.encode(&text, false)?;
        Ok(Prompt { text, ids })
    }

    /// A generation request for `prompt` with the turn's stop tokens.
    pub fn request(
        &self,
        prompt: Vec<u32>,
        sampling: SamplingParams,
        max_tokens: usize,
        stop: Vec<String>,
        seed: u64,
    ) -> GenerateRequest {
        GenerateRequest {
            prompt,
            sampling,
            max_tokens,
            stop_token_ids: self.stop_ids.clone(),
            stop_strings: stop,
            seed,
            top_logprobs: 0,
            constraint: None,
            adapter: None,
        }
    }

    /// The text of generated ids, special tokens left out.
    pub fn text(&self, ids: &[u32]) -> String {
        self.detok.decode(ids)
    }
}

/// Render options that open the assistant's turn, nothing else set.
pub fn generation_prompt() -> RenderOptions {
    RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    }
}

fn sampling(p: &openclaw_plugin_api::SamplingParams) -> SamplingParams {
    SamplingParams {
        temperature: p.temperature,
        top_k: p.top_k as usize,
        top_p: p.top_p,
    }
}

fn message_from(parsed: &openclaw_chat::ParsedMessage) -> Message {
    to_abi(&parsed.to_chat_message())
}

impl<B: Backend> PolicyEngine<B>
where
    Model<B>: Send + Sync,
{
    fn run(
        &self,
        prompt: Vec<u32>,
        prompt_text: &str,
        params: &openclaw_plugin_api::SamplingParams,
        tools: bool,
    ) -> Result<AbiGeneration, String> {
        let seed = params.seed.into_option().unwrap_or_else(rand::random);
        let stops = params.stop.iter().map(|s| s.to_string()).collect();
        let req = self.request(
            prompt,
            sampling(params),
            params.max_tokens.max(1) as usize,
            stops,
            seed,
        );
        let g = self.scheduler.generate_blocking(req)?;
        let all = self.text(&g.token_ids);
        let text = g.stop.as_ref().map_or(&*all, |m| m.visible(&all));
        let mut parser = OutputParser::new(ParserOptions {
            parse_tool_calls: tools,
            ..ParserOptions::for_prompt(prompt_text)
        });
        parser.push(text);
        parser.finish();
        let parsed = parser.message();
        let finish = if !parsed.tool_calls.is_empty() {
            "tool_calls"
        } else {
            g.finish_reason.as_str()
        };
        Ok(AbiGeneration {
            prompt_ids: g.prompt_ids.into(),
            response_ids: g.token_ids.into(),
            logprobs: g.logprobs.into(),
            message: message_from(parsed),
            finish_reason: finish.into(),
            weight_version: g.weight_version,
        })
    }
}

impl<B: Backend> PolicyService for PolicyEngine<B>
where
    Model<B>: Send + Sync,
    B: 'static,
{
    fn generate(
        &self,
        prompt_ids: &[u32],
        params: &openclaw_plugin_api::SamplingParams,
    ) -> Result<AbiGeneration, String> {
        let text = self.text(prompt_ids);
        self.run(prompt_ids.to_vec(), &text, params, false)
    }

    fn chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        params: &openclaw_plugin_api::SamplingParams,
    ) -> Result<AbiGeneration, String> {
        let msgs: Vec<ChatMessage> = messages.iter().map(from_abi).collect();
        let tools: Option<Value> = (!tools_json.trim().is_empty())
            .then(|| serde_json::from_str(tools_json))
            .transpose()
            .map_err(|e| format!("tools are not JSON: {e}"))?;
        let p = self
            .prompt(&msgs, tools.as_ref(), &generation_prompt())
            .map_err(|e| format!("{e:#}"))?;
        self.run(p.ids, &p.text, params, tools.is_some())
    }

    fn score(&self, r: &ScoreTokens) -> Result<TokenScores, String> {
        let weights = self.weights.current();
        let k = r.top_k as usize;
        let req = ScoreRequest {
            prompt: r.prompt_ids.to_vec(),
            response: r.response_ids.to_vec(),
            sampling: SamplingParams::default(),
            top_k: k,
        };
        let mut out = score(&weights.model, &[req], &ScoreOptions::default())
            .map_err(|e| format!("{e:#}"))?;
        let s = out.pop().ok_or("scoring returned nothing")?;
        let topk = (k > 0).then(|| TopKEntries {
            k: k as u32,
            token_ids: s
                .top_logprobs
                .iter()
                .flat_map(|row| row.iter().map(|(t, _)| *t))
                .collect(),
            logprobs: s
                .top_logprobs
                .iter()
                .flat_map(|row| row.iter().map(|(_, l)| *l))
                .collect(),
        });
        Ok(TokenScores {
            logprobs: s.logprobs.into(),
            topk: topk.into(),
        })
    }

    fn render_chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let msgs: Vec<ChatMessage> = messages.iter().map(from_abi).collect();
        let tools: Option<Value> = (!tools_json.trim().is_empty())
            .then(|| serde_json::from_str(tools_json))
            .transpose()
            .map_err(|e| format!("tools are not JSON: {e}"))?;
        self.prompt(
            &msgs,
            tools.as_ref(),
            &RenderOptions {
                add_generation_prompt,
                ..Default::default()
            },
        )
        .map(|p| p.text)
        .map_err(|e| format!("{e:#}"))
    }

    fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer
            .encode(text, false)
            .map_err(|e| format!("{e:#}"))
    }

    fn weight_version(&self) -> u64 {
        self.weights.version()
    }
}

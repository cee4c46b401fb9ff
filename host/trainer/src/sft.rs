//! Supervised fine-tuning on chat conversations: cross-entropy on the assistant tokens only
//! (each assistant turn's end-of-turn token included), with the trainer's optimizer, LoRA and
//! checkpoints.
//!
//! Tokenization follows what serving will see: before each assistant message the conversation
//! so far is rendered with the chat template and `add_generation_prompt = true`, then the
//! assistant's text and `<|im_end|>` follow as trained tokens.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use openclaw_chat::{ChatMessage, ChatTemplate, RenderOptions, Tokenizer};
use openclaw_engine::Model;
use serde::Deserialize;

use crate::logprob::layout_logprobs;
use crate::pack::{pack, Layout, MicroBatch, SeqRef};
use crate::parallel::parallel_map;
use crate::rng::SplitMix;
use crate::step::{thread_models, StepGradients, StepReport, Trainer};

/// The end-of-turn token of ChatML templates.
pub const END_OF_TURN: &str = "<|im_end|>";

/// One training sequence: token ids and which of them are trained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SftExample {
    /// Token ids.
    pub ids: Vec<u32>,
    /// `mask[j]`: token `j` is a target (predicted from position `j - 1`); `mask[0]` is false.
    pub mask: Vec<bool>,
}

impl SftExample {
    /// Positions of the trained tokens.
    pub fn targets(&self) -> Vec<usize> {
        (1..self.ids.len()).filter(|&j| self.mask[j]).collect()
    }
}

/// The text an assistant message is trained on: Qwen-style `<think>` block when it has
/// reasoning, the content, then `<tool_call>` blocks for its tool calls.
pub fn assistant_text(m: &ChatMessage) -> String {
    let mut s = String::new();
    if let Some(r) = m.reasoning_content.as_deref() {
        s += "<think>\n";
        s += r.trim_matches('\n');
        s += "\n</think>\n\n";
    }
    s += &m.text();
    for (i, call) in m.tool_calls.iter().flatten().enumerate() {
        if i > 0 || !s.is_empty() {
            s.push('\n');
        }
        let args = match &call.function.arguments {
            serde_json::Value::String(a) => a.clone(),
            other => other.to_string(),
        };
        s += &format!(
            "<tool_call>\n{{\"name\": \"{}\", \"arguments\": {args}}}\n</tool_call>",
            call.function.name
        );
    }
    s
}

/// Tokenizes one conversation into training sequences. Assistant turns extend one sequence as
/// long as each re-rendered prefix starts with the tokens so far; when the template rewrites
/// history (dropping earlier reasoning, say) a new sequence starts. Sequences are cut to
/// `max_len` tokens; those left without a trained token are dropped.
pub fn tokenize_conversation(
    messages: &[ChatMessage],
    tools: Option<&serde_json::Value>,
    template: &ChatTemplate,
    tokenizer: &Tokenizer,
    max_len: usize,
) -> Result<Vec<SftExample>> {
    let eot = tokenizer
        .token_to_id(END_OF_TURN)
        .with_context(|| format!("the tokenizer has no {END_OF_TURN} token"))?;
    let opts = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    let mut cur = SftExample {
        ids: Vec::new(),
        mask: Vec::new(),
    };
    for (j, m) in messages.iter().enumerate() {
        if m.role != "assistant" {
            continue;
        }
        let prefix = tokenizer.encode(&template.render(&messages[..j], tools, &opts)?, false)?;
        if prefix.starts_with(&cur.ids) {
            cur.mask
                .extend(std::iter::repeat_n(false, prefix.len() - cur.ids.len()));
            cur.ids = prefix;
        } else {
            let done = std::mem::replace(
                &mut cur,
                SftExample {
                    mask: vec![false; prefix.len()],
                    ids: prefix,
                },
            );
            out.push(done);
        }
        let mut answer = tokenizer.encode(&assistant_text(m), false)?;
        answer.push(eot);
        cur.mask.extend(std::iter::repeat_n(true, answer.len()));
        cur.ids.extend(answer);
    }
    out.push(cur);
    Ok(out
        .into_iter()
        .filter_map(|mut e| {
            e.ids.truncate(max_len);
            e.mask.truncate(max_len);
            if let Some(m) = e.mask.first_mut() {
                *m = false;
            }
            e.mask.iter().any(|&m| m).then_some(e)
        })
        .collect())
}

#[derive(Deserialize)]
struct Line {
    messages: Vec<ChatMessage>,
    /// The tools offered (an OpenAI `tools` array), rendered into the prompt by the template.
    #[serde(default)]
    tools: Option<serde_json::Value>,
}

/// Reads a JSONL file of `{"messages": [...], "tools"?: [...]}` conversations and tokenizes each (see
/// [`tokenize_conversation`]). Errors name the line.
pub fn load_jsonl(
    path: &Path,
    template: &ChatTemplate,
    tokenizer: &Tokenizer,
    max_len: usize,
) -> Result<Vec<SftExample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not a {{messages: [...]}} object",
                path.display(),
                i + 1
            )
        })?;
        out.extend(
            tokenize_conversation(&l.messages, l.tools.as_ref(), template, tokenizer, max_len)
                .with_context(|| format!("{}:{}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

impl<B: AutodiffBackend> Trainer<B> {
    /// Gradients of the mean cross-entropy over every trained token of `examples`, accumulated
    /// over micro-batches within the token budget.
    pub fn sft_gradients(&self, examples: &[SftExample]) -> Result<StepGradients> {
        let started = Instant::now();
        let model = self.model();
        let cfg = &model.config;
        let total: usize = examples.iter().map(|e| e.targets().len()).sum();
        if total == 0 {
            bail!("an SFT step needs at least one trained token");
        }
        for (i, e) in examples.iter().enumerate() {
            if e.ids.len() != e.mask.len() {
                bail!(
                    "SFT example {i}: {} ids but {} mask entries",
                    e.ids.len(),
                    e.mask.len()
                );
            }
            if e.ids.len() > cfg.max_position_embeddings {
                bail!(
                    "SFT example {i}: {} tokens exceed the model's context of {}",
                    e.ids.len(),
                    cfg.max_position_embeddings
                );
            }
            if let Some(t) = e.ids.iter().find(|&&t| t as usize >= cfg.vocab_size) {
                bail!(
                    "SFT example {i}: token id {t} is outside the vocabulary ({})",
                    cfg.vocab_size
                );
            }
        }
        self.seed_dropout();
        let lengths: Vec<usize> = examples.iter().map(|e| e.ids.len()).collect();
        let groups: Vec<u64> = (0..examples.len() as u64).collect();
        let threads = self.config.data_parallel.max(1);
        let mut packing = pack(&lengths, &groups, self.config.max_tokens_per_batch);
        if packing.micro_batches.len() < threads && examples.len() > 1 {
            // Smaller micro-batches so that every thread gets one.
            let padded: usize = packing
                .micro_batches
                .iter()
                .map(|m| m.samples.len() * m.width)
                .sum();
            let widest = lengths.iter().copied().max().unwrap_or(1);
            packing = pack(&lengths, &groups, padded.div_ceil(threads).max(widest));
        }
        let mut acc = GradientsAccumulator::<Model<B>>::new();
        let mut report = StepReport {
            samples: examples.len(),
            micro_batches: packing.micro_batches.len(),
            trained_tokens: total,
            ..Default::default()
        };
        let (temp, chunk) = (self.config.temperature, self.config.logprob_chunk);
        for round in packing.micro_batches.chunks(threads) {
            // Each thread runs forward and backward on its own copy of the weights (see
            // `thread_models`).
            let items: Vec<(Model<B>, &MicroBatch)> = thread_models(model, round.len())
                .into_iter()
                .zip(round)
                .collect();
            let results = parallel_map(items, &|(m, mb): (Model<B>, &MicroBatch)| {
                let seqs: Vec<SeqRef<'_>> = mb
                    .samples
                    .iter()
                    .map(|&i| SeqRef {
                        tokens: vec![&examples[i].ids[..]],
                        targets: examples[i].targets(),
                    })
                    .collect();
                let layout = Layout::new(&seqs);
                if layout.targets.is_empty() {
                    return (None, 0.0, layout.real_tokens);
                }
                let out = layout_logprobs(&m, &layout, None, temp, chunk);
                // Token-level mean over the whole step: each micro-batch's sum shares one
                // divisor.
                let loss = out.logp.sum().mul_scalar(-1.0 / total as f64);
                let value = loss.clone().into_scalar().elem::<f64>();
                let grads = GradientsParams::from_grads(loss.backward(), &m);
                (Some(grads), value, layout.real_tokens)
            });
            let mut grads = Vec::new();
            for (g, loss, tokens) in results {
                report.loss += loss;
                report.tokens += tokens;
                grads.extend(g);
            }
            for g in grads {
                acc.accumulate(model, g);
            }
        }
        Ok(StepGradients::new(acc.grads(), report, started))
    }

    /// One SFT optimizer step on `examples`.
    pub fn sft_step(&mut self, examples: &[SftExample]) -> Result<StepReport> {
        let g = self.sft_gradients(examples)?;
        self.apply_gradients(g)
    }
}

/// How [`run_sft`] walks the data.
#[derive(Clone, Debug, PartialEq)]
pub struct SftOptions {
    /// Passes over the data.
    pub epochs: usize,
    /// Sequences per optimizer step.
    pub batch_size: usize,
    /// Shuffle each epoch (the order depends only on the trainer's seed and the epoch).
    pub shuffle: bool,
}

impl Default for SftOptions {
    fn default() -> Self {
        SftOptions {
            epochs: 1,
            batch_size: 16,
            shuffle: true,
        }
    }
}

impl SftOptions {
    /// Optimizer steps a full run over `examples` sequences takes.
    pub fn total_steps(&self, examples: usize) -> u64 {
        (self.epochs * examples.div_ceil(self.batch_size.max(1))) as u64
    }
}

/// The order of the sequences in `epoch`.
fn epoch_order(n: usize, seed: u64, epoch: usize, shuffle: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        SplitMix::new(seed ^ (epoch as u64).wrapping_mul(0xa076_1d64_78bd_642f))
            .shuffle(&mut order);
    }
    order
}

/// Trains on `examples` for `opts.epochs`, starting from the trainer's data position (the
/// number of sequences already consumed, so a resumed run continues where it stopped) and
/// calling `on_step` after every step (log, checkpoint, publish there). A batch never spans
/// two epochs.
pub fn run_sft<B: AutodiffBackend>(
    trainer: &mut Trainer<B>,
    examples: &[SftExample],
    opts: &SftOptions,
    mut on_step: impl FnMut(&mut Trainer<B>, &StepReport) -> Result<()>,
) -> Result<()> {
    let n = examples.len();
    if n == 0 {
        bail!("no SFT examples");
    }
    let bs = opts.batch_size.max(1);
    let end = (opts.epochs * n) as u64;
    while trainer.state().data_position < end {
        let pos = trainer.state().data_position as usize;
        let (epoch, offset) = (pos / n, pos % n);
        let order = epoch_order(n, trainer.config().seed, epoch, opts.shuffle);
        let take = bs.min(n - offset);
        let batch: Vec<SftExample> = order[offset..offset + take]
            .iter()
            .map(|&i| examples[i].clone())
            .collect();
        let report = trainer.sft_step(&batch)?;
        trainer.set_data_position((pos + take) as u64);
        on_step(trainer, &report)?;
    }
    Ok(())
}

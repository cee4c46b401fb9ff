//! Evaluation on held-out simulated prompts: how a model's answers meet the simulated user's
//! preference, with and without a hint line.
//!
//! The prompts are the held-out split of openclaw-sim's tasks ([`TaskSet::standard`]`.eval`),
//! which SFT of the default model and RL with simulated users never see. Each prompt is asked
//! under three conditions (no hint, a plain hint, a markdown hint) and sampled
//! `samples_per_prompt` times at temperature 1 with no top-k or top-p, so the shares estimate
//! the policy's own distribution. Every sample's seed depends only on the evaluation seed, the
//! condition, the prompt and the sample number: two checkpoints evaluated with one seed are
//! compared on common random numbers, which makes small differences between them visible.

pub mod judge_agreement;
pub mod load;
pub mod stats;
pub mod suites;

pub use load::{load, EvalModel};
pub use stats::{distinct_ratio, wilson, Share};

use anyhow::{bail, Result};
use burn::prelude::Backend;
use openclaw_chat::{ChatMessage, ChatTemplate, RenderOptions, Tokenizer};
use openclaw_engine::{FinishReason, GenerateRequest, Model, SamplingParams, Versioned};
use openclaw_sim::answers::{with_hint, MARKDOWN_HINTS, PLAIN_HINTS};
use openclaw_sim::{classify, on_topic, Task, TaskSet, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What the user message carries besides the task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The task alone: the model's own default style.
    None,
    /// The task with a hint line asking for plain text.
    PlainHint,
    /// The task with a hint line asking for markdown.
    MarkdownHint,
}

impl Condition {
    /// All three, in report order.
    pub const ALL: [Condition; 3] = [
        Condition::None,
        Condition::PlainHint,
        Condition::MarkdownHint,
    ];

    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Condition::None => "none",
            Condition::PlainHint => "plain_hint",
            Condition::MarkdownHint => "markdown_hint",
        }
    }

    /// The style an answer under this condition should have: the one its hint asks for, or
    /// without a hint the simulated users' preference.
    pub fn wanted(self) -> Verdict {
        match self {
            Condition::None | Condition::PlainHint => Verdict::Plain,
            Condition::MarkdownHint => Verdict::Markdown,
        }
    }

    /// The user message for held-out task number `index` under this condition. The hint's
    /// phrasing rotates with the index so every phrasing is measured.
    pub fn prompt(self, task: &Task, index: usize) -> String {
        match self {
            Condition::None => task.prompt.clone(),
            Condition::PlainHint => with_hint(&task.prompt, PLAIN_HINTS[index % PLAIN_HINTS.len()]),
            Condition::MarkdownHint => {
                with_hint(&task.prompt, MARKDOWN_HINTS[index % MARKDOWN_HINTS.len()])
            }
        }
    }
}

/// How to evaluate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalOptions {
    /// Held-out prompts to use (at most the 100 of the split), spread evenly over it.
    pub eval_tasks: usize,
    /// Samples per prompt and condition.
    pub samples_per_prompt: usize,
    /// Seeds every sample (common random numbers across checkpoints).
    pub seed: u64,
    /// Most new tokens of an answer; an answer that has not ended by then is invalid.
    pub max_new_tokens: usize,
    /// Sampling temperature (1: the policy's own distribution).
    pub temperature: f32,
    /// The conditions to run.
    pub conditions: Vec<Condition>,
    /// Threads decoding batches side by side (the CPU backend's small matmuls use one core).
    pub threads: usize,
    /// Answers quoted per condition in the report.
    pub examples: usize,
    /// A directory with the tokenizer files, for a checkpoint that lacks them and names no
    /// base model that has them.
    pub tokenizer: Option<PathBuf>,
    /// The save directory `latest` refers to.
    pub save_dir: PathBuf,
    /// Prompts of a task file instead of the held-out split (`eval_tasks` then caps them).
    pub tasks: Option<Vec<Task>>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            eval_tasks: 100,
            samples_per_prompt: 2,
            seed: 0,
            max_new_tokens: 96,
            temperature: 1.0,
            conditions: Condition::ALL.to_vec(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(4),
            examples: 2,
            tokenizer: None,
            save_dir: openclaw_model_store::LoadOptions::default().save_dir,
            tasks: None,
        }
    }
}

/// The results of one condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConditionReport {
    /// The condition.
    pub condition: Condition,
    /// Answers sampled.
    pub samples: usize,
    /// Finished, at least 6 words, no markdown.
    pub plain: Share,
    /// Finished, at least 6 words, with markdown.
    pub markdown: Share,
    /// Unfinished within `max_new_tokens`, or fewer than 6 words.
    pub invalid: Share,
    /// Names the subject (for arithmetic: states the correct result), over all answers.
    pub on_topic: Share,
    /// On topic and in the style the condition wants: the one its hint asks for, or without
    /// a hint the simulated users' preference (plain). (Absent from reports written before it
    /// was measured, such as the shipped default model's.)
    #[serde(default)]
    pub followed: Share,
    /// On-topic share by task kind (animal, tips, arithmetic, concept, category).
    pub on_topic_by_kind: BTreeMap<String, Share>,
    /// Plain share by task kind.
    pub plain_by_kind: BTreeMap<String, Share>,
    /// Distinct answer texts over answers.
    pub distinct_ratio: f64,
    /// Mean answer length in tokens (the end-of-turn token not counted).
    pub mean_tokens: f64,
    /// The first few answers, for a look at what the shares mean.
    pub examples: Vec<String>,
}

/// An evaluation's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// What was evaluated.
    pub model_path: String,
    /// Held-out prompts used.
    pub eval_tasks: usize,
    /// Samples per prompt and condition.
    pub samples_per_prompt: usize,
    /// The seed.
    pub seed: u64,
    /// Most new tokens of an answer.
    pub max_new_tokens: usize,
    /// Sampling temperature.
    pub temperature: f32,
    /// Wall time of the sampling, in seconds.
    pub seconds: f64,
    /// One report per condition, in the order asked.
    pub conditions: Vec<ConditionReport>,
}

impl EvalReport {
    /// The report of `condition`, if it was run.
    pub fn condition(&self, condition: Condition) -> Option<&ConditionReport> {
        self.conditions.iter().find(|c| c.condition == condition)
    }

    /// A small table: one row per condition, shares with their 95% intervals.
    pub fn table(&self) -> String {
        let share = |s: &Share| format!("{:.3} [{:.2},{:.2}]", s.value, s.lo, s.hi);
        let mut out = format!(
            "{} held-out prompts x {} samples, T={}, seed {}, max {} new tokens ({:.1} s)\n",
            self.eval_tasks,
            self.samples_per_prompt,
            self.temperature,
            self.seed,
            self.max_new_tokens,
            self.seconds
        );
        out += &format!(
            "{:<14} {:>5}  {:<19} {:<19} {:<19} {:<19} {:>8} {:>7}\n",
            "condition", "n", "plain", "markdown", "invalid", "on-topic", "distinct", "tokens"
        );
        for c in &self.conditions {
            out += &format!(
                "{:<14} {:>5}  {:<19} {:<19} {:<19} {:<19} {:>8.3} {:>7.1}\n",
                c.condition.name(),
                c.samples,
                share(&c.plain),
                share(&c.markdown),
                share(&c.invalid),
                share(&c.on_topic),
                c.distinct_ratio,
                c.mean_tokens
            );
        }
        out
    }
}

/// The held-out tasks an evaluation of `n` prompts uses, with their indices in the split:
/// evenly spaced, so every kind is represented whatever `n` is.
pub fn eval_tasks(n: usize) -> Vec<(usize, Task)> {
    let all = TaskSet::standard().eval;
    let n = n.min(all.len());
    (0..n)
        .map(|i| {
            let j = i * all.len() / n;
            (j, all[j].clone())
        })
        .collect()
}

/// A sample's seed from the evaluation seed and its coordinates (SplitMix64 finaliser, so
/// neighbouring coordinates get unrelated streams).
fn sample_seed(seed: u64, condition: usize, task: usize, sample: usize) -> u64 {
    let mut h = seed;
    for x in [condition as u64, task as u64, sample as u64] {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ x.wrapping_mul(0xd6e8_feb8_6659_fd93);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    h
}

/// Sequences decoded together. Fixed (not derived from the thread count) so that the batches,
/// and with them every number, are the same on any machine.
const BATCH: usize = 50;

/// Evaluates the model `model_path` names: a model directory, a checkpoint the trainer wrote
/// (LoRA adapters merged), a save directory or `checkpoint-latest` (its newest checkpoint),
/// `latest` (in `opts.save_dir`) or a GGUF file.
pub fn evaluate(model_path: &Path, opts: &EvalOptions) -> Result<EvalReport> {
    evaluate_on::<openclaw_config::backend::Cpu>(model_path, opts, &Default::default())
}

/// [`evaluate`] on backend `B`, on `device`.
pub fn evaluate_on<B: Backend>(
    model_path: &Path,
    opts: &EvalOptions,
    device: &B::Device,
) -> Result<EvalReport> {
    let m = load::load_on::<B>(
        &model_path.to_string_lossy(),
        &opts.save_dir,
        opts.tokenizer.as_deref(),
        device,
    )?;
    let mut report = evaluate_model(&m.model, &m.tokenizer, &m.template, opts)?;
    report.model_path = m.path().display().to_string();
    Ok(report)
}

/// Evaluates weights already in memory (a training loop's current policy, say).
pub fn evaluate_model<B: Backend>(
    model: &Model<B>,
    tokenizer: &Tokenizer,
    template: &ChatTemplate,
    opts: &EvalOptions,
) -> Result<EvalReport> {
    if opts.eval_tasks == 0 || opts.samples_per_prompt == 0 || opts.conditions.is_empty() {
        bail!("an evaluation needs at least one prompt, one sample and one condition");
    }
    let tasks = match &opts.tasks {
        Some(t) => t
            .iter()
            .take(opts.eval_tasks)
            .cloned()
            .enumerate()
            .collect(),
        None => eval_tasks(opts.eval_tasks),
    };
    if tasks.is_empty() {
        bail!("an evaluation needs at least one prompt");
    }
    let stops = openclaw_policy::engine::stop_ids(tokenizer);
    let render = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };

    // Every request, with the coordinates needed to score its answer.
    let mut requests = Vec::new();
    let mut coords: Vec<(usize, usize)> = Vec::new(); // (condition slot, task slot)
    for (ci, &cond) in opts.conditions.iter().enumerate() {
        let cond_id = Condition::ALL.iter().position(|&c| c == cond).unwrap_or(ci);
        for (ti, (index, task)) in tasks.iter().enumerate() {
            let text = template.render(
                &[ChatMessage::new("user", cond.prompt(task, *index))],
                None,
                &render,
            )?;
            let ids = tokenizer.encode(&text, false)?;
            for k in 0..opts.samples_per_prompt {
                requests.push(GenerateRequest {
                    prompt: ids.clone(),
                    sampling: SamplingParams {
                        temperature: opts.temperature,
                        top_k: 0,
                        top_p: 1.0,
                    },
                    max_tokens: opts.max_new_tokens,
                    stop_token_ids: stops.clone(),
                    stop_strings: Vec::new(),
                    top_logprobs: 0,
                    constraint: None,
                    adapter: None,
                    seed: sample_seed(opts.seed, cond_id, *index, k),
                });
                coords.push((ci, ti));
            }
        }
    }

    let started = Instant::now();
    let generations = decode_all(model, requests, opts.threads.max(1))?;
    let seconds = started.elapsed().as_secs_f64();

    // Per condition: (verdict, on topic, kind, text, tokens) of each answer.
    type Scored = (Verdict, bool, String, String, usize);
    let mut per: Vec<Vec<Scored>> = vec![Vec::new(); opts.conditions.len()];
    for ((ci, ti), g) in coords.into_iter().zip(generations) {
        let finished = g.finish_reason == FinishReason::Stop;
        let content: &[u32] = match (finished, g.token_ids.split_last()) {
            (true, Some((_, rest))) => rest,
            _ => &g.token_ids,
        };
        let text = tokenizer.decode(content, true)?;
        let task = &tasks[ti].1;
        let kind = serde_json::to_value(task.kind)?
            .as_str()
            .unwrap_or("other")
            .to_string();
        per[ci].push((
            classify(&text, finished),
            on_topic(task, &text),
            kind,
            text,
            content.len(),
        ));
    }

    let conditions = opts
        .conditions
        .iter()
        .zip(per)
        .map(|(&condition, answers)| {
            let n = answers.len();
            let count = |v: Verdict| answers.iter().filter(|a| a.0 == v).count();
            // (on topic, plain, all) per kind.
            let mut by_kind: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
            for a in &answers {
                let e = by_kind.entry(a.2.clone()).or_default();
                e.0 += a.1 as usize;
                e.1 += (a.0 == Verdict::Plain) as usize;
                e.2 += 1;
            }
            let texts: Vec<&str> = answers.iter().map(|a| a.3.as_str()).collect();
            ConditionReport {
                condition,
                samples: n,
                plain: Share::new(count(Verdict::Plain), n),
                markdown: Share::new(count(Verdict::Markdown), n),
                invalid: Share::new(count(Verdict::Invalid), n),
                on_topic: Share::new(answers.iter().filter(|a| a.1).count(), n),
                followed: Share::new(
                    answers
                        .iter()
                        .filter(|a| a.1 && a.0 == condition.wanted())
                        .count(),
                    n,
                ),
                on_topic_by_kind: by_kind
                    .iter()
                    .map(|(k, &(hit, _, all))| (k.clone(), Share::new(hit, all)))
                    .collect(),
                plain_by_kind: by_kind
                    .iter()
                    .map(|(k, &(_, plain, all))| (k.clone(), Share::new(plain, all)))
                    .collect(),
                distinct_ratio: distinct_ratio(&texts),
                mean_tokens: answers.iter().map(|a| a.4 as f64).sum::<f64>() / n.max(1) as f64,
                examples: texts
                    .iter()
                    .take(opts.examples)
                    .map(|t| t.to_string())
                    .collect(),
            }
        })
        .collect();

    Ok(EvalReport {
        model_path: String::new(),
        eval_tasks: tasks.len(),
        samples_per_prompt: opts.samples_per_prompt,
        seed: opts.seed,
        max_new_tokens: opts.max_new_tokens,
        temperature: opts.temperature,
        seconds,
        conditions,
    })
}

/// Decodes `requests` in fixed batches of [`BATCH`], `threads` batches at a time; results in
/// request order.
fn decode_all<B: Backend>(
    model: &Model<B>,
    requests: Vec<GenerateRequest>,
    threads: usize,
) -> Result<Vec<openclaw_engine::Generation>> {
    let weights = Arc::new(Versioned {
        version: 0,
        model: model.clone(),
    });
    let batches: Vec<Vec<GenerateRequest>> = requests.chunks(BATCH).map(|c| c.to_vec()).collect();
    let results: Vec<Mutex<Option<Result<Vec<openclaw_engine::Generation>>>>> =
        batches.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(batches.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(batch) = batches.get(i) else { break };
                let r = openclaw_engine::generate(weights.clone(), batch.clone(), None);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    let mut out = Vec::new();
    for r in results {
        let r = r.into_inner().unwrap_or_else(|e| e.into_inner());
        out.extend(r.unwrap_or_else(|| Err(anyhow::anyhow!("a decode thread panicked")))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_tasks_are_held_out_and_spread_over_the_kinds() {
        let split = TaskSet::standard();
        let picked = eval_tasks(10);
        assert_eq!(picked.len(), 10);
        let kinds: std::collections::HashSet<_> = picked.iter().map(|(_, t)| t.kind).collect();
        assert_eq!(kinds.len(), 5, "every kind is represented");
        for (_, t) in eval_tasks(1000) {
            assert!(!split.train.iter().any(|x| x.prompt == t.prompt));
        }
        assert_eq!(eval_tasks(1000).len(), split.eval.len());
    }

    #[test]
    fn hinted_prompts_never_appear_in_training_prompts() {
        // The SFT data asks the training tasks only; a held-out task with any hint is unseen.
        let split = TaskSet::standard();
        let train: std::collections::HashSet<&str> =
            split.train.iter().map(|t| t.prompt.as_str()).collect();
        for (i, t) in eval_tasks(100) {
            for c in Condition::ALL {
                let p = c.prompt(&t, i);
                assert!(p.starts_with(&t.prompt));
                assert!(!train.contains(p.as_str()));
            }
        }
    }

    #[test]
    fn sample_seeds_differ_by_every_coordinate() {
        let base = sample_seed(0, 0, 0, 0);
        assert_ne!(base, sample_seed(1, 0, 0, 0));
        assert_ne!(base, sample_seed(0, 1, 0, 0));
        assert_ne!(base, sample_seed(0, 0, 1, 0));
        assert_ne!(base, sample_seed(0, 0, 0, 1));
        assert_eq!(base, sample_seed(0, 0, 0, 0));
    }
}

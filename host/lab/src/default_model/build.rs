//! Building the default model from its recipe: conversations from openclaw-sim, a byte-level
//! BPE trained on them, a randomly initialised tiny Qwen3, SFT.

use super::recipe::Recipe;
use anyhow::{bail, Context, Result};
use burn::backend::Autodiff;
use burn::module::Module;
use openclaw_chat::{train_bpe, ChatMessage, ChatTemplate};
use openclaw_engine::weights::{TensorExport, WeightSource};
use openclaw_engine::{
    random_model, save_model, CpuBackend, Model, ModelConfig, SaveDtype, SaveOptions,
};
use openclaw_trainer::rng::SplitMix;
use openclaw_trainer::schedule::{LrSchedule, ScheduleKind};
use openclaw_trainer::sft::{tokenize_conversation, SftExample};
use openclaw_trainer::{AdamWConfig, TrainConfig, Trainer};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// What a build did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildReport {
    /// Wall time of the whole build, in seconds.
    pub seconds: f64,
    /// Of which SFT.
    pub sft_seconds: f64,
    /// SFT steps taken.
    pub steps: u64,
    /// The real vocabulary (the BPE target is an upper bound).
    pub vocab_size: usize,
    /// Model parameters.
    pub parameters: usize,
    /// Mean SFT loss of the first step.
    pub first_loss: f64,
    /// Mean SFT loss over the last 50 steps (or all, when fewer).
    pub final_loss: f64,
}

/// The text the tokenizer is trained on: each conversation as the model sees it, without the
/// ChatML control tokens (they are added tokens, never split, so BPE merges over them would be
/// wasted vocabulary).
fn corpus(convs: &[Vec<ChatMessage>]) -> String {
    let mut s = String::new();
    for c in convs {
        for m in c {
            s += &m.role;
            s.push('\n');
            s += &m.text();
            s.push('\n');
        }
    }
    s
}

/// A model of the trainer's shape with the averaged weights `avg`.
fn averaged(
    trainer: &Trainer<Autodiff<CpuBackend>>,
    avg: &[TensorExport],
) -> Result<Model<CpuBackend>> {
    struct Source<'a>(HashMap<&'a str, &'a TensorExport>);
    impl WeightSource for Source<'_> {
        fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
            match self.0.get(name) {
                Some(t) if t.shape == shape => Ok(t.data.clone()),
                Some(t) => bail!("averaged {name} has shape {:?}, not {shape:?}", t.shape),
                None => bail!("no averaged tensor {name}"),
            }
        }
    }
    let mut src = Source(avg.iter().map(|t| (t.name.as_str(), t)).collect());
    Model::from_source(
        trainer.model().config.clone(),
        &mut src,
        &Default::default(),
    )
}

/// Builds the model of `recipe` into `out` (created; it should be empty): `config.json`,
/// `model.safetensors`, `tokenizer.json`, `tokenizer_config.json` (with the chat template).
/// The caller writes `recipe.json`.
pub fn build(recipe: &Recipe, out: &Path, show_progress: bool) -> Result<BuildReport> {
    let started = Instant::now();
    if recipe.steps == 0 || recipe.batch_size == 0 || recipe.conversations == 0 {
        bail!("a default-model recipe needs steps, a batch size and conversations");
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let convs = recipe.conversations();

    // Tokenizer: trained on a file (the trainer reads files), removed afterwards.
    let corpus_path = out.join("corpus.txt.tmp");
    std::fs::write(&corpus_path, corpus(&convs))
        .with_context(|| format!("cannot write {}", corpus_path.display()))?;
    let tokenizer = train_bpe(&[&corpus_path], recipe.vocab_size, out);
    std::fs::remove_file(&corpus_path).ok();
    let tokenizer = tokenizer?;
    let template = ChatTemplate::from_dir(out)?;

    // Many conversations repeat (about 1k prompts, four plain and two markdown phrasings):
    // tokenize each distinct one once.
    let mut seen: HashMap<(String, String), Vec<SftExample>> = HashMap::new();
    let mut examples = Vec::with_capacity(convs.len());
    for c in &convs {
        let key = (c[0].text(), c.last().map(|m| m.text()).unwrap_or_default());
        if !seen.contains_key(&key) {
            let ex = tokenize_conversation(
                c,
                None,
                &template,
                &tokenizer,
                recipe.max_position_embeddings,
            )?;
            seen.insert(key.clone(), ex);
        }
        examples.extend(seen[&key].iter().cloned());
    }

    let mut config = ModelConfig::qwen3(
        tokenizer.vocab_size(),
        recipe.hidden_size,
        recipe.intermediate_size,
        recipe.num_hidden_layers,
        recipe.num_attention_heads,
        recipe.num_key_value_heads,
        recipe.head_dim,
        recipe.tie_word_embeddings,
    );
    config.rope_theta = recipe.rope_theta;
    config.max_position_embeddings = recipe.max_position_embeddings;
    if let Some(eot) = tokenizer.token_to_id(openclaw_trainer::sft::END_OF_TURN) {
        // For transformers' generate, which stops at config.json's eos.
        config
            .raw
            .insert("eos_token_id".into(), serde_json::json!(eot));
    }
    let device = Default::default();
    let model = random_model::<Autodiff<CpuBackend>>(config, recipe.init_seed, &device)?;
    let parameters = model.num_params();
    let train_config = TrainConfig {
        schedule: LrSchedule {
            kind: ScheduleKind::Cosine,
            base_lr: recipe.lr,
            warmup_steps: recipe.warmup_steps,
            total_steps: recipe.steps.max(recipe.warmup_steps + 1),
            min_lr: recipe.min_lr,
        },
        optimizer: AdamWConfig {
            weight_decay: recipe.weight_decay,
            beta1: recipe.adam_beta1,
            beta2: recipe.adam_beta2,
            eps: recipe.adam_eps,
            offload_state: false,
        },
        max_grad_norm: recipe.max_grad_norm,
        data_parallel: recipe.data_parallel,
        seed: recipe.train_seed,
        base_model: "openclaw-host default model (random init)".into(),
        ..Default::default()
    };
    let mut trainer = Trainer::new(model, train_config)?;

    let bar = show_progress
        .then(|| openclaw_trainer::progress_bar(recipe.steps, "building the default model (SFT)"));
    let sft_started = Instant::now();
    let mut rng = SplitMix::new(recipe.train_seed);
    let mut order: Vec<usize> = Vec::new();
    let mut pos = 0;
    let mut losses = Vec::with_capacity(recipe.steps as usize);
    let mut ema: Option<Vec<TensorExport>> = None;
    for step in 0..recipe.steps {
        // Epochs of shuffled sequences; a batch never spans two epochs.
        if pos + recipe.batch_size.min(examples.len()) > order.len() {
            order = (0..examples.len()).collect();
            rng.shuffle(&mut order);
            pos = 0;
        }
        let take = recipe.batch_size.min(order.len() - pos);
        let batch: Vec<SftExample> = order[pos..pos + take]
            .iter()
            .map(|&i| examples[i].clone())
            .collect();
        pos += take;
        let report = trainer.sft_step(&batch)?;
        losses.push(report.loss);
        if !report.loss.is_finite() {
            bail!("SFT diverged at step {}: loss {}", step + 1, report.loss);
        }
        if recipe.ema_decay > 0.0 && step + 1 >= recipe.steps / 2 {
            let now = trainer.model().export();
            match &mut ema {
                None => ema = Some(now),
                Some(avg) => {
                    let d = recipe.ema_decay as f32;
                    for (a, t) in avg.iter_mut().zip(&now) {
                        for (x, y) in a.data.iter_mut().zip(&t.data) {
                            *x = d * *x + (1.0 - d) * y;
                        }
                    }
                }
            }
        }
        if let Some(bar) = &bar {
            bar.inc(1);
            if (step + 1) % 100 == 0 || step + 1 == recipe.steps {
                let line = format!(
                    "step {:>5}/{}  loss {:.4}  lr {:.2e}",
                    step + 1,
                    recipe.steps,
                    report.loss,
                    report.lr
                );
                if bar.is_hidden() {
                    eprintln!("{line}");
                } else {
                    bar.println(line);
                }
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let sft_seconds = sft_started.elapsed().as_secs_f64();

    let dtype = match recipe.dtype.as_str() {
        "float32" => SaveDtype::F32,
        "bfloat16" => SaveDtype::BF16,
        other => bail!("unknown dtype `{other}` in the recipe (float32 or bfloat16)"),
    };
    let model = match &ema {
        Some(avg) => averaged(&trainer, avg)?,
        None => trainer.inference_model(),
    };
    save_model(
        &model,
        out,
        &SaveOptions {
            dtype,
            max_shard_bytes: None,
        },
    )?;
    let tail = &losses[losses.len().saturating_sub(50)..];
    Ok(BuildReport {
        seconds: started.elapsed().as_secs_f64(),
        sft_seconds,
        steps: recipe.steps,
        vocab_size: tokenizer.vocab_size(),
        parameters,
        first_loss: losses[0],
        final_loss: tail.iter().sum::<f64>() / tail.len() as f64,
    })
}

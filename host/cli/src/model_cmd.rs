//! `init-model`, `generate` and `chat`: make a model directory, sample from it, talk to it.

use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_chat::{train_bpe, OutputParser, ParserOptions, Tokenizer};
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_engine::Model;
use openclaw_engine::{
    random_model, save_model, CpuBackend, DecodeBatch, GenerateRequest, ModelConfig, Published,
    SamplingParams, SaveOptions,
};
use openclaw_policy::engine::{stop_ids, ModelFiles, TokenizerDetok};
use serde_json::json;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The shapes `init-model --preset` knows.
pub fn preset(name: &str, vocab: usize) -> Result<ModelConfig> {
    let mut c = match name {
        // About 1M parameters: trains in minutes on two CPU cores.
        "tiny" => ModelConfig::qwen3(vocab, 128, 384, 4, 4, 2, 32, true),
        // About 4M parameters.
        "small" => ModelConfig::qwen3(vocab, 256, 768, 4, 8, 4, 32, true),
        other => bail!("unknown preset `{other}` (known: tiny, small)"),
    };
    c.rope_theta = 10_000.0;
    // Room for an environment's first message (the GUI tool's schema and a page take
    // 2,400 to 6,000 of a small vocabulary's tokens); the positions are RoPE, nothing to learn.
    c.max_position_embeddings = 8192;
    Ok(c)
}

/// Writes a randomly initialised model directory with a tokenizer.
pub fn init_model(
    arch: &str,
    preset_name: &str,
    out: &Path,
    tokenizer: Option<&Path>,
    train_text: &[PathBuf],
    vocab: usize,
    seed: u64,
) -> Result<()> {
    if arch != "qwen3" {
        bail!("unknown architecture `{arch}` (known: qwen3)");
    }
    if out.join("config.json").exists() {
        bail!(
            "{} already holds a model (config.json); choose another --out",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let tok = match (tokenizer, train_text.is_empty()) {
        (Some(dir), true) => {
            let src = if dir.is_dir() { dir.to_path_buf() } else { dir.parent().unwrap_or(dir).to_path_buf() };
            for f in ["tokenizer.json", "tokenizer_config.json"] {
                let from = src.join(f);
                if from.exists() {
                    std::fs::copy(&from, out.join(f)).with_context(|| format!("cannot copy {}", from.display()))?;
                } else if f == "tokenizer.json" {
                    bail!("{} has no tokenizer.json", src.display());
                }
            }
            Tokenizer::from_dir(out)?
        }
        (None, false) => {
            for t in train_text {
                if !t.is_file() {
                    bail!("training text {} does not exist", t.display());
                }
            }
            train_bpe(train_text, vocab, out)?
        }
        (Some(_), false) => bail!("give either --tokenizer or --train-text, not both"),
        (None, true) => bail!("a tokenizer is needed: --tokenizer DIR (an existing tokenizer.json) or --train-text FILE... (train one)"),
    };
    let config = preset(preset_name, tok.vocab_size())?;
    let device = Default::default();
    let model = random_model::<CpuBackend>(config, seed, &device)?;
    save_model(&model, out, &SaveOptions::default())?;
    Ok(())
}

/// Generation options of `generate` and `chat`.
#[derive(Clone, Debug)]
pub struct SampleArgs {
    /// Temperature.
    pub temperature: f32,
    /// Top-p.
    pub top_p: f32,
    /// Top-k.
    pub top_k: usize,
    /// Most new tokens.
    pub max_tokens: usize,
    /// Seed.
    pub seed: u64,
}

impl SampleArgs {
    /// A request for `prompt` with these options, stopping at `stops`, sampled with `seed`.
    fn request(&self, prompt: Vec<u32>, stops: Vec<u32>, seed: u64) -> GenerateRequest {
        GenerateRequest {
            prompt,
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
            },
            max_tokens: self.max_tokens,
            stop_token_ids: stops,
            stop_strings: Vec::new(),
            top_logprobs: 0,
            constraint: None,
            adapter: None,
            seed,
        }
    }
}

/// `generate`: one completion of a chat prompt (or raw text with `raw`), on the device
/// `ROLLOUT_GPUS` names.
pub fn generate(
    model_path: &Path,
    prompt: &str,
    raw: bool,
    args: &SampleArgs,
    as_json: bool,
) -> Result<()> {
    struct On<'a>(&'a Path, &'a str, bool, &'a SampleArgs, bool);
    impl OnBackend for On<'_> {
        type Output = ();
        fn run<B: Backend>(self, p: Placement<B>) -> Result<()>
        where
            Model<B>: Send + Sync,
        {
            generate_on::<B>(self.0, self.1, self.2, self.3, self.4, &p.serve)
        }
    }
    openclaw_config::backend::dispatch_generation(On(model_path, prompt, raw, args, as_json))
}

fn generate_on<B: Backend>(
    model_path: &Path,
    prompt: &str,
    raw: bool,
    args: &SampleArgs,
    as_json: bool,
    device: &B::Device,
) -> Result<()>
where
    Model<B>: Send + Sync,
{
    let files = ModelFiles::<B>::load_path(model_path, device)?;
    let text = if raw {
        prompt.to_string()
    } else {
        files.template.render(
            &[serde_json::from_value(
                json!({"role": "user", "content": prompt}),
            )?],
            None,
            &openclaw_chat::RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )?
    };
    let ids = files.tokenizer.encode(&text, false)?;
    let stops = stop_ids(&files.tokenizer);
    let tokenizer = files.tokenizer.clone();
    let weights = Arc::new(Published::new(files.model, 0)).current();
    let req = args.request(ids, stops, args.seed);
    let g = openclaw_engine::generate(
        weights,
        vec![req],
        Some(Arc::new(TokenizerDetok(tokenizer.clone()))),
    )?
    .pop()
    .context("no generation")?;
    let completion = tokenizer.decode(&g.token_ids, true)?;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "prompt": text,
                "completion": completion,
                "prompt_ids": g.prompt_ids,
                "token_ids": g.token_ids,
                "logprobs": g.logprobs,
                "finish_reason": g.finish_reason.as_str(),
                "weight_version": g.weight_version,
                "seed": args.seed,
            }))?
        );
    } else {
        println!("{completion}");
    }
    Ok(())
}

/// `chat`: an interactive conversation in the terminal, streamed token by token, on the
/// device `ROLLOUT_GPUS` names.
pub fn chat(model_path: &Path, system: Option<&str>, args: &SampleArgs) -> Result<()> {
    struct On<'a>(&'a Path, Option<&'a str>, &'a SampleArgs);
    impl OnBackend for On<'_> {
        type Output = ();
        fn run<B: Backend>(self, p: Placement<B>) -> Result<()>
        where
            Model<B>: Send + Sync,
        {
            chat_on::<B>(self.0, self.1, self.2, &p.serve)
        }
    }
    openclaw_config::backend::dispatch_generation(On(model_path, system, args))
}

fn chat_on<B: Backend>(
    model_path: &Path,
    system: Option<&str>,
    args: &SampleArgs,
    device: &B::Device,
) -> Result<()>
where
    Model<B>: Send + Sync,
{
    let files = ModelFiles::<B>::load_path(model_path, device)?;
    let stops = stop_ids(&files.tokenizer);
    let tokenizer = files.tokenizer.clone();
    let template = files.template.clone();
    let weights = Arc::new(Published::new(files.model, 0));
    let mut history: Vec<serde_json::Value> = Vec::new();
    if let Some(s) = system {
        history.push(json!({"role": "system", "content": s}));
    }
    eprintln!(
        "chatting with {} (empty line or Ctrl-D to quit)",
        model_path.display()
    );
    let stdin = std::io::stdin();
    let mut seed = args.seed;
    loop {
        eprint!("you> ");
        std::io::stderr().flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        history.push(json!({"role": "user", "content": line.trim_end()}));
        let msgs = history
            .iter()
            .map(|m| serde_json::from_value(m.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let text = template.render(
            &msgs,
            None,
            &openclaw_chat::RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )?;
        let ids = tokenizer.encode(&text, false)?;
        let req = args.request(ids, stops.clone(), seed);
        seed = seed.wrapping_add(1);
        let mut batch = DecodeBatch::new(weights.current(), vec![req], None)?;
        let mut decoder = tokenizer.incremental_decoder(true);
        let mut parser = OutputParser::new(ParserOptions::for_prompt(&text));
        let mut out = std::io::stdout();
        print!("model> ");
        while !batch.is_finished() {
            for ev in batch.step() {
                let delta = decoder.push(ev.token)?;
                for e in parser.push(&delta) {
                    if let openclaw_chat::ParseEvent::ContentDelta(t) = e {
                        print!("{t}");
                    }
                }
                out.flush()?;
            }
        }
        let rest = decoder.finish()?;
        for e in parser.push(&rest).into_iter().chain(parser.finish()) {
            if let openclaw_chat::ParseEvent::ContentDelta(t) = e {
                print!("{t}");
            }
        }
        println!();
        let reply = parser.message().content.clone();
        history.push(json!({"role": "assistant", "content": reply}));
    }
    Ok(())
}

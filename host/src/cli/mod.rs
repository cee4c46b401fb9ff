//! The command line: parsing with clap and one module per command; no logic of its own beyond
//! printing.

mod buffer_cmd;
mod config_cmd;
mod export_cmd;
pub mod flags;
pub mod model_cmd;
mod plugins;
pub mod serve_cmd;
pub mod train_cmd;

use clap::{Parser, Subcommand};
use flags::RunFlags;
use openclaw_plugin_api::PluginKind;
use std::path::PathBuf;

/// The `openclaw-host` command line.
#[derive(Parser, Debug)]
#[command(
    name = "openclaw-host",
    version,
    about = "Serve a policy model, learn from the conversations it has, with methods as plugins"
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List, inspect, scaffold and check plugins.
    Plugins {
        /// The plugins command.
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Print the fully resolved run configuration, each value annotated with its source.
    Config(flags::RunFlags),
    /// Write a randomly initialised model directory (config, safetensors, tokenizer).
    InitModel {
        /// The architecture.
        #[arg(long, default_value = "qwen3")]
        arch: String,
        /// The size: tiny (about 1M parameters) or small (about 4M).
        #[arg(long, default_value = "tiny")]
        preset: String,
        /// The directory to write.
        #[arg(long)]
        out: PathBuf,
        /// Use this tokenizer (a directory with tokenizer.json, or the file).
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Train a byte-level BPE tokenizer on these text files.
        #[arg(long, num_args = 1..)]
        train_text: Vec<PathBuf>,
        /// Vocabulary size of a trained tokenizer (an upper bound).
        #[arg(long, default_value_t = 2048)]
        vocab_size: usize,
        /// Seed of the weights.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Complete one prompt; with --json, also the prompt ids, sampled ids and logprobs.
    Generate {
        /// The model directory.
        #[arg(long, env = "MODEL_PATH")]
        model_path: PathBuf,
        /// The user message (or raw text with --raw).
        #[arg(long)]
        prompt: String,
        /// Feed the prompt as raw text instead of through the chat template.
        #[arg(long)]
        raw: bool,
        /// Print JSON with token ids and logprobs.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        sample: SampleFlags,
    },
    /// Talk to a model in the terminal.
    Chat {
        /// The model directory.
        #[arg(long, env = "MODEL_PATH")]
        model_path: PathBuf,
        /// A system message.
        #[arg(long)]
        system: Option<String>,
        #[command(flatten)]
        sample: SampleFlags,
    },
    /// Measure this machine: `bench engine` (prefill, decode at batch 1 and 8, scoring).
    Bench {
        /// What to measure: engine.
        what: String,
    },
    /// Serve the OpenAI-compatible API and record every main turn (no training).
    Serve(flags::RunFlags),
    /// RL on trajectory files (`{session_id, turns: [...]}`), scored by their `reward` field or
    /// the method's reward plugin, with the run's optimizer, LoRA and checkpoint settings.
    Train {
        #[command(flatten)]
        run: RunFlags,
        #[command(flatten)]
        epochs: train_cmd::EpochFlags,
    },
    /// Supervised fine-tuning on chat conversations (JSONL of `{messages: [...]}`), loss on
    /// assistant tokens only.
    Sft {
        #[command(flatten)]
        run: RunFlags,
        #[command(flatten)]
        epochs: train_cmd::EpochFlags,
        /// Sequences per optimizer step.
        #[arg(long, default_value_t = 16)]
        batch_size: usize,
        /// Cut sequences to this many tokens.
        #[arg(long, default_value_t = 4096)]
        max_len: usize,
    },
    /// Write a checkpoint as a standard Hugging Face model directory (LoRA merged).
    Export {
        /// A checkpoint directory, or `latest` (in --save-dir).
        #[arg(long)]
        checkpoint: String,
        /// Where `latest` is looked up.
        #[arg(long, env = "CKPT_SAVE_DIR", default_value = "./checkpoints")]
        save_dir: PathBuf,
        /// The output directory.
        #[arg(long)]
        out: PathBuf,
        /// Take the tokenizer files from here (default: the checkpoint, or its base model).
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Element type of the weights: float32 or bfloat16.
        #[arg(long, default_value = "float32")]
        dtype: String,
    },
    /// Read the durable buffer of recorded turns.
    Buffer {
        /// The buffer command.
        #[command(subcommand)]
        command: BufferCommand,
    },
}

/// The buffer commands.
#[derive(Subcommand, Debug)]
pub enum BufferCommand {
    /// Write the recorded sessions as trajectory JSONL (the format `train --data-path` reads).
    Export {
        /// The buffer directory.
        #[arg(long, default_value = "./rl_buffer", env = "RL_BUFFER_DIR")]
        rl_buffer_dir: PathBuf,
        /// The output file (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// The plugins commands.
#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// A table of plugin crates: name, version, kinds, built or not, path.
    List {
        /// Plugin crate directories or folders of them (default: methods/, examples/, envs/).
        dirs: Vec<PathBuf>,
    },
    /// A plugin's manifest and default configuration (builds and loads it).
    Info {
        /// A plugin name, crate directory or library file.
        plugin: String,
    },
    /// Scaffold a plugin crate that builds, loads and passes `plugins test` as written.
    New {
        /// The plugin's name (also its crate name).
        name: String,
        /// The kinds it provides, comma-separated: loss, reward, rollout, generate, env.
        #[arg(long, value_delimiter = ',', required = true, value_parser = parse_kind)]
        kind: Vec<PluginKind>,
        /// The folder to create it in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Check a plugin against the contract on generated inputs.
    Test {
        /// A plugin name, crate directory or library file.
        plugin: String,
        /// A configuration file to construct it with (default: its own defaults).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// Sampling flags of `generate` and `chat`.
#[derive(clap::Args, Debug, Clone)]
pub struct SampleFlags {
    /// Temperature (0: greedy).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f32,
    /// Nucleus mass.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Keep the k most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Most new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Seed: the same seed gives the same output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SampleFlags {
    fn args(&self) -> model_cmd::SampleArgs {
        model_cmd::SampleArgs {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            max_tokens: self.max_tokens,
            seed: self.seed,
        }
    }
}

fn parse_kind(s: &str) -> Result<PluginKind, String> {
    s.parse()
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Plugins { command } => plugins::run(command),
        Command::Config(flags) => config_cmd::run(&flags),
        Command::Buffer { command } => buffer_cmd::run(command),
        Command::InitModel {
            arch,
            preset,
            out,
            tokenizer,
            train_text,
            vocab_size,
            seed,
        } => {
            model_cmd::init_model(
                &arch,
                &preset,
                &out,
                tokenizer.as_deref(),
                &train_text,
                vocab_size,
                seed,
            )?;
            println!("wrote a {preset} {arch} model to {}", out.display());
            Ok(0)
        }
        Command::Generate {
            model_path,
            prompt,
            raw,
            json,
            sample,
        } => {
            model_cmd::generate(&model_path, &prompt, raw, &sample.args(), json)?;
            Ok(0)
        }
        Command::Chat {
            model_path,
            system,
            sample,
        } => {
            model_cmd::chat(&model_path, system.as_deref(), &sample.args())?;
            Ok(0)
        }
        Command::Serve(flags) => serve_cmd::run(&flags),
        Command::Train { run, epochs } => train_cmd::train(&run, &epochs),
        Command::Sft {
            run,
            epochs,
            batch_size,
            max_len,
        } => train_cmd::sft(&run, &epochs, batch_size, max_len),
        Command::Export {
            checkpoint,
            save_dir,
            out,
            tokenizer,
            dtype,
        } => export_cmd::run(&checkpoint, &save_dir, &out, tokenizer.as_deref(), &dtype),
        Command::Bench { what } => {
            if what != "engine" {
                anyhow::bail!("unknown benchmark `{what}` (known: engine)");
            }
            let cfg = openclaw_engine::bench::BenchConfig::default();
            eprintln!(
                "engine benchmark: Qwen3 vocab {}, hidden {}, {} layers, {}/{} heads; {}-token prompts, {} new tokens",
                cfg.model.vocab_size,
                cfg.model.hidden_size,
                cfg.model.num_hidden_layers,
                cfg.model.num_attention_heads,
                cfg.model.num_key_value_heads,
                cfg.prompt_len,
                cfg.new_tokens
            );
            let report = openclaw_engine::bench::run(&cfg)?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(0)
        }
    }
}

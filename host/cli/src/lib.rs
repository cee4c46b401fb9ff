//! The command line: parsing with clap and one module per command; no logic of its own beyond
//! printing.

mod bench_serve;
mod buffer_cmd;
mod config_cmd;
pub mod default_model_cmd;
pub mod env_check_cmd;
pub mod env_eval_cmd;
pub mod env_pool_cmd;
pub mod eval_cmd;
mod export_cmd;
pub mod flags;
pub mod judge_agreement_cmd;
pub mod model_cmd;
pub mod plot_cmd;
mod plugins;
pub mod run_cmd;
pub mod serve_cmd;
pub mod train_cmd;

use anyhow::Context;
use clap::{Parser, Subcommand};
use flags::For;
use openclaw_plugin_api::PluginKind;
use std::path::{Path, PathBuf};

/// `run --help`'s examples.
const RUN_EXAMPLES: &str = "\
Examples:
  # The built-in default model with simulated users: watch it learn (dashboard at /dashboard)
  openclaw-host run --plugin combine --max-steps 40
  # Your model, served to your agent on port 8000, learning from its conversations
  openclaw-host run --plugin binary-rl --model-path ./Qwen3-1.7B --judge self --api-key K
  # An environment track
  openclaw-host run --plugin binary-rl --model-path ./model --env toolcall --parallel-envs 4
  # Settings from a file, one overridden
  openclaw-host run --config run.toml --set lr=2e-6

Every flag is also a run.toml key (`openclaw-host config` prints them with their sources).";

/// `serve --help`'s examples.
const SERVE_EXAMPLES: &str = "\
Examples:
  openclaw-host serve --model-path ./Qwen3-1.7B --port 8000 --api-key K
  # The original's server command line works as typed
  openclaw-host serve --model-path $BASE_MODEL_PATH --port 8000 --enable-rl-intercept --rl-buffer-dir ./rl_buffer
  # The newest checkpoint of a save directory
  openclaw-host serve --model-path latest --save-dir ./checkpoints";

/// `train --help`'s examples.
const TRAIN_EXAMPLES: &str = "\
Examples:
  openclaw-host train --plugin binary-rl --model-path ./model --data-path trajectories.jsonl
  # Two passes, LoRA, resumed from the newest checkpoint
  openclaw-host train --plugin combine --model-path ./model --data-path t.jsonl --num-epochs 2 \\
      --use-lora --lora-rank 16 --resume-from-checkpoint latest
  # Metrics for TensorBoard
  openclaw-host train --plugin opd --model-path ./model --data-path t.jsonl --tensorboard-dir runs/opd";

/// `sft --help`'s examples.
const SFT_EXAMPLES: &str = "\
Examples:
  openclaw-host sft --model-path ./model --data-path chats.jsonl --lr 3e-4 --save-dir sft";

/// `config --help`'s examples.
const CONFIG_EXAMPLES: &str = "\
Examples:
  # What a launch script's settings resolve to, and where each comes from
  MODEL_PATH=./model openclaw-host config --plugin binary-rl --lr 1e-6";

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

/// `env` commands.
#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// Check a task set: each task's reference solution must solve it and no action must not;
    /// prints a table, lists the tasks that could not load, exits 1 when any failed.
    Check(env_check_cmd::CheckFlags),
}

/// `env-pool` commands.
#[derive(Subcommand, Debug)]
pub enum EnvPoolCommand {
    /// Host the environment and answer /allocate, /heartbeat, /reset, /step, /exec_tool,
    /// /evaluate, /close, /tasks, /status and /healthz until Ctrl-C or SIGTERM.
    Serve(env_pool_cmd::ServeFlags),
}

/// `bench` commands.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Prefill, decode at batch 1 and 8, and scoring of a random 4.2M Qwen3 (transformers
    /// beside it: `host/engine/bench/torch_engine.py`).
    Engine,
    /// Decode speed of a real model (llama.cpp beside it:
    /// `host/engine/bench/compare_llama_cpp.sh`).
    Decode {
        /// The model: a model directory or a GGUF file.
        #[arg(long, env = "MODEL_PATH")]
        model_path: PathBuf,
        #[command(flatten)]
        decode: DecodeBenchFlags,
    },
    /// Training tokens/s and peak memory (PyTorch beside it: `host/trainer/bench/compare.sh`).
    Train {
        /// Timed optimizer steps per shape, after one warm-up step (the mean counts).
        #[arg(long, default_value_t = 20)]
        steps: usize,
    },
    /// A load test of N streaming clients, without and then with training.
    Serve {
        /// The model (default: MODEL_PATH, else the built-in one).
        #[arg(long, env = "MODEL_PATH")]
        model_path: Option<String>,
        /// The method of the training run.
        #[arg(long, default_value = "methods/binary-rl")]
        plugin: String,
        /// Concurrent streaming clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Seconds per run.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Tokens per answer.
        #[arg(long, default_value_t = 32)]
        max_tokens: u32,
        /// Compare `serve` answering plain text with `serve` answering under a JSON schema
        /// (`response_format: json_schema`) instead of `serve` with `run`: the cost of
        /// structured outputs.
        #[arg(long)]
        schema: bool,
    },
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
    #[command(after_help = CONFIG_EXAMPLES)]
    Config(For<flags::All>),
    /// Check an environment's task set (`env check swe`, `env check terminal --data-path F`).
    Env {
        /// The env command.
        #[command(subcommand)]
        command: EnvCommand,
    },
    /// Serve an environment plugin to runs on other machines (the lease protocol; see
    /// `--env-pool-url` of run and eval).
    EnvPool {
        /// The env-pool command.
        #[command(subcommand)]
        command: EnvPoolCommand,
    },
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
    /// Write the built-in default model (the copy compiled into this binary, or built from its
    /// recipe: SFT of a 1M-parameter Qwen3 on simulated conversations) to a directory.
    InitDefaultModel {
        /// The directory (default: $OPENCLAW_HOME/default-model, else the user cache).
        #[arg(long)]
        out: Option<PathBuf>,
        /// SFT steps (another recipe: built, not copied).
        #[arg(long)]
        steps: Option<u64>,
        /// Build even when the directory or the binary already has the recipe's model.
        #[arg(long)]
        rebuild: bool,
    },
    /// Evaluate a model on held-out simulated prompts (no hint, plain hint, markdown hint):
    /// plain, markdown, invalid and on-topic shares with 95% intervals.
    Eval(Box<eval_cmd::EvalFlags>),
    /// Re-judge a buffer's recorded turns with a judge model (--judge-model-path or
    /// --judge-endpoint) and with the rule-based judge, through the method's reward plugin, and
    /// report how often they agree.
    JudgeAgreement {
        #[command(flatten)]
        run: For<flags::Judging>,
        #[command(flatten)]
        extra: judge_agreement_cmd::AgreementFlags,
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
    /// Measure this machine: `bench engine` (prefill, decode at batch 1 and 8, scoring),
    /// `bench decode` (decode speed of a real model), `bench train` (training tokens/s),
    /// `bench serve` (load test with and without training).
    Bench {
        /// What to measure; each takes only its own settings.
        #[command(subcommand)]
        what: BenchCommand,
    },
    /// Serve the OpenAI-compatible API and record every main turn (no training).
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(For<flags::Serving>),
    /// Serve, collect, judge and train in one process (with no model given: the built-in
    /// default with simulated users, showing the policy learn).
    #[command(after_help = RUN_EXAMPLES)]
    Run(For<flags::All>),
    /// RL on trajectory files (`{session_id, turns: [...]}`), scored by their `reward` field or
    /// the method's reward plugin, with the run's optimizer, LoRA and checkpoint settings.
    #[command(after_help = TRAIN_EXAMPLES)]
    Train {
        #[command(flatten)]
        run: For<flags::Training>,
        #[command(flatten)]
        epochs: train_cmd::EpochFlags,
    },
    /// Supervised fine-tuning on chat conversations (JSONL of `{messages: [...]}`), loss on
    /// assistant tokens only.
    #[command(after_help = SFT_EXAMPLES)]
    Sft {
        #[command(flatten)]
        run: For<flags::Sft>,
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
        /// Anything --model-path takes: a checkpoint, a save directory or its
        /// `checkpoint-latest`, `latest` (in --save-dir), a model directory or a GGUF file.
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
    /// Plot learning curves from JSON Lines logs (training.log, eval logs) to a PNG, one panel
    /// per metric, one line per log.
    Plot(plot_cmd::PlotArgs),
    /// Read, check and repair the durable buffer of recorded turns.
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
        /// Write the environment episodes instead, each with its task, conversation, exact
        /// tokens per step, outcome, and the samples made from it (loss masks, advantages).
        #[arg(long)]
        episodes: bool,
    },
    /// Read every segment and list every damaged span (exit status 1 when a segment is damaged
    /// beyond a torn tail); changes nothing.
    Check {
        /// The buffer directory.
        #[arg(long, default_value = "./rl_buffer", env = "RL_BUFFER_DIR")]
        rl_buffer_dir: PathBuf,
    },
    /// Rewrite each damaged segment with every whole record it holds, keeping the original
    /// beside it as `segment-N.log.damaged`. Run it while no `run` or `serve` uses the buffer.
    Repair {
        /// The buffer directory.
        #[arg(long, default_value = "./rl_buffer", env = "RL_BUFFER_DIR")]
        rl_buffer_dir: PathBuf,
    },
}

/// The plugins commands.
#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// A table of plugin crates: name, version, kinds, built or not, path.
    List {
        /// Plugin crate directories or folders of them (default: methods/, examples/, envs/).
        dirs: Vec<PathBuf>,
        /// The installed plugins instead ($OPENCLAW_PLUGIN_DIR): name, version, kinds, the
        /// plugin API each was built against, and where it came from.
        #[arg(long, conflicts_with = "dirs")]
        installed: bool,
    },
    /// A plugin's manifest and default configuration (builds and loads it); for a plugin found
    /// only in an index, its record.
    Info {
        /// A plugin name, name@version, crate directory or library file.
        plugin: String,
        #[command(flatten)]
        index: IndexFlags,
    },
    /// The plugins in the indexes whose name or description holds TERM.
    Search {
        /// What to look for (empty: everything).
        #[arg(default_value = "")]
        term: String,
        #[command(flatten)]
        index: IndexFlags,
    },
    /// Write a plugin crate's index record: its checksum, the plugin API range it loads under,
    /// kinds, declared permissions and contract checks' result, signed with --key.
    Package {
        /// The plugin crate directory.
        dir: PathBuf,
        /// The record points at this git repository (default: the crate's `origin` remote).
        #[arg(long, value_name = "URL", conflicts_with = "archive")]
        git: Option<String>,
        /// The commit the record pins (default: HEAD, which must hold every change).
        #[arg(long, value_name = "COMMIT", conflicts_with = "archive")]
        rev: Option<String>,
        /// Write a source archive beside the index file and point the record at it.
        #[arg(long)]
        archive: bool,
        /// Sign the record with this minisign secret key (as `plugins keygen` writes).
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Add the record to this index file (created when missing).
        #[arg(long, value_name = "FILE")]
        index_file: Option<PathBuf>,
    },
    /// Mark a version in an index file yanked (withdrawn: not installed unless asked), or
    /// not with --undo.
    Yank {
        /// NAME@VERSION.
        plugin: String,
        /// The index file.
        #[arg(long, value_name = "FILE")]
        index_file: PathBuf,
        /// Sign the changed record with this key (needed when it was signed).
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// Take the yank back.
        #[arg(long)]
        undo: bool,
    },
    /// Write a minisign key pair for signing index records: PREFIX.key (secret) and PREFIX.pub.
    Keygen {
        /// Where: PREFIX.key and PREFIX.pub.
        prefix: PathBuf,
    },
    /// Build a plugin and install it into the installed-plugins directory ($OPENCLAW_PLUGIN_DIR,
    /// default ~/.local/share/openclaw-host/plugins), where runs find it by name from anywhere.
    Install {
        /// A plugin crate directory, a git URL (https://, ssh://, file://, git@host:path, or a
        /// local .git), a built library (.so), or the name of a crate on the plugin search path.
        source: String,
        /// For a git URL: the branch, tag or commit to build (default: the default branch).
        #[arg(long, value_name = "REF")]
        rev: Option<String>,
        /// For a git URL: the crate's folder in the repository (default: the one plugin crate
        /// it holds).
        #[arg(long, value_name = "DIR")]
        subdir: Option<String>,
        /// Replace the version when it is already installed.
        #[arg(long)]
        force: bool,
        /// Install a version its publisher has yanked.
        #[arg(long)]
        allow_yanked: bool,
        #[command(flatten)]
        index: IndexFlags,
    },
    /// Remove an installed plugin: every version of NAME, or the one NAME@VERSION names.
    Remove {
        /// NAME or NAME@VERSION.
        plugin: String,
    },
    /// Install a newer version of installed plugins from where each came from (its index, its
    /// crate directory or its git repository), beside the versions already installed.
    Update {
        /// The plugins to update (default: all installed).
        names: Vec<String>,
        #[command(flatten)]
        index: IndexFlags,
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

/// Which plugin indexes to use and what to trust, over `settings.toml` in the
/// installed-plugins directory.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct IndexFlags {
    /// A plugin index (a path or an HTTPS URL) instead of those in settings.toml; repeat for
    /// several, searched in order.
    #[arg(long = "index", value_name = "PATH|URL")]
    pub indexes: Vec<String>,
    /// A public key whose signatures are trusted (minisign base64, or a .pub file); repeat for
    /// several.
    #[arg(long = "trusted-key", value_name = "KEY")]
    pub trusted_keys: Vec<String>,
    /// Install only records signed by a trusted key.
    #[arg(long)]
    pub only_signed: bool,
    /// Accept plain http:// indexes and sources.
    #[arg(long)]
    pub allow_http: bool,
}

impl IndexFlags {
    fn flags(&self) -> openclaw_marketplace::settings::Flags {
        openclaw_marketplace::settings::Flags {
            indexes: self.indexes.clone(),
            trusted_keys: self.trusted_keys.clone(),
            only_signed: self.only_signed,
            allow_http: self.allow_http,
        }
    }
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
        Command::Env {
            command: EnvCommand::Check(flags),
        } => env_check_cmd::run(&flags),
        Command::EnvPool {
            command: EnvPoolCommand::Serve(flags),
        } => env_pool_cmd::serve(&flags),
        Command::Buffer { command } => buffer_cmd::run(command),
        Command::Plot(args) => plot_cmd::run(&args),
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
        Command::InitDefaultModel {
            out,
            steps,
            rebuild,
        } => default_model_cmd::run(out.as_deref(), steps, rebuild),
        Command::Eval(flags) => match openclaw_eval::suites::EvalTasks::parse(&flags.eval_tasks)? {
            openclaw_eval::suites::EvalTasks::Count(n) if flags.env.is_some() => {
                env_eval_cmd::run(&flags, flags.env.as_deref().expect("checked"), n)
            }
            tasks => eval_cmd::run(&flags, tasks),
        },
        Command::JudgeAgreement { run, extra } => judge_agreement_cmd::run(&run, &extra),
        Command::Serve(flags) => serve_cmd::run(&flags),
        Command::Run(flags) => run_cmd::run(&flags),
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
        Command::Bench { what } => match what {
            BenchCommand::Engine => bench_engine(),
            BenchCommand::Decode { model_path, decode } => bench_decode(&model_path, &decode),
            BenchCommand::Train { steps } => bench_train(steps),
            BenchCommand::Serve {
                model_path,
                plugin,
                clients,
                seconds,
                max_tokens,
                schema,
            } => {
                let model = match model_path {
                    Some(m) => m,
                    None => builtin_model_path()?,
                };
                let reports = bench_serve::run(&bench_serve::ServeBenchOptions {
                    model,
                    plugin,
                    clients,
                    seconds,
                    max_tokens,
                    compare: if schema {
                        bench_serve::Compare::Schema
                    } else {
                        bench_serve::Compare::Training
                    },
                })?;
                println!("{}", serde_json::to_string_pretty(&reports)?);
                if let ([a, b], true) = (&reports[..], schema) {
                    println!(
                        "decode {:.0} tokens/s plain, {:.0} under a JSON schema: ratio {:.2}; ttft p50 {:.1} vs {:.1} ms; failed {} and {}",
                        a.tokens_per_s, b.tokens_per_s, b.tokens_per_s / a.tokens_per_s,
                        a.ttft_p50_ms, b.ttft_p50_ms, a.failed, b.failed
                    );
                } else if let [a, b] = &reports[..] {
                    println!(
                        "ttft p50 {:.1} ms without training, {:.1} ms with ({} steps): ratio {:.2}; p99 {:.1} vs {:.1} ms: ratio {:.2}; failed {} and {}",
                        a.ttft_p50_ms, b.ttft_p50_ms, b.train_steps, b.ttft_p50_ms / a.ttft_p50_ms,
                        a.ttft_p99_ms, b.ttft_p99_ms, b.ttft_p99_ms / a.ttft_p99_ms, a.failed, b.failed
                    );
                }
                Ok(0)
            }
        },
    }
}

/// `bench decode` settings.
#[derive(clap::Args, Debug)]
pub struct DecodeBenchFlags {
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 8])]
    batches: Vec<usize>,
    /// Prompt tokens per sequence.
    #[arg(long, default_value_t = 32)]
    prompt_len: usize,
    /// Tokens generated per sequence.
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Timed repetitions (the best counts) after a warm-up.
    #[arg(long, default_value_t = 2)]
    repeats: usize,
    /// How a GGUF file's quantised weights are held: `blocks` (as served: dequantised
    /// inside the matmuls) or `f32` (dequantised at load, as training holds them).
    #[arg(long, value_enum, default_value_t = WeightsForm::Blocks)]
    weights: WeightsForm,
    /// Distinct LoRA adapters the sequences of each batch take, comma-separated (sequence i
    /// takes adapter i mod k; 0: the base alone): what serving one adapter per user costs.
    #[arg(long, value_delimiter = ',')]
    adapters: Vec<usize>,
    /// The rank of those adapters (on every projection).
    #[arg(long, default_value_t = 16)]
    lora_rank: usize,
}

/// The form of a GGUF file's quantised weights once loaded.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightsForm {
    /// Kept in their blocks.
    Blocks,
    /// Dequantised to f32 at load.
    F32,
}

impl From<WeightsForm> for openclaw_engine::GgufWeights {
    fn from(w: WeightsForm) -> Self {
        match w {
            WeightsForm::Blocks => openclaw_engine::GgufWeights::Blocks,
            WeightsForm::F32 => openclaw_engine::GgufWeights::F32,
        }
    }
}

fn bench_decode(model: &Path, flags: &DecodeBenchFlags) -> anyhow::Result<i32> {
    use openclaw_engine::bench::{decode_speed, DecodeBenchConfig};
    if flags.batches.is_empty() || flags.batches.contains(&0) {
        anyhow::bail!("--batches: give positive batch sizes, e.g. 1,8");
    }
    if flags.prompt_len == 0 || flags.new_tokens == 0 {
        anyhow::bail!("--prompt-len and --new-tokens must be positive");
    }
    let device = openclaw_engine::CpuDevice::default();
    let t = std::time::Instant::now();
    let load = openclaw_engine::LoadConfig {
        gguf: flags.weights.into(),
    };
    let model =
        openclaw_engine::load_model_with::<openclaw_engine::CpuBackend>(model, &device, &load)
            .with_context(|| format!("cannot load {}", model.display()))?;
    let cfg = &model.config;
    eprintln!(
        "decode benchmark: {} ({} layers, hidden {}, vocab {}), weights {}, loaded in {:.1} s; {}-token prompts, {} new tokens",
        cfg.architecture.name(),
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.vocab_size,
        if model.is_quantised() { "in quantised blocks" } else { "f32" },
        t.elapsed().as_secs_f64(),
        flags.prompt_len,
        flags.new_tokens
    );
    let threads = openclaw_engine::bench::cpu_threads();
    let weights = std::sync::Arc::new(openclaw_engine::Versioned { version: 0, model });
    let rows = decode_speed(
        weights,
        &DecodeBenchConfig {
            prompt_len: flags.prompt_len,
            new_tokens: flags.new_tokens,
            batches: flags.batches.clone(),
            groups: threads,
            repeats: flags.repeats,
            seed: 0,
            adapters: flags.adapters.clone(),
            lora: openclaw_engine::lora::LoraConfig {
                rank: flags.lora_rank,
                alpha: 2.0 * flags.lora_rank as f64,
                ..Default::default()
            },
        },
    )?;
    for r in &rows {
        eprintln!(
            "batch {:>2} in {} group(s), {} adapter(s): {:>7.1} tokens/s decode ({:.1} per sequence), prefill {:.2} s",
            r.batch, r.groups, r.adapters, r.decode_tok_s, r.per_sequence_tok_s, r.prefill_s
        );
    }
    if let Some(mib) = peak_rss_mib() {
        eprintln!("peak resident memory {mib:.0} MiB");
    }
    println!("{}", serde_json::to_string_pretty(&rows)?);
    Ok(0)
}

fn bench_engine() -> anyhow::Result<i32> {
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

/// Peak resident memory of this process (Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn bench_train(steps: usize) -> anyhow::Result<i32> {
    use openclaw_trainer::bench::{run, BenchConfig};
    anyhow::ensure!(steps > 0, "bench train --steps must be at least 1");
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(2);
    let mut out = Vec::new();
    // The built-in default's shape (about 1M parameters) and the larger bench shape.
    let small = BenchConfig {
        model: openclaw_engine::ModelConfig::qwen3(2048, 128, 384, 4, 4, 2, 32, true),
        batch: 32,
        seq: 64,
        ..BenchConfig::tiny()
    };
    for (name, mut cfg) in [("tiny-1M", small), ("bench-4L-256", BenchConfig::tiny())] {
        cfg.data_parallel = threads;
        cfg.iters = steps;
        let r =
            run::<burn::backend::Autodiff<openclaw_engine::CpuBackend>>(&cfg, &Default::default())?;
        eprintln!(
            "{name}: {}x{} tokens per step, best {:.0} tok/s, mean {:.0} tok/s ({threads} threads)",
            cfg.batch, cfg.seq, r.best_tokens_per_s, r.mean_tokens_per_s
        );
        out.push(serde_json::json!({"config": name, "batch": cfg.batch, "seq": cfg.seq, "threads": threads, "result": r}));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(
            &serde_json::json!({"runs": out, "peak_rss_mib": peak_rss_mib()})
        )?
    );
    Ok(0)
}

/// The built-in default model's directory (built on first use).
pub fn builtin_model_path() -> anyhow::Result<String> {
    run_cmd::builtin_model().map(|p| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("openclaw-host").chain(args.iter().copied()))
    }

    #[test]
    fn each_bench_takes_its_own_settings_and_refuses_the_others() {
        let cli = parse(&["bench", "train", "--steps", "3"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Bench {
                what: BenchCommand::Train { steps: 3 }
            }
        ));
        let cli = parse(&[
            "bench",
            "decode",
            "--model-path",
            "m.gguf",
            "--batches",
            "1,4",
        ])
        .unwrap();
        let Command::Bench {
            what: BenchCommand::Decode { model_path, decode },
        } = cli.command
        else {
            panic!("not bench decode");
        };
        assert_eq!(
            (model_path, decode.batches),
            (PathBuf::from("m.gguf"), vec![1, 4])
        );
        // A setting of another benchmark would do nothing: refused, naming it.
        let wrong: [&[&str]; 4] = [
            &["bench", "engine", "--steps", "3"],
            &[
                "bench",
                "decode",
                "--model-path",
                "m.gguf",
                "--clients",
                "4",
            ],
            &["bench", "train", "--batches", "1,8"],
            &["bench", "serve", "--weights", "f32"],
        ];
        for args in wrong {
            let e = parse(args).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::UnknownArgument, "{args:?}");
            assert!(
                e.to_string().contains(args[args.len() - 2]),
                "{args:?}: {e}"
            );
        }
        let e = parse(&["bench", "speed"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidSubcommand);
    }
}

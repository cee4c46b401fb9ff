//! `openclaw-host eval`: a model's answers to held-out simulated prompts, with and without a
//! hint, as shares with 95% intervals.

use crate::backend::{OnBackend, Placement};
use crate::eval::{evaluate_on, EvalOptions};
use anyhow::Result;
use burn::prelude::Backend;
use openclaw_engine::Model;
use std::path::{Path, PathBuf};

/// The flags of `eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalFlags {
    /// A model directory, a checkpoint, a save directory or its `checkpoint-latest` (the newest
    /// checkpoint), `latest` (in --save-dir), or a GGUF file.
    #[arg(long, env = "MODEL_PATH")]
    pub model_path: PathBuf,
    /// The save directory `latest` refers to.
    #[arg(long, env = "CKPT_SAVE_DIR", default_value = "./checkpoints")]
    pub save_dir: PathBuf,
    /// Held-out prompts to ask (at most 100), spread over the task kinds.
    #[arg(long, default_value_t = 100)]
    pub eval_tasks: usize,
    /// Answers sampled per prompt and condition (temperature 1).
    #[arg(long, default_value_t = 2)]
    pub samples_per_prompt: usize,
    /// Seed of the samples: the same seed compares checkpoints on common random numbers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most new tokens of an answer (an unfinished answer counts as invalid).
    #[arg(long, default_value_t = 96)]
    pub max_new_tokens: usize,
    /// Tokenizer files for a checkpoint that has none (default: the checkpoint, then the base
    /// model its trainer_state.json names).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Answers quoted per condition in the JSON report.
    #[arg(long, default_value_t = 2)]
    pub examples: usize,
    /// Print the report as JSON (with per-kind shares and example answers).
    #[arg(long)]
    pub json: bool,
    /// Evaluate on an environment plugin's tasks instead of the built-in world: a crate
    /// directory or library (`envs/toolcall`), or an environment's name under `envs/`
    /// (`toolcall`). Its tasks run as episodes with the model; `--eval-tasks` tasks,
    /// `--samples-per-prompt` episodes each, `--max-new-tokens` per turn.
    #[arg(long, env = "ENV_TYPE")]
    pub env: Option<String>,
    /// The environment's configuration, a TOML file (default: the environment's own).
    #[arg(long, env = "ENV_CONFIG")]
    pub env_config: Option<PathBuf>,
    /// The tools and their limits: a TOML file of `[tools.<name>]` tables added to the
    /// environment's configuration.
    #[arg(long, env = "TOOLS_CONFIG")]
    pub tools_config: Option<PathBuf>,
    /// Run the episodes on remote environment pools (`env-pool serve`, or the original's
    /// terminal workers), comma-separated in failover order, instead of loading the plugin here.
    #[arg(long, env = "ENV_POOL_URL", value_delimiter = ',')]
    pub env_pool_url: Vec<String>,
    /// Episodes running at once.
    #[arg(long, env = "PARALLEL_ENVS", default_value_t = 4)]
    pub parallel_envs: usize,
    /// Agent steps per episode before the host cuts it off (it is still scored).
    #[arg(long = "max-episode-steps", env = "MAX_STEPS", default_value_t = 16)]
    pub max_episode_steps: u32,
    /// The environment's split to take tasks from.
    #[arg(long, default_value = "eval")]
    pub split: String,
    /// Seconds one environment call (reset, a step, close) may take; `evaluate` gets ten times
    /// as long.
    #[arg(long, default_value_t = 60)]
    pub env_call_timeout: u64,
    /// Write every episode (conversation, each step's exact tokens and logprobs, outcome) as
    /// JSON Lines to this file.
    #[arg(long)]
    pub episodes_out: Option<PathBuf>,
}

/// Runs `eval` on the built-in world (`--env` is `env_eval_cmd`'s).
pub fn run(flags: &EvalFlags) -> Result<i32> {
    let opts = EvalOptions {
        eval_tasks: flags.eval_tasks,
        samples_per_prompt: flags.samples_per_prompt,
        seed: flags.seed,
        max_new_tokens: flags.max_new_tokens,
        tokenizer: flags.tokenizer.clone(),
        save_dir: flags.save_dir.clone(),
        examples: flags.examples,
        ..Default::default()
    };
    struct On<'a>(&'a Path, &'a EvalOptions);
    impl OnBackend for On<'_> {
        type Output = crate::eval::EvalReport;
        fn run<B: Backend>(self, p: Placement<B>) -> Result<Self::Output>
        where
            Model<B>: Send + Sync,
        {
            evaluate_on::<B>(self.0, self.1, &p.serve)
        }
    }
    // Generation goes where ROLLOUT_GPUS says.
    let report = crate::backend::dispatch_generation(On(Path::new(&flags.model_path), &opts))?;
    if flags.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.model_path);
        print!("{}", report.table());
    }
    Ok(0)
}

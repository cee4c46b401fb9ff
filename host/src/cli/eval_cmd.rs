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
}

/// Runs `eval`.
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

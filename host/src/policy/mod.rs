//! The served policy: a model (any `--model-path`, read by `openclaw-models`) loaded into the engine, the generation thread, and the
//! `Policy` service plugins call.

pub mod engine;
pub mod scheduler;

pub use engine::{ModelFiles, PolicyEngine, Prompt};
pub use openclaw_models::{LoadOptions, ModelSource};

use crate::config::RunConfig;
use anyhow::Result;

/// How the run's configuration reads model paths: `latest` is the newest checkpoint in
/// `--save-dir`.
pub fn load_options(cfg: &RunConfig) -> LoadOptions {
    LoadOptions {
        save_dir: cfg.save_dir.clone().into(),
        tokenizer: None,
    }
}

/// What the run's `--model-path` names (see [`openclaw_models::resolve`]).
pub fn model_source(cfg: &RunConfig) -> Result<ModelSource> {
    openclaw_models::resolve(&cfg.model_path, std::path::Path::new(&cfg.save_dir))
}
pub use scheduler::{Busy, GenEvent, Scheduler, SchedulerOptions};

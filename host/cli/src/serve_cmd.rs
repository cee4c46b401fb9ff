//! `openclaw-host serve`: the OpenAI-compatible server that records every main turn
//! ([`Pipeline::serving`]).

use super::flags::RunFlags;
use anyhow::{bail, Result};
use burn::prelude::Backend;
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_config::{resolve, PluginConfigs, RunConfig};
use openclaw_engine::Model;
use openclaw_pipeline::Pipeline;

/// `openclaw-host serve`.
pub fn run(flags: &RunFlags) -> Result<i32> {
    let resolved = resolve(&flags.inputs(), &PluginConfigs::default())?;
    let cfg = resolved.config;
    if cfg.model_path.is_empty() {
        bail!("no model: set MODEL_PATH or --model-path (a model directory, a checkpoint, a save directory, `latest` or a .gguf file)");
    }
    openclaw_config::backend::dispatch(&cfg.clone(), ServeOn(cfg))
}

/// `serve` on the backend the configuration places it on.
struct ServeOn(RunConfig);

impl OnBackend for ServeOn {
    type Output = i32;

    fn run<B: Backend>(self, placement: Placement<B>) -> Result<i32>
    where
        Model<B>: Send + Sync,
    {
        let handle = Pipeline::<B>::serving(&self.0, &placement)?.start(|_| {})?;
        // Until Ctrl-C or SIGTERM.
        handle.wait();
        handle.shutdown()?;
        Ok(0)
    }
}

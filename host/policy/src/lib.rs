//! The served policy: a model (any `--model-path`, read by `openclaw-model-store`) loaded into the engine, the generation thread, and the
//! `Policy` service plugins call.

pub mod engine;
pub mod scheduler;

pub use engine::{ModelFiles, PolicyEngine, Prompt};
pub use openclaw_model_store::{LoadOptions, ModelSource};

use anyhow::Result;
use burn::prelude::Backend;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_metrics::Metrics;
use std::sync::Arc;

/// How the run's configuration reads model paths: `latest` is the newest checkpoint in
/// `--save-dir`.
pub fn load_options(cfg: &RunConfig) -> LoadOptions {
    LoadOptions {
        save_dir: cfg.save_dir.clone().into(),
        tokenizer: None,
        gguf: openclaw_engine::GgufWeights::Blocks,
    }
}

/// What the run's `--model-path` names (see [`openclaw_model_store::resolve`]).
pub fn model_source(cfg: &RunConfig) -> Result<ModelSource> {
    openclaw_model_store::resolve(&cfg.model_path, std::path::Path::new(&cfg.save_dir))
}

/// How tools reach the model `spec` names, as the first line of a run with an environment says
/// it: through its chat template's tools section, or in the system prompt when the template has
/// none (see [`openclaw_chat::ToolsRoute`]). Reads the tokenizer and chat template, not the
/// weights.
pub fn tools_line(spec: &str, load: &LoadOptions) -> Result<String> {
    let source = openclaw_model_store::resolve(spec, &load.save_dir)?;
    let (_, template) =
        openclaw_model_store::tokenizer_and_template(&source, load.tokenizer.as_deref())?;
    Ok(template.tools_route().line(spec))
}

pub use scheduler::{Busy, GenEvent, Scheduler, SchedulerOptions};

/// The engine's batch limits from the configuration.
pub fn scheduler_options(cfg: &RunConfig) -> SchedulerOptions {
    SchedulerOptions {
        max_batch: cfg.max_batch_size as usize,
        max_inflight: cfg.max_inflight as usize,
        prefix_cache: openclaw_engine::PrefixCacheOptions {
            budget_bytes: (cfg.prefix_cache_mb as usize) << 20,
            ..Default::default()
        },
    }
}

/// The run's model (`--model-path`) served by a policy engine with the run's batch limits, for
/// reward plugins that score with the policy (distillation's teacher) and judges that ask it.
pub fn policy_engine<B: Backend>(
    cfg: &RunConfig,
    device: &B::Device,
) -> Result<Arc<PolicyEngine<B>>>
where
    Model<B>: Send + Sync,
{
    let files = ModelFiles::<B>::load(&cfg.model_path, &load_options(cfg), device)?;
    Ok(Arc::new(PolicyEngine::start(
        files,
        0,
        scheduler_options(cfg),
        Arc::new(Metrics::new()),
    )))
}

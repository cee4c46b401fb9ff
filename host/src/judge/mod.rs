//! Judges: the models the methods' reward plugins ask, and the pool that runs them.

pub mod endpoint;
pub mod pool;
pub mod rule;

pub use endpoint::{EndpointJudge, EndpointOptions};

use crate::config::RunConfig;
use anyhow::Result;
use openclaw_plugin_api::host::JudgeService;
use openclaw_plugin_api::JudgeSettings;
use std::sync::Arc;
use std::time::Duration;

/// The judge a run's reward plugin asks: the endpoint of `--judge-endpoint` when set, else the
/// rule-based judge (which reads the next state; the built-in default's judge).
pub fn from_config(cfg: &RunConfig) -> Result<Arc<dyn JudgeService>> {
    if !cfg.judge_endpoint.is_empty() {
        let j = EndpointJudge::new(EndpointOptions {
            base_url: cfg.judge_endpoint.clone(),
            api_key: cfg.judge_api_key.clone(),
            model: cfg.judge_model.clone(),
            timeout: Duration::from_secs(cfg.judge_timeout),
        })?;
        tracing::info!("judging with {} at {}", j.model(), cfg.judge_endpoint);
        return Ok(Arc::new(j));
    }
    if !cfg.judge_model_path.is_empty() {
        anyhow::bail!(
            "--judge-model-path: a local judge model is not available in this build; serve the \
             judge with any OpenAI-compatible server and give --judge-endpoint URL"
        );
    }
    Ok(Arc::new(rule::RuleJudge))
}

/// The judge settings a run passes to its reward plugin.
pub fn settings(cfg: &RunConfig) -> JudgeSettings {
    JudgeSettings {
        votes: cfg.majority_vote_n,
        threshold: cfg.majority_vote_threshold as f32,
        temperature: cfg.judge_temperature,
        max_tokens: cfg.judge_max_tokens,
        topk: cfg.distill_topk,
    }
}

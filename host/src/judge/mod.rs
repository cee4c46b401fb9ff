//! Judges: the models the methods' reward plugins ask, and the pool that runs them.

pub mod endpoint;
pub mod local;
pub mod pool;
pub mod rule;

pub use endpoint::{EndpointJudge, EndpointOptions};

use crate::config::RunConfig;
use anyhow::Result;
use burn::prelude::Backend;
use openclaw_engine::Model;
use openclaw_plugin_api::host::JudgeService;
use openclaw_plugin_api::JudgeSettings;
use std::sync::Arc;
use std::time::Duration;

/// The judge a run's reward plugin asks: for chat verdicts the endpoint of `--judge-endpoint`,
/// else the local model of `--judge-model-path`, else the rule-based judge (which reads the
/// next state; the built-in default's judge); for class probabilities the classifier of
/// `--prm-model-path` when given. Local models run on backend `B` on `device` (`PRM_GPUS`).
pub fn from_config<B: Backend>(cfg: &RunConfig, device: &B::Device) -> Result<Arc<dyn JudgeService>>
where
    Model<B>: Send + Sync,
{
    let path = |p: &str| (!p.is_empty()).then(|| std::path::PathBuf::from(p));
    let chat: Arc<dyn JudgeService> = if !cfg.judge_endpoint.is_empty() {
        let j = EndpointJudge::new(EndpointOptions {
            base_url: cfg.judge_endpoint.clone(),
            api_key: cfg.judge_api_key.clone(),
            model: cfg.judge_model.clone(),
            timeout: Duration::from_secs(cfg.judge_timeout),
        })?;
        tracing::info!("judging with {} at {}", j.model(), cfg.judge_endpoint);
        Arc::new(j)
    } else if let Some(d) = path(&cfg.judge_model_path) {
        Arc::new(local::LocalJudge::<B>::load(
            Some(&d),
            None,
            Arc::new(crate::metrics::Metrics::new()),
            device,
        )?)
    } else {
        Arc::new(rule::RuleJudge)
    };
    match path(&cfg.prm_model_path) {
        None => Ok(chat),
        Some(d) => Ok(Arc::new(WithClassifier {
            chat,
            prm: Box::new(local::LocalJudge::<B>::load(
                None,
                Some(&d),
                Arc::new(crate::metrics::Metrics::new()),
                device,
            )?),
        })),
    }
}

/// Chat verdicts from one judge, class probabilities from a local classifier.
struct WithClassifier {
    chat: Arc<dyn JudgeService>,
    prm: Box<dyn JudgeService>,
}

impl JudgeService for WithClassifier {
    fn complete(
        &self,
        req: &openclaw_plugin_api::JudgeRequest,
    ) -> std::result::Result<Vec<std::result::Result<String, String>>, String> {
        self.chat.complete(req)
    }

    fn classify(&self, text: &str) -> std::result::Result<Vec<f32>, String> {
        self.prm.classify(text)
    }
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

//! A judge model run by the host's own engine: a chat model that writes the judge's verdicts
//! (`JUDGE_MODEL_PATH`, `PRM_MODEL_PATH`, or the frozen starting policy of `--judge self`) and a
//! sequence classifier whose class probabilities are a custom reward's input. Both are frozen.

use anyhow::{Context, Result};
use burn::prelude::Backend;
use openclaw_chat::Tokenizer;
use openclaw_engine::{classify, Model};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::host::{JudgeService, PolicyService};
use openclaw_plugin_api::JudgeRequest;
use openclaw_policy::{ModelFiles, PolicyEngine, SchedulerOptions};
use std::path::Path;
use std::sync::Arc;

/// Most tokens a classifier reads (the end of longer text is kept: the outcome is there).
pub const PRM_MAX_TOKENS: usize = 2048;

/// A judge served by a local chat model and, optionally, a local classifier, on backend `B`.
pub struct LocalJudge<B: Backend> {
    chat: Option<Arc<dyn PolicyService>>,
    prm: Option<(Model<B>, Tokenizer)>,
}

impl<B: Backend> LocalJudge<B> {
    /// A judge whose verdicts `policy` writes (`--judge self`: the frozen starting model).
    pub fn over_policy(policy: Arc<dyn PolicyService>) -> Self {
        LocalJudge {
            chat: Some(policy),
            prm: None,
        }
    }
}

impl<B: Backend> LocalJudge<B>
where
    Model<B>: Send + Sync,
{
    /// Loads the chat judge from `judge_dir` and the classifier from `prm_dir` (either may be
    /// absent, not both) on `device`. Either may be anything `--model-path` takes.
    pub fn load(
        judge_dir: Option<&Path>,
        prm_dir: Option<&Path>,
        metrics: Arc<Metrics>,
        device: &B::Device,
    ) -> Result<Self> {
        let chat = judge_dir
            .map(|d| -> Result<_> {
                let files = ModelFiles::<B>::load_path(d, device)
                    .with_context(|| format!("cannot load the judge model {}", d.display()))?;
                let engine: Arc<dyn PolicyService> = Arc::new(PolicyEngine::start(
                    files,
                    0,
                    SchedulerOptions {
                        max_batch: 8,
                        max_inflight: 64,
                        // Judge prompts repeat their instructions: keep their prefixes.
                        prefix_cache: Default::default(),
                    },
                    metrics.clone(),
                ));
                Ok(engine)
            })
            .transpose()?;
        let prm = prm_dir
            .map(|d| -> Result<_> {
                let source = openclaw_model_store::resolve(
                    &d.to_string_lossy(),
                    &openclaw_model_store::LoadOptions::default().save_dir,
                )?;
                let d = source.path();
                let model = openclaw_model_store::load::load_weights::<B>(&source, device)
                    .with_context(|| format!("cannot load the reward model {}", d.display()))?;
                if model.score.is_none() {
                    anyhow::bail!(
                        "{} is not a sequence classifier (its config names no *ForSequenceClassification architecture)",
                        d.display()
                    );
                }
                Ok((model, Tokenizer::from_dir(d)?))
            })
            .transpose()?;
        anyhow::ensure!(chat.is_some() || prm.is_some(), "no judge model given");
        Ok(LocalJudge { chat, prm })
    }
}

impl<B: Backend> JudgeService for LocalJudge<B>
where
    Model<B>: Send + Sync,
{
    fn complete(&self, req: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        let engine = self.chat.as_ref().ok_or(
            "no judge chat model: give --judge-model-path, --judge-endpoint or --judge self",
        )?;
        // Votes are independent samples; the scheduler batches them together.
        let n = req.n.max(1) as usize;
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let engine = engine.clone();
                let mut sampling = req.sampling.clone();
                if let Some(s) = sampling.seed.as_ref().copied().into_option() {
                    sampling.seed = Some(s.wrapping_add(i as u64)).into();
                }
                let messages = req.messages.to_vec();
                std::thread::spawn(move || {
                    engine
                        .chat(&messages, "", &sampling)
                        .map(|g| g.message.content.to_string())
                })
            })
            .collect();
        Ok(handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a judge call panicked".into()))
            })
            .collect())
    }

    fn classify(&self, text: &str) -> Result<Vec<f32>, String> {
        let (model, tok) = self.prm.as_ref().ok_or(
            "no reward classifier: --prm-model-path must name a sequence classifier (a \
                 *ForSequenceClassification model); a chat model given there answers the PRM \
                 prompt instead",
        )?;
        let mut ids = tok.encode(text, false).map_err(|e| format!("{e:#}"))?;
        if ids.len() > PRM_MAX_TOKENS {
            ids.drain(..ids.len() - PRM_MAX_TOKENS);
        }
        if ids.is_empty() {
            return Err("nothing to classify".into());
        }
        let logits = classify(model, &[ids])
            .map_err(|e| format!("{e:#}"))?
            .pop()
            .ok_or("the classifier returned nothing")?;
        // Probabilities, as a reward plugin expects.
        let m = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = logits.iter().map(|l| (l - m).exp()).collect();
        let z: f32 = exps.iter().sum();
        Ok(exps.into_iter().map(|e| e / z).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_engine::config::Architecture;
    use openclaw_engine::CpuBackend;
    use openclaw_engine::{random_model, save_model, ModelConfig, SaveOptions};
    use openclaw_plugin_api::{Message, SamplingParams};

    /// A tiny model directory (random weights, a BPE tokenizer trained on a few words).
    fn model_dir(dir: &Path, classifier: bool) -> std::path::PathBuf {
        let text = dir.join("corpus.txt");
        std::fs::write(
            &text,
            "the answer is good progress correction thanks\n".repeat(50),
        )
        .unwrap();
        let out = dir.join(if classifier { "prm" } else { "judge" });
        std::fs::create_dir_all(&out).unwrap();
        let tok = openclaw_chat::train_bpe(&[text], 300, &out).unwrap();
        let mut cfg = ModelConfig::qwen3(tok.vocab_size(), 32, 64, 1, 2, 1, 16, true);
        if classifier {
            cfg.architecture = Architecture::Qwen3ForSequenceClassification;
            cfg.num_labels = 2;
        }
        let m = random_model::<CpuBackend>(cfg, 1, &Default::default()).unwrap();
        save_model(&m, &out, &SaveOptions::default()).unwrap();
        out
    }

    #[test]
    fn a_local_chat_judge_returns_one_completion_per_vote_and_a_classifier_probabilities() {
        let tmp = tempfile::tempdir().unwrap();
        let judge = model_dir(tmp.path(), false);
        let prm = model_dir(tmp.path(), true);
        let j = LocalJudge::<CpuBackend>::load(
            Some(&judge),
            Some(&prm),
            Arc::new(Metrics::new()),
            &Default::default(),
        )
        .unwrap();
        let req = JudgeRequest {
            messages: vec![Message::new("user", "is this good progress")].into(),
            sampling: SamplingParams {
                max_tokens: 5,
                seed: Some(3).into(),
                ..Default::default()
            },
            n: 3,
        };
        let votes = j.complete(&req).unwrap();
        assert_eq!(votes.len(), 3);
        assert!(votes.iter().all(|v| v.is_ok()), "{votes:?}");
        let p = j.classify("the answer is good").unwrap();
        assert_eq!(p.len(), 2);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{p:?}");
        // A chat model is not a classifier.
        let e = LocalJudge::<CpuBackend>::load(
            None,
            Some(&judge),
            Arc::new(Metrics::new()),
            &Default::default(),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("not a sequence classifier"), "{e}");
    }
}

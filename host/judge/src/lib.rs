//! Judges: the models the methods' reward plugins ask, and the pool that runs them.

pub mod endpoint;
pub mod feedback;
pub mod local;
pub mod pool;
pub mod rule;
pub mod stats;

pub use endpoint::{EndpointJudge, EndpointOptions};
pub use feedback::{feedback_score, Feedback, FeedbackMode, FeedbackRule};

use anyhow::{Context, Result};
use burn::prelude::Backend;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_plugin_api::host::{HostServicesBuilder, JudgeService, PolicyService};
use openclaw_plugin_api::{JudgeSettings, ScoreRequest, Turn};
use std::sync::Arc;
use std::time::Duration;

/// Where one judge role's verdicts come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JudgeSource {
    /// An OpenAI-compatible server (`--judge-endpoint`).
    Endpoint(String),
    /// A chat model run here (`--judge-model-path`, `--prm-model-path`).
    Model(String),
    /// The starting policy, frozen (`--judge self`).
    Policy,
    /// The keyword rules written for the simulated users (`--judge rule`).
    Rule,
    /// Nothing named: a run that judges no turn, or a custom reward that brings its own.
    Unnamed,
}

impl std::fmt::Display for JudgeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JudgeSource::Endpoint(url) => write!(f, "the endpoint {url}"),
            JudgeSource::Model(path) => write!(f, "the model {path}"),
            JudgeSource::Policy => write!(f, "the starting policy, frozen (--judge self)"),
            JudgeSource::Rule => write!(f, "the keyword rules (--judge rule)"),
            JudgeSource::Unnamed => write!(f, "none named"),
        }
    }
}

/// What judges a run's turns, chosen from its settings before anything is loaded.
///
/// Two roles, as in the original: the outcome judge answers binary RL's PRM prompt
/// (`PRM_MODEL_PATH`), the hint judge finds distillation's hints (`JUDGE_MODEL_PATH`). Each
/// takes its own model first, then the endpoint, then the other role's model, then `--judge`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeChoice {
    /// The judge of distillation's hint prompt (and of any prompt without its own judge).
    pub hint: JudgeSource,
    /// The judge of the outcome (PRM) prompt.
    pub prm: JudgeSource,
    /// A sequence classifier for a custom reward's `classify` (`PRM_MODEL_PATH` with
    /// `--custom-rm-path`).
    pub classifier: Option<String>,
}

/// The refusal of a run whose turns would be judged by nothing named.
pub const NO_JUDGE: &str = "this run judges its turns and no judge is named; choose one:
  --judge-model-path DIR   a chat model judges (JUDGE_MODEL_PATH; PRM_MODEL_PATH for the outcome prompt alone)
  --judge-endpoint URL     an OpenAI-compatible server judges (JUDGE_ENDPOINT)
  --judge self             the starting policy, frozen, judges its own turns (OPENCLAW_JUDGE=self)
  --judge rule             keyword rules read the next state; written for the simulated users, not for real ones (OPENCLAW_JUDGE=rule)";

impl JudgeChoice {
    /// The choice for `cfg`. `judges_turns`: whether the method's reward will ask a judge about
    /// turns (not when an environment's reward decides alone); `is_classifier` says whether a
    /// model path is a sequence classifier.
    pub fn resolve(
        cfg: &RunConfig,
        judges_turns: bool,
        is_classifier: &dyn Fn(&str) -> Result<bool>,
    ) -> Result<JudgeChoice> {
        let named = |p: &str| (!p.is_empty()).then(|| JudgeSource::Model(p.to_string()));
        let custom = !cfg.custom_rm_path.is_empty();
        let (prm_model, classifier) = match cfg.prm_model_path.as_str() {
            "" => (None, None),
            p if is_classifier(p)? => {
                anyhow::ensure!(
                    custom,
                    "PRM_MODEL_PATH {p} is a sequence classifier, and PRM_MODEL_PATH names the chat \
                     model that answers the outcome (PRM) prompt; a classifier's probabilities are \
                     read by a reward plugin of your own: give it with --custom-rm-path (for example \
                     examples/my-method)"
                );
                (None, Some(p.to_string()))
            }
            p => (named(p), None),
        };
        let own = match cfg.judge.as_str() {
            "self" => Some(JudgeSource::Policy),
            "rule" => Some(JudgeSource::Rule),
            _ => None,
        };
        let shared = named(&cfg.judge_model_path)
            .or_else(|| {
                (!cfg.judge_endpoint.is_empty())
                    .then(|| JudgeSource::Endpoint(cfg.judge_endpoint.clone()))
            })
            .or(own);
        let hint = shared.clone().or_else(|| prm_model.clone());
        let prm = prm_model.or(shared);
        match (hint, prm) {
            (Some(hint), Some(prm)) => Ok(JudgeChoice {
                hint,
                prm,
                classifier,
            }),
            // A custom reward asks what it needs (a classifier, or nothing); a chat prompt it
            // sends anyway is answered with an error naming the choices, not with the rules.
            _ if custom || !judges_turns => Ok(JudgeChoice {
                hint: JudgeSource::Unnamed,
                prm: JudgeSource::Unnamed,
                classifier,
            }),
            _ => anyhow::bail!("{NO_JUDGE}"),
        }
    }

    /// The one line a run logs about its judges.
    pub fn describe(&self) -> String {
        let mut line = if self.hint == self.prm {
            match self.hint {
                JudgeSource::Unnamed => {
                    "none (no turn of this run is judged by a chat prompt)".to_string()
                }
                ref s => format!("{s} (outcome votes and hints)"),
            }
        } else {
            format!(
                "outcome votes (PRM prompt) by {}; hints by {}",
                self.prm, self.hint
            )
        };
        if let Some(c) = &self.classifier {
            line.push_str(&format!("; class probabilities by the classifier {c}"));
        }
        format!("judge: {line}")
    }

    /// Whether a role is answered by the frozen starting policy.
    pub fn needs_policy(&self) -> bool {
        self.hint == JudgeSource::Policy || self.prm == JudgeSource::Policy
    }
}

/// Whether the model at `path` is a sequence classifier (its config names a
/// `*ForSequenceClassification` architecture). A GGUF file never is.
pub fn is_classifier(path: &str) -> Result<bool> {
    let source = openclaw_model_store::resolve(
        path,
        &openclaw_model_store::LoadOptions::default().save_dir,
    )?;
    let openclaw_model_store::ModelSource::Directory(dir) = source else {
        return Ok(false);
    };
    let file = dir.join("config.json");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let config: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    Ok(config["architectures"].as_array().is_some_and(|a| {
        a.iter()
            .filter_map(|x| x.as_str())
            .any(|x| x.ends_with("ForSequenceClassification"))
    }))
}

/// A run's judges, loaded: what its reward plugin is given.
pub struct Judges {
    /// The hint judge (the plugin's `judge()`), with the classifier when there is one.
    pub hint: Arc<dyn JudgeService>,
    /// The outcome judge (the plugin's `prm_judge()`).
    pub prm: Arc<dyn JudgeService>,
}

impl Judges {
    /// Loads the judges of `choice`, each model once; local models run on backend `B` on
    /// `device` (`PRM_GPUS`). `frozen` gives the starting policy when a role is `--judge self`.
    pub fn load<B: Backend>(
        choice: &JudgeChoice,
        cfg: &RunConfig,
        device: &B::Device,
        frozen: &mut dyn FnMut() -> Result<Arc<dyn PolicyService>>,
    ) -> Result<Judges>
    where
        Model<B>: Send + Sync,
    {
        let mut loaded: Vec<(JudgeSource, Arc<dyn JudgeService>)> = Vec::new();
        let mut get = |source: &JudgeSource| -> Result<Arc<dyn JudgeService>> {
            if let Some((_, j)) = loaded.iter().find(|(s, _)| s == source) {
                return Ok(j.clone());
            }
            let judge: Arc<dyn JudgeService> = match source {
                JudgeSource::Endpoint(url) => Arc::new(EndpointJudge::new(EndpointOptions {
                    base_url: url.clone(),
                    api_key: cfg.judge_api_key.clone(),
                    model: cfg.judge_model.clone(),
                    timeout: Duration::from_secs(cfg.judge_timeout),
                })?),
                JudgeSource::Model(path) => Arc::new(local::LocalJudge::<B>::load(
                    Some(std::path::Path::new(path)),
                    None,
                    Arc::new(openclaw_metrics::Metrics::new()),
                    device,
                )?),
                JudgeSource::Policy => Arc::new(local::LocalJudge::<B>::over_policy(frozen()?)),
                JudgeSource::Rule => Arc::new(rule::RuleJudge),
                JudgeSource::Unnamed => Arc::new(UnnamedJudge),
            };
            loaded.push((source.clone(), judge.clone()));
            Ok(judge)
        };
        let prm = get(&choice.prm)?;
        let mut hint = get(&choice.hint)?;
        if let Some(path) = &choice.classifier {
            hint = Arc::new(WithClassifier {
                chat: hint,
                prm: Box::new(local::LocalJudge::<B>::load(
                    None,
                    Some(std::path::Path::new(path)),
                    Arc::new(openclaw_metrics::Metrics::new()),
                    device,
                )?),
            });
        }
        Ok(Judges { hint, prm })
    }

    /// Gives the judges to a plugin's services.
    pub fn give(&self, services: HostServicesBuilder) -> HostServicesBuilder {
        services
            .judge(self.hint.clone())
            .prm_judge(self.prm.clone())
    }
}

/// The judge of a role nothing was named for: every question is refused with the choices.
struct UnnamedJudge;

impl JudgeService for UnnamedJudge {
    fn complete(
        &self,
        _: &openclaw_plugin_api::JudgeRequest,
    ) -> std::result::Result<Vec<std::result::Result<String, String>>, String> {
        Err(NO_JUDGE.replace(
            "this run judges its turns and",
            "a plugin asked a judge, but",
        ))
    }

    fn classify(&self, _: &str) -> std::result::Result<Vec<f32>, String> {
        Err("no reward classifier: give PRM_MODEL_PATH a sequence-classification model".into())
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

/// The score request for a turn: the judge reads the response as the client saw it.
pub fn score_request(turn: Turn, session_closed: bool, judge: &JudgeSettings) -> ScoreRequest {
    ScoreRequest {
        response_text: turn.response.content.clone(),
        session_closed,
        judge: judge.clone(),
        turn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use JudgeSource::*;

    fn cfg(settings: &[(&str, &str)]) -> RunConfig {
        let mut c = RunConfig::defaults();
        for (k, v) in settings {
            let v = v.to_string();
            match *k {
                "judge" => c.judge = v,
                "judge_model_path" => c.judge_model_path = v,
                "prm_model_path" => c.prm_model_path = v,
                "judge_endpoint" => c.judge_endpoint = v,
                "custom_rm_path" => c.custom_rm_path = v,
                _ => unreachable!("{k}"),
            }
        }
        c
    }

    /// `cls` is the only path that is a sequence classifier.
    fn choose(settings: &[(&str, &str)], judges_turns: bool) -> Result<JudgeChoice> {
        JudgeChoice::resolve(&cfg(settings), judges_turns, &|p| Ok(p == "cls"))
    }

    fn roles(settings: &[(&str, &str)]) -> (JudgeSource, JudgeSource) {
        let c = choose(settings, true).unwrap();
        (c.hint, c.prm)
    }

    #[test]
    fn each_role_takes_its_own_model_then_the_endpoint_then_the_other_model_then_the_flag() {
        let m = |p: &str| Model(p.into());
        assert_eq!(roles(&[("judge_model_path", "j")]), (m("j"), m("j")));
        assert_eq!(roles(&[("prm_model_path", "p")]), (m("p"), m("p")));
        assert_eq!(
            roles(&[("judge_model_path", "j"), ("prm_model_path", "p")]),
            (m("j"), m("p"))
        );
        let url = "http://127.0.0.1:1/v1";
        assert_eq!(
            roles(&[("judge_endpoint", url), ("prm_model_path", "p")]),
            (Endpoint(url.into()), m("p"))
        );
        assert_eq!(roles(&[("judge", "self")]), (Policy, Policy));
        assert_eq!(roles(&[("judge", "rule")]), (Rule, Rule));
        assert_eq!(
            roles(&[("judge", "self"), ("prm_model_path", "p")]),
            (Policy, m("p"))
        );
    }

    #[test]
    fn judged_turns_with_no_judge_named_are_refused_with_every_choice() {
        let e = choose(&[], true).unwrap_err().to_string();
        for choice in [
            "--judge-model-path",
            "--judge-endpoint",
            "--judge self",
            "--judge rule",
        ] {
            assert!(e.contains(choice), "{e}");
        }
        // Nothing judged (an environment's reward alone): nothing needed, nothing pretended.
        let c = choose(&[], false).unwrap();
        assert_eq!((&c.hint, &c.prm), (&Unnamed, &Unnamed));
        assert!(c.describe().contains("none"), "{}", c.describe());
    }

    #[test]
    fn a_classifier_in_prm_model_path_serves_a_custom_reward_only() {
        let e = choose(&[("prm_model_path", "cls")], true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sequence classifier") && e.contains("--custom-rm-path"),
            "{e}"
        );
        let c = choose(
            &[
                ("prm_model_path", "cls"),
                ("custom_rm_path", "examples/my-method"),
            ],
            true,
        )
        .unwrap();
        assert_eq!((&c.hint, &c.prm), (&Unnamed, &Unnamed));
        assert_eq!(c.classifier.as_deref(), Some("cls"));
        let line = c.describe();
        assert!(
            line.starts_with("judge: ") && line.contains("classifier cls"),
            "{line}"
        );
    }

    #[test]
    fn the_description_names_each_role_once() {
        let c = choose(&[("judge_model_path", "j"), ("prm_model_path", "p")], true).unwrap();
        assert_eq!(
            c.describe(),
            "judge: outcome votes (PRM prompt) by the model p; hints by the model j"
        );
        let c = choose(&[("judge", "rule")], true).unwrap();
        assert_eq!(
            c.describe(),
            "judge: the keyword rules (--judge rule) (outcome votes and hints)"
        );
    }

    #[test]
    fn an_unnamed_judge_refuses_to_answer() {
        let e = UnnamedJudge
            .complete(&openclaw_plugin_api::JudgeRequest {
                messages: Vec::new().into(),
                sampling: Default::default(),
                n: 1,
            })
            .unwrap_err();
        assert!(
            e.contains("a plugin asked a judge") && e.contains("--judge self"),
            "{e}"
        );
    }

    #[test]
    fn a_config_without_a_classifier_architecture_is_a_chat_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        for (arch, expected) in [
            ("Qwen3ForCausalLM", false),
            ("Qwen3ForSequenceClassification", true),
        ] {
            std::fs::write(
                dir.join("config.json"),
                format!(r#"{{"architectures": ["{arch}"]}}"#),
            )
            .unwrap();
            assert_eq!(is_classifier(&dir.display().to_string()).unwrap(), expected);
        }
    }
}

//! A custom reward model: a sequence classifier (a PRM given with `--prm-model-path`) reads the
//! turn as `Prompt: … / Response: … / Outcome: …`, and the probability of its positive class is
//! the reward. Used as `--custom-rm-path examples/my-method` beside any method's loss.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Judge, PluginResult, Reward, Score, ScoreRequest,
};

/// The `[reward]` settings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct MyRewardConfig {
    /// Which class of the classifier means "good".
    pub positive_class: usize,
    /// Turns without an outcome (no next state) are not scored.
    pub require_outcome: bool,
}

impl Default for MyRewardConfig {
    fn default() -> Self {
        MyRewardConfig {
            positive_class: 1,
            require_outcome: true,
        }
    }
}

/// The reward model.
pub struct MyReward {
    config: MyRewardConfig,
    judge: Judge,
}

/// The text the classifier reads. The host keeps its last 2,048 tokens, where the outcome is.
pub fn classifier_text(request: &ScoreRequest) -> String {
    let prompt = request
        .turn
        .prompt_messages
        .iter()
        .rev()
        .find(|m| m.role.as_str() == "user")
        .map(|m| m.content.to_string())
        .unwrap_or_default();
    let outcome = request
        .turn
        .next_state
        .as_ref()
        .map(|n| n.content.to_string())
        .unwrap_or_default();
    format!(
        "Prompt: {prompt}\nResponse: {}\nOutcome: {outcome}",
        request.response_text
    )
}

impl Reward for MyReward {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let config: MyRewardConfig = parse_config_section(config, "reward")?;
        let judge = host.judge().ok_or(
            "the my-method reward needs the host's judge with a classifier (--prm-model-path)",
        )?;
        Ok(MyReward { config, judge })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        if self.config.require_outcome && request.turn.next_state.is_none() {
            return Ok(Score {
                judge_text: "no outcome to classify".into(),
                ..Default::default()
            });
        }
        let probs = self.judge.classify(&classifier_text(request))?;
        let p = *probs.get(self.config.positive_class).ok_or_else(|| {
            format!(
                "the classifier has {} classes; positive_class = {} is not one of them",
                probs.len(),
                self.config.positive_class
            )
        })?;
        if !p.is_finite() {
            return Err(format!("the classifier returned {p}"));
        }
        Ok(Score {
            value: p,
            trainable: true,
            judge_text: format!("P(positive) = {p:.4}").into(),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::host::JudgeService;
    use openclaw_plugin_api::{JudgeRequest, Message, NextState, Turn, TurnType};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Classifier {
        seen: Mutex<Vec<String>>,
    }

    impl JudgeService for Classifier {
        fn complete(&self, _: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
            Err("no chat model".into())
        }
        fn classify(&self, text: &str) -> Result<Vec<f32>, String> {
            self.seen.lock().unwrap().push(text.to_string());
            Ok(vec![0.25, 0.75])
        }
    }

    fn request(next: Option<&str>) -> ScoreRequest {
        ScoreRequest {
            turn: Turn {
                session_id: "s".into(),
                turn_index: 0,
                turn_type: TurnType::Main,
                prompt_messages: vec![Message::new("user", "Where do owls live?")].into(),
                tools_json: "".into(),
                response: Message::new("assistant", "In forests."),
                prompt_ids: vec![1].into(),
                response_ids: vec![2].into(),
                response_logprobs: vec![-0.1].into(),
                weight_version: 0,
                next_state: next
                    .map(|t| NextState {
                        role: "user".into(),
                        content: t.into(),
                        messages: vec![Message::new("user", t)].into(),
                    })
                    .into(),
                trainable: true,
            },
            response_text: "In forests.".into(),
            session_closed: next.is_none(),
            judge: Default::default(),
        }
    }

    #[test]
    fn the_reward_is_the_positive_class_probability_of_prompt_response_outcome() {
        let c = Arc::new(Classifier::default());
        let host = HostServices::builder().judge(c.clone()).build();
        let r = MyReward::new("", host).unwrap();
        let s = r.score(&request(Some("Thanks!"))).unwrap();
        assert_eq!((s.value, s.trainable), (0.75, true));
        assert_eq!(
            c.seen.lock().unwrap()[0],
            "Prompt: Where do owls live?\nResponse: In forests.\nOutcome: Thanks!"
        );
        let none = r.score(&request(None)).unwrap();
        assert!(!none.trainable);
    }

    #[test]
    fn bad_settings_and_a_missing_classifier_are_named() {
        let c = Arc::new(Classifier::default());
        let host = HostServices::builder().judge(c).build();
        let r = MyReward::new("[reward]\npositive_class = 5", host).unwrap();
        let e = r.score(&request(Some("ok"))).unwrap_err();
        assert!(e.contains("positive_class = 5"), "{e}");
        let e = MyReward::new("", HostServices::standalone()).err().unwrap();
        assert!(e.contains("--prm-model-path"), "{e}");
        let e = MyReward::new("[reward]\npositve_class = 1", HostServices::standalone())
            .err()
            .unwrap();
        assert!(e.contains("positve_class"), "{e}");
    }
}

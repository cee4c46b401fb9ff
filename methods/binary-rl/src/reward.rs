//! The binary RL reward: the judge's majority vote on a turn, read from its next state.

use crate::config::BinaryRlRewardConfig;
use openclaw_judging::{judge_turn, prm_votes, PrmVerdict};
use openclaw_plugin_api::serde_json::json;
use openclaw_plugin_api::{HostServices, Judge, PluginResult, Reward, Score, ScoreRequest};

/// Scores a main turn +1 (the next state shows progress), -1 (a correction, a redo, an error
/// the turn caused) or 0 (ambiguous) by the majority of `judge.votes` answers of the outcome
/// judge ([`openclaw_judging::prm_judge_messages`]). A turn scored 0, or without a
/// next state, is not trainable; a turn without a next state is not sent to the judge at all.
pub struct BinaryRlReward {
    config: BinaryRlRewardConfig,
    judge: Judge,
}

impl BinaryRlReward {
    /// The configuration in use.
    pub fn config(&self) -> &BinaryRlRewardConfig {
        &self.config
    }
}

/// The score of a judged turn.
pub fn verdict_score(v: PrmVerdict, votes_asked: u32) -> Score {
    Score {
        value: v.score,
        trainable: v.score != 0.0,
        metadata_json: json!({
            "judged": true,
            "score": v.score,
            "votes_asked": votes_asked,
            "invalid_votes": v.invalid_votes,
        })
        .to_string()
        .into(),
        votes: v.votes.into(),
        invalid_votes: v.invalid_votes,
        judge_text: v.judge_text.into(),
        ..Default::default()
    }
}

impl Reward for BinaryRlReward {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let config = BinaryRlRewardConfig::parse(config)?;
        // The outcome prompt goes to PRM_MODEL_PATH's judge when the host has one apart.
        let judge = host.prm_judge().ok_or(
            "the binary-rl reward needs a judge model to vote on each turn, and the host has none",
        )?;
        Ok(BinaryRlReward { config, judge })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        judge_turn(request, self.config.max_judge_chars, |input| {
            let verdict = prm_votes(&self.judge, &input, &request.judge)?;
            Ok(verdict_score(verdict, request.judge.votes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_judging::scripted::ScriptedJudge;
    use openclaw_plugin_api::{JudgeSettings, Message, NextState, Turn, TurnType};
    use std::sync::Arc;

    fn request(next: Option<(&str, &str)>) -> ScoreRequest {
        let mut response = Message::new("assistant", "I deleted the old logs.");
        response.reasoning_content = Some("They asked to clean up.".into()).into();
        ScoreRequest {
            turn: Turn {
                session_id: "s1".into(),
                turn_index: 2,
                turn_type: TurnType::Main,
                prompt_messages: vec![Message::new("user", "Clean up the logs.")].into(),
                tools_json: "".into(),
                response,
                prompt_ids: vec![1, 2].into(),
                response_ids: vec![3, 4, 5].into(),
                response_logprobs: vec![-0.1, -0.2, -0.3].into(),
                weight_version: 1,
                next_state: next
                    .map(|(role, text)| NextState {
                        role: role.into(),
                        content: text.into(),
                        messages: vec![Message::new(role, text)].into(),
                    })
                    .into(),
                trainable: true,
            },
            response_text: "<think>They asked to clean up.</think>I deleted the old logs.".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        }
    }

    fn reward(judge: ScriptedJudge) -> (Arc<ScriptedJudge>, BinaryRlReward) {
        let judge = Arc::new(judge);
        let host = HostServices::builder().judge(judge.clone()).build();
        let r = BinaryRlReward::new(crate::DEFAULT_CONFIG, host).unwrap();
        (judge, r)
    }

    #[test]
    fn the_majority_of_valid_votes_is_the_score() {
        let (judge, r) = reward(ScriptedJudge::new(|_| {
            Ok(vec![
                Ok("They had to ask again. \\boxed{-1}".into()),
                Err("timeout".into()),
                Ok("\\boxed{7}".into()),
                Ok("reasoning... \\boxed{-1}".into()),
                Ok("\\boxed{1}".into()),
            ])
        }));
        let mut req = request(Some((
            "user",
            "No, I said the OLD logs, not all of them. Redo it.",
        )));
        req.judge.votes = 5;
        req.judge.temperature = 0.4;
        req.judge.max_tokens = 321;
        let s = r.score(&req).unwrap();
        assert_eq!(s.value, -1.0);
        assert!(s.trainable);
        assert_eq!(s.votes.to_vec(), vec![-1.0, -1.0, 1.0]);
        assert_eq!(s.invalid_votes, 2);
        assert_eq!(s.judge_text.as_str(), "They had to ask again. \\boxed{-1}");
        assert!(s.hint.is_none() && s.teacher_logprobs.is_none());
        assert!(
            s.metadata_json.contains("\"judged\":true"),
            "{}",
            s.metadata_json
        );

        assert_eq!(judge.calls(), 1);
        let sent = judge.requests.lock().unwrap()[0].clone();
        assert_eq!((sent.n, sent.sampling.max_tokens), (5, 321));
        assert_eq!(sent.sampling.temperature, 0.4);
        assert_eq!(sent.messages[0].role.as_str(), "system");
        assert_eq!(sent.messages[1].role.as_str(), "user");
        let user = sent.messages[1].content.as_str();
        assert!(
            user.starts_with(
                "## Assistant output\n<think>\nThey asked to clean up.\n</think>\n\
                 I deleted the old logs.\n\n## Next state [role: user]\nNo, I said the OLD logs"
            ),
            "{user}"
        );
    }

    #[test]
    fn ties_and_low_shares_give_an_untrainable_zero() {
        let (_, r) = reward(ScriptedJudge::always(&[
            "\\boxed{1}",
            "\\boxed{-1}",
            "\\boxed{0}",
        ]));
        let s = r.score(&request(Some(("tool", "ok")))).unwrap();
        assert_eq!((s.value, s.trainable), (0.0, false));
        assert_eq!(s.votes.len(), 3);
        assert_eq!(
            s.judge_text.as_str(),
            "\\boxed{0}",
            "the answer that voted 0"
        );

        let (_, r) = reward(ScriptedJudge::always(&[
            "\\boxed{1}",
            "\\boxed{1}",
            "\\boxed{-1}",
        ]));
        let mut req = request(Some(("tool", "ok")));
        req.judge.threshold = 0.7;
        let s = r.score(&req).unwrap();
        assert_eq!((s.value, s.trainable), (0.0, false));
        assert_eq!(
            s.judge_text.as_str(),
            "\\boxed{1}",
            "no answer voted 0: the first"
        );
        req.judge.threshold = 0.6;
        assert_eq!(r.score(&req).unwrap().value, 1.0);

        // Nothing parseable: 0, every vote invalid.
        let (_, r) = reward(ScriptedJudge::always(&[
            "I think it went fine.",
            "\\boxed{}",
        ]));
        let s = r.score(&request(Some(("user", "thanks")))).unwrap();
        assert_eq!((s.value, s.trainable, s.invalid_votes), (0.0, false, 3));
    }

    #[test]
    fn a_tool_success_is_judged_with_its_role() {
        let (judge, r) = reward(ScriptedJudge::always(&["tool worked \\boxed{1}"]));
        let s = r
            .score(&request(Some(("tool", "{\"deleted\": 12}"))))
            .unwrap();
        assert_eq!((s.value, s.trainable), (1.0, true));
        assert!(judge
            .prompt(0)
            .contains("## Next state [role: tool]\n{\"deleted\": 12}"));
    }

    #[test]
    fn a_turn_without_a_next_state_is_not_judged() {
        let (judge, r) = reward(ScriptedJudge::always(&["\\boxed{1}"]));
        let s = r.score(&request(None)).unwrap();
        assert_eq!((s.value, s.trainable), (0.0, false));
        assert!(s.votes.is_empty());
        assert!(s.metadata_json.contains("no next state"));
        let mut side = request(Some(("user", "thanks")));
        side.turn.turn_type = TurnType::Side;
        assert!(!r.score(&side).unwrap().trainable);
        assert_eq!(judge.calls(), 0, "no judge call for an unjudged turn");
    }

    #[test]
    fn a_failed_judge_call_is_an_error_and_no_judge_fails_construction() {
        let (_, r) = reward(ScriptedJudge::new(|_| Err("connection refused".into())));
        let e = r.score(&request(Some(("user", "ok")))).unwrap_err();
        assert!(e.contains("connection refused"), "{e}");

        let e = BinaryRlReward::new("", HostServices::standalone())
            .err()
            .unwrap();
        assert!(e.contains("judge"), "{e}");
        let host = HostServices::builder()
            .judge(Arc::new(ScriptedJudge::always(&["x"])))
            .build();
        let e = BinaryRlReward::new("[reward]\nmax_judge_chars = 5", host)
            .err()
            .unwrap();
        assert!(e.contains("max_judge_chars = 5"), "{e}");
    }

    #[test]
    fn long_inputs_are_clipped_before_the_judge_reads_them() {
        let judge = Arc::new(ScriptedJudge::always(&["\\boxed{1}"]));
        let host = HostServices::builder().judge(judge.clone()).build();
        let r = BinaryRlReward::new("[reward]\nmax_judge_chars = 200", host).unwrap();
        assert_eq!(r.config().max_judge_chars, 200);
        let long = "x".repeat(1000);
        r.score(&request(Some(("tool", &long)))).unwrap();
        let prompt = judge.prompt(0);
        assert!(
            prompt.contains("[... 800 characters omitted ...]"),
            "{prompt}"
        );
        assert!(!prompt.contains(&"x".repeat(101)));
    }
}

//! The combined reward: the hint judge (with the hinted teacher) and the binary-RL judge on
//! the same turn, at the same time, merged into at most one sample.

use crate::config::CombineRewardConfig;
use openclaw_judging::{
    distill, judge_turn, prm_votes, run_both, DistillServices, Distillation, PrmVerdict,
};
use openclaw_plugin_api::serde_json::json;
use openclaw_plugin_api::{HostServices, PluginResult, Reward, Score, ScoreRequest};

/// Runs both judges on each main turn with a next state: the hint judge of opd (and, when it
/// gives a hint, the teacher's log-probabilities of the response under the hinted prompt) on a
/// second thread, and the binary-RL votes on this one. The turn then gives at most one sample:
///
/// | hint | RL score | sample |
/// |------|----------|--------|
/// | yes  | ±1       | teacher log-probs, reward = score |
/// | yes  | 0        | teacher log-probs, reward 0 |
/// | no   | ±1       | reward = score, no teacher log-probs (the loss's teacher term is 0) |
/// | no   | 0        | none (not trainable) |
///
/// With `w_opd = 0` the loss reads no teacher, so the hint judge is not asked: every turn falls
/// in the last two rows, as in binary-rl.
pub struct CombineReward {
    config: CombineRewardConfig,
    services: DistillServices,
}

impl CombineReward {
    /// The configuration in use.
    pub fn config(&self) -> &CombineRewardConfig {
        &self.config
    }
}

/// Which row of the dispatch table a turn falls in.
pub fn sample_kind(has_teacher: bool, rl_score: f32) -> &'static str {
    match (has_teacher, rl_score != 0.0) {
        (true, true) => "opd+rl",
        (true, false) => "opd",
        (false, true) => "rl",
        (false, false) => "none",
    }
}

/// The score of a turn the judges have seen; `d` is `None` when the hint judge was not asked
/// (`w_opd = 0`), and the metadata's `hint_judge` is then null.
pub fn combined_score(d: Option<Distillation>, rl: PrmVerdict) -> Score {
    let (verdict, teacher) = d.map_or((None, None), |d| (Some(d.verdict), d.teacher));
    let kind = sample_kind(teacher.is_some(), rl.score);
    let metadata = json!({
        "judged": true,
        "sample": kind,
        "rl": rl.summary(),
        "hint_judge": verdict.as_ref().map(|v| v.summary()),
        "hint_judge_text": verdict.as_ref().map(|v| &v.judge_text),
    });
    Score {
        // The RL score is the reward in every row: 0 where it is 0.
        value: rl.score,
        trainable: kind != "none",
        votes: rl.votes.into(),
        invalid_votes: rl.invalid_votes,
        hint: verdict
            .and_then(|v| v.hint)
            .filter(|_| teacher.is_some())
            .map(Into::into)
            .into(),
        judge_text: rl.judge_text.into(),
        // A sample without a hint has no teacher: the loss gives it a zero teacher term.
        teacher_logprobs: teacher.map(|t| t.logprobs).into(),
        metadata_json: metadata.to_string().into(),
        ..Default::default()
    }
}

impl Reward for CombineReward {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let config = CombineRewardConfig::parse(config)?;
        let services =
            DistillServices::from_host(&host, "combine", "for its hint and score votes")?;
        Ok(CombineReward { config, services })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        judge_turn(request, self.config.max_judge_chars, |input| {
            let s = &self.services;
            let settings = &request.judge;
            if !self.config.distill {
                // w_opd = 0: the loss reads no teacher, so no hint is asked for.
                let rl = prm_votes(&s.prm_judge, &input, settings)?;
                return Ok(combined_score(None, rl));
            }
            // The combined loss has no top-k term, so the teacher is asked for none.
            let (d, rl) = run_both(
                || distill(&s.judge, &s.teacher, &input, &request.turn, settings, 0),
                || prm_votes(&s.prm_judge, &input, settings),
            )?;
            Ok(combined_score(Some(d), rl))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_judging::scripted::{ScriptedJudge, ScriptedPolicy};
    use openclaw_plugin_api::serde_json::{self, Value};
    use openclaw_plugin_api::{JudgeRequest, JudgeSettings, Message, NextState, Turn, TurnType};
    use std::sync::Arc;
    use std::time::Duration;

    const HINT: &str = "Ask which branch before pushing.";

    fn request(next: Option<(&str, &str)>) -> ScoreRequest {
        ScoreRequest {
            turn: Turn {
                session_id: "s".into(),
                turn_index: 5,
                turn_type: TurnType::Main,
                prompt_messages: vec![Message::new("user", "Push my changes.")].into(),
                tools_json: "".into(),
                response: Message::new("assistant", "Pushed to main."),
                prompt_ids: vec![1, 2, 3].into(),
                response_ids: vec![70_000, 70_001, 70_002].into(),
                response_logprobs: vec![-0.7, -0.8, -0.9].into(),
                weight_version: 9,
                next_state: next
                    .map(|(role, text)| NextState {
                        role: role.into(),
                        content: text.into(),
                        messages: vec![Message::new(role, text)].into(),
                    })
                    .into(),
                trainable: true,
            },
            response_text: "Pushed to main.".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        }
    }

    fn is_hint_judge(r: &JudgeRequest) -> bool {
        r.messages[0].content.contains("hindsight")
    }

    /// A judge that answers the hint prompt with `hint` and the score prompt with `score`.
    fn judge(hint: &'static str, score: &'static str) -> ScriptedJudge {
        ScriptedJudge::new(move |r| {
            let text = if is_hint_judge(r) { hint } else { score };
            Ok((0..r.n).map(|_| Ok(text.to_string())).collect())
        })
    }

    const WITH_HINT: &str =
        "The user wanted a feature branch. \\boxed{1}\n[HINT_START]Ask which branch before pushing.[HINT_END]";
    const NO_HINT: &str = "Nothing to learn here. \\boxed{-1}";

    struct Setup {
        judge: Arc<ScriptedJudge>,
        teacher: Arc<ScriptedPolicy>,
        reward: CombineReward,
    }

    fn setup(judge: ScriptedJudge) -> Setup {
        setup_with(crate::DEFAULT_CONFIG, judge)
    }

    fn setup_with(config: &str, judge: ScriptedJudge) -> Setup {
        let judge = Arc::new(judge);
        let teacher = Arc::new(ScriptedPolicy::default());
        let host = HostServices::builder()
            .judge(judge.clone())
            .teacher(teacher.clone())
            .build();
        let reward = CombineReward::new(config, host).unwrap();
        Setup {
            judge,
            teacher,
            reward,
        }
    }

    fn metadata(s: &Score) -> Value {
        serde_json::from_str(&s.metadata_json).unwrap()
    }

    #[test]
    fn hint_and_score_give_one_sample_with_both_signals() {
        let s = setup(judge(WITH_HINT, "wrong branch \\boxed{-1}"));
        let req = request(Some(("user", "Not main! Use a feature branch.")));
        let score = s.reward.score(&req).unwrap();
        assert_eq!((score.value, score.trainable), (-1.0, true));
        assert_eq!(
            score.hint.clone().map(|h| h.to_string()),
            Some(HINT.to_string()).into()
        );
        let teacher = score.teacher_logprobs.clone().unwrap();
        assert_eq!(teacher.len(), 3);
        assert_eq!(score.votes.to_vec(), vec![-1.0; 3]);
        assert_eq!(score.judge_text.as_str(), "wrong branch \\boxed{-1}");
        let m = metadata(&score);
        assert_eq!(m["sample"], "opd+rl");
        assert_eq!(m["hint_judge"]["hint"], HINT);
        // The teacher scored the exact response ids under the hinted prompt, asking no top-k.
        let scored = s.teacher.scored.lock().unwrap()[0].clone();
        assert_eq!(scored.response_ids, req.turn.response_ids);
        assert_eq!(scored.top_k, 0);
        assert!(s.teacher.rendered.lock().unwrap()[0].contains(HINT));
        assert_eq!(s.judge.calls(), 2);
    }

    #[test]
    fn hint_with_an_ambiguous_score_trains_on_the_teacher_alone() {
        let s = setup(judge(WITH_HINT, "can't tell \\boxed{0}"));
        let score = s.reward.score(&request(Some(("user", "hmm")))).unwrap();
        assert_eq!((score.value, score.trainable), (0.0, true));
        assert!(score.teacher_logprobs.is_some() && score.hint.is_some());
        assert_eq!(metadata(&score)["sample"], "opd");
    }

    #[test]
    fn a_score_without_a_hint_trains_on_the_reward_alone() {
        let s = setup(judge(NO_HINT, "they moved on \\boxed{1}"));
        let score = s
            .reward
            .score(&request(Some(("user", "Great, now run the tests."))))
            .unwrap();
        assert_eq!((score.value, score.trainable), (1.0, true));
        // No teacher: not the rollout log-probs dressed up as one.
        assert!(score.teacher_logprobs.is_none());
        assert!(score.hint.is_none());
        assert!(s.teacher.scored.lock().unwrap().is_empty());
        assert_eq!(metadata(&score)["sample"], "rl");
    }

    #[test]
    fn without_the_distillation_term_only_the_score_is_asked_for() {
        let s = setup_with("w_opd = 0.0", judge(WITH_HINT, "they moved on \\boxed{1}"));
        let score = s.reward.score(&request(Some(("user", "thanks")))).unwrap();
        assert_eq!((score.value, score.trainable), (1.0, true));
        assert!(score.teacher_logprobs.is_none() && score.hint.is_none());
        // One call, the score prompt; the teacher never scores.
        assert_eq!(s.judge.calls(), 1);
        assert!(!is_hint_judge(&s.judge.requests.lock().unwrap()[0]));
        assert!(s.teacher.scored.lock().unwrap().is_empty());
        let m = metadata(&score);
        assert_eq!(m["sample"], "rl");
        assert!(m["hint_judge"].is_null(), "{m}");
        // A zero score gives no sample, as without a hint.
        let s = setup_with("w_opd = 0.0", judge(WITH_HINT, "\\boxed{0}"));
        assert!(
            !s.reward
                .score(&request(Some(("user", "ok"))))
                .unwrap()
                .trainable
        );
    }

    #[test]
    fn neither_signal_gives_no_sample() {
        let s = setup(judge(NO_HINT, "\\boxed{1} \\boxed{0}"));
        let score = s.reward.score(&request(Some(("user", "ok")))).unwrap();
        assert_eq!((score.value, score.trainable), (0.0, false));
        assert!(score.teacher_logprobs.is_none() && score.hint.is_none());
        assert_eq!(metadata(&score)["sample"], "none");
        // A tie is 0 too.
        let s = setup(ScriptedJudge::new(|r| {
            if is_hint_judge(r) {
                Ok(vec![Ok(NO_HINT.into()); r.n as usize])
            } else {
                Ok(vec![Ok("\\boxed{1}".into()), Ok("\\boxed{-1}".into())])
            }
        }));
        let mut req = request(Some(("user", "ok")));
        req.judge.votes = 2;
        let score = s.reward.score(&req).unwrap();
        assert!(!score.trainable);
        assert_eq!(score.votes.to_vec(), vec![1.0, -1.0]);
    }

    #[test]
    fn the_dispatch_table() {
        assert_eq!(sample_kind(true, 1.0), "opd+rl");
        assert_eq!(sample_kind(true, -1.0), "opd+rl");
        assert_eq!(sample_kind(true, 0.0), "opd");
        assert_eq!(sample_kind(false, -1.0), "rl");
        assert_eq!(sample_kind(false, 0.0), "none");
    }

    #[test]
    fn the_two_vote_sets_run_concurrently() {
        // Each call waits until the other is in flight; one after the other, the first call
        // would give up after the timeout and the score would fail.
        let s = setup(judge(WITH_HINT, "\\boxed{1}").with_rendezvous(Duration::from_secs(20)));
        let score = s.reward.score(&request(Some(("user", "thanks")))).unwrap();
        assert_eq!((score.value, score.trainable), (1.0, true));
        assert_eq!(s.judge.calls(), 2);
        let kinds: Vec<bool> = s
            .judge
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(is_hint_judge)
            .collect();
        assert!(kinds.contains(&true) && kinds.contains(&false), "{kinds:?}");
    }

    #[test]
    fn a_turn_without_a_next_state_makes_no_call() {
        let s = setup(judge(WITH_HINT, "\\boxed{1}"));
        let score = s.reward.score(&request(None)).unwrap();
        assert!(!score.trainable && score.teacher_logprobs.is_none());
        assert_eq!(s.judge.calls(), 0);
        assert!(s.teacher.scored.lock().unwrap().is_empty());
    }

    #[test]
    fn failures_of_either_side_are_errors() {
        let s = setup(ScriptedJudge::new(|r| {
            if is_hint_judge(r) {
                Err("hint judge down".into())
            } else {
                Ok(vec![Ok("\\boxed{1}".into()); r.n as usize])
            }
        }));
        let e = s.reward.score(&request(Some(("user", "ok")))).unwrap_err();
        assert!(e.contains("hint judge down"), "{e}");

        let judge = Arc::new(judge(WITH_HINT, "\\boxed{1}"));
        let host = HostServices::builder()
            .judge(judge.clone())
            .policy(Arc::new(ScriptedPolicy {
                short_by: 2,
                ..Default::default()
            }))
            .build();
        let r = CombineReward::new("", host).unwrap();
        let e = r.score(&request(Some(("user", "ok")))).unwrap_err();
        assert!(e.contains("1 log-probabilities for 3"), "{e}");

        let e = CombineReward::new("", HostServices::standalone())
            .err()
            .unwrap();
        assert!(e.contains("judge"), "{e}");
        let host = HostServices::builder().judge(judge).build();
        let e = CombineReward::new("", host).err().unwrap();
        assert!(e.contains("teacher"), "{e}");
    }
}

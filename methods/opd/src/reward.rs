//! The OPD reward: a hint judge reads the next state for hindsight, and the teacher scores the
//! turn's exact response tokens under the turn's prompt with that hint added.

use crate::config::{Mode, OpdRewardConfig};
use openclaw_judging::{
    distill, judge_turn, prm_votes, run_both, DistillServices, Distillation, PrmVerdict,
};
use openclaw_plugin_api::serde_json::json;
use openclaw_plugin_api::{HostServices, JudgeSettings, PluginResult, Reward, Score, ScoreRequest};

/// Distils hindsight into the policy. For each main turn with a next state, the hint judge
/// ([`openclaw_judging::hint_judge_messages`]) votes `judge.votes` times on whether
/// the next state holds a hint that would have improved the response; the longest usable hint
/// is appended to the turn's last user message, and the teacher (the host's teacher model, or
/// the policy when there is none) scores the turn's exact response tokens under that prompt.
/// A turn with a hint is trainable with those teacher log-probabilities (its value, 1, is a
/// placeholder the loss does not read); a turn without one is not trainable.
pub struct OpdReward {
    config: OpdRewardConfig,
    services: DistillServices,
}

impl OpdReward {
    /// The configuration in use.
    pub fn config(&self) -> &OpdRewardConfig {
        &self.config
    }

    /// The top-k the loss needs from the teacher: in top-k mode the run's `judge.topk`, or
    /// `default_topk` when the run gives none; none in token mode (its loss would not read it).
    fn top_k(&self, settings: &JudgeSettings) -> Result<u32, String> {
        match self.config.mode {
            Mode::Token => Ok(0),
            Mode::Topk if settings.topk > 0 => Ok(settings.topk),
            Mode::Topk if self.config.default_topk > 0 => Ok(self.config.default_topk),
            Mode::Topk => Err(
                "mode = \"topk\" needs the teacher's top-k, but the run asks for none and \
                 reward.default_topk is 0: set the distillation top-k (--distill-topk) above 0, \
                 or use mode = \"token\""
                    .into(),
            ),
        }
    }
}

/// The score of a turn the hint judge has seen; `eval` is the binary-RL verdict when it ran.
pub fn distillation_score(d: Distillation, eval: Option<PrmVerdict>) -> Score {
    let Distillation { verdict, teacher } = d;
    let mut metadata = json!({ "judged": true, "hint_judge": verdict.summary() });
    if let Some(e) = &eval {
        metadata["eval_score"] = json!(e.score);
        metadata["eval"] = e.summary();
    }
    let mut score = Score {
        votes: verdict.decisions.into(),
        invalid_votes: verdict.invalid_votes,
        judge_text: verdict.judge_text.into(),
        metadata_json: metadata.to_string().into(),
        ..Default::default()
    };
    if let (Some(hint), Some(t)) = (verdict.hint, teacher) {
        score.value = 1.0;
        score.trainable = true;
        score.hint = Some(hint.into()).into();
        score.teacher_logprobs = Some(t.logprobs).into();
        score.teacher_topk = t.topk;
    }
    score
}

impl Reward for OpdReward {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let config = OpdRewardConfig::parse(config)?;
        let services = DistillServices::from_host(&host, "opd", "to find hints")?;
        Ok(OpdReward { config, services })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        judge_turn(request, self.config.max_judge_chars, |input| {
            let top_k = self.top_k(&request.judge)?;
            let s = &self.services;
            let settings = &request.judge;
            let hinted = || distill(&s.judge, &s.teacher, &input, &request.turn, settings, top_k);
            if self.config.eval_votes {
                let (d, eval) = run_both(hinted, || prm_votes(&s.prm_judge, &input, settings))?;
                Ok(distillation_score(d, Some(eval)))
            } else {
                Ok(distillation_score(hinted()?, None))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_judging::scripted::{ScriptedJudge, ScriptedPolicy};
    use openclaw_plugin_api::serde_json::{self, Value};
    use openclaw_plugin_api::{Message, NextState, Turn, TurnType};
    use std::sync::Arc;
    use std::time::Duration;

    const HINT: &str = "List the files with ls -a so hidden ones show.";

    fn request(next: Option<(&str, &str)>) -> ScoreRequest {
        ScoreRequest {
            turn: Turn {
                session_id: "s".into(),
                turn_index: 1,
                turn_type: TurnType::Main,
                prompt_messages: vec![
                    Message::new("system", "You are a shell helper."),
                    Message::new("user", "Show me every file here."),
                ]
                .into(),
                tools_json: "[{\"name\":\"exec\"}]".into(),
                response: Message::new("assistant", "Run `ls`."),
                prompt_ids: vec![10, 11].into(),
                // Ids that no byte tokenizer would produce from the text: they must pass as
                // they are.
                response_ids: vec![50_001, 50_002, 50_003, 50_004, 50_005].into(),
                response_logprobs: vec![-0.5; 5].into(),
                weight_version: 2,
                next_state: next
                    .map(|(role, text)| NextState {
                        role: role.into(),
                        content: text.into(),
                        messages: vec![Message::new(role, text)].into(),
                    })
                    .into(),
                trainable: true,
            },
            response_text: "Run `ls`.<|im_end|>".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        }
    }

    struct Setup {
        judge: Arc<ScriptedJudge>,
        teacher: Arc<ScriptedPolicy>,
        reward: OpdReward,
    }

    fn setup(judge: ScriptedJudge, config: &str) -> Setup {
        let judge = Arc::new(judge);
        let teacher = Arc::new(ScriptedPolicy::default());
        let host = HostServices::builder()
            .judge(judge.clone())
            .teacher(teacher.clone())
            .policy(Arc::new(ScriptedPolicy::default()))
            .build();
        let reward = OpdReward::new(config, host).unwrap();
        Setup {
            judge,
            teacher,
            reward,
        }
    }

    fn hinted(hint: &str) -> String {
        format!("The user wanted hidden files. \\boxed{{1}}\n[HINT_START]{hint}[HINT_END]")
    }

    fn metadata(s: &Score) -> Value {
        serde_json::from_str(&s.metadata_json).unwrap()
    }

    #[test]
    fn a_hint_gives_teacher_logprobs_of_the_exact_response_under_the_hinted_prompt() {
        let answers = [
            hinted("Use ls -a."),
            "\\boxed{-1}".to_string(),
            hinted(HINT),
        ];
        let s = setup(
            ScriptedJudge::new(move |r| {
                Ok((0..r.n as usize)
                    .map(|i| Ok(answers[i % 3].clone()))
                    .collect())
            }),
            crate::DEFAULT_CONFIG,
        );
        let req = request(Some(("user", "You missed the hidden files.")));
        let score = s.reward.score(&req).unwrap();
        assert!(score.trainable);
        assert_eq!(score.value, 1.0);
        assert_eq!(score.hint.as_ref().map(|h| h.as_str()), Some(HINT).into());
        assert_eq!(score.votes.to_vec(), vec![1.0, -1.0, 1.0]);
        assert_eq!(score.invalid_votes, 0);
        assert!(score.judge_text.contains(HINT));

        // The judge saw the hint prompt, with the next state's role.
        assert_eq!(s.judge.calls(), 1);
        let prompt = s.judge.prompt(0);
        assert!(
            prompt.contains("## Next state (turn t+1) [role: user]\nYou missed the hidden files.")
        );

        // The teacher rendered the turn's messages and tools with the hint in the user message.
        let rendered = s.teacher.rendered.lock().unwrap()[0].clone();
        assert_eq!(
            rendered,
            format!(
                "tools: [{{\"name\":\"exec\"}}]\nsystem: You are a shell helper.\n\
                 user: Show me every file here.\n\n[user's hint / instruction]\n{HINT}\nassistant: "
            )
        );
        let scored = s.teacher.scored.lock().unwrap()[0].clone();
        let prompt_ids: Vec<u32> = rendered.bytes().map(u32::from).collect();
        assert_eq!(scored.prompt_ids.to_vec(), prompt_ids);
        assert_eq!(scored.response_ids, req.turn.response_ids);
        assert_eq!(scored.top_k, 0, "token mode asks for no top-k");
        let want: Vec<f32> = (0..5)
            .map(|i| ScriptedPolicy::logprob(i, prompt_ids.len()))
            .collect();
        assert_eq!(score.teacher_logprobs.clone().unwrap().to_vec(), want);
        assert!(score.teacher_topk.is_none());

        let m = metadata(&score);
        assert_eq!(m["hint_judge"]["hint"], HINT);
        assert_eq!(m["hint_judge"]["positive_votes"], 2);
        assert!(
            m.get("eval_score").is_none(),
            "eval votes are off by default"
        );
    }

    #[test]
    fn topk_mode_passes_the_runs_top_k_to_the_teacher() {
        let s = setup(ScriptedJudge::always(&[&hinted(HINT)]), "mode = \"topk\"");
        let mut req = request(Some(("user", "hidden files too")));
        req.judge.topk = 4;
        let score = s.reward.score(&req).unwrap();
        assert_eq!(s.teacher.scored.lock().unwrap()[0].top_k, 4);
        let topk = score.teacher_topk.clone().unwrap();
        assert_eq!(
            (topk.k, topk.token_ids.len(), topk.logprobs.len()),
            (4, 20, 20)
        );
        assert_eq!(score.teacher_logprobs.clone().unwrap().len(), 5);

        // A run that asks for none gets the plugin's default, or an error when that is 0.
        req.judge.topk = 0;
        s.reward.score(&req).unwrap();
        assert_eq!(s.teacher.scored.lock().unwrap()[1].top_k, 50);
        let s = setup(
            ScriptedJudge::always(&[&hinted(HINT)]),
            "mode = \"topk\"\n[reward]\ndefault_topk = 0",
        );
        let e = s.reward.score(&req).unwrap_err();
        assert!(e.contains("topk") && e.contains("--distill-topk"), "{e}");
        assert_eq!(s.judge.calls(), 0, "refused before asking the judge");
        // Token mode never asks for a top-k.
        let s = setup(ScriptedJudge::always(&[&hinted(HINT)]), "");
        req.judge.topk = 7;
        assert!(s.reward.score(&req).unwrap().teacher_topk.is_none());
        assert_eq!(s.teacher.scored.lock().unwrap()[0].top_k, 0);
    }

    #[test]
    fn no_usable_hint_means_no_sample_and_no_teacher_call() {
        for answers in [
            vec!["\\boxed{-1}"],
            vec!["\\boxed{1} but no hint"],
            vec!["\\boxed{1} [HINT_START]Too short[HINT_END]"],
            vec!["\\boxed{-1} [HINT_START]A hint from a negative vote.[HINT_END]"],
            vec![
                "garbage",
                "\\boxed{0} [HINT_START]Zero is not a decision.[HINT_END]",
            ],
        ] {
            let s = setup(ScriptedJudge::always(&answers), crate::DEFAULT_CONFIG);
            let score = s.reward.score(&request(Some(("user", "hmm")))).unwrap();
            assert!(!score.trainable, "{answers:?}");
            assert_eq!(score.value, 0.0);
            assert!(score.hint.is_none() && score.teacher_logprobs.is_none());
            assert!(s.teacher.scored.lock().unwrap().is_empty(), "{answers:?}");
            assert_eq!(metadata(&score)["hint_judge"]["accepted"], false);
        }
        let s = setup(ScriptedJudge::always(&["garbage"]), crate::DEFAULT_CONFIG);
        let score = s.reward.score(&request(Some(("user", "hmm")))).unwrap();
        assert_eq!((score.votes.len(), score.invalid_votes), (0, 3));
    }

    #[test]
    fn a_turn_without_a_next_state_makes_no_call() {
        let s = setup(
            ScriptedJudge::always(&[&hinted(HINT)]),
            "[reward]\neval_votes = true",
        );
        let score = s.reward.score(&request(None)).unwrap();
        assert!(!score.trainable && score.teacher_logprobs.is_none());
        assert_eq!(s.judge.calls(), 0);
        assert!(s.teacher.scored.lock().unwrap().is_empty());
    }

    #[test]
    fn eval_votes_run_alongside_the_hint_votes_and_land_in_the_metadata() {
        // Each call waits for the other: sequential calls would fail after the timeout.
        let judge = ScriptedJudge::new(|r| {
            let hint_judge = r.messages[0].content.contains("hindsight");
            let text = if hint_judge {
                hinted(HINT)
            } else {
                "a redo request \\boxed{-1}".to_string()
            };
            Ok((0..r.n).map(|_| Ok(text.clone())).collect())
        })
        .with_rendezvous(Duration::from_secs(20));
        let s = setup(judge, "[reward]\neval_votes = true");
        assert!(s.reward.config().eval_votes);
        let score = s
            .reward
            .score(&request(Some(("user", "Redo it with hidden files."))))
            .unwrap();
        assert_eq!(s.judge.calls(), 2);
        // Monitoring only: the sample is the distillation sample.
        assert_eq!((score.value, score.trainable), (1.0, true));
        assert_eq!(score.votes.to_vec(), vec![1.0; 3]);
        let m = metadata(&score);
        assert_eq!(m["eval_score"], -1.0);
        assert_eq!(m["eval"]["votes"], serde_json::json!([-1.0, -1.0, -1.0]));
    }

    #[test]
    fn teacher_answers_of_the_wrong_length_are_errors() {
        let judge = Arc::new(ScriptedJudge::always(&[&hinted(HINT)]));
        let host = HostServices::builder()
            .judge(judge)
            .teacher(Arc::new(ScriptedPolicy {
                short_by: 1,
                ..Default::default()
            }))
            .build();
        let r = OpdReward::new("", host).unwrap();
        let e = r.score(&request(Some(("user", "hidden too")))).unwrap_err();
        assert!(
            e.contains("4 log-probabilities for 5 response tokens"),
            "{e}"
        );
    }

    #[test]
    fn the_policy_stands_in_for_a_missing_teacher_and_missing_services_fail_construction() {
        let judge = Arc::new(ScriptedJudge::always(&[&hinted(HINT)]));
        let policy = Arc::new(ScriptedPolicy::default());
        let host = HostServices::builder()
            .judge(judge.clone())
            .policy(policy.clone())
            .build();
        let r = OpdReward::new("", host).unwrap();
        assert!(r.score(&request(Some(("user", "x")))).unwrap().trainable);
        assert_eq!(policy.scored.lock().unwrap().len(), 1);

        let host = HostServices::builder().judge(judge).build();
        let e = OpdReward::new("", host).err().unwrap();
        assert!(e.contains("teacher"), "{e}");
        let host = HostServices::builder()
            .teacher(Arc::new(ScriptedPolicy::default()))
            .build();
        let e = OpdReward::new("", host).err().unwrap();
        assert!(e.contains("judge"), "{e}");
    }
}

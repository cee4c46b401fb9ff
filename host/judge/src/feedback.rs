//! A user's explicit feedback on a turn (`POST /v1/feedback`, `/rl/set_reward`) and how it
//! judges the turn (`--feedback`):
//!
//! - `instead` (the default): the feedback's reward is the turn's verdict and the judge casts
//!   no vote. A method whose loss reads teacher log-probabilities (OPD, combine) learns from
//!   text, not from a number: when the feedback has a text, the reward plugin still runs with
//!   that text as the turn's next state (OPD's hint judge may take it as the hint), and its
//!   value and votes are then replaced by the feedback's.
//! - `beside`: the judge votes as usual, reading the feedback's text as the turn's next state,
//!   and the feedback counts as many votes as the judge casts (`--majority-vote-n`); the value
//!   is their majority under `--majority-vote-threshold`. A method that scores without votes
//!   (a rule, a reward model) gets the mean of its value and the feedback's. A judge that
//!   abstains (no next state, no text) leaves the feedback alone to decide.
//!
//! Feedback only reaches turns still waiting for their next state (a judged turn keeps its
//! verdict), so live the text never hides a real next state; replay reads it the same way.

use crate::pool::JudgeJob;
use crate::score_request;
use openclaw_plugin_api::reward::majority_vote;
use openclaw_plugin_api::{JudgeSettings, Message, NextState, Score, Turn};
use serde_json::{json, Value};

/// What a user said of one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Feedback {
    /// In [-1, 1]; thumbs are ±1.
    pub reward: f32,
    /// A correction or comment, if any.
    pub text: Option<String>,
}

/// How feedback judges a turn (`--feedback`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackMode {
    /// The feedback is the verdict.
    Instead,
    /// The feedback votes beside the judge.
    Beside,
}

impl FeedbackMode {
    /// The mode a `feedback` setting names.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        match s {
            "instead" => Ok(FeedbackMode::Instead),
            "beside" => Ok(FeedbackMode::Beside),
            other => anyhow::bail!("feedback = {other:?}: expected \"instead\" or \"beside\""),
        }
    }
}

/// What a run does with feedback: its mode, and whether the method learns from text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedbackRule {
    /// `--feedback`.
    pub mode: FeedbackMode,
    /// The method's loss reads teacher log-probabilities, which only the reward plugin makes.
    pub reads_text: bool,
}

impl Default for FeedbackRule {
    fn default() -> Self {
        FeedbackRule {
            mode: FeedbackMode::Instead,
            reads_text: false,
        }
    }
}

/// How a job's feedback meets the reward plugin.
#[derive(Clone, Debug, PartialEq)]
pub enum FeedbackUse {
    /// The feedback is the verdict; the plugin is not asked.
    Verdict,
    /// The plugin runs (for what it makes of the text), then the feedback replaces its value.
    Override,
    /// The plugin runs and the feedback votes beside it.
    Vote,
}

/// The feedback a judge job carries.
#[derive(Clone, Debug, PartialEq)]
pub struct GivenFeedback {
    /// What the user said.
    pub feedback: Feedback,
    /// How it meets the plugin.
    pub apply: FeedbackUse,
}

impl FeedbackRule {
    /// The judge job of a turn that `feedback` judges. Its text becomes the turn's next state
    /// when the plugin is asked and the turn has none.
    pub fn job(
        &self,
        turn_seq: u64,
        mut turn: Turn,
        feedback: Feedback,
        judge: &JudgeSettings,
    ) -> JudgeJob {
        let apply = match self.mode {
            FeedbackMode::Beside => FeedbackUse::Vote,
            FeedbackMode::Instead if self.reads_text && feedback.text.is_some() => {
                FeedbackUse::Override
            }
            FeedbackMode::Instead => FeedbackUse::Verdict,
        };
        // Live, feedback only reaches a turn still waiting for its next state; on replay the
        // follow-up may be in the buffer too, and the text still stands in for it, so the
        // verdict is the same after a restart.
        if apply != FeedbackUse::Verdict {
            if let Some(text) = &feedback.text {
                turn.next_state = Some(NextState {
                    role: "user".into(),
                    content: text.as_str().into(),
                    messages: vec![Message::new("user", text)].into(),
                })
                .into();
            }
        }
        let closed = turn.next_state.is_none();
        JudgeJob {
            turn_seq,
            request: score_request(turn, closed, judge),
            feedback: Some(GivenFeedback { feedback, apply }),
            adapter: None,
        }
    }
}

impl GivenFeedback {
    /// The verdict when the plugin is not asked.
    pub fn verdict(&self) -> Option<Score> {
        (self.apply == FeedbackUse::Verdict)
            .then(|| feedback_score(self.feedback.reward, self.feedback.text.as_deref()))
    }

    /// The plugin's score with the feedback applied.
    pub fn merge(&self, judged: Score, judge: &JudgeSettings) -> Score {
        let reward = self.feedback.reward;
        let mut s = judged;
        let before = json!({
            "value": s.value,
            "votes": s.votes.as_slice(),
            "trainable": s.trainable,
        });
        match self.apply {
            FeedbackUse::Verdict => return feedback_score(reward, self.feedback.text.as_deref()),
            FeedbackUse::Override => {
                s.value = reward;
                s.votes = vec![reward].into();
                s.trainable = reward != 0.0 || s.trainable;
            }
            FeedbackUse::Vote => {
                let abstained = !s.trainable && s.votes.is_empty();
                s.value = if abstained {
                    reward
                } else if s.votes.is_empty() {
                    (s.value + reward) / 2.0
                } else {
                    // The judge votes -1, 0 or +1: the user's reward votes by its sign, so 0.8
                    // agrees with the judge's +1 rather than splitting the count.
                    let vote = if reward > 0.0 {
                        1.0
                    } else if reward < 0.0 {
                        -1.0
                    } else {
                        0.0
                    };
                    let mut votes = s.votes.to_vec();
                    votes.extend(std::iter::repeat_n(vote, judge.votes.max(1) as usize));
                    let value = majority_vote(&votes, judge.threshold);
                    s.votes = votes.into();
                    value
                };
                s.trainable = s.value != 0.0 || s.teacher_logprobs.is_some();
            }
        }
        let judge_meta = serde_json::from_str::<Value>(&s.metadata_json).unwrap_or(Value::Null);
        s.metadata_json = json!({
            "feedback": {"reward": reward, "text": self.feedback.text, "applied": self.label()},
            "judged": before,
            "judge": judge_meta,
        })
        .to_string()
        .into();
        s
    }

    /// `instead` or `beside`, as the metadata says it.
    fn label(&self) -> &'static str {
        match self.apply {
            FeedbackUse::Vote => "beside",
            FeedbackUse::Verdict | FeedbackUse::Override => "instead",
        }
    }
}

/// The verdict of a user's own feedback on a turn: its reward is the score, as one vote, and its
/// text the hint; the judge is not asked. A reward of 0 says nothing to learn, so it is not
/// trainable.
pub fn feedback_score(reward: f32, text: Option<&str>) -> Score {
    Score {
        value: reward,
        trainable: reward != 0.0,
        votes: vec![reward].into(),
        invalid_votes: 0,
        hint: text.map(Into::into).into(),
        judge_text: "explicit feedback".into(),
        metadata_json: json!({"feedback": {"reward": reward, "text": text, "applied": "instead"}})
            .to_string()
            .into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::abi_stable::std_types::ROption;

    fn turn() -> Turn {
        Turn {
            session_id: "s".into(),
            turn_index: 0,
            turn_type: openclaw_plugin_api::TurnType::Main,
            prompt_messages: vec![Message::new("user", "hi")].into(),
            tools_json: "".into(),
            response: Message::new("assistant", "hello"),
            prompt_ids: vec![1].into(),
            response_ids: vec![2].into(),
            response_logprobs: vec![-0.5].into(),
            weight_version: 0,
            next_state: ROption::RNone,
            trainable: true,
        }
    }

    fn rule(mode: FeedbackMode, reads_text: bool) -> FeedbackRule {
        FeedbackRule { mode, reads_text }
    }

    fn said(reward: f32, text: Option<&str>) -> Feedback {
        Feedback {
            reward,
            text: text.map(str::to_string),
        }
    }

    fn votes(v: &[f32]) -> Score {
        Score {
            value: majority_vote(v, 0.5),
            trainable: majority_vote(v, 0.5) != 0.0,
            votes: v.to_vec().into(),
            ..Default::default()
        }
    }

    #[test]
    fn instead_asks_no_judge_unless_the_method_learns_from_text() {
        let judge = JudgeSettings::default();
        let job = rule(FeedbackMode::Instead, false).job(7, turn(), said(-1.0, Some("no")), &judge);
        let f = job.feedback.unwrap();
        assert_eq!(f.verdict().unwrap().value, -1.0);
        // The text stays the hint; the turn is not given a next state.
        assert!(job.request.turn.next_state.is_none() && job.request.session_closed);

        let job =
            rule(FeedbackMode::Instead, true).job(7, turn(), said(-1.0, Some("use ls -a")), &judge);
        let f = job.feedback.clone().unwrap();
        assert!(
            f.verdict().is_none(),
            "an OPD run asks its plugin about the text"
        );
        let ns = job.request.turn.next_state.as_ref().unwrap();
        assert_eq!(
            (ns.role.as_str(), ns.content.as_str()),
            ("user", "use ls -a")
        );
        assert!(!job.request.session_closed);
        // Whatever the plugin made of it (here a hint and teacher log-probabilities), the value
        // is the user's.
        let judged = Score {
            value: 1.0,
            trainable: true,
            teacher_logprobs: Some(vec![-0.1f32].into()).into(),
            ..Default::default()
        };
        let s = f.merge(judged, &judge);
        assert_eq!((s.value, s.votes.to_vec()), (-1.0, vec![-1.0]));
        assert!(s.trainable && s.teacher_logprobs.is_some());
        // A thumbs without text in an OPD run is a verdict: there is nothing to read.
        let job = rule(FeedbackMode::Instead, true).job(7, turn(), said(1.0, None), &judge);
        assert!(job.feedback.unwrap().verdict().is_some());
    }

    #[test]
    fn beside_votes_with_the_judge_as_many_times_as_it_votes() {
        let judge = JudgeSettings {
            votes: 3,
            threshold: 0.5,
            ..Default::default()
        };
        let f = rule(FeedbackMode::Beside, false)
            .job(1, turn(), said(-1.0, Some("too long")), &judge)
            .feedback
            .unwrap();
        assert!(f.verdict().is_none());
        // Judge 3-0 for +1 against the user's three -1 votes: a tie, nothing to learn.
        let s = f.merge(votes(&[1.0, 1.0, 1.0]), &judge);
        assert_eq!((s.value, s.votes.len(), s.trainable), (0.0, 6, false));
        // Judge 2-1 for +1: the user's votes tip it to -1.
        let s = f.merge(votes(&[1.0, 1.0, -1.0]), &judge);
        assert_eq!((s.value, s.trainable), (-1.0, true));
        let m: Value = serde_json::from_str(&s.metadata_json).unwrap();
        assert_eq!(m["feedback"]["applied"], "beside");
        assert_eq!(m["judged"]["value"], 1.0);
        // A fractional reward votes by its sign: 0.8 agrees with the judge's +1.
        let mild = rule(FeedbackMode::Beside, false)
            .job(1, turn(), said(0.8, None), &judge)
            .feedback
            .unwrap();
        assert_eq!(mild.merge(votes(&[1.0, 1.0, 1.0]), &judge).value, 1.0);
        let against = rule(FeedbackMode::Beside, false)
            .job(1, turn(), said(-0.5, None), &judge)
            .feedback
            .unwrap();
        assert_eq!(against.merge(votes(&[1.0, 1.0, -1.0]), &judge).value, -1.0);
        // A judge that abstains (no next state) leaves the user to decide.
        let s = f.merge(Score::default(), &judge);
        assert_eq!((s.value, s.trainable), (-1.0, true));
        // A reward model's value is averaged with the user's.
        let rm = Score {
            value: 0.5,
            trainable: true,
            ..Default::default()
        };
        assert_eq!(f.merge(rm, &judge).value, -0.25);
    }

    #[test]
    fn the_mode_is_named_or_refused() {
        assert_eq!(FeedbackMode::parse("beside").unwrap(), FeedbackMode::Beside);
        let e = FeedbackMode::parse("vote").unwrap_err().to_string();
        assert!(e.contains("feedback") && e.contains("instead"), "{e}");
    }
}

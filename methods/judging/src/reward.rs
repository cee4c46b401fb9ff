//! What the methods' rewards share: the `reward.max_judge_chars` key, leaving out the turns the
//! judge does not read, and the services a distilling reward takes from the host.

use super::*;
use openclaw_plugin_api::HostServices;

/// The default of `reward.max_judge_chars`: the most characters of the response, and of the
/// next state, the judge reads.
pub const DEFAULT_MAX_JUDGE_CHARS: usize = 16_000;

/// Checks `reward.max_judge_chars`: 0 (no limit) or at least 200, since the clip marker alone
/// is about 40 characters and a limit must leave room for the text.
pub fn check_max_judge_chars(v: usize) -> Result<(), String> {
    if v == 0 || v >= 200 {
        Ok(())
    } else {
        Err(format!(
            "reward.max_judge_chars = {v} is out of range: use 0 (no limit) or at least 200"
        ))
    }
}

/// Scores a turn with `judge`, which gets what the judge reads of it ([`judge_input`], each text
/// clipped to `max_chars`); a turn the judge does not read gets [`unjudged_score`] and no call.
pub fn judge_turn(
    request: &ScoreRequest,
    max_chars: usize,
    judge: impl FnOnce(JudgeInput) -> Result<Score, String>,
) -> Result<Score, String> {
    match judge_input(request, max_chars) {
        Ok(input) => judge(input),
        Err(reason) => Ok(unjudged_score(reason)),
    }
}

/// The services a distilling reward (opd, combine) takes from the host.
pub struct DistillServices {
    /// The hint judge (`JUDGE_MODEL_PATH`).
    pub judge: Judge,
    /// The outcome judge (`PRM_MODEL_PATH`; the hint judge when none is given apart).
    pub prm_judge: Judge,
    /// The teacher: the host's teacher model, or the policy when it has none.
    pub teacher: Policy,
}

impl DistillServices {
    /// The services of the `method` reward, whose judge model is there `judge_for` (e.g. "to
    /// find hints"); the errors say which service the host lacks.
    pub fn from_host(host: &HostServices, method: &str, judge_for: &str) -> Result<Self, String> {
        let judge = host.judge().ok_or_else(|| {
            format!("the {method} reward needs a judge model {judge_for}, and the host has none")
        })?;
        let teacher = host.teacher().or_else(|| host.policy()).ok_or_else(|| {
            format!(
                "the {method} reward needs a teacher to score responses under the hinted prompt, \
                 and the host has neither a teacher model nor a policy"
            )
        })?;
        // The host gives the hint judge for the outcome prompt when it has no other.
        let prm_judge = host
            .prm_judge()
            .ok_or("the host gave a judge but no outcome judge")?;
        Ok(DistillServices {
            judge,
            prm_judge,
            teacher,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::{ScriptedJudge, ScriptedPolicy};
    use std::sync::Arc;

    #[test]
    fn max_judge_chars_is_zero_or_leaves_room_for_the_text() {
        for v in [0, 200, DEFAULT_MAX_JUDGE_CHARS] {
            check_max_judge_chars(v).unwrap();
        }
        assert_eq!(
            check_max_judge_chars(199).unwrap_err(),
            "reward.max_judge_chars = 199 is out of range: use 0 (no limit) or at least 200"
        );
    }

    #[test]
    fn missing_services_are_named_with_the_method() {
        let none = HostServices::standalone();
        let e = DistillServices::from_host(&none, "opd", "to find hints")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "the opd reward needs a judge model to find hints, and the host has none"
        );
        let judge_only = HostServices::builder()
            .judge(Arc::new(ScriptedJudge::always(&["x"])))
            .build();
        let e = DistillServices::from_host(&judge_only, "combine", "")
            .err()
            .unwrap();
        assert_eq!(
            e,
            "the combine reward needs a teacher to score responses under the hinted prompt, and \
             the host has neither a teacher model nor a policy"
        );
        let with_policy = HostServices::builder()
            .judge(Arc::new(ScriptedJudge::always(&["x"])))
            .policy(Arc::new(ScriptedPolicy::default()))
            .build();
        assert!(DistillServices::from_host(&with_policy, "opd", "").is_ok());
    }
}

//! The hinted teacher: the teacher's log-probabilities of the exact response tokens under the
//! prompt with the hint appended, and the distillation advantage from them.

use super::*;

/// The teacher's prompt token ids for `turn` with `hint` appended
/// ([`append_hint_to_messages`]), rendered with the turn's tools by the teacher's own chat
/// template, ready for the assistant's reply.
pub fn hinted_teacher_prompt(
    teacher: &Policy,
    turn: &Turn,
    hint: &str,
) -> Result<Vec<u32>, String> {
    let messages = append_hint_to_messages(&turn.prompt_messages, hint);
    let text = teacher
        .render_chat(&messages, &turn.tools_json, true)
        .map_err(|e| format!("teacher chat template failed: {e}"))?;
    teacher
        .tokenize(&text)
        .map_err(|e| format!("teacher tokenizer failed: {e}"))
}

/// The teacher's log-probability of each of the turn's exact response tokens (never
/// re-tokenized) under the hinted prompt, and its top-`top_k` at each response position when
/// `top_k > 0`.
///
/// The host's `score` already returns the log-probability of token `i` taken at the position
/// that predicts it, so the values are used as they come; the answer must have exactly one
/// finite value per response token (and `top_k` entries per position), or this is an error.
pub fn hinted_teacher_scores(
    teacher: &Policy,
    turn: &Turn,
    hint: &str,
    top_k: u32,
) -> Result<TokenScores, String> {
    let prompt_ids = hinted_teacher_prompt(teacher, turn, hint)?;
    let request = ScoreTokens {
        prompt_ids: prompt_ids.into(),
        response_ids: turn.response_ids.clone(),
        top_k,
    };
    let mut scores = teacher
        .score(&request)
        .map_err(|e| format!("teacher scoring failed: {e}"))?;
    let n = turn.response_ids.len();
    if scores.logprobs.len() != n {
        return Err(format!(
            "the teacher returned {} log-probabilities for {n} response tokens",
            scores.logprobs.len()
        ));
    }
    if let Some(i) = scores
        .logprobs
        .iter()
        .position(|l| !l.is_finite() || *l > 0.0)
    {
        return Err(format!(
            "the teacher's log-probability of response token {i} is {}",
            scores.logprobs[i]
        ));
    }
    if top_k == 0 {
        scores.topk = ROption::RNone;
        return Ok(scores);
    }
    match &scores.topk {
        ROption::RSome(TopKEntries {
            k,
            token_ids,
            logprobs,
        }) if *k == top_k
            && token_ids.len() == n * top_k as usize
            && logprobs.len() == token_ids.len() =>
        {
            if let Some(i) = logprobs.iter().position(|l| l.is_nan() || *l > 0.0) {
                return Err(format!(
                    "the teacher's top-k log-probability {i} is {}",
                    logprobs[i]
                ));
            }
        }
        ROption::RSome(t) => {
            return Err(format!(
            "the teacher returned top-{} entries ({} ids, {} log-probabilities) where top-{top_k} \
                 for {n} tokens ({} entries) was asked",
            t.k,
            t.token_ids.len(),
            t.logprobs.len(),
            n * top_k as usize
        ))
        }
        ROption::RNone => {
            return Err(format!(
                "the teacher returned no top-k entries (top-{top_k} was asked)"
            ))
        }
    }
    Ok(scores)
}

/// The hint judge's verdict on a turn and, when it gave a hint, the teacher's scores of the
/// turn's response under the hinted prompt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Distillation {
    /// The hint judge's verdict.
    pub verdict: HintVerdict,
    /// The teacher's scores, present exactly when the verdict has a hint.
    pub teacher: Option<TokenScores>,
}

/// Runs the hint judge's votes on `input` and, when a hint is selected, scores `turn`'s
/// response with the hinted teacher ([`hinted_teacher_scores`], top-`top_k` when > 0).
pub fn distill(
    judge: &Judge,
    teacher: &Policy,
    input: &JudgeInput,
    turn: &Turn,
    settings: &JudgeSettings,
    top_k: u32,
) -> Result<Distillation, String> {
    let verdict = hint_votes(judge, input, settings)?;
    let teacher = match &verdict.hint {
        Some(hint) => Some(hinted_teacher_scores(teacher, turn, hint, top_k)?),
        None => None,
    };
    Ok(Distillation { verdict, teacher })
}

impl PrmVerdict {
    /// The verdict's numbers as JSON, for a score's metadata.
    pub fn summary(&self) -> Value {
        serde_json::json!({
            "score": self.score,
            "votes": self.votes,
            "invalid_votes": self.invalid_votes,
        })
    }
}

impl HintVerdict {
    /// The verdict's numbers and hint as JSON, for a score's metadata.
    pub fn summary(&self) -> Value {
        serde_json::json!({
            "accepted": self.hint.is_some(),
            "hint": self.hint,
            "positive_votes": self.decisions.iter().filter(|d| **d == 1.0).count(),
            "votes": self.decisions,
            "invalid_votes": self.invalid_votes,
        })
    }
}

//! Asking the judge: its sampling, and the votes of the outcome and hint judges.

use super::*;

/// The judge's sampling parameters from the run's settings.
pub fn judge_sampling(settings: &JudgeSettings) -> SamplingParams {
    SamplingParams {
        temperature: settings.temperature,
        top_p: 1.0,
        top_k: 0,
        max_tokens: settings.max_tokens,
        ..SamplingParams::default()
    }
}

/// Asks the judge for `settings.votes` completions of `messages`. Always returns exactly that
/// many entries: completions the judge did not return count as failed. A failure of the whole
/// call is an error: the judge was not consulted, which is not the same as a vote.
pub fn ask_judge(
    judge: &Judge,
    messages: Vec<Message>,
    settings: &JudgeSettings,
) -> Result<Vec<Result<String, String>>, String> {
    let n = settings.votes;
    if n == 0 {
        return Err("judge.votes is 0: a turn needs at least one judge vote".into());
    }
    let request = JudgeRequest {
        messages: messages.into(),
        sampling: judge_sampling(settings),
        n,
    };
    let mut outputs = judge
        .complete(&request)
        .map_err(|e| format!("judge call failed: {e}"))?;
    outputs.truncate(n as usize);
    while outputs.len() < n as usize {
        outputs.push(Err("the judge returned fewer completions than asked".into()));
    }
    Ok(outputs)
}

fn output_text(output: &Result<String, String>) -> String {
    match output {
        Ok(text) => text.clone(),
        Err(e) => format!("(judge call failed: {e})"),
    }
}

/// The outcome judge's verdict on one turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrmVerdict {
    /// The majority vote: 1, -1 or 0.
    pub score: f32,
    /// The valid votes, in the judge's order.
    pub votes: Vec<f32>,
    /// Votes whose call failed or whose answer had no valid score.
    pub invalid_votes: u32,
    /// The first answer that voted the final score, or the first answer.
    pub judge_text: String,
}

/// Runs the outcome judge's votes on `input` and merges them with [`majority_vote`] at
/// `settings.threshold`.
pub fn prm_votes(
    judge: &Judge,
    input: &JudgeInput,
    settings: &JudgeSettings,
) -> Result<PrmVerdict, String> {
    let outputs = ask_judge(judge, prm_judge_messages(input), settings)?;
    let parsed: Vec<Option<i32>> = outputs
        .iter()
        .map(|o| {
            o.as_ref()
                .ok()
                .and_then(|t| parse_boxed_score(t, &PRM_VALUES))
        })
        .collect();
    let votes: Vec<f32> = parsed.iter().flatten().map(|&v| v as f32).collect();
    let score = majority_vote(&votes, settings.threshold);
    let representative = parsed
        .iter()
        .position(|v| v.is_some_and(|v| v as f32 == score))
        .unwrap_or(0);
    Ok(PrmVerdict {
        score,
        invalid_votes: (outputs.len() - votes.len()) as u32,
        votes,
        judge_text: output_text(&outputs[representative]),
    })
}

/// The hint judge's verdict on one turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HintVerdict {
    /// The chosen hint ([`select_best_hint`]), if any vote gave a usable one.
    pub hint: Option<String>,
    /// The valid decisions (1 or -1), in the judge's order.
    pub decisions: Vec<f32>,
    /// Votes whose call failed or whose answer had no valid decision.
    pub invalid_votes: u32,
    /// The answer the hint came from, or the first answer.
    pub judge_text: String,
}

/// Runs the hint judge's votes on `input` and selects the hint.
pub fn hint_votes(
    judge: &Judge,
    input: &JudgeInput,
    settings: &JudgeSettings,
) -> Result<HintVerdict, String> {
    let outputs = ask_judge(judge, hint_judge_messages(input), settings)?;
    let votes: Vec<(Option<i32>, Option<String>)> = outputs
        .iter()
        .map(|o| match o {
            Ok(text) => (parse_boxed_score(text, &HINT_VALUES), extract_hint(text)),
            Err(_) => (None, None),
        })
        .collect();
    let decisions: Vec<f32> = votes.iter().filter_map(|v| v.0).map(|d| d as f32).collect();
    let chosen = best_hint_index(&votes);
    Ok(HintVerdict {
        hint: chosen.and_then(|i| votes[i].1.as_deref().map(|h| h.trim().to_string())),
        invalid_votes: (outputs.len() - decisions.len()) as u32,
        decisions,
        judge_text: output_text(&outputs[chosen.unwrap_or(0)]),
    })
}

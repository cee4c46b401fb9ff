//! Judge prompts, vote parsing and hint extraction for reward plugins that ask a judge model
//! about a turn. A library the methods link (it exports no plugin); it lives apart from the
//! ABI crate so that changing a prompt is not an ABI change.
//!
//! Two judges are built here, because several methods use them and one plugin library cannot
//! link another (each exports the same root-module symbol):
//!
//! - the **outcome judge** of binary RL ([`prm_judge_messages`], [`prm_votes`]): did the
//!   assistant's output do what the user wanted, judged from the next state; each vote is
//!   `\boxed{1}`, `\boxed{-1}` or `\boxed{0}` and the votes are merged by [`majority_vote`];
//! - the **hint judge** of on-policy distillation ([`hint_judge_messages`], [`hint_votes`]):
//!   does the next state hold hindsight that would have improved the response, and if so, what
//!   hint (`[HINT_START] ... [HINT_END]`); the teacher then scores the turn's exact response
//!   tokens under the prompt with the hint appended ([`hinted_teacher_scores`]).
//!
//! Parsing is lenient about spacing and strict about values: an answer that cannot be read is an
//! invalid vote, never a guess.

#![warn(missing_docs)]

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::host::{Judge, JudgeRequest, Policy, ScoreTokens, TokenScores};
use openclaw_plugin_api::serde_json::{self, Value};
use openclaw_plugin_api::{
    JudgeSettings, Message, SamplingParams, Score, ScoreRequest, TopKEntries, Turn, TurnType,
};

/// The valid votes of the outcome judge.
pub const PRM_VALUES: [i32; 3] = [1, -1, 0];
/// The valid decisions of the hint judge.
pub const HINT_VALUES: [i32; 2] = [1, -1];
/// The marker that opens a hint in the hint judge's answer.
pub const HINT_START: &str = "[HINT_START]";
/// The marker that closes a hint in the hint judge's answer.
pub const HINT_END: &str = "[HINT_END]";
/// The line that introduces a hint appended to the teacher's prompt.
pub const HINT_MARKER: &str = "[user's hint / instruction]";
/// A hint must be longer than this many characters (after trimming) to be used.
pub const MIN_HINT_CHARS: usize = 10;

// ---------------------------------------------------------------------------------------------
// Parsing and voting

/// The value in the last `\boxed{...}` of `text`, when it is a whole number in `allowed`.
///
/// Spaces inside the braces and a leading `+` are accepted (`\boxed{ +1 }` is 1). Only the last
/// box counts: when it is malformed (`\boxed{}`, `\boxed{yes}`, `\boxed{2}` where 2 is not
/// allowed) the answer is invalid, rather than falling back to an earlier box, which is usually
/// the judge quoting the format while it reasons.
pub fn parse_boxed_score(text: &str, allowed: &[i32]) -> Option<i32> {
    const OPEN: &str = "\\boxed{";
    let start = text.rfind(OPEN)? + OPEN.len();
    let inner = &text[start..];
    let inner = inner[..inner.find('}')?].trim();
    let (negative, digits) = match inner.as_bytes().first()? {
        b'+' => (false, inner[1..].trim_start()),
        b'-' => (true, inner[1..].trim_start()),
        _ => (false, inner),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i32 = digits.parse().ok()?;
    let value = if negative { -magnitude } else { magnitude };
    allowed.contains(&value).then_some(value)
}

/// Merges valid votes: the most common value wins when its share of the votes is at least
/// `threshold` and no other value has as many votes; otherwise (and with no votes) 0.
///
/// `[1, 1, -1]` with 0.5 gives 1; `[1, -1, 0]` gives 0 (a tie); `[1, 1, -1]` with 0.7 gives 0.
/// Non-finite entries are not votes and are skipped.
pub fn majority_vote(valid: &[f32], threshold: f32) -> f32 {
    let votes: Vec<f32> = valid.iter().copied().filter(|v| v.is_finite()).collect();
    if votes.is_empty() {
        return 0.0;
    }
    let mut counts: Vec<(f32, usize)> = Vec::new();
    for v in &votes {
        match counts.iter_mut().find(|(value, _)| value == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((*v, 1)),
        }
    }
    let top = counts.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let mut leaders = counts.iter().filter(|&&(_, n)| n == top);
    let (winner, _) = *leaders.next().expect("at least one value was counted");
    if leaders.next().is_some() {
        return 0.0;
    }
    // IEEE division is correctly rounded, so a share exactly equal to the threshold compares
    // equal (3 of 5 against 0.6).
    if (top as f32) / (votes.len() as f32) >= threshold {
        winner
    } else {
        0.0
    }
}

/// The text of the last complete `[HINT_START] ... [HINT_END]` span of `text`, trimmed; spans
/// may cross lines. A start marker without an end marker (a truncated answer) is ignored; when
/// start markers repeat before an end marker, the hint begins after the last of them. `None`
/// when there is no complete span or it is blank.
pub fn extract_hint(text: &str) -> Option<String> {
    let end = text.rfind(HINT_END)?;
    let start = text[..end].rfind(HINT_START)? + HINT_START.len();
    let hint = text[start..end].trim();
    (!hint.is_empty()).then(|| hint.to_string())
}

/// The index of the hint [`select_best_hint`] chooses.
fn best_hint_index(votes: &[(Option<i32>, Option<String>)]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, (decision, hint)) in votes.iter().enumerate() {
        let Some(hint) = hint.as_deref().filter(|_| *decision == Some(1)) else {
            continue;
        };
        let len = hint.trim().chars().count();
        // Strictly longer: on equal lengths the earlier vote keeps its place.
        if len > MIN_HINT_CHARS && best.is_none_or(|(_, b)| len > b) {
            best = Some((i, len));
        }
    }
    best.map(|(i, _)| i)
}

/// Among votes that decided 1 and carry a hint longer than [`MIN_HINT_CHARS`] characters
/// (after trimming), the longest hint, trimmed; the earliest wins a tie.
pub fn select_best_hint(votes: &[(Option<i32>, Option<String>)]) -> Option<String> {
    best_hint_index(votes).and_then(|i| votes[i].1.as_deref().map(|h| h.trim().to_string()))
}

/// A copy of `messages` with `hint` appended to the last user message (the last message when
/// there is no user message) after a blank line and [`HINT_MARKER`]; the changed content is
/// trimmed at its end. With no messages at all, one user message holding the hint.
pub fn append_hint_to_messages(messages: &[Message], hint: &str) -> Vec<Message> {
    let addition = format!("\n\n{HINT_MARKER}\n{hint}");
    let mut out = messages.to_vec();
    let target = out
        .iter()
        .rposition(|m| m.role.as_str() == "user")
        .or_else(|| out.len().checked_sub(1));
    match target {
        Some(i) => {
            let content = format!("{}{addition}", out[i].content);
            out[i].content = content.trim_end().into();
        }
        None => out.push(Message::new("user", addition.trim())),
    }
    out
}

/// An assistant message as a judge reads it: its reasoning inside `<think>` tags, its text, and
/// each tool call as `<tool_call>{"name": ..., "arguments": ...}</tool_call>`, one per line.
/// Template markup and end-of-turn tokens are left out.
pub fn render_for_judge(msg: &Message) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let ROption::RSome(reasoning) = &msg.reasoning_content {
        let reasoning = reasoning.trim();
        if !reasoning.is_empty() {
            parts.push(format!("<think>\n{reasoning}\n</think>"));
        }
    }
    let content = msg.content.trim();
    if !content.is_empty() {
        parts.push(content.to_string());
    }
    if let ROption::RSome(calls) = &msg.tool_calls_json {
        parts.extend(render_tool_calls(calls));
    }
    parts.join("\n")
}

fn render_tool_calls(json: &str) -> Vec<String> {
    let tagged = |body: String| format!("<tool_call>{body}</tool_call>");
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Array(calls)) => calls.iter().map(|c| tagged(tool_call_json(c))).collect(),
        Ok(Value::Null) => Vec::new(),
        Ok(call) => vec![tagged(tool_call_json(&call))],
        // Text that is not JSON is still what the model wrote: show it as it is.
        Err(_) if json.trim().is_empty() => Vec::new(),
        Err(_) => vec![tagged(json.trim().to_string())],
    }
}

/// `{"name": ..., "arguments": ...}` of an OpenAI tool call, whose arguments travel as JSON
/// text; anything of another shape is shown whole.
fn tool_call_json(call: &Value) -> String {
    let function = call.get("function").unwrap_or(call);
    let Some(name) = function.get("name") else {
        return call.to_string();
    };
    let arguments = match function.get("arguments") {
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Some(other) => other.clone(),
        None => Value::Object(Default::default()),
    };
    format!("{{\"name\": {name}, \"arguments\": {arguments}}}")
}

/// `text` cut to at most `max_chars` characters (0: no limit) by dropping its middle, whose
/// size a marker line states: the start says what was attempted and the end usually holds the
/// answer, the tool call or the error, so both are kept.
pub fn clip_middle(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if max_chars == 0 || total <= max_chars {
        return text.to_string();
    }
    let head = max_chars / 2;
    let tail = max_chars - head;
    let byte_at = |chars: usize| {
        text.char_indices()
            .nth(chars)
            .map_or(text.len(), |(b, _)| b)
    };
    format!(
        "{}\n[... {} characters omitted ...]\n{}",
        &text[..byte_at(head)],
        total - max_chars,
        &text[byte_at(total - tail)..]
    )
}

// ---------------------------------------------------------------------------------------------
// What the judge reads

/// What a judge reads about one turn.
#[derive(Clone, Debug, PartialEq)]
pub struct JudgeInput {
    /// The assistant's response, rendered by [`render_for_judge`].
    pub response: String,
    /// The role of the next state (`user` or `tool`).
    pub role: String,
    /// The next state's text.
    pub next_state: String,
}

/// The judge's view of a request: the response and the next state, each clipped to
/// `max_chars` characters (0: whole). `Err` says why the turn is not judged at all: it has no
/// next state, it is a side turn, or it was recorded as not trainable.
pub fn judge_input(request: &ScoreRequest, max_chars: usize) -> Result<JudgeInput, &'static str> {
    let turn = &request.turn;
    if turn.turn_type == TurnType::Side {
        return Err("side turn");
    }
    if !turn.trainable {
        return Err("turn recorded as not trainable");
    }
    let ROption::RSome(next) = &turn.next_state else {
        return Err("no next state");
    };
    let mut response = render_for_judge(&turn.response);
    if response.trim().is_empty() {
        // A response the host could not parse into a message still has its rendered text.
        response = request.response_text.trim().to_string();
    }
    let mut next_text = next.content.to_string();
    if next_text.trim().is_empty() {
        next_text = next
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
    }
    Ok(JudgeInput {
        response: clip_middle(&response, max_chars),
        role: next.role.to_string(),
        next_state: clip_middle(&next_text, max_chars),
    })
}

/// The score of a turn that was not judged: 0, not trainable, and the reason in the metadata.
pub fn unjudged_score(reason: &str) -> Score {
    Score {
        metadata_json: serde_json::json!({ "judged": false, "reason": reason })
            .to_string()
            .into(),
        ..Default::default()
    }
}

/// The outcome judge's chat (binary RL): a system message with the rules and a user message
/// with the assistant's output, the next state with its role, and what to answer.
pub fn prm_judge_messages(input: &JudgeInput) -> Vec<Message> {
    let system = "\
You are a process reward model (PRM). You evaluate one step of an AI assistant: did its output \
fulfil what the user intended? Nobody will answer your questions; your evidence is the next \
state, which is whatever came right after the output.

The next state has a role:
- role \"user\": the user's next message, written after reading the output.
- role \"tool\": what a tool returned. The assistant called that tool in its output, so the \
result follows from the assistant's own action. A tool output that succeeded (no error, the \
kind of result the call asked for) means the step moved the task forward and scores as \
progress.

Scoring:
- \\boxed{1}: the task progressed. The user moves on to something new, approves or thanks; the \
environment confirms the action; a tool call returns a successful result.
- \\boxed{-1}: the output was wrong, incomplete or not wanted. Signs: the user asks to redo or \
retry it; the user corrects it or asks for something in it to be changed; the user repeats the \
same request in other words; a tool or the environment reports an error that the assistant's \
action caused.
- \\boxed{0}: the next state does not tell either way (ambiguous, or not enough to judge).

Important: a request to change what the assistant produced is negative feedback and scores \
\\boxed{-1}, however politely it is worded.

Think step by step, then end with the score in \\boxed{}: \\boxed{1}, \\boxed{-1} or \\boxed{0}.";
    let user = format!(
        "## Assistant output\n{}\n\n## Next state [role: {}]\n{}\n\n\
         First classify the next state as one of:\n\
         (a) progress: the user moves on or approves, or the tool or environment reports \
         success;\n\
         (b) a correction, redo or change request, the same request again, or an error caused by \
         the output;\n\
         (c) ambiguous.\n\
         Then give the score: \\boxed{{1}} for (a), \\boxed{{-1}} for (b), \\boxed{{0}} for (c).",
        input.response, input.role, input.next_state
    );
    vec![Message::new("system", system), Message::new("user", &user)]
}

/// The hint judge's chat (on-policy distillation): a system message with the task and the
/// strict answer format, and a user message with the response at turn t and the next state at
/// turn t+1 with its role.
pub fn hint_judge_messages(input: &JudgeInput) -> Vec<Message> {
    let system = format!(
        "\
You are a process reward model that extracts hindsight hints. You receive:
1. the assistant's response at turn t;
2. the next state at turn t+1, with its role.

The role of the next state:
- role \"user\": the user's next message, written after reading the response.
- role \"tool\": what a tool returned. The assistant called that tool in its response, so the \
result follows from its own action. A successful tool output is NOT information the assistant \
should have known before acting, and is not a hint by itself.

Decide whether the next state reveals hindsight that would have made the response at turn t \
better: for example the user corrects a mistake, states a requirement or preference the \
response missed, or a tool error shows what should have been done differently.

Answer format, strictly:
- exactly one decision: \\boxed{{1}} when the next state holds such useful hindsight, \\boxed{{-1}} \
when it does not;
- if and only if the decision is \\boxed{{1}}, a hint between {HINT_START} and {HINT_END}: one to \
three sentences, concise, concrete and actionable, telling the assistant what to do at turn t."
    );
    let user = format!(
        "## Assistant response (turn t)\n{}\n\n## Next state (turn t+1) [role: {}]\n{}\n\n\
         Now output your decision and, if it is positive, the hint, in the required format.",
        input.response, input.role, input.next_state
    );
    vec![Message::new("system", &system), Message::new("user", &user)]
}

// ---------------------------------------------------------------------------------------------
// Asking the judge

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

// ---------------------------------------------------------------------------------------------
// The hinted teacher

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

// ---------------------------------------------------------------------------------------------
// Running two things at once

/// Runs `a` on a second thread while `b` runs on this one, and returns both results: the two
/// sets of judge votes of a turn do not wait for each other. A panic in `a` becomes an error.
pub fn run_both<A: Send, B>(
    a: impl FnOnce() -> Result<A, String> + Send,
    b: impl FnOnce() -> Result<B, String>,
) -> Result<(A, B), String> {
    std::thread::scope(|s| {
        let handle = s.spawn(a);
        let b = b();
        let a = handle.join().map_err(|p| {
            format!(
                "a judge thread panicked: {}",
                openclaw_plugin_api::ffi::panic_message(&*p)
            )
        })?;
        Ok((a?, b?))
    })
}

// ---------------------------------------------------------------------------------------------
// Scripted services for tests

/// A judge and a policy that answer from a script, for testing reward plugins without a model
/// (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod scripted {
    use openclaw_plugin_api::abi_stable::std_types::ROption;
    use openclaw_plugin_api::host::{
        Generation, JudgeRequest, JudgeService, PolicyService, TokenScores,
    };
    use openclaw_plugin_api::{Message, SamplingParams, ScoreTokens, TopKEntries};
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    type Answer =
        dyn Fn(&JudgeRequest) -> Result<Vec<Result<String, String>>, String> + Send + Sync;

    /// A judge that answers each request with a function of it and records every request.
    pub struct ScriptedJudge {
        answer: Box<Answer>,
        /// Every request, in the order they arrived.
        pub requests: Mutex<Vec<JudgeRequest>>,
        in_flight: Mutex<usize>,
        changed: Condvar,
        rendezvous: Option<Duration>,
    }

    impl ScriptedJudge {
        /// A judge whose answer to a request is `answer(request)`.
        pub fn new(
            answer: impl Fn(&JudgeRequest) -> Result<Vec<Result<String, String>>, String>
                + Send
                + Sync
                + 'static,
        ) -> Self {
            ScriptedJudge {
                answer: Box::new(answer),
                requests: Mutex::new(Vec::new()),
                in_flight: Mutex::new(0),
                changed: Condvar::new(),
                rendezvous: None,
            }
        }

        /// A judge that answers every request with `texts`, repeated or cut to `n` entries.
        pub fn always(texts: &[&str]) -> Self {
            let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
            Self::new(move |r| {
                Ok((0..r.n as usize)
                    .map(|i| Ok(texts[i % texts.len()].clone()))
                    .collect())
            })
        }

        /// Makes each call wait until a second call is in flight, failing after `timeout`: a
        /// test of concurrency fails, rather than hangs, when calls come one after another.
        pub fn with_rendezvous(mut self, timeout: Duration) -> Self {
            self.rendezvous = Some(timeout);
            self
        }

        /// The number of requests so far.
        pub fn calls(&self) -> usize {
            self.requests.lock().unwrap().len()
        }

        /// The text of every message of request `i`, joined.
        pub fn prompt(&self, i: usize) -> String {
            self.requests.lock().unwrap()[i]
                .messages
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        }

        fn meet(&self, timeout: Duration) -> Result<(), String> {
            let mut n = self.in_flight.lock().unwrap();
            *n += 1;
            self.changed.notify_all();
            let (n, wait) = self
                .changed
                .wait_timeout_while(n, timeout, |n| *n < 2)
                .unwrap();
            drop(n);
            if wait.timed_out() {
                Err("no second judge call arrived while this one was in flight".into())
            } else {
                Ok(())
            }
        }
    }

    impl JudgeService for ScriptedJudge {
        fn complete(&self, request: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
            self.requests.lock().unwrap().push(request.clone());
            if let Some(timeout) = self.rendezvous {
                self.meet(timeout)?;
            }
            (self.answer)(request)
        }
        fn classify(&self, _: &str) -> Result<Vec<f32>, String> {
            Err("the scripted judge has no classifier".into())
        }
    }

    /// A policy whose tokens are bytes and whose chat template writes `role: content` lines.
    /// Its score of response token `i` is `-(1 + i) / 1000 - prompt_len / 1e6`, so a test can
    /// read back which prompt it was given; every score request is recorded.
    #[derive(Default)]
    pub struct ScriptedPolicy {
        /// Every score request, in order.
        pub scored: Mutex<Vec<ScoreTokens>>,
        /// Every rendered chat text, in order.
        pub rendered: Mutex<Vec<String>>,
        /// Return this many log-probabilities fewer than asked (to test the checks).
        pub short_by: usize,
    }

    impl ScriptedPolicy {
        /// The log-probability it gives response token `i` under a prompt of `prompt_len`
        /// tokens.
        pub fn logprob(i: usize, prompt_len: usize) -> f32 {
            -((1 + i) as f32) / 1000.0 - prompt_len as f32 / 1e6
        }
    }

    impl PolicyService for ScriptedPolicy {
        fn generate(&self, _: &[u32], _: &SamplingParams) -> Result<Generation, String> {
            Err("the scripted policy does not generate".into())
        }
        fn chat(&self, _: &[Message], _: &str, _: &SamplingParams) -> Result<Generation, String> {
            Err("the scripted policy does not generate".into())
        }
        fn score(&self, r: &ScoreTokens) -> Result<TokenScores, String> {
            self.scored.lock().unwrap().push(r.clone());
            let n = r.response_ids.len().saturating_sub(self.short_by);
            let k = r.top_k as usize;
            Ok(TokenScores {
                logprobs: (0..n)
                    .map(|i| Self::logprob(i, r.prompt_ids.len()))
                    .collect(),
                topk: if k == 0 {
                    ROption::RNone
                } else {
                    ROption::RSome(TopKEntries {
                        k: r.top_k,
                        token_ids: (0..n * k).map(|j| j as u32).collect(),
                        logprobs: vec![-(k as f32).ln() - 0.5; n * k].into(),
                    })
                },
            })
        }
        fn render_chat(
            &self,
            messages: &[Message],
            tools_json: &str,
            add_generation_prompt: bool,
        ) -> Result<String, String> {
            let mut text = String::new();
            if !tools_json.is_empty() {
                text.push_str(&format!("tools: {tools_json}\n"));
            }
            for m in messages {
                text.push_str(&format!("{}: {}\n", m.role, m.content));
            }
            if add_generation_prompt {
                text.push_str("assistant: ");
            }
            self.rendered.lock().unwrap().push(text.clone());
            Ok(text)
        }
        fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
            Ok(text.bytes().map(u32::from).collect())
        }
        fn weight_version(&self) -> u64 {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scripted::{ScriptedJudge, ScriptedPolicy};
    use super::*;
    use openclaw_plugin_api::host::{Generation, HostServices};
    use openclaw_plugin_api::NextState;
    use std::sync::Arc;
    use std::time::Duration;

    const B: &[i32] = &PRM_VALUES;

    #[test]
    fn boxed_scores_parse_the_last_box_with_spaces_and_signs() {
        assert_eq!(parse_boxed_score("so \\boxed{1}", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{-1}", B), Some(-1));
        assert_eq!(parse_boxed_score("\\boxed{0}.", B), Some(0));
        assert_eq!(parse_boxed_score("\\boxed{ 1 }", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{+1}", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{ - 1 }", B), Some(-1));
        // Several boxes: the last one is the answer.
        assert_eq!(
            parse_boxed_score("\\boxed{1} hmm, no: \\boxed{-1}", B),
            Some(-1)
        );
        assert_eq!(
            parse_boxed_score("\\boxed{-1}\n\\boxed{0}\nfinal \\boxed{1}", B),
            Some(1)
        );
    }

    #[test]
    fn malformed_or_disallowed_boxes_are_invalid() {
        for text in [
            "",
            "no box at all, score 1",
            "\\boxed{2}",
            "\\boxed{}",
            "\\boxed{ }",
            "\\boxed{+}",
            "\\boxed{yes}",
            "\\boxed{1.0}",
            "\\boxed{10}",
            "\\boxed{1",
            "boxed{1}",
            "\\boxed{--1}",
            // The final box decides even when an earlier one was valid.
            "\\boxed{1} ... \\boxed{2}",
            "\\boxed{1} ... \\boxed{}",
        ] {
            assert_eq!(parse_boxed_score(text, B), None, "{text:?}");
        }
        // 0 is not a hint decision.
        assert_eq!(parse_boxed_score("\\boxed{0}", &HINT_VALUES), None);
        assert_eq!(parse_boxed_score("\\boxed{-1}", &HINT_VALUES), Some(-1));
        assert_eq!(parse_boxed_score("\\boxed{99999999999}", B), None);
    }

    #[test]
    fn majority_needs_a_unique_winner_with_enough_share() {
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[-1.0, 1.0, -1.0], 0.5), -1.0);
        assert_eq!(majority_vote(&[1.0, -1.0, 0.0], 0.5), 0.0);
        assert_eq!(majority_vote(&[1.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[-1.0], 1.0), -1.0);
        assert_eq!(majority_vote(&[], 0.5), 0.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0], 0.7), 0.0);
        // Ties between the two most common values give 0 whatever the threshold.
        assert_eq!(majority_vote(&[1.0, -1.0], 0.0), 0.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, -1.0, 0.0], 0.0), 0.0);
        // A share exactly at the threshold wins.
        assert_eq!(majority_vote(&[1.0, 1.0, 1.0, -1.0, 0.0], 0.6), 1.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, 0.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, 0.0], 0.51), 0.0);
        // A winning 0 is 0; non-finite entries are not votes.
        assert_eq!(majority_vote(&[0.0, 0.0, 1.0], 0.5), 0.0);
        assert_eq!(majority_vote(&[f32::NAN, 1.0, f32::NAN], 0.9), 1.0);
    }

    #[test]
    fn hints_come_from_the_last_complete_span() {
        assert_eq!(
            extract_hint("\\boxed{1}\n[HINT_START]  Ask first.  [HINT_END]").as_deref(),
            Some("Ask first.")
        );
        assert_eq!(
            extract_hint("[HINT_START]one[HINT_END] then [HINT_START]\ntwo\nlines\n[HINT_END]")
                .as_deref(),
            Some("two\nlines")
        );
        // A truncated last span does not count; the earlier complete one does.
        assert_eq!(
            extract_hint("[HINT_START]kept[HINT_END] [HINT_START]cut off").as_deref(),
            Some("kept")
        );
        assert_eq!(extract_hint("[HINT_START] never closed"), None);
        assert_eq!(extract_hint("only an end [HINT_END]"), None);
        assert_eq!(extract_hint("[HINT_END] backwards [HINT_START]"), None);
        assert_eq!(extract_hint("[HINT_START]   [HINT_END]"), None);
        assert_eq!(extract_hint("no hint"), None);
        // A repeated start marker: the hint begins after the last one.
        assert_eq!(
            extract_hint("[HINT_START] draft [HINT_START] final [HINT_END]").as_deref(),
            Some("final")
        );
        // Brackets and markup inside the hint are kept.
        assert_eq!(
            extract_hint("[HINT_START]Use `ls [dir]` {not} \\boxed{1}[HINT_END]").as_deref(),
            Some("Use `ls [dir]` {not} \\boxed{1}")
        );
    }

    fn vote(d: Option<i32>, h: Option<&str>) -> (Option<i32>, Option<String>) {
        (d, h.map(str::to_string))
    }

    #[test]
    fn the_longest_positive_hint_over_ten_characters_wins() {
        let votes = [
            vote(Some(1), Some("Short one!")), // exactly 10 characters: too short
            vote(Some(-1), Some("A much longer hint from a negative vote.")),
            vote(
                None,
                Some("An even longer hint from a vote with no decision at all."),
            ),
            vote(Some(1), Some("  Check the path first.  ")),
            vote(Some(1), Some("Check it exists.")),
            vote(Some(1), None),
        ];
        assert_eq!(
            select_best_hint(&votes).as_deref(),
            Some("Check the path first.")
        );
        // Equal lengths: the earlier vote keeps its place.
        let tie = [
            vote(Some(1), Some("Say hello first.")),
            vote(Some(1), Some("Say goodbye now.")),
        ];
        assert_eq!(select_best_hint(&tie).as_deref(), Some("Say hello first."));
        assert_eq!(select_best_hint(&votes[..3]), None);
        assert_eq!(
            select_best_hint(&[vote(Some(1), Some("           x"))]),
            None
        );
        assert_eq!(
            select_best_hint(&[vote(Some(1), Some("eleven char"))]).as_deref(),
            Some("eleven char")
        );
        assert_eq!(select_best_hint(&[]), None);
        // Length is counted in characters, not bytes.
        assert_eq!(select_best_hint(&[vote(Some(1), Some("ééééééé"))]), None);
    }

    #[test]
    fn hints_go_to_the_last_user_message() {
        let msgs = vec![
            Message::new("system", "sys"),
            Message::new("user", "first"),
            Message::new("assistant", "a"),
            Message::new("user", "second  \n"),
            Message::new("assistant", "calling a tool"),
            Message::new("tool", "result"),
        ];
        let out = append_hint_to_messages(&msgs, "Be brief.  ");
        assert_eq!(out.len(), msgs.len());
        assert_eq!(
            out[3].content.as_str(),
            "second  \n\n\n[user's hint / instruction]\nBe brief."
        );
        for i in [0, 1, 2, 4, 5] {
            assert_eq!(out[i], msgs[i], "message {i} is unchanged");
        }
        assert_eq!(
            msgs[3].content.as_str(),
            "second  \n",
            "the input is not modified"
        );

        let no_user = vec![Message::new("system", "sys"), Message::new("tool", "out")];
        let out = append_hint_to_messages(&no_user, "Hint.");
        assert_eq!(out[0], no_user[0]);
        assert_eq!(
            out[1].content.as_str(),
            "out\n\n[user's hint / instruction]\nHint."
        );
        assert_eq!(out[1].role.as_str(), "tool");

        let out = append_hint_to_messages(&[], "Hint.");
        assert_eq!(
            out,
            vec![Message::new("user", "[user's hint / instruction]\nHint.")]
        );
    }

    #[test]
    fn judges_read_reasoning_text_and_tool_calls() {
        let mut m = Message::new("assistant", "  Let me look.  ");
        m.reasoning_content = ROption::RSome("The user wants a file.".into());
        m.tool_calls_json = ROption::RSome(
            r#"[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\": \"a.txt\"}"}},
                {"id":"c2","type":"function","function":{"name":"ls","arguments":"not json"}}]"#
                .into(),
        );
        assert_eq!(
            render_for_judge(&m),
            "<think>\nThe user wants a file.\n</think>\nLet me look.\n\
             <tool_call>{\"name\": \"read\", \"arguments\": {\"path\":\"a.txt\"}}</tool_call>\n\
             <tool_call>{\"name\": \"ls\", \"arguments\": \"not json\"}</tool_call>"
        );
        assert_eq!(render_for_judge(&Message::new("assistant", "Hi.")), "Hi.");
        let mut blank = Message::new("assistant", "");
        blank.reasoning_content = ROption::RSome("  ".into());
        blank.tool_calls_json = ROption::RSome("[]".into());
        assert_eq!(render_for_judge(&blank), "");
        blank.tool_calls_json = ROption::RSome("<garbled>".into());
        assert_eq!(render_for_judge(&blank), "<tool_call><garbled></tool_call>");
        blank.tool_calls_json = ROption::RSome(r#"{"name":"x","arguments":{"a":1}}"#.into());
        assert_eq!(
            render_for_judge(&blank),
            "<tool_call>{\"name\": \"x\", \"arguments\": {\"a\":1}}</tool_call>"
        );
    }

    #[test]
    fn long_texts_keep_their_start_and_end() {
        assert_eq!(clip_middle("short", 10), "short");
        assert_eq!(clip_middle("anything", 0), "anything");
        let text = "é".repeat(10) + &"x".repeat(80) + &"z".repeat(10);
        let clipped = clip_middle(&text, 20);
        assert!(clipped.starts_with(&"é".repeat(10)), "{clipped}");
        assert!(clipped.ends_with(&"z".repeat(10)), "{clipped}");
        assert!(
            clipped.contains("[... 80 characters omitted ...]"),
            "{clipped}"
        );
        assert!(!clipped.contains('x'), "{clipped}");
    }

    fn turn(next: Option<(&str, &str)>) -> Turn {
        Turn {
            session_id: "s".into(),
            turn_index: 3,
            turn_type: TurnType::Main,
            prompt_messages: vec![
                Message::new("system", "You help."),
                Message::new("user", "List the files."),
            ]
            .into(),
            tools_json: r#"[{"type":"function","function":{"name":"ls"}}]"#.into(),
            response: Message::new("assistant", "Here they are: a, b."),
            prompt_ids: vec![1, 2, 3].into(),
            response_ids: vec![901, 7, 902, 13].into(),
            response_logprobs: vec![-0.1, -0.2, -0.3, -0.4].into(),
            weight_version: 4,
            next_state: next
                .map(|(role, text)| NextState {
                    role: role.into(),
                    content: text.into(),
                    messages: vec![Message::new(role, text)].into(),
                })
                .into(),
            trainable: true,
        }
    }

    fn request(next: Option<(&str, &str)>) -> ScoreRequest {
        ScoreRequest {
            turn: turn(next),
            response_text: "Here they are: a, b.<|im_end|>".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        }
    }

    #[test]
    fn the_judge_reads_the_response_and_the_next_state_with_its_role() {
        let input = judge_input(&request(Some(("tool", "ERROR: no such dir"))), 0).unwrap();
        assert_eq!(
            input,
            JudgeInput {
                response: "Here they are: a, b.".into(),
                role: "tool".into(),
                next_state: "ERROR: no such dir".into(),
            }
        );
        assert_eq!(judge_input(&request(None), 0), Err("no next state"));
        let mut side = request(Some(("user", "ok")));
        side.turn.turn_type = TurnType::Side;
        assert_eq!(judge_input(&side, 0), Err("side turn"));
        let mut untrainable = request(Some(("user", "ok")));
        untrainable.turn.trainable = false;
        assert!(judge_input(&untrainable, 0).is_err());
        // An unparsed response falls back to the rendered text; long texts are clipped.
        let mut raw = request(Some(("user", &"y".repeat(500))));
        raw.turn.response = Message::new("assistant", "");
        let input = judge_input(&raw, 100).unwrap();
        assert_eq!(input.response, "Here they are: a, b.<|im_end|>");
        assert!(
            input.next_state.contains("400 characters omitted"),
            "{}",
            input.next_state
        );
        let s = unjudged_score("no next state");
        assert!(!s.trainable && s.value == 0.0 && s.votes.is_empty());
        assert!(s.metadata_json.contains("no next state"));
    }

    fn input(role: &str) -> JudgeInput {
        JudgeInput {
            response: "RESPONSE-TEXT".into(),
            role: role.into(),
            next_state: "NEXT-STATE-TEXT".into(),
        }
    }

    #[test]
    fn the_outcome_judge_prompt_has_its_rules_and_sections() {
        let msgs = prm_judge_messages(&input("tool"));
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].role.as_str(), "system");
        assert_eq!(msgs[1].role.as_str(), "user");
        let sys = msgs[0].content.as_str();
        for needle in [
            "process reward model",
            "next state",
            "role \"user\"",
            "role \"tool\"",
            "\\boxed{1}",
            "\\boxed{-1}",
            "\\boxed{0}",
            "redo or retry",
            "repeats the same request",
            "negative feedback",
            "step by step",
        ] {
            assert!(sys.contains(needle), "system prompt lacks {needle:?}");
        }
        // The rules come in order: progress, then negative, then ambiguous.
        let (p, n, z) = (
            sys.find("- \\boxed{1}").unwrap(),
            sys.find("- \\boxed{-1}").unwrap(),
            sys.find("- \\boxed{0}").unwrap(),
        );
        assert!(p < n && n < z);
        let user = msgs[1].content.as_str();
        assert!(
            user.starts_with(
                "## Assistant output\nRESPONSE-TEXT\n\n## Next state [role: tool]\nNEXT-STATE-TEXT\n\n"
            ),
            "{user}"
        );
        let (a, b, c) = (
            user.find("(a) progress").unwrap(),
            user.find("(b) a correction, redo or change request")
                .unwrap(),
            user.find("(c) ambiguous").unwrap(),
        );
        assert!(a < b && b < c);
        assert!(user.ends_with("\\boxed{0} for (c)."), "{user}");
        assert!(prm_judge_messages(&input("user"))[1]
            .content
            .contains("[role: user]"));
    }

    #[test]
    fn the_hint_judge_prompt_has_its_format_and_sections() {
        let msgs = hint_judge_messages(&input("user"));
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].role.as_str(), "system");
        let sys = msgs[0].content.as_str();
        for needle in [
            "hindsight",
            "turn t",
            "turn t+1",
            "NOT information the assistant should have known",
            "\\boxed{1}",
            "\\boxed{-1}",
            "if and only if",
            "[HINT_START]",
            "[HINT_END]",
            "one to three sentences",
        ] {
            assert!(sys.contains(needle), "system prompt lacks {needle:?}");
        }
        assert!(!sys.contains("\\boxed{0}"), "the hint judge has no 0");
        let user = msgs[1].content.as_str();
        assert!(
            user.starts_with(
                "## Assistant response (turn t)\nRESPONSE-TEXT\n\n\
                 ## Next state (turn t+1) [role: user]\nNEXT-STATE-TEXT\n\n"
            ),
            "{user}"
        );
        assert!(user.contains("output your decision and, if it is positive, the hint"));
    }

    fn judge_of(j: ScriptedJudge) -> (Arc<ScriptedJudge>, Judge) {
        let j = Arc::new(j);
        let host = HostServices::builder().judge(j.clone()).build();
        (j, host.judge().unwrap())
    }

    #[test]
    fn outcome_votes_count_failures_and_garbage_as_invalid() {
        let (script, judge) = judge_of(ScriptedJudge::new(|_| {
            Ok(vec![
                Ok("bad \\boxed{-1}".into()),
                Err("timeout".into()),
                Ok("\\boxed{2}".into()),
                Ok("fine \\boxed{1}".into()),
                Ok("great \\boxed{ +1 }".into()),
            ])
        }));
        let settings = JudgeSettings {
            votes: 6,
            temperature: 0.3,
            max_tokens: 77,
            ..JudgeSettings::default()
        };
        let v = prm_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.votes, vec![-1.0, 1.0, 1.0]);
        // A failed call, a 2 and a sixth completion the judge never returned.
        assert_eq!(v.invalid_votes, 3);
        assert_eq!(v.score, 1.0);
        assert_eq!(v.judge_text, "fine \\boxed{1}");
        let req = script.requests.lock().unwrap()[0].clone();
        assert_eq!(req.n, 6);
        assert_eq!(req.sampling.temperature, 0.3);
        assert_eq!(req.sampling.max_tokens, 77);
        assert_eq!(req.messages.to_vec(), prm_judge_messages(&input("user")));

        // 2 of 3 is below a 0.7 threshold: the score is 0 and the text the first answer.
        let strict = JudgeSettings {
            votes: 5,
            threshold: 0.7,
            ..settings
        };
        let v = prm_votes(&judge, &input("user"), &strict).unwrap();
        assert_eq!(v.score, 0.0);
        assert_eq!(v.judge_text, "bad \\boxed{-1}");

        let (_, failing) = judge_of(ScriptedJudge::new(|_| Err("judge down".into())));
        let e = prm_votes(&failing, &input("user"), &settings).unwrap_err();
        assert!(e.contains("judge down"), "{e}");
        let e = prm_votes(
            &judge,
            &input("user"),
            &JudgeSettings {
                votes: 0,
                ..settings
            },
        )
        .unwrap_err();
        assert!(e.contains("votes"), "{e}");

        let (_, all_failed) = judge_of(ScriptedJudge::new(|r| {
            Ok((0..r.n).map(|_| Err("overloaded".to_string())).collect())
        }));
        let v = prm_votes(&all_failed, &input("user"), &JudgeSettings::default()).unwrap();
        assert_eq!((v.score, v.invalid_votes, v.votes.len()), (0.0, 3, 0));
        assert!(v.judge_text.contains("overloaded"));
    }

    #[test]
    fn hint_votes_select_the_longest_positive_hint() {
        let (script, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{-1}",
            "\\boxed{1} [HINT_START]Say which files.[HINT_END]",
            "garbage",
            "\\boxed{1} [HINT_START]List hidden files as well.[HINT_END]",
            "\\boxed{1} [HINT_START]Short.[HINT_END]",
        ]));
        let settings = JudgeSettings {
            votes: 5,
            ..JudgeSettings::default()
        };
        let v = hint_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.hint.as_deref(), Some("List hidden files as well."));
        assert_eq!(v.decisions, vec![-1.0, 1.0, 1.0, 1.0]);
        assert_eq!(v.invalid_votes, 1);
        assert!(v.judge_text.contains("hidden files"));
        assert!(script.prompt(0).contains("## Assistant response (turn t)"));

        let (_, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{-1}",
            "\\boxed{1} no hint",
        ]));
        let v = hint_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.hint, None);
        assert_eq!(v.judge_text, "\\boxed{-1}");
    }

    fn teacher_of(p: ScriptedPolicy) -> (Arc<ScriptedPolicy>, Policy) {
        let p = Arc::new(p);
        let host = HostServices::builder().teacher(p.clone()).build();
        (p, host.teacher().unwrap())
    }

    #[test]
    fn the_teacher_scores_the_exact_response_under_the_hinted_prompt() {
        let (script, teacher) = teacher_of(ScriptedPolicy::default());
        let t = turn(Some(("user", "also hidden ones")));
        let scores = hinted_teacher_scores(&teacher, &t, "Include hidden files.", 0).unwrap();
        let rendered = script.rendered.lock().unwrap()[0].clone();
        assert_eq!(
            rendered,
            "tools: [{\"type\":\"function\",\"function\":{\"name\":\"ls\"}}]\n\
             system: You help.\n\
             user: List the files.\n\n[user's hint / instruction]\nInclude hidden files.\n\
             assistant: "
        );
        let req = script.scored.lock().unwrap()[0].clone();
        let expected_prompt: Vec<u32> = rendered.bytes().map(u32::from).collect();
        assert_eq!(req.prompt_ids.to_vec(), expected_prompt);
        assert_eq!(
            req.response_ids, t.response_ids,
            "the response ids pass unchanged"
        );
        assert_eq!(req.top_k, 0);
        // Taken as they come: token i's value is the one the host gave for token i.
        let want: Vec<f32> = (0..4)
            .map(|i| ScriptedPolicy::logprob(i, expected_prompt.len()))
            .collect();
        assert_eq!(scores.logprobs.to_vec(), want);
        assert!(scores.topk.is_none());

        let scores = hinted_teacher_scores(&teacher, &t, "Include hidden files.", 3).unwrap();
        assert_eq!(script.scored.lock().unwrap()[1].top_k, 3);
        let topk = scores.topk.into_option().unwrap();
        assert_eq!(
            (topk.k, topk.token_ids.len(), topk.logprobs.len()),
            (3, 12, 12)
        );
    }

    #[test]
    fn teacher_answers_of_the_wrong_size_are_errors() {
        let (_, teacher) = teacher_of(ScriptedPolicy {
            short_by: 1,
            ..Default::default()
        });
        let t = turn(None);
        let e = hinted_teacher_scores(&teacher, &t, "Hint here.", 0).unwrap_err();
        assert!(
            e.contains("3 log-probabilities for 4 response tokens"),
            "{e}"
        );

        // A teacher that returns fixed log-probabilities and never a top-k.
        struct Fixed(Vec<f32>);
        impl openclaw_plugin_api::host::PolicyService for Fixed {
            fn generate(&self, _: &[u32], _: &SamplingParams) -> Result<Generation, String> {
                Err("unused".into())
            }
            fn chat(
                &self,
                _: &[Message],
                _: &str,
                _: &SamplingParams,
            ) -> Result<Generation, String> {
                Err("unused".into())
            }
            fn score(&self, _: &ScoreTokens) -> Result<TokenScores, String> {
                Ok(TokenScores {
                    logprobs: self.0.clone().into(),
                    topk: ROption::RNone,
                })
            }
            fn render_chat(&self, _: &[Message], _: &str, _: bool) -> Result<String, String> {
                Ok("prompt".into())
            }
            fn tokenize(&self, _: &str) -> Result<Vec<u32>, String> {
                Ok(vec![1])
            }
            fn weight_version(&self) -> u64 {
                0
            }
        }
        let fixed = |lp: Vec<f32>| {
            HostServices::builder()
                .teacher(Arc::new(Fixed(lp)))
                .build()
                .teacher()
                .unwrap()
        };
        let teacher = fixed(vec![-1.0; 4]);
        hinted_teacher_scores(&teacher, &t, "Hint here.", 0).unwrap();
        let e = hinted_teacher_scores(&teacher, &t, "Hint here.", 5).unwrap_err();
        assert!(e.contains("no top-k"), "{e}");
        let e = hinted_teacher_scores(
            &fixed(vec![-1.0, f32::NAN, -1.0, -1.0]),
            &t,
            "Hint here.",
            0,
        )
        .unwrap_err();
        assert!(e.contains("token 1 is NaN"), "{e}");
        let e = hinted_teacher_scores(&fixed(vec![-1.0, -1.0, 0.5, -1.0]), &t, "Hint here.", 0)
            .unwrap_err();
        assert!(e.contains("token 2 is 0.5"), "{e}");
        let e = hinted_teacher_scores(&fixed(vec![-1.0; 5]), &t, "Hint here.", 0).unwrap_err();
        assert!(e.contains("5 log-probabilities for 4"), "{e}");
    }

    #[test]
    fn distillation_scores_the_teacher_only_with_a_hint() {
        let (_, teacher) = teacher_of(ScriptedPolicy::default());
        let t = turn(Some(("user", "also hidden ones")));
        let settings = JudgeSettings::default();
        let (_, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{1} [HINT_START]Include hidden files too.[HINT_END]",
        ]));
        let d = distill(&judge, &teacher, &input("user"), &t, &settings, 2).unwrap();
        assert_eq!(d.verdict.hint.as_deref(), Some("Include hidden files too."));
        let scores = d.teacher.unwrap();
        assert_eq!(scores.logprobs.len(), 4);
        assert_eq!(scores.topk.into_option().unwrap().k, 2);
        let summary = d.verdict.summary();
        assert_eq!(summary["accepted"], true);
        assert_eq!(summary["positive_votes"], 3);

        let (script, teacher) = teacher_of(ScriptedPolicy::default());
        let (_, judge) = judge_of(ScriptedJudge::always(&["\\boxed{-1}"]));
        let d = distill(&judge, &teacher, &input("user"), &t, &settings, 2).unwrap();
        assert_eq!((d.verdict.hint, d.teacher), (None, None));
        assert!(
            script.scored.lock().unwrap().is_empty(),
            "no teacher call without a hint"
        );
    }

    #[test]
    fn run_both_runs_concurrently_and_reports_panics() {
        let (script, judge) = judge_of(
            ScriptedJudge::always(&["\\boxed{1}"]).with_rendezvous(Duration::from_secs(20)),
        );
        let settings = JudgeSettings::default();
        let (a, b) = run_both(
            || prm_votes(&judge, &input("user"), &settings),
            || prm_votes(&judge, &input("tool"), &settings),
        )
        .unwrap();
        assert_eq!((a.score, b.score), (1.0, 1.0));
        assert_eq!(script.calls(), 2);

        let e = run_both(|| -> Result<(), String> { panic!("boom") }, || Ok(())).unwrap_err();
        assert!(e.contains("boom"), "{e}");
        let e = run_both(
            || Ok(()),
            || -> Result<(), String> { Err("second failed".into()) },
        )
        .unwrap_err();
        assert_eq!(e, "second failed");
    }
}

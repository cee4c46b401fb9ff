//! Parsing and voting: boxed scores, majority votes, hints, and rendering a message for the
//! judge.

use super::*;

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

pub use openclaw_plugin_api::reward::majority_vote;

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
pub(crate) fn best_hint_index(votes: &[(Option<i32>, Option<String>)]) -> Option<usize> {
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

//! What the judge reads: a turn's response and next state, and the outcome and hint prompts.

use super::*;

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

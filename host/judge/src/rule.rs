//! The rule-based judge of the built-in default: reads the next state in the methods' judge
//! prompts and answers in their format, without a model. Praise is +1; a correction, a redo
//! or change request, the same request again, or a tool error is -1; anything else is 0. Asked
//! for a hint, it returns the explicit instructions the user gave.
//!
//! It answers the same prompts an LLM judge gets, so the methods' prompt building, vote
//! parsing and hint selection run exactly as they do with a real judge.

use openclaw_plugin_api::host::JudgeService;
use openclaw_plugin_api::JudgeRequest;

const PRAISE: &[&str] = &[
    "thank",
    "great",
    "perfect",
    "exactly what",
    "that helps",
    "nice",
    "awesome",
    "well done",
];
const CORRECTION: &[&str] = &[
    "redo",
    "rewrite",
    "try again",
    "again, please",
    "not what i asked",
    "didn't answer",
    "doesn't answer",
    "did not answer",
    "no markdown",
    "plain text",
    "wrong",
    "incorrect",
    "instead",
    "too formatted",
    "stopped in the middle",
    "that's not",
];
const TOOL_ERROR: &[&str] = &[
    "error",
    "failed",
    "traceback",
    "not found",
    "no such file",
    "permission denied",
    "exception",
];
const INSTRUCTION: &[&str] = &[
    "please",
    "write",
    "rewrite",
    "redo",
    "use ",
    "don't",
    "do not",
    "no markdown",
    "without",
    "answer",
    "just ",
];

/// What the judge read from a prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadPrompt {
    /// Whether it is the hint judge's prompt.
    pub wants_hint: bool,
    /// The next state's role.
    pub role: String,
    /// The next state's text.
    pub next_state: String,
}

/// Finds the next state in a judge prompt: after the last `## Next state ... [role: X]` line,
/// up to the instruction paragraph that follows it.
pub fn read_prompt(req: &JudgeRequest) -> Option<ReadPrompt> {
    let wants_hint = req
        .messages
        .iter()
        .any(|m| m.content.contains("HINT_START"));
    let user = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role.as_str() == "user")?;
    let text = user.content.as_str();
    let header = text.rfind("## Next state")?;
    let rest = &text[header..];
    let line_end = rest.find('\n')?;
    let header_line = &rest[..line_end];
    let role = header_line
        .split("[role: ")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .unwrap_or("user")
        .trim()
        .to_string();
    let body = &rest[line_end + 1..];
    let end = [
        "\n\nFirst classify the next state",
        "\n\nNow output your decision",
    ]
    .iter()
    .filter_map(|m| body.rfind(m))
    .min()
    .unwrap_or(body.len());
    Some(ReadPrompt {
        wants_hint,
        role,
        next_state: body[..end].trim().to_string(),
    })
}

/// The verdict on a next state: +1, -1 or 0.
pub fn verdict(role: &str, next_state: &str) -> i32 {
    let t = next_state.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if role == "tool" {
        return if has(TOOL_ERROR) { -1 } else { 1 };
    }
    // A change request is negative however politely it is put.
    if has(CORRECTION) {
        -1
    } else if has(PRAISE) {
        1
    } else {
        0
    }
}

/// The explicit instructions in a next state, as a hint.
pub fn hint(next_state: &str) -> Option<String> {
    let sentences: Vec<&str> = next_state
        .split_inclusive(['.', '!', '?', '\n'])
        .map(str::trim)
        .filter(|s| {
            let l = s.to_lowercase();
            INSTRUCTION.iter().any(|w| l.contains(w))
        })
        .collect();
    let h = sentences.join(" ");
    (h.trim().len() > 10).then_some(h)
}

/// The rule-based judge.
#[derive(Clone, Copy, Debug, Default)]
pub struct RuleJudge;

impl RuleJudge {
    fn answer(&self, req: &JudgeRequest) -> Result<String, String> {
        let p = read_prompt(req).ok_or("the judge prompt has no `## Next state` section")?;
        let v = verdict(&p.role, &p.next_state);
        if p.wants_hint {
            // Hindsight exists when the user corrected the turn and said what they want.
            match (v, hint(&p.next_state)) {
                (-1, Some(h)) if p.role == "user" => Ok(format!(
                    "The user asked for a change and said how.\n\\boxed{{1}}\n[HINT_START]{h}[HINT_END]"
                )),
                _ => Ok("The next state holds no instruction to learn from.\n\\boxed{-1}".into()),
            }
        } else {
            let what = match v {
                1 => "(a) progress",
                -1 => "(b) a correction or change request",
                _ => "(c) ambiguous",
            };
            Ok(format!("The next state is {what}.\n\\boxed{{{v}}}"))
        }
    }
}

impl JudgeService for RuleJudge {
    fn complete(&self, req: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        let a = self.answer(req);
        Ok((0..req.n.max(1)).map(|_| a.clone()).collect())
    }

    fn classify(&self, _text: &str) -> Result<Vec<f32>, String> {
        Err("the rule-based judge has no classifier; give --prm-model-path".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_judging::{
        extract_hint, hint_judge_messages, majority_vote, parse_boxed_score, prm_judge_messages,
        JudgeInput,
    };
    use openclaw_plugin_api::SamplingParams;

    fn ask(messages: Vec<openclaw_plugin_api::Message>) -> String {
        let req = JudgeRequest {
            messages: messages.into(),
            sampling: SamplingParams::default(),
            n: 3,
        };
        let votes = RuleJudge.complete(&req).unwrap();
        assert_eq!(votes.len(), 3);
        votes[0].clone().unwrap()
    }

    fn input(role: &str, next: &str) -> JudgeInput {
        JudgeInput {
            response: "## The Shark\n\n1. **Diet:** fish".into(),
            role: role.into(),
            next_state: next.into(),
        }
    }

    #[test]
    fn it_reads_the_methods_own_prompts_and_answers_in_their_format() {
        for (next, want) in [
            ("Thanks, that's exactly what I needed.", 1),
            ("Please write that as plain text, no markdown.", -1),
            ("Great, but can you redo it without the list?", -1),
            ("What about whales?", 0),
        ] {
            let out = ask(prm_judge_messages(&input("user", next)));
            assert_eq!(
                parse_boxed_score(&out, &[1, -1, 0]),
                Some(want),
                "{next}: {out}"
            );
        }
        let out = ask(prm_judge_messages(&input("tool", "a.txt b.txt")));
        assert_eq!(parse_boxed_score(&out, &[1, -1, 0]), Some(1));
        let out = ask(prm_judge_messages(&input("tool", "Error: no such file")));
        assert_eq!(parse_boxed_score(&out, &[1, -1, 0]), Some(-1));
        assert_eq!(majority_vote(&[1.0, 1.0, 1.0], 0.5), 1.0);
    }

    #[test]
    fn hints_are_the_users_explicit_instructions() {
        let out = ask(hint_judge_messages(&input(
            "user",
            "That's too formatted. Rewrite it in plain text, please.",
        )));
        assert_eq!(parse_boxed_score(&out, &[1, -1]), Some(1), "{out}");
        let h = extract_hint(&out).unwrap();
        assert!(h.contains("Rewrite it in plain text"), "{h}");
        let out = ask(hint_judge_messages(&input(
            "user",
            "Thanks, that helps a lot.",
        )));
        assert_eq!(parse_boxed_score(&out, &[1, -1]), Some(-1), "{out}");
        assert_eq!(extract_hint(&out), None);
    }

    #[test]
    fn the_simulated_users_replies_are_read_as_meant() {
        use openclaw_sim::{answer, SimulatedUser, Style, TaskSet};
        use rand::SeedableRng;
        // Half the requests ask for a style in so many words.
        let mut user = SimulatedUser::new(1, TaskSet::standard().train).with_requests(0.5);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        for _ in 0..200 {
            let request = user.next_request();
            for style in [Style::Plain, Style::Markdown] {
                let a = answer(&request.task, style, &mut rng);
                let reply = user.reply_to(&request, &a, true);
                let v = verdict("user", &reply.text);
                assert_eq!(v == 1, reply.satisfied, "{reply:?}");
                assert_eq!(v == -1, !reply.satisfied, "{reply:?}");
                if !reply.satisfied {
                    assert!(hint(&reply.text).is_some(), "{reply:?}");
                }
            }
        }
    }
}

//! The checks a simulated user applies to an answer: its style, and whether it answers the
//! question asked.

use crate::tasks::{Task, TaskKind};
use serde::{Deserialize, Serialize};

/// How an answer reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// One paragraph of plain sentences.
    Plain,
    /// Markdown: emphasis, code, headings, lists or several paragraphs.
    Markdown,
    /// Unfinished (no end of turn) or too short to be an answer.
    Invalid,
}

/// Classifies an answer. `finished` says whether the model ended its turn (rather than running
/// out of tokens). Fewer than 6 words is not an answer.
pub fn classify(text: &str, finished: bool) -> Verdict {
    if !finished || text.split_whitespace().count() < 6 {
        return Verdict::Invalid;
    }
    if text.contains("**") || text.contains("__") || text.contains('`') {
        return Verdict::Markdown;
    }
    let list_start = |l: &str| {
        let l = l.trim_start();
        l.starts_with('#')
            || l.starts_with("- ")
            || l.starts_with("* ")
            || l.starts_with("+ ")
            || l.split_once(['.', ')']).is_some_and(|(n, _)| {
                !n.is_empty() && n.len() <= 2 && n.chars().all(|c| c.is_ascii_digit())
            })
    };
    if text.lines().any(list_start) {
        return Verdict::Markdown;
    }
    if text.trim().contains("\n\n") {
        return Verdict::Markdown;
    }
    Verdict::Plain
}

/// Whether the answer is about what was asked: it names the subject, or for arithmetic it
/// states the correct result as a number of its own.
pub fn on_topic(task: &Task, text: &str) -> bool {
    let lower = text.to_lowercase();
    match task.kind {
        TaskKind::Arithmetic => lower
            .split(|c: char| !c.is_ascii_digit())
            .any(|n| n == task.must_mention),
        _ => lower.contains(&task.must_mention.to_lowercase()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_of_the_style_check() {
        assert_eq!(
            classify("The shark lives in the sea and eats fish.", true),
            Verdict::Plain
        );
        assert_eq!(
            classify("The shark lives in the sea and eats fish.", false),
            Verdict::Invalid
        );
        assert_eq!(classify("Sharks eat fish.", true), Verdict::Invalid);
        assert_eq!(
            classify("The shark is **fast** and lives in the sea.", true),
            Verdict::Markdown
        );
        assert_eq!(
            classify("Facts about it here:\n1. It swims fast in the sea", true),
            Verdict::Markdown
        );
        assert_eq!(
            classify("Facts about it here:\n- It swims fast in the sea", true),
            Verdict::Markdown
        );
        assert_eq!(
            classify("## Shark\nIt swims fast in the sea all day", true),
            Verdict::Markdown
        );
        assert_eq!(
            classify(
                "One paragraph here is fine.\n\nTwo paragraphs are not.",
                true
            ),
            Verdict::Markdown
        );
        assert_eq!(
            classify("In 2024. it swam fast in the sea all day", true),
            Verdict::Plain
        );
    }

    #[test]
    fn arithmetic_needs_the_right_number() {
        let t = Task {
            kind: TaskKind::Arithmetic,
            prompt: "What is 3 times 4?".into(),
            subject: "3 times 4".into(),
            must_mention: "12".into(),
        };
        assert!(on_topic(
            &t,
            "The answer is 12, because 3 times 4 equals 12."
        ));
        assert!(!on_topic(&t, "The answer is 112."));
        assert!(!on_topic(&t, "The answer is 7."));
    }
}

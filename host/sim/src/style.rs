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

/// Whether the answer is about what was asked: for arithmetic it states the correct result as
/// a number of its own; otherwise it names the subject as a person would, in any inflection
/// ("fruit" for fruits, "stay healthy" for staying healthy, "run" for running), or for a
/// category names two of its members.
pub fn on_topic(task: &Task, text: &str) -> bool {
    let lower = text.to_lowercase();
    match task.kind {
        TaskKind::Arithmetic => lower
            .split(|c: char| !c.is_ascii_digit())
            .any(|n| n == task.must_mention),
        kind => {
            let subject = task.must_mention.to_lowercase();
            let words: Vec<&str> = subject
                .split_whitespace()
                .filter(|w| w.len() >= 4)
                .collect();
            let named = !words.is_empty() && words.iter().all(|w| lower.contains(&stem(w)));
            named
                || lower.contains(&subject)
                || (kind == TaskKind::Category
                    && crate::tasks::CATEGORIES
                        .iter()
                        .find(|(c, _)| *c == subject)
                        .is_some_and(|(_, items)| {
                            items
                                .iter()
                                .filter(|i| lower.contains(&i.to_lowercase()))
                                .count()
                                >= 2
                        }))
        }
    }
}

/// A word's stem as far as the subjects need: without `-ing` (and a doubled consonant before
/// it) or a plural `-s`.
fn stem(word: &str) -> String {
    let mut w = word.to_string();
    if w.len() > 5 && w.ends_with("ing") {
        w.truncate(w.len() - 3);
        let b = w.as_bytes();
        if b.len() >= 2 && b[b.len() - 1] == b[b.len() - 2] && !b"aeiou".contains(&b[b.len() - 1]) {
            w.pop();
        }
    } else if w.len() > 4 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        w.pop();
    }
    w
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

    fn task(kind: TaskKind, subject: &str) -> Task {
        Task {
            kind,
            prompt: String::new(),
            subject: subject.into(),
            must_mention: subject.into(),
        }
    }

    #[test]
    fn a_subject_counts_in_the_forms_a_person_writes_it() {
        let cases = [
            (
                TaskKind::Category,
                "fruits",
                "An apple is a sweet fruit.",
                true,
            ),
            (
                TaskKind::Category,
                "fruits",
                "Try an apple, a banana or a cherry.",
                true,
            ),
            (
                TaskKind::Category,
                "fruits",
                "Try an apple or a pear.",
                false,
            ),
            (TaskKind::Category, "planets", "Mars is a red planet.", true),
            (
                TaskKind::Tips,
                "staying healthy",
                "To stay healthy, walk every day.",
                true,
            ),
            (
                TaskKind::Tips,
                "staying healthy",
                "Walk every day and sleep well.",
                false,
            ),
            (
                TaskKind::Tips,
                "running",
                "Run slowly at first and you will run far.",
                true,
            ),
            (
                TaskKind::Tips,
                "public speaking",
                "Practice speaking in public often.",
                true,
            ),
            (
                TaskKind::Tips,
                "learning a language",
                "Learn ten words of the language daily.",
                true,
            ),
            (
                TaskKind::Tips,
                "focus",
                "Focus on one task at a time.",
                true,
            ),
            (
                TaskKind::Concept,
                "internet",
                "The Internet connects computers.",
                true,
            ),
            (TaskKind::Concept, "gravity", "It pulls things down.", false),
            (TaskKind::Animal, "shark", "Sharks live in the sea.", true),
            (TaskKind::Animal, "owl", "The owl hunts at night.", true),
            (TaskKind::Animal, "owl", "It hunts at night.", false),
        ];
        for (kind, subject, text, expected) in cases {
            assert_eq!(
                on_topic(&task(kind, subject), text),
                expected,
                "{subject}: {text}"
            );
        }
    }
}

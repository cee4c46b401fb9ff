//! Answers to tasks in two styles: plain prose, or markdown with headings, bold words and
//! numbered lists. Four plain phrasings of each and two markdown ones, so a model trained on
//! them has choices to make, and a model that learns to answer plainly still has several ways to
//! say it (with two, half of any two answers to one prompt were the same text).

use crate::tasks::{Task, TaskKind, ANIMALS, CATEGORIES, CONCEPTS, TIPS};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How an answer is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// One paragraph of plain sentences.
    Plain,
    /// Headings, bold words and numbered lists.
    Markdown,
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// How many phrasings of an answer `style` has.
fn phrasings(style: Style) -> u8 {
    match style {
        Style::Plain => 4,
        Style::Markdown => 2,
    }
}

/// `1. **A**` ... `3. **C**`, each item capitalised.
fn bold_list(items: [&str; 3]) -> String {
    format!(
        "1. **{}**\n2. **{}**\n3. **{}**",
        capitalise(items[0]),
        capitalise(items[1]),
        capitalise(items[2])
    )
}

fn arithmetic_parts(subject: &str) -> (u32, &str, u32) {
    let mut it = subject.split(' ');
    let a = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let op = it.next().unwrap_or("plus");
    let b = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    (a, op, b)
}

/// An answer to `task` in `style`; `rng` picks the phrasing and, for categories, the items.
pub fn answer(task: &Task, style: Style, rng: &mut impl Rng) -> String {
    // One draw for either style, so that both consume the generator alike.
    let k = rng.random_range(0..4u8) % phrasings(style);
    let s = task.subject.as_str();
    match (task.kind, style) {
        (TaskKind::Animal, _) => {
            let (_, home, food, known) = ANIMALS.iter().find(|a| a.0 == s).copied().unwrap_or((
                s,
                "in many places",
                "many things",
                "being interesting",
            ));
            match (style, k) {
                (Style::Plain, 0) => format!("The {s} is an animal that lives {home}. It eats {food} and is known for {known}."),
                (Style::Plain, 1) => format!("A {s} lives {home} and eats {food}. People know it for {known}."),
                (Style::Plain, 2) => format!("You can find the {s} {home}, where it eats {food}. It is best known for {known}."),
                (Style::Plain, _) => format!("The {s} makes its home {home} and lives on {food}. What stands out about it is {known}."),
                (Style::Markdown, 0) => format!("## The {}\n\nThe {s} lives **{home}**.\n\n1. **Diet:** {food}\n2. **Known for:** {known}", capitalise(s)),
                (Style::Markdown, _) => format!("Here are some facts about the {s}:\n\n1. **Home:** {home}\n2. **Food:** {food}\n3. **Known for:** {known}"),
            }
        }
        (TaskKind::Tips, _) => {
            let tips = TIPS.iter().find(|t| t.0 == s).map(|t| t.1).unwrap_or([
                "start small",
                "be patient",
                "keep practicing",
            ]);
            match (style, k) {
                (Style::Plain, 0) => format!(
                    "For {s}, {} and {}. It also helps to {}.",
                    tips[0], tips[1], tips[2]
                ),
                (Style::Plain, 1) => format!(
                    "To get better at {s}, {}. You should also {} and {}.",
                    tips[0], tips[1], tips[2]
                ),
                (Style::Plain, 2) => format!(
                    "When it comes to {s}, the best advice is to {} and {}. Try to {} as well.",
                    tips[0], tips[1], tips[2]
                ),
                (Style::Plain, _) => format!(
                    "{}, {} and {}: these three habits make {s} easier.",
                    capitalise(tips[0]),
                    tips[1],
                    tips[2]
                ),
                (Style::Markdown, 0) => {
                    format!("## Tips for {}\n\n{}", capitalise(s), bold_list(tips))
                }
                (Style::Markdown, _) => {
                    format!("Here are three tips for {s}:\n\n{}", bold_list(tips))
                }
            }
        }
        (TaskKind::Concept, _) => {
            let (_, what, more) = CONCEPTS.iter().find(|c| c.0 == s).copied().unwrap_or((
                s,
                "an idea",
                "it is useful",
            ));
            match (style, k) {
                (Style::Plain, 0) => format!("{} is {what}. In short, {more}.", capitalise(s)),
                (Style::Plain, 1) => format!("Put simply, {s} is {what}, and {more}."),
                (Style::Plain, 2) => format!("{} means {what}. This matters because {more}.", capitalise(s)),
                (Style::Plain, _) => format!("In simple words, {s} is {what}. One thing to know is that {more}."),
                (Style::Markdown, 0) => format!("## {}\n\n**{}** is {what}.\n\n1. **Key fact:** {more}", capitalise(s), capitalise(s)),
                (Style::Markdown, _) => format!("Here is {s} in brief:\n\n1. **Meaning:** {what}\n2. **Why it matters:** {more}"),
            }
        }
        (TaskKind::Category, _) => {
            let items = CATEGORIES
                .iter()
                .find(|c| c.0 == s)
                .map(|c| c.1)
                .unwrap_or(["one", "two", "three", "four"]);
            let skip = rng.random_range(0..4);
            let pick: Vec<&str> = items
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, x)| *x)
                .collect();
            match (style, k) {
                (Style::Plain, 0) => format!(
                    "Three {s} are {}, {} and {}. They are all easy to recognise.",
                    pick[0], pick[1], pick[2]
                ),
                (Style::Plain, 1) => format!(
                    "Some well known {s} are {}, {} and {}, and there are many more.",
                    pick[0], pick[1], pick[2]
                ),
                (Style::Plain, 2) => format!(
                    "Examples of {s} include {}, {} and {}.",
                    pick[0], pick[1], pick[2]
                ),
                (Style::Plain, _) => format!(
                    "If you need {s}, think of {}, {} or {}. Each one is a common example.",
                    pick[0], pick[1], pick[2]
                ),
                (Style::Markdown, 0) => {
                    format!("## Three {s}\n\n{}", bold_list([pick[0], pick[1], pick[2]]))
                }
                (Style::Markdown, _) => {
                    format!(
                        "Here are three {s}:\n\n{}",
                        bold_list([pick[0], pick[1], pick[2]])
                    )
                }
            }
        }
        (TaskKind::Arithmetic, _) => {
            let (a, op, b) = arithmetic_parts(s);
            let r = &task.must_mention;
            match (style, k) {
                (Style::Plain, 0) => format!("The answer is {r}, because {a} {op} {b} equals {r}."),
                (Style::Plain, 1) => format!("{a} {op} {b} equals {r}, so the answer is {r}."),
                (Style::Plain, 2) => format!("If you work out {a} {op} {b}, you get {r}."),
                (Style::Plain, _) => format!("{a} {op} {b} makes {r}. So the result is {r}."),
                (Style::Markdown, 0) => format!("## Answer\n\n**{a} {op} {b} = {r}**\n\n1. Take {a} {op} {b}.\n2. The result is **{r}**."),
                (Style::Markdown, _) => format!("Here is the calculation:\n\n1. **Numbers:** {a} and {b}\n2. **Result:** {r}"),
            }
        }
    }
}

/// Hint lines that ask for plain text, as a user would append them. The last four are the
/// simulated user's own corrections as the rule-based judge extracts them, so that the
/// distillation teacher (the model with the hint) understands the hints it is given in `run`.
pub const PLAIN_HINTS: [&str; 7] = [
    "please write plain text, no markdown",
    "answer in one plain paragraph without lists or headings",
    "no markdown please, just simple sentences",
    "Please write that as plain text, no markdown.",
    "Can you redo that without the headings and lists? Just plain sentences.",
    "No markdown please, write it as one simple paragraph.",
    "Rewrite it in plain text, please.",
];

/// Hint lines that ask for markdown.
pub const MARKDOWN_HINTS: [&str; 2] = [
    "please use markdown with a numbered list",
    "format it with a heading and a numbered list",
];

/// The marker a hint is appended under, as the on-policy distillation teacher sees it.
pub const HINT_MARKER: &str = "[user's hint / instruction]";

/// A user message with a hint line appended.
pub fn with_hint(prompt: &str, hint: &str) -> String {
    format!("{prompt}\n\n{HINT_MARKER}\n{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::style::{classify, on_topic, Verdict};
    use crate::tasks::all_tasks;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn every_answer_is_on_topic_and_classified_as_its_style() {
        let mut rng = StdRng::seed_from_u64(1);
        for task in all_tasks() {
            for style in [Style::Plain, Style::Markdown] {
                let mut seen = std::collections::HashSet::new();
                for _ in 0..32 {
                    let a = answer(&task, style, &mut rng);
                    seen.insert(a.clone());
                    let want = match style {
                        Style::Plain => Verdict::Plain,
                        Style::Markdown => Verdict::Markdown,
                    };
                    assert_eq!(classify(&a, true), want, "{}: {a}", task.prompt);
                    assert!(on_topic(&task, &a), "{}: {a}", task.prompt);
                }
                // Every phrasing is drawn (categories also vary their items).
                assert!(
                    seen.len() >= phrasings(style) as usize,
                    "{}: {seen:?}",
                    task.prompt
                );
            }
        }
    }
}

//! A simulated user: asks tasks, prefers plain answers (which the base model does not give by
//! default), and answers like a person: thanks when satisfied, a correction or an explicit
//! instruction when not.

use crate::style::{classify, on_topic, Verdict};
use crate::tasks::Task;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

const THANKS: [&str; 5] = [
    "Thanks, that's exactly what I needed.",
    "Great, thank you!",
    "Perfect, thanks.",
    "Thanks, that helps a lot.",
    "Nice, thank you.",
];

const STYLE_CORRECTIONS: [&str; 4] = [
    "Please write that as plain text, no markdown.",
    "Can you redo that without the headings and lists? Just plain sentences.",
    "No markdown please, write it as one simple paragraph.",
    "That's too formatted. Rewrite it in plain text, please.",
];

const OFF_TOPIC: [&str; 2] = [
    "That's not what I asked. Please answer my question about {}.",
    "You didn't answer my question about {}. Try again, please.",
];

const INVALID: [&str; 2] = [
    "That doesn't answer my question. Try again, please.",
    "You stopped in the middle. Please answer properly.",
];

/// What the user said back, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserReply {
    /// The reply, as the user types it.
    pub text: String,
    /// Whether the answer met the user's preference and the question.
    pub satisfied: bool,
    /// The answer's style.
    pub verdict: Verdict,
    /// Whether the answer was about the question.
    pub on_topic: bool,
}

/// A user with a preference for plain answers.
pub struct SimulatedUser {
    rng: StdRng,
    tasks: Vec<Task>,
}

impl SimulatedUser {
    /// A user who asks tasks from `tasks`, deterministically from `seed`.
    pub fn new(seed: u64, tasks: Vec<Task>) -> Self {
        assert!(!tasks.is_empty(), "a simulated user needs tasks");
        SimulatedUser {
            rng: StdRng::seed_from_u64(seed),
            tasks,
        }
    }

    /// The next thing the user asks.
    pub fn next_task(&mut self) -> Task {
        let i = self.rng.random_range(0..self.tasks.len());
        self.tasks[i].clone()
    }

    /// The user's reply to an answer. `finished` says whether the model ended its turn.
    pub fn reply(&mut self, task: &Task, answer: &str, finished: bool) -> UserReply {
        let verdict = classify(answer, finished);
        let topical = on_topic(task, answer);
        let (text, satisfied) = match (verdict, topical) {
            (Verdict::Invalid, _) => (self.pick(&INVALID).to_string(), false),
            (_, false) => (self.pick(&OFF_TOPIC).replace("{}", &task.subject), false),
            (Verdict::Markdown, true) => (self.pick(&STYLE_CORRECTIONS).to_string(), false),
            (Verdict::Plain, true) => (self.pick(&THANKS).to_string(), true),
        };
        UserReply {
            text,
            satisfied,
            verdict,
            on_topic: topical,
        }
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.rng.random_range(0..options.len())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answers::{answer, Style};
    use crate::tasks::TaskSet;

    #[test]
    fn thanks_for_plain_corrections_for_markdown_and_off_topic() {
        let tasks = TaskSet::standard().train;
        let mut user = SimulatedUser::new(3, tasks);
        let mut rng = StdRng::seed_from_u64(4);
        for _ in 0..50 {
            let task = user.next_task();
            let plain = answer(&task, Style::Plain, &mut rng);
            let r = user.reply(&task, &plain, true);
            assert!(
                r.satisfied && r.text.to_lowercase().contains("thank"),
                "{r:?}"
            );
            let md = answer(&task, Style::Markdown, &mut rng);
            let r = user.reply(&task, &md, true);
            assert!(!r.satisfied && r.verdict == Verdict::Markdown, "{r:?}");
            assert!(
                r.text.contains("plain") || r.text.contains("markdown"),
                "{r:?}"
            );
            let r = user.reply(&task, &plain, false);
            assert_eq!(r.verdict, Verdict::Invalid);
        }
        let task = user.next_task();
        let r = user.reply(
            &task,
            "This answer talks about something else entirely, sorry.",
            true,
        );
        assert!(!r.on_topic && r.text.contains(&task.subject), "{r:?}");
    }
}

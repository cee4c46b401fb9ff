//! A simulated user: asks tasks, prefers plain answers (which the base model does not give by
//! default), and answers like a person: thanks when satisfied, a correction or an explicit
//! instruction when not. Some of its requests say in so many words how the answer should look
//! (markdown with a numbered list, or plain text), and then that instruction is what it wants.

use crate::answers::{with_hint, Style, MARKDOWN_HINTS, PLAIN_HINTS};
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

/// Replies to an answer that ignored an explicit request for markdown. Worded as the rule-based
/// judge reads a correction, with the instruction as its hint.
const FORMAT_CORRECTIONS: [&str; 2] = [
    "That's not the format I asked for. Please use markdown with a numbered list.",
    "I asked for markdown. Please redo it with a heading and a numbered list.",
];

/// The requests in the user's own words (the plain hints after these are the user's
/// corrections as the judge passes them on).
const PLAIN_REQUESTS: usize = 3;

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

/// What a user sends: a task, worded with an explicit style instruction or not.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The task asked.
    pub task: Task,
    /// The message as sent.
    pub prompt: String,
    /// The style the message asks for, when it asks for one.
    pub requested: Option<Style>,
}

/// A user with a preference for plain answers (or, [`SimulatedUser::preferring`], for
/// markdown).
pub struct SimulatedUser {
    rng: StdRng,
    tasks: Vec<Task>,
    /// Share of requests with an explicit style instruction.
    requests: f64,
    /// The style wanted when the request does not say.
    prefers: Style,
}

impl SimulatedUser {
    /// A user who asks tasks from `tasks`, deterministically from `seed`.
    pub fn new(seed: u64, tasks: Vec<Task>) -> Self {
        assert!(!tasks.is_empty(), "a simulated user needs tasks");
        SimulatedUser {
            rng: StdRng::seed_from_u64(seed),
            tasks,
            requests: 0.0,
            prefers: Style::Plain,
        }
    }

    /// A user who wants `style` when their request does not say: a markdown user thanks for
    /// markdown and asks for it again, in the words of [`FORMAT_CORRECTIONS`], when the answer
    /// is plain.
    pub fn preferring(self, style: Style) -> Self {
        SimulatedUser {
            prefers: style,
            ..self
        }
    }

    /// The style this user wants when the request does not say.
    pub fn prefers(&self) -> Style {
        self.prefers
    }

    /// A user who words `share` of its requests with an explicit style instruction: markdown
    /// with a numbered list twice as often as plain text.
    pub fn with_requests(self, share: f64) -> Self {
        SimulatedUser {
            requests: share,
            ..self
        }
    }

    /// The next message the user sends.
    pub fn next_request(&mut self) -> Request {
        let task = self.next_task();
        // No draw when requests are off: the user's sequence stays what it always was.
        let asks = self.requests > 0.0 && self.rng.random::<f64>() < self.requests;
        if !asks {
            return Request {
                prompt: task.prompt.clone(),
                task,
                requested: None,
            };
        }
        let (style, hint) = if self.rng.random_range(0..3) < 2 {
            (Style::Markdown, self.pick(&MARKDOWN_HINTS))
        } else {
            (Style::Plain, self.pick(&PLAIN_HINTS[..PLAIN_REQUESTS]))
        };
        Request {
            prompt: with_hint(&task.prompt, hint),
            task,
            requested: Some(style),
        }
    }

    /// The user's reply to an answer to `request`: as [`SimulatedUser::reply`], except that a
    /// request for markdown wants markdown.
    pub fn reply_to(&mut self, request: &Request, answer: &str, finished: bool) -> UserReply {
        let wants = match request.requested {
            Some(style) => style,
            None => self.prefers,
        };
        if wants != Style::Markdown {
            return self.reply(&request.task, answer, finished);
        }
        let verdict = classify(answer, finished);
        let topical = on_topic(&request.task, answer);
        let (text, satisfied) = match (verdict, topical) {
            (Verdict::Invalid, _) => (self.pick(&INVALID).to_string(), false),
            (_, false) => (
                self.pick(&OFF_TOPIC).replace("{}", &request.task.subject),
                false,
            ),
            (Verdict::Plain, true) => (self.pick(&FORMAT_CORRECTIONS).to_string(), false),
            (Verdict::Markdown, true) => (self.pick(&THANKS).to_string(), true),
        };
        UserReply {
            text,
            satisfied,
            verdict,
            on_topic: topical,
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

    #[test]
    fn a_share_of_requests_asks_for_a_style_and_wants_it() {
        let tasks = TaskSet::standard().train;
        // Without requests, the user asks exactly what it asked before requests existed.
        let mut a = SimulatedUser::new(5, tasks.clone());
        let mut b = SimulatedUser::new(5, tasks.clone()).with_requests(0.0);
        for _ in 0..20 {
            let r = b.next_request();
            assert_eq!((r.task, r.prompt.clone(), r.requested), {
                let t = a.next_task();
                (t.clone(), t.prompt, None)
            });
        }
        let mut user = SimulatedUser::new(6, tasks).with_requests(0.3);
        let mut rng = StdRng::seed_from_u64(7);
        let (mut markdown, mut plain, n) = (0, 0, 3000);
        for _ in 0..n {
            let req = user.next_request();
            let Some(style) = req.requested else {
                assert_eq!(req.prompt, req.task.prompt);
                continue;
            };
            assert!(
                req.prompt.starts_with(&req.task.prompt)
                    && req.prompt.len() > req.task.prompt.len()
            );
            let asked = answer(&req.task, style, &mut rng);
            let other = if style == Style::Plain {
                Style::Markdown
            } else {
                Style::Plain
            };
            let ignored = answer(&req.task, other, &mut rng);
            let r = user.reply_to(&req, &asked, true);
            assert!(
                r.satisfied && r.text.to_lowercase().contains("thank"),
                "{r:?}"
            );
            let r = user.reply_to(&req, &ignored, true);
            assert!(!r.satisfied, "{r:?}");
            match style {
                Style::Markdown => {
                    markdown += 1;
                    assert!(
                        r.text.contains("markdown") && r.text.contains("numbered list"),
                        "{r:?}"
                    );
                }
                Style::Plain => plain += 1,
            }
        }
        let share = (markdown + plain) as f64 / n as f64;
        assert!((0.27..0.33).contains(&share), "{share}");
        let md = markdown as f64 / (markdown + plain) as f64;
        assert!((0.6..0.73).contains(&md), "{md}");
    }
}

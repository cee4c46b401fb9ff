//! Supervised conversations for the built-in model: the tasks answered in both styles, with and
//! without hint lines, so the model learns to answer, has a default style (mostly markdown,
//! which the simulated user does not like), and follows a hint when one is given.

use crate::answers::{answer, with_hint, Style, MARKDOWN_HINTS, PLAIN_HINTS};
use crate::tasks::Task;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// The mix of the conversations.
#[derive(Clone, Copy, Debug)]
pub struct SftMix {
    /// Share of conversations without a hint.
    pub no_hint: f64,
    /// Share of un-hinted answers that are plain (the rest are markdown).
    pub plain_prior: f64,
    /// Share of conversations with a plain hint (the rest of the hinted ones get a markdown hint).
    pub plain_hint: f64,
    /// How often a hinted answer follows its hint.
    pub hint_follow: f64,
}

impl Default for SftMix {
    fn default() -> Self {
        SftMix {
            no_hint: 0.60,
            plain_prior: 0.30,
            plain_hint: 0.25,
            hint_follow: 0.95,
        }
    }
}

/// `n` conversations as OpenAI `{messages: [...]}` objects, deterministically from `seed`.
pub fn conversations(tasks: &[Task], n: usize, mix: SftMix, seed: u64) -> Vec<Value> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let task = &tasks[rng.random_range(0..tasks.len())];
            let r: f64 = rng.random();
            let (prompt, style) = if r < mix.no_hint {
                let plain = rng.random_bool(mix.plain_prior);
                (
                    task.prompt.clone(),
                    if plain { Style::Plain } else { Style::Markdown },
                )
            } else if r < mix.no_hint + mix.plain_hint {
                let hint = PLAIN_HINTS[rng.random_range(0..PLAIN_HINTS.len())];
                let follow = rng.random_bool(mix.hint_follow);
                (
                    with_hint(&task.prompt, hint),
                    if follow {
                        Style::Plain
                    } else {
                        Style::Markdown
                    },
                )
            } else {
                let hint = MARKDOWN_HINTS[rng.random_range(0..MARKDOWN_HINTS.len())];
                let follow = rng.random_bool(mix.hint_follow);
                (
                    with_hint(&task.prompt, hint),
                    if follow {
                        Style::Markdown
                    } else {
                        Style::Plain
                    },
                )
            };
            let reply = answer(task, style, &mut rng);
            json!({"messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": reply},
            ]})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::style::{classify, Verdict};
    use crate::tasks::TaskSet;

    #[test]
    fn the_mix_has_the_stated_shares_and_is_deterministic() {
        let tasks = TaskSet::standard().train;
        let convs = conversations(&tasks, 4000, SftMix::default(), 7);
        assert_eq!(convs, conversations(&tasks, 4000, SftMix::default(), 7));
        let unhinted: Vec<&Value> = convs
            .iter()
            .filter(|c| {
                !c["messages"][0]["content"]
                    .as_str()
                    .unwrap()
                    .contains("[user's hint")
            })
            .collect();
        let plain = unhinted
            .iter()
            .filter(|c| {
                classify(c["messages"][1]["content"].as_str().unwrap(), true) == Verdict::Plain
            })
            .count() as f64
            / unhinted.len() as f64;
        assert!((unhinted.len() as f64 / 4000.0 - 0.6).abs() < 0.03);
        assert!((plain - 0.3).abs() < 0.04, "plain share {plain}");
    }
}

//! What the judges said between two training steps: how many turns had a next state to judge,
//! how the votes split, how many votes did not parse, how spread the scores were; and a
//! warning when that signal collapses (the original's troubleshooting: scores all at the
//! undecided value, a judge whose answers do not follow the prompt's `\boxed{}` format).

use openclaw_metrics::Metrics;
use openclaw_plugin_api::{Score, Turn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Steps between two warnings of the same kind.
pub const WARN_EVERY: u64 = 10;

/// Fewest votes a window needs before a share of them is worth a warning.
const MIN_WINDOW: u64 = 4;

/// Fewest turns a window needs before a share of them is worth a warning. A session's closing
/// turn has no next state, so about half the turns lack one, and their verdicts come in bursts
/// as sessions end: windows of a few turns between frequent steps (one adapter per user) drop
/// below a fifth by chance.
const MIN_TURNS: u64 = 16;

/// Counts since the last step.
#[derive(Default, Clone, Debug)]
struct Counts {
    turns: u64,
    next_state: u64,
    trainable: u64,
    hinted: u64,
    pos: u64,
    zero: u64,
    neg: u64,
    unparseable: u64,
    scored: u64,
    score_sum: f64,
    score_sq: f64,
}

/// The judges' window of one step, as `score.log` holds it.
#[derive(serde::Serialize, Clone, Debug, PartialEq)]
pub struct JudgeWindow {
    /// Turns scored since the last step.
    pub judged_turns: u64,
    /// Share of them with a next state (the judge's evidence).
    pub next_state_share: f64,
    /// Share of them that became training samples.
    pub trainable_share: f64,
    /// Outcome votes asked (valid and unparseable).
    pub votes: u64,
    /// Shares of the valid votes that were +1, 0 and -1.
    pub vote_pos_share: f64,
    #[allow(missing_docs)]
    pub vote_zero_share: f64,
    #[allow(missing_docs)]
    pub vote_neg_share: f64,
    /// Share of the votes with no `\boxed{}` score the method accepts.
    pub unparseable_share: f64,
    /// Mean and standard deviation of the scores of turns with a next state.
    pub score_mean: f64,
    #[allow(missing_docs)]
    pub score_std: f64,
    /// Share of the turns given a hint (on-policy distillation).
    pub hint_share: f64,
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl Counts {
    fn window(&self) -> JudgeWindow {
        let valid = self.pos + self.zero + self.neg;
        let votes = valid + self.unparseable;
        let mean = if self.scored == 0 {
            0.0
        } else {
            self.score_sum / self.scored as f64
        };
        let var = if self.scored == 0 {
            0.0
        } else {
            (self.score_sq / self.scored as f64 - mean * mean).max(0.0)
        };
        JudgeWindow {
            judged_turns: self.turns,
            next_state_share: share(self.next_state, self.turns),
            trainable_share: share(self.trainable, self.turns),
            votes,
            vote_pos_share: share(self.pos, valid),
            vote_zero_share: share(self.zero, valid),
            vote_neg_share: share(self.neg, valid),
            unparseable_share: share(self.unparseable, votes),
            score_mean: mean,
            score_std: var.sqrt(),
            hint_share: share(self.hinted, self.turns),
        }
    }
}

impl JudgeWindow {
    /// The step line's part: `| judged 32: next state 0.50 ...`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "  | judged {}: next state {:.2}  trainable {:.2}",
            self.judged_turns, self.next_state_share, self.trainable_share
        );
        if self.votes > 0 {
            line += &format!(
                "  votes +1 {:.2} 0 {:.2} -1 {:.2}  unparseable {:.2}",
                self.vote_pos_share,
                self.vote_zero_share,
                self.vote_neg_share,
                self.unparseable_share
            );
        }
        if self.hint_share > 0.0 {
            line += &format!("  hints {:.2}", self.hint_share);
        }
        line
    }

    /// What has collapsed in this window, each as (kind, message).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let turns = self.judged_turns;
        let valid = (self.votes as f64 * (1.0 - self.unparseable_share)).round() as u64;
        if turns >= MIN_TURNS && self.next_state_share < 0.2 {
            out.push((
                "next_state",
                format!(
                    "only {:.0}% of the {turns} turns judged since the last step had a next state: \
                     the judge reads what follows a turn (the user's next message or a tool's \
                     result), and a turn whose session ends without one is not trained. Does the \
                     client keep one session per conversation (the session header or id pattern)?",
                    self.next_state_share * 100.0
                ),
            ));
        }
        if self.votes >= MIN_WINDOW && self.unparseable_share > 0.5 {
            out.push((
                "unparseable",
                format!(
                    "{:.0}% of the {} judge votes since the last step had no \\boxed{{}} score: the \
                     judge does not follow the prompt's answer format. Use a larger judge \
                     (--judge-endpoint, --judge-model-path), or raise --judge-max-tokens if its \
                     answers are cut off before the score",
                    self.unparseable_share * 100.0,
                    self.votes
                ),
            ));
        }
        if valid >= MIN_WINDOW && self.vote_zero_share > 0.9 {
            out.push((
                "collapse",
                format!(
                    "reward collapse: {:.0}% of the valid votes since the last step were 0 (undecided), \
                     so almost no turn trains. Check that next states carry the user's feedback, \
                     that the judge prompt's template fits the judge model, and try more votes \
                     (--majority-vote-n 7)",
                    self.vote_zero_share * 100.0
                ),
            ));
        }
        if turns >= MIN_TURNS && self.trainable_share < 0.1 && out.is_empty() {
            out.push((
                "trainable",
                format!(
                    "only {:.0}% of the {turns} turns judged since the last step became samples",
                    self.trainable_share * 100.0
                ),
            ));
        }
        out
    }
}

/// The judges' counts of a run: fed by every verdict recorded, taken at every step.
pub struct JudgeStats {
    counts: Mutex<Counts>,
    /// The step each kind of warning was last given.
    warned: Mutex<HashMap<&'static str, u64>>,
    metrics: Arc<Metrics>,
}

impl JudgeStats {
    /// Counts that also go to `metrics` (`judge_votes`, `judged_turns`).
    pub fn new(metrics: Arc<Metrics>) -> Self {
        JudgeStats {
            counts: Mutex::new(Counts::default()),
            warned: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Counts one verdict on `turn`.
    pub fn add(&self, turn: &Turn, score: &Score) {
        let has_next = turn.next_state.is_some();
        let mut c = self.counts.lock().expect("judge stats lock");
        c.turns += 1;
        c.next_state += has_next as u64;
        c.trainable += score.trainable as u64;
        c.hinted += score.hint.is_some() as u64;
        for &v in score.votes.iter() {
            let (count, label) = if v > 0.0 {
                (&mut c.pos, "+1")
            } else if v < 0.0 {
                (&mut c.neg, "-1")
            } else {
                (&mut c.zero, "0")
            };
            *count += 1;
            self.metrics
                .judge_votes
                .get_or_create(&Metrics::label("vote", label))
                .inc();
        }
        c.unparseable += score.invalid_votes as u64;
        self.metrics
            .judge_votes
            .get_or_create(&Metrics::label("vote", "unparseable"))
            .inc_by(score.invalid_votes as u64);
        if has_next {
            c.scored += 1;
            c.score_sum += score.value as f64;
            c.score_sq += (score.value as f64).powi(2);
        }
        self.metrics
            .judged_turns
            .get_or_create(&Metrics::label(
                "next_state",
                if has_next { "yes" } else { "no" },
            ))
            .inc();
    }

    /// The window since the last call (none when no turn was judged) and the warnings due at
    /// `step`: each kind at most once every [`WARN_EVERY`] steps.
    pub fn take(&self, step: u64) -> Option<(JudgeWindow, Vec<String>)> {
        let counts = std::mem::take(&mut *self.counts.lock().expect("judge stats lock"));
        if counts.turns == 0 {
            return None;
        }
        let window = counts.window();
        let mut warned = self.warned.lock().expect("judge stats lock");
        let warnings = window
            .problems()
            .into_iter()
            .filter(|(kind, _)| {
                let due = warned
                    .get(kind)
                    .is_none_or(|&last| step >= last + WARN_EVERY);
                if due {
                    warned.insert(kind, step);
                }
                due
            })
            .map(|(_, message)| message)
            .collect();
        Some((window, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::{Message, NextState, TurnType};

    fn turn(next: bool) -> Turn {
        Turn {
            session_id: "s".into(),
            turn_index: 0,
            turn_type: TurnType::Main,
            prompt_messages: Vec::new().into(),
            tools_json: "".into(),
            response: Message::new("assistant", "a"),
            prompt_ids: Vec::new().into(),
            response_ids: Vec::new().into(),
            response_logprobs: Vec::new().into(),
            weight_version: 0,
            next_state: next
                .then(|| NextState {
                    role: "user".into(),
                    content: "thanks".into(),
                    messages: Vec::new().into(),
                })
                .into(),
            trainable: true,
        }
    }

    fn score(value: f32, votes: &[f32], invalid: u32) -> Score {
        Score {
            value,
            trainable: value != 0.0,
            votes: votes.to_vec().into(),
            invalid_votes: invalid,
            ..Default::default()
        }
    }

    #[test]
    fn shares_are_of_the_turns_and_votes_since_the_last_step() {
        let stats = JudgeStats::new(Arc::new(Metrics::new()));
        stats.add(&turn(true), &score(1.0, &[1.0, 1.0, -1.0], 0));
        stats.add(&turn(true), &score(-1.0, &[-1.0, 0.0], 1));
        stats.add(&turn(false), &score(0.0, &[], 0));
        stats.add(&turn(false), &score(0.0, &[], 0));
        let (w, warnings) = stats.take(1).unwrap();
        assert_eq!(w.judged_turns, 4);
        assert_eq!(w.next_state_share, 0.5);
        assert_eq!(w.trainable_share, 0.5);
        assert_eq!(w.votes, 6);
        assert_eq!(
            (w.vote_pos_share, w.vote_zero_share, w.vote_neg_share),
            (0.4, 0.2, 0.4)
        );
        assert!((w.unparseable_share - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!((w.score_mean, w.score_std), (0.0, 1.0));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(
            w.line().contains("judged 4: next state 0.50"),
            "{}",
            w.line()
        );
        // Taken: the next step starts afresh.
        assert!(stats.take(2).is_none());
        let text = stats.metrics.render();
        assert!(
            text.contains("openclaw_judge_votes_total{vote=\"+1\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("openclaw_judged_turns_total{next_state=\"no\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn each_collapse_warns_on_its_own_condition_and_not_again_for_ten_steps() {
        let stats = JudgeStats::new(Arc::new(Metrics::new()));
        let kinds = |step: u64, turns: &[(bool, Score)]| {
            for (next, s) in turns {
                stats.add(&turn(*next), s);
            }
            let (w, _) = stats.take(step).unwrap();
            w.problems().into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        };
        let healthy = vec![
            (true, score(1.0, &[1.0], 0)),
            (true, score(-1.0, &[-1.0], 0)),
        ];
        assert!(kinds(1, &[healthy.clone(), healthy.clone(), healthy].concat()).is_empty());
        // Sessions that end without a next state.
        assert_eq!(
            kinds(2, &vec![(false, score(0.0, &[], 0)); 16]),
            ["next_state"]
        );
        assert!(kinds(2, &vec![(false, score(0.0, &[], 0)); 15]).is_empty());
        // A judge that does not write \boxed{}.
        let garbled = vec![(true, score(0.0, &[], 3)); 4];
        assert_eq!(kinds(3, &garbled), ["unparseable"]);
        // Every valid vote undecided.
        let undecided = vec![(true, score(0.0, &[0.0, 0.0], 0)); 4];
        assert_eq!(kinds(4, &undecided), ["collapse"]);
        // Votes decided but few turns trainable (a method that trains on hints, none given).
        let mut few = vec![
            (
                true,
                Score {
                    trainable: false,
                    ..score(1.0, &[1.0], 0)
                }
            );
            20
        ];
        few[0].1.trainable = true;
        few[1].1.trainable = true;
        assert!(kinds(5, &few).is_empty(), "10% trainable is not below 10%");
        few[0].1.trainable = false;
        assert_eq!(kinds(6, &few), ["trainable"]);
        // Too small a window says nothing.
        assert!(kinds(7, &vec![(false, score(0.0, &[], 1)); 2]).is_empty());

        // The same warning is given once per ten steps.
        let stats = JudgeStats::new(Arc::new(Metrics::new()));
        let warn = |step: u64| {
            for _ in 0..4 {
                stats.add(&turn(true), &score(0.0, &[], 2));
            }
            stats.take(step).unwrap().1.len()
        };
        assert_eq!(
            (1..=12).map(warn).collect::<Vec<_>>(),
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
        );
    }
}

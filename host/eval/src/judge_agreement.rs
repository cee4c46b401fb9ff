//! How often one judge's verdicts agree with another's on the same recorded turns: each turn
//! with a next state is scored by the method's reward plugin twice, once with the reference
//! judge (the rule-based judge, say) and once with the candidate (a judge model), so both see
//! exactly the prompts the method builds and their votes are counted by the method's own rule.

use crate::Share;
use abi_stable::std_types::{ROption, RString};
use anyhow::Result;
use openclaw_buffer::record::{Envelope, Joined, TurnRefs};
use openclaw_judge::score_request;
use openclaw_plugin_api::{JudgeSettings, Score, Turn, TurnType};
use openclaw_plugins::RewardHandle;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The verdict classes, in table order.
pub const CLASSES: [i32; 3] = [1, 0, -1];

/// The recorded main, trainable turns that have a next state, in buffer order.
pub fn turns_with_next_state(records: &[Envelope]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut refs = TurnRefs::default();
    for env in records {
        match refs.join(env) {
            Joined::Turn { seq, turn } if turn.turn_type == TurnType::Main && turn.trainable => {
                index.insert(seq, turns.len());
                turns.push(turn.clone());
            }
            Joined::NextState { turn, next_state } => {
                if let Some(&i) = turn.and_then(|q| index.get(&q)) {
                    turns[i].next_state = ROption::RSome(next_state.clone());
                }
            }
            _ => {}
        }
    }
    turns.retain(|t| t.next_state.is_some());
    turns
}

/// `limit` turns spread evenly over `turns` (all of them when there are fewer), so a run's
/// early and late turns are both represented.
pub fn spread<T: Clone>(turns: &[T], limit: usize) -> Vec<T> {
    if limit == 0 || turns.len() <= limit {
        return turns.to_vec();
    }
    (0..limit)
        .map(|i| turns[i * turns.len() / limit].clone())
        .collect()
}

/// A score's verdict class: the sign of its value.
pub fn class_of(score: &Score) -> i32 {
    if score.value > 0.0 {
        1
    } else if score.value < 0.0 {
        -1
    } else {
        0
    }
}

/// One turn the two judges saw differently.
#[derive(Clone, Debug, Serialize)]
pub struct Disagreement {
    /// The session.
    pub session_id: String,
    /// The turn.
    pub turn_index: u32,
    /// The reference judge's verdict.
    pub reference: i32,
    /// The candidate judge's verdict.
    pub candidate: i32,
    /// The next state both judged.
    pub next_state: String,
    /// A representative output of the candidate judge.
    pub candidate_text: String,
}

/// The comparison of two judges.
#[derive(Clone, Debug, Serialize)]
pub struct AgreementReport {
    /// Turns both judges scored.
    pub turns: usize,
    /// Turns that could not be scored by one of them (an error from the plugin or the judge).
    pub errors: usize,
    /// Turns with the same verdict, with its 95% interval.
    pub agreement: Share,
    /// Cohen's kappa: agreement beyond what the two verdict distributions give by chance
    /// (0 = chance, 1 = perfect; `None` when chance agreement is already total).
    pub kappa: Option<f64>,
    /// `counts[c][r]`: turns the candidate judged `CLASSES[c]` and the reference `CLASSES[r]`.
    pub counts: [[usize; 3]; 3],
    /// Votes of the candidate judge that could not be parsed or failed, and votes in all.
    pub candidate_invalid_votes: usize,
    /// Votes the candidate judge was asked for.
    pub candidate_votes: usize,
    /// Some of the turns the judges disagreed on.
    pub disagreements: Vec<Disagreement>,
}

impl AgreementReport {
    /// Builds the report from `(reference, candidate)` verdicts.
    fn from_pairs(pairs: &[(i32, i32)]) -> ([[usize; 3]; 3], Share, Option<f64>) {
        let pos = |v: i32| CLASSES.iter().position(|&c| c == v).expect("a class");
        let mut counts = [[0usize; 3]; 3];
        for &(r, c) in pairs {
            counts[pos(c)][pos(r)] += 1;
        }
        let n = pairs.len();
        let same: usize = (0..3).map(|i| counts[i][i]).sum();
        let kappa = (n > 0)
            .then(|| {
                let nf = n as f64;
                let chance: f64 = (0..3)
                    .map(|i| {
                        let cand: usize = counts[i].iter().sum();
                        let refr: usize = (0..3).map(|c| counts[c][i]).sum();
                        cand as f64 / nf * refr as f64 / nf
                    })
                    .sum();
                let observed = same as f64 / nf;
                (chance < 1.0).then(|| (observed - chance) / (1.0 - chance))
            })
            .flatten();
        (counts, Share::new(same, n), kappa)
    }
}

/// Both judges' scores of one turn (reference, candidate), or why it could not be scored.
type PairResult = Result<(Score, Score), String>;

/// Scores every turn with both reward plugins on `workers` threads (the candidate's judge
/// model batches the votes of concurrent turns), calling `progress` after each turn.
pub fn compare(
    turns: &[Turn],
    reference: &RewardHandle,
    candidate: &RewardHandle,
    settings: &JudgeSettings,
    workers: usize,
    max_examples: usize,
    progress: &(dyn Fn() + Sync),
) -> Result<AgreementReport> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, PairResult)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1).min(turns.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(turn) = turns.get(i) else { break };
                let request = score_request(turn.clone(), false, settings);
                let r = reference
                    .score(&request)
                    .and_then(|r| candidate.score(&request).map(|c| (r, c)))
                    .map_err(|e| format!("{e:#}"));
                results.lock().expect("results").push((i, r));
                progress();
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    let mut pairs = Vec::new();
    let (mut errors, mut invalid, mut votes) = (0usize, 0usize, 0usize);
    let mut disagreements = Vec::new();
    for (i, r) in results {
        let (reference, cand) = match r {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("turn {i}: {e}");
                errors += 1;
                continue;
            }
        };
        invalid += cand.invalid_votes as usize;
        votes += cand.votes.len() + cand.invalid_votes as usize;
        let (rc, cc) = (class_of(&reference), class_of(&cand));
        pairs.push((rc, cc));
        if rc != cc && disagreements.len() < max_examples {
            let turn = &turns[i];
            let next_state = match &turn.next_state {
                ROption::RSome(n) => n.content.to_string(),
                ROption::RNone => String::new(),
            };
            disagreements.push(Disagreement {
                session_id: turn.session_id.to_string(),
                turn_index: turn.turn_index,
                reference: rc,
                candidate: cc,
                next_state,
                candidate_text: RString::into_string(cand.judge_text),
            });
        }
    }
    let (counts, agreement, kappa) = AgreementReport::from_pairs(&pairs);
    Ok(AgreementReport {
        turns: pairs.len(),
        errors,
        agreement,
        kappa,
        counts,
        candidate_invalid_votes: invalid,
        candidate_votes: votes,
        disagreements,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agreement_and_kappa() {
        // Perfect agreement over two classes: kappa 1.
        let (counts, share, kappa) =
            AgreementReport::from_pairs(&[(1, 1), (-1, -1), (1, 1), (-1, -1)]);
        assert_eq!(share.count, 4);
        assert_eq!(counts[0][0], 2);
        assert_eq!(counts[2][2], 2);
        assert!((kappa.unwrap() - 1.0).abs() < 1e-12);
        // A candidate that always says +1 against a half/half reference: agreement 0.5,
        // kappa 0 (no better than chance).
        let (counts, share, kappa) =
            AgreementReport::from_pairs(&[(1, 1), (-1, 1), (1, 1), (-1, 1)]);
        assert_eq!((share.count, share.n), (2, 4));
        assert_eq!(counts[0], [2, 0, 2]);
        assert!(kappa.unwrap().abs() < 1e-12);
        // Both always the same class: chance agreement is total, kappa undefined.
        let (_, share, kappa) = AgreementReport::from_pairs(&[(0, 0), (0, 0)]);
        assert_eq!(share.count, 2);
        assert!(kappa.is_none());
    }

    #[test]
    fn spread_takes_evenly_from_the_whole_list() {
        let v: Vec<usize> = (0..10).collect();
        assert_eq!(spread(&v, 5), vec![0, 2, 4, 6, 8]);
        assert_eq!(spread(&v, 20), v);
        assert_eq!(spread(&v, 0), v);
    }
}

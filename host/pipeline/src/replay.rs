//! After a restart: what the buffer holds that was not finished. Samples not consumed by the
//! checkpoint train; turns judged trainable without a sample get one; turns never judged are
//! judged (those still waiting for a next state when the host stopped are judged as if their
//! session had ended: the session table did not survive the restart).

use super::train_loop::ConsumedState;
use openclaw_buffer::record::{EpisodeEntry, Joined, TurnRefs};
use openclaw_buffer::{Envelope, Record};
use openclaw_judge::Feedback;
use openclaw_plugin_api::{NextState, Score, TrainingSample, Turn, TurnType};
use std::collections::BTreeMap;
use std::collections::{HashMap, HashSet};

/// A turn to judge: its sequence number, the turn with its next state if any, whether its
/// session closed, the user's first feedback when they gave one, the user adapter it trains.
pub type ToJudge = (u64, Turn, bool, Option<Feedback>, Option<String>);

/// The unfinished work found in the buffer.
#[derive(Debug, Default)]
pub struct ReplayPlan {
    /// Recorded samples the checkpoint did not consume, in buffer order.
    pub to_train: Vec<(u64, TrainingSample)>,
    /// Turns judged trainable whose sample was never written: (turn's sequence number, turn,
    /// verdict, the user adapter it trains).
    pub to_sample: Vec<(u64, Turn, Score, Option<String>)>,
    /// Turns to judge: (turn's sequence number, turn with its next state if any, session
    /// closed or not, the user's first feedback when they gave one, the user adapter it
    /// trains).
    pub to_judge: Vec<ToJudge>,
    /// Samples the checkpoint had consumed (skipped).
    pub already_trained: usize,
    /// Environment episode groups left unfinished.
    pub episodes: EpisodePlan,
    /// The first group number no recorded generated trajectory (`gen-<group>-<k>`) uses.
    pub next_generated_group: u64,
    /// The first rollout id no recorded rollout sample (`rollout-<id>:...`) uses.
    pub next_rollout_id: u64,
}

/// Environment episodes in the buffer: where group numbers go on, and the groups whose
/// samples were not all written (a group short of episodes runs its missing ones; a whole
/// group gets the samples it lacks).
#[derive(Debug, Default)]
pub struct EpisodePlan {
    /// The first group number no recorded episode uses.
    pub next_group: u64,
    /// Unfinished groups, by group number.
    pub groups: Vec<PendingGroup>,
}

/// A group of episodes whose samples were not all written.
#[derive(Debug, Clone)]
pub struct PendingGroup {
    /// Its number.
    pub group: u64,
    /// Episodes it needs.
    pub size: u32,
    /// The episodes recorded, by sample index.
    pub episodes: Vec<EpisodeEntry>,
    /// The (episode, step) samples already recorded.
    pub sampled: HashSet<Key>,
}

impl PendingGroup {
    /// Whether every episode of the group was recorded.
    pub fn complete(&self) -> bool {
        self.episodes.len() >= self.size as usize
    }
}

/// A (session or episode, turn or step) key.
pub type Key = (String, u32);

/// Plans the replay of `records` given what the checkpoint consumed. Next states, verdicts and
/// samples join their turn by its sequence number ([`TurnRefs`]), so a session id and turn
/// index that recur across restarts never lend one turn's verdict to another.
pub fn replay(records: &[Envelope], consumed: &ConsumedState) -> ReplayPlan {
    let mut turns: Vec<(u64, Turn, Option<String>)> = Vec::new();
    let mut refs = TurnRefs::default();
    let mut next: HashMap<u64, NextState> = HashMap::new();
    let mut judged: HashMap<u64, Score> = HashMap::new();
    // The first feedback on each turn: the one that judged it, had the host not stopped.
    let mut feedback: HashMap<u64, Feedback> = HashMap::new();
    let mut sampled_turns: HashSet<u64> = HashSet::new();
    let mut sampled: HashSet<Key> = HashSet::new();
    let mut plan = ReplayPlan::default();
    let mut groups: BTreeMap<u64, PendingGroup> = BTreeMap::new();
    for e in records {
        let adapter = match &e.record {
            Record::Turn { adapter, .. } => adapter.clone(),
            _ => None,
        };
        let record = match refs.join(e) {
            Joined::Turn { seq, turn } => {
                if turn.turn_type == TurnType::Main && turn.trainable {
                    turns.push((seq, turn.clone(), adapter));
                }
                continue;
            }
            Joined::NextState { turn, next_state } => {
                if let Some(q) = turn {
                    next.insert(q, next_state.clone());
                }
                continue;
            }
            Joined::Judgement { turn, score } => {
                if let Some(q) = turn {
                    judged.insert(q, score.clone());
                }
                continue;
            }
            Joined::Other(e) => &e.record,
        };
        match record {
            Record::Sample { sample, turn_seq } => {
                if let Some(g) = sample
                    .session_id
                    .strip_prefix("gen-")
                    .and_then(|r| r.split('-').next())
                    .and_then(|g| g.parse::<u64>().ok())
                {
                    plan.next_generated_group = plan.next_generated_group.max(g + 1);
                }
                if let Some(id) = sample
                    .session_id
                    .strip_prefix("rollout-")
                    .and_then(|r| r.split(':').next())
                    .and_then(|id| id.parse::<u64>().ok())
                {
                    plan.next_rollout_id = plan.next_rollout_id.max(id + 1);
                }
                // A sample of a turn marks that turn. Samples of episode steps and plugins have
                // no turn and are keyed by their own ids, which are unique in the buffer; a
                // sample written before `turn_seq` was kept may be either, so it counts as both.
                if let Some(q) = refs.resolve(*turn_seq, &sample.session_id, sample.turn_index) {
                    sampled_turns.insert(q);
                }
                if turn_seq.is_none() {
                    sampled.insert((sample.session_id.to_string(), sample.turn_index));
                }
                let adapter = super::samples::adapter_of(sample);
                if e.seq > consumed.through(adapter.as_deref()) {
                    plan.to_train.push((e.seq, (**sample).clone()));
                } else {
                    plan.already_trained += 1;
                }
            }
            Record::Episode { episode } => {
                plan.episodes.next_group = plan.episodes.next_group.max(episode.group + 1);
                let g = groups.entry(episode.group).or_insert_with(|| PendingGroup {
                    group: episode.group,
                    size: episode.group_size,
                    episodes: Vec::new(),
                    sampled: HashSet::new(),
                });
                if !g.episodes.iter().any(|x| x.sample == episode.sample) {
                    g.episodes.push((**episode).clone());
                }
            }
            Record::Feedback {
                session_id,
                turn_index,
                turn_seq,
                reward,
                text,
            } => {
                if let Some(q) = refs.resolve(*turn_seq, session_id, *turn_index) {
                    feedback.entry(q).or_insert_with(|| Feedback {
                        reward: *reward,
                        text: text.clone(),
                    });
                }
            }
            Record::SessionClosed { .. }
            | Record::Turn { .. }
            | Record::NextState { .. }
            | Record::Judgement { .. } => {}
        }
    }
    for mut g in groups.into_values() {
        let ids: HashSet<&str> = g.episodes.iter().map(|e| e.episode_id.as_str()).collect();
        g.sampled = sampled
            .iter()
            .filter(|(sid, _)| ids.contains(sid.as_str()))
            .cloned()
            .collect();
        g.episodes.sort_by_key(|e| e.sample);
        let expected = crate::training::episodes::group_samples(
            &g.episodes,
            crate::training::episodes::EPISODE_GROUP_NORM,
        );
        let unfinished = !g.complete()
            || expected.iter().any(|s| {
                !g.sampled
                    .contains(&(s.session_id.to_string(), s.turn_index))
            });
        if unfinished {
            plan.episodes.groups.push(g);
        }
    }
    for (seq, mut turn, adapter) in turns {
        if let Some(ns) = next.remove(&seq) {
            turn.next_state = Some(ns).into();
        }
        match judged.get(&seq) {
            Some(score) => {
                if score.trainable && !sampled_turns.contains(&seq) {
                    plan.to_sample.push((seq, turn, score.clone(), adapter));
                }
            }
            None => {
                let closed = turn.next_state.is_none();
                let given = feedback.remove(&seq);
                plan.to_judge.push((seq, turn, closed, given, adapter));
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::training::sample_from;
    use openclaw_plugin_api::Message;

    use openclaw_buffer::testing::test_turn as turn;

    fn env(seq: u64, record: Record) -> Envelope {
        Envelope {
            seq,
            at_ms: 0,
            record,
        }
    }

    fn score(trainable: bool) -> Score {
        Score {
            value: 1.0,
            trainable,
            ..Default::default()
        }
    }

    #[test]
    fn unfinished_work_is_found_and_consumed_samples_are_skipped() {
        let ns = NextState {
            role: "user".into(),
            content: "thanks".into(),
            messages: vec![Message::new("user", "thanks")].into(),
        };
        // Records as written before they carried their turn's sequence number.
        let judged = |s: &str| Record::Judgement {
            session_id: s.into(),
            turn_index: 0,
            turn_seq: None,
            score: Box::new(score(true)),
        };
        let sample = |s: &str| Record::Sample {
            sample: Box::new(sample_from(&turn(s, 0), &score(true), 0)),
            turn_seq: None,
        };
        let records = vec![
            // a: judged and sampled before the checkpoint
            env(
                1,
                Record::Turn {
                    turn: Box::new(turn("a", 0)),
                    constraint: None,
                    adapter: None,
                },
            ),
            env(2, judged("a")),
            env(3, sample("a")),
            // b: judged and sampled after it
            env(
                4,
                Record::Turn {
                    turn: Box::new(turn("b", 0)),
                    constraint: None,
                    adapter: None,
                },
            ),
            env(5, judged("b")),
            env(6, sample("b")),
            // c: judged, the sample was never written
            env(
                7,
                Record::Turn {
                    turn: Box::new(turn("c", 0)),
                    constraint: None,
                    adapter: None,
                },
            ),
            env(8, judged("c")),
            // d: got its next state, never judged
            env(
                9,
                Record::Turn {
                    turn: Box::new(turn("d", 0)),
                    constraint: None,
                    adapter: None,
                },
            ),
            env(
                10,
                Record::NextState {
                    session_id: "d".into(),
                    turn_index: 0,
                    turn_seq: None,
                    next_state: ns,
                },
            ),
            // e: still waiting when the host stopped
            env(
                11,
                Record::Turn {
                    turn: Box::new(turn("e", 0)),
                    constraint: None,
                    adapter: None,
                },
            ),
        ];
        let plan = replay(
            &records,
            &ConsumedState {
                consumed_through: 3,
                ..Default::default()
            },
        );
        assert_eq!(plan.already_trained, 1);
        assert_eq!(plan.to_train.len(), 1);
        assert_eq!(plan.to_train[0].0, 6);
        assert_eq!(plan.to_sample.len(), 1);
        assert_eq!(plan.to_sample[0].1.session_id.as_str(), "c");
        let judge: Vec<(&str, bool, bool)> = plan
            .to_judge
            .iter()
            .map(|(_, t, closed, ..)| (t.session_id.as_str(), t.next_state.is_some(), *closed))
            .collect();
        assert_eq!(judge, vec![("d", true, false), ("e", false, true)]);
    }

    /// A client that reused a session id and turn index after a restart: the verdict that
    /// replay later wrote for the first life's turn belongs to that turn alone.
    #[test]
    fn a_colliding_session_id_never_lends_a_verdict_to_another_turn() {
        let t = |seq| {
            env(
                seq,
                Record::Turn {
                    turn: Box::new(turn("s", 0)),
                    constraint: None,
                    adapter: None,
                },
            )
        };
        let records = vec![
            t(1), // first life, never judged
            t(2), // second life: the same id and index
            // The second life's replay judged the first turn and made its sample.
            env(
                3,
                Record::Judgement {
                    session_id: "s".into(),
                    turn_index: 0,
                    turn_seq: Some(1),
                    score: Box::new(score(true)),
                },
            ),
            env(
                4,
                Record::Sample {
                    sample: Box::new(sample_from(&turn("s", 0), &score(true), 0)),
                    turn_seq: Some(1),
                },
            ),
        ];
        let plan = replay(&records, &ConsumedState::default());
        let judge: Vec<u64> = plan.to_judge.iter().map(|(seq, ..)| *seq).collect();
        assert_eq!(judge, vec![2], "the second turn was never judged");
        assert!(plan.to_sample.is_empty());
        assert_eq!(plan.to_train.len(), 1);
        // A reference to a turn the buffer does not hold joins nothing.
        let mut orphan = records.clone();
        orphan.push(env(
            5,
            Record::Judgement {
                session_id: "s".into(),
                turn_index: 0,
                turn_seq: Some(99),
                score: Box::new(score(true)),
            },
        ));
        assert_eq!(replay(&orphan, &ConsumedState::default()).to_judge.len(), 1);
    }
}

//! The buffer as the user's dataset: trajectories in the format `train --data-path` reads.

use super::record::{disk, Envelope, EpisodeEntry, Joined, Record, TurnRefs};
use crate::messages::{next_state_json, to_json};
use crate::trajectory::{TrajectoryRecord, TurnRecord};
use abi_stable::std_types::ROption;
use openclaw_plugin_api::TurnType;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Groups the buffer's turns by session, in order of first appearance, with their next states
/// and judged rewards.
pub fn trajectories(records: &[Envelope]) -> Vec<TrajectoryRecord> {
    let mut order: Vec<String> = Vec::new();
    let mut sessions: HashMap<String, Vec<TurnRecord>> = HashMap::new();
    // A turn's place (session in `order`, turn in its list) by its sequence number.
    let mut index: HashMap<u64, (usize, usize)> = HashMap::new();
    let mut refs = TurnRefs::default();
    for env in records {
        match refs.join(env) {
            Joined::Turn { seq, turn } => {
                let sid = turn.session_id.to_string();
                let turns = sessions.entry(sid.clone()).or_insert_with(|| {
                    order.push(sid.clone());
                    Vec::new()
                });
                let pos = order.iter().position(|s| s == &sid).unwrap();
                index.insert(seq, (pos, turns.len()));
                let tools = (!turn.tools_json.is_empty())
                    .then(|| serde_json::from_str::<Value>(&turn.tools_json).ok())
                    .flatten();
                turns.push(TurnRecord {
                    turn_type: match turn.turn_type {
                        TurnType::Main => "main".into(),
                        TurnType::Side => "side".into(),
                    },
                    turn_index: Some(turn.turn_index),
                    prompt: Value::Array(turn.prompt_messages.iter().map(to_json).collect()),
                    tools,
                    response: to_json(&turn.response),
                    next_state: match &turn.next_state {
                        ROption::RSome(n) => Some(next_state_json(n)),
                        ROption::RNone => None,
                    },
                    trainable: turn.trainable && turn.turn_type == TurnType::Main,
                    reward: None,
                    prompt_ids: Some(turn.prompt_ids.to_vec()),
                    response_ids: Some(turn.response_ids.to_vec()),
                    response_logprobs: Some(turn.response_logprobs.to_vec()),
                    weight_version: Some(turn.weight_version),
                    constraint: match &env.record {
                        Record::Turn { constraint, .. } => constraint.clone(),
                        _ => None,
                    },
                    adapter: match &env.record {
                        Record::Turn { adapter, .. } => adapter.clone(),
                        _ => None,
                    },
                });
            }
            Joined::NextState { turn, next_state } => {
                if let Some(&(s, t)) = turn.and_then(|q| index.get(&q)) {
                    if let Some(turn) = sessions.get_mut(&order[s]).and_then(|v| v.get_mut(t)) {
                        turn.next_state = Some(next_state_json(next_state));
                    }
                }
            }
            Joined::Judgement { turn, score } => {
                if let Some(&(s, t)) = turn.and_then(|q| index.get(&q)) {
                    if let Some(turn) = sessions.get_mut(&order[s]).and_then(|v| v.get_mut(t)) {
                        turn.reward = Some(score.value);
                    }
                }
            }
            Joined::Other(Envelope {
                record: Record::Episode { episode },
                ..
            }) => {
                let sid = episode.episode_id.clone();
                if !sessions.contains_key(&sid) {
                    order.push(sid.clone());
                }
                sessions.insert(sid, episode_turns(episode));
            }
            Joined::Other(_) => {}
        }
    }
    order
        .into_iter()
        .map(|sid| TrajectoryRecord {
            turns: sessions.remove(&sid).unwrap_or_default(),
            session_id: sid,
        })
        .collect()
}

/// An episode's agent steps as trajectory turns: the conversation before each action as its
/// prompt, the action as the response, what the environment answered as the next state, the
/// exact tokens of the step, and the episode's outcome as every step's reward (a failed
/// episode's steps are not trainable).
pub fn episode_turns(e: &EpisodeEntry) -> Vec<TurnRecord> {
    let tools = (!e.tools_json.is_empty())
        .then(|| serde_json::from_str::<Value>(&e.tools_json).ok())
        .flatten();
    let mut turns = Vec::with_capacity(e.action_at.len());
    for (i, &at) in e.action_at.iter().enumerate() {
        let at = at as usize;
        let Some(action) = e.conversation.get(at) else {
            break;
        };
        let end = e
            .action_at
            .get(i + 1)
            .map_or(e.conversation.len(), |&n| n as usize);
        let observed = &e.conversation[(at + 1).min(end)..end];
        let next_state = (!observed.is_empty()).then(|| {
            let content: Vec<&str> = observed.iter().map(|m| m.content.as_str()).collect();
            json!({"role": observed[0].role.as_str(), "content": content.join("\n")})
        });
        let step = e.steps.get(i);
        turns.push(TurnRecord {
            turn_type: "main".into(),
            turn_index: Some(i as u32),
            prompt: Value::Array(e.conversation[..at].iter().map(to_json).collect()),
            tools: tools.clone(),
            response: to_json(action),
            next_state,
            trainable: e.reward.is_some() && step.is_some(),
            reward: e.reward,
            prompt_ids: step.map(|g| g.prompt_ids.to_vec()),
            response_ids: step.map(|g| g.response_ids.to_vec()),
            response_logprobs: step.map(|g| g.logprobs.to_vec()),
            weight_version: step.map(|g| g.weight_version),
            constraint: None,
            adapter: None,
        });
    }
    turns
}

/// Every recorded episode with the samples made from its steps (loss masks, advantages), as
/// JSON objects in buffer order: `buffer export --episodes`.
pub fn episodes(records: &[Envelope]) -> Vec<Value> {
    let mut samples: HashMap<String, Vec<Value>> = HashMap::new();
    for env in records {
        if let Record::Sample { sample, .. } = &env.record {
            samples
                .entry(sample.session_id.to_string())
                .or_default()
                .push(json!({
                    "seq": env.seq,
                    "step": sample.turn_index,
                    "group_id": sample.group_id,
                    "reward": sample.reward,
                    "advantages": sample.advantages.as_ref().map(|a| a.to_vec()).into_option(),
                    "loss_mask": sample.loss_mask.as_slice(),
                    "prompt_tokens": sample.prompt_ids.len(),
                    "response_ids": sample.response_ids.as_slice(),
                    "rollout_logprobs": sample.rollout_logprobs.as_slice(),
                    "weight_version": sample.weight_version,
                }));
        }
    }
    records
        .iter()
        .filter_map(|env| match &env.record {
            Record::Episode { episode } => {
                let mut v = disk::episode_to_json(episode);
                v["seq"] = json!(env.seq);
                v["samples"] =
                    Value::Array(samples.remove(&episode.episode_id).unwrap_or_default());
                Some(v)
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trajectory::read_trajectories;
    use crate::{Log, LogOptions};
    use openclaw_plugin_api::{Message, NextState, Score, Turn};

    fn turn(sid: &str, i: u32, ty: TurnType) -> Turn {
        Turn {
            session_id: sid.into(),
            turn_index: i,
            turn_type: ty,
            prompt_messages: vec![Message::new("user", &format!("q{i}"))].into(),
            tools_json: "".into(),
            response: Message::new("assistant", &format!("a{i}")),
            prompt_ids: vec![1, 2].into(),
            response_ids: vec![3, 4, 5].into(),
            response_logprobs: vec![-0.1, -0.2, -0.3].into(),
            weight_version: 7,
            next_state: ROption::RNone,
            trainable: true,
        }
    }

    #[test]
    fn export_groups_sessions_and_reads_back_as_training_data() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        log.append(&Record::Turn {
            turn: Box::new(turn("s1", 0, TurnType::Main)),
            constraint: None,
            adapter: None,
        })
        .unwrap();
        log.append(&Record::Turn {
            turn: Box::new(turn("s2", 0, TurnType::Side)),
            constraint: None,
            adapter: None,
        })
        .unwrap();
        log.append(&Record::NextState {
            session_id: "s1".into(),
            turn_index: 0,
            turn_seq: Some(1),
            next_state: NextState {
                role: "user".into(),
                content: "thanks".into(),
                messages: vec![].into(),
            },
        })
        .unwrap();
        log.append(&Record::Judgement {
            session_id: "s1".into(),
            turn_index: 0,
            turn_seq: None,
            score: Box::new(Score {
                value: 1.0,
                trainable: true,
                ..Default::default()
            }),
        })
        .unwrap();
        log.append(&Record::Turn {
            turn: Box::new(turn("s1", 1, TurnType::Main)),
            constraint: None,
            adapter: None,
        })
        .unwrap();
        let replay = Log::read_all(dir.path()).unwrap();
        let t = trajectories(&replay.records);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].session_id, "s1");
        assert_eq!(t[0].turns.len(), 2);
        assert_eq!(
            t[0].turns[0].next_state.as_ref().unwrap()["content"],
            "thanks"
        );
        assert_eq!(t[0].turns[0].reward, Some(1.0));
        assert_eq!(t[0].turns[1].next_state, None);
        assert!(!t[1].turns[0].trainable, "side turns are never trainable");

        let out = dir.path().join("export.jsonl");
        let text: String = t
            .iter()
            .map(|x| serde_json::to_string(x).unwrap() + "\n")
            .collect();
        std::fs::write(&out, text).unwrap();
        let back = read_trajectories(&out).unwrap();
        assert!(back.errors.is_empty(), "{:?}", back.errors);
        assert_eq!(back.trajectories, t);
    }
}

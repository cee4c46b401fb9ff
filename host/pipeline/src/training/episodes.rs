//! Training samples from a group of environment episodes, as GRPO with per-step samples
//! (slime's `--dynamic_history`) makes them:
//!
//! - every agent step is its own sample: exactly the prompt tokens the policy saw at that step
//!   and the tokens it sampled, with their log-probabilities and weight version (never
//!   re-tokenized). Tool results and other observations are in the next step's prompt, never
//!   in a response, so no response token is one the policy did not sample: the loss mask is 1
//!   on every response token;
//! - the advantage is computed once per trajectory: the outcome rewards of the group's scored
//!   episodes, centred on their mean and divided by their standard deviation (+1e-6), and
//!   given to every step of the episode;
//! - a failed episode (an env call or the policy failed) makes no sample and does not count
//!   in its group's mean, as the original removes aborted samples.

use abi_stable::std_types::{ROption, RVec};
use openclaw_buffer::record::EpisodeEntry;
use openclaw_plugin_api::math::{group_advantages, GroupNorm};
use openclaw_plugin_api::TrainingSample;
use std::hash::{Hash, Hasher};

/// How the outcome rewards of a group become advantages: GRPO's centring and scaling (slime's
/// `grpo_std_normalization`, on by default there).
pub const EPISODE_GROUP_NORM: GroupNorm = GroupNorm::CenterScale;

/// The group id the samples of episode group `group` carry (apart from live turns' ids).
pub fn episode_group_id(group: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    "env-group".hash(&mut h);
    group.hash(&mut h);
    h.finish()
}

/// The outcome advantage of each episode of `group` (`None` for failed episodes).
pub fn trajectory_advantages(group: &[EpisodeEntry], norm: GroupNorm) -> Vec<Option<f32>> {
    let scored: Vec<f32> = group.iter().filter_map(|e| e.reward).collect();
    let adv = group_advantages(&scored, &vec![0; scored.len()], norm);
    let mut it = adv.into_iter();
    group
        .iter()
        .map(|e| e.reward.and_then(|_| it.next()))
        .collect()
}

/// The step samples of every scored episode of `group` (one group: the same task's attempts),
/// in episode then step order.
pub fn group_samples(group: &[EpisodeEntry], norm: GroupNorm) -> Vec<TrainingSample> {
    let advantages = trajectory_advantages(group, norm);
    let mut out = Vec::new();
    for (e, adv) in group.iter().zip(advantages) {
        let (Some(adv), Some(reward)) = (adv, e.reward) else {
            continue;
        };
        out.extend(episode_samples(e, reward, adv));
    }
    out
}

/// The step samples of one scored episode with its trajectory advantage `adv`.
pub fn episode_samples(e: &EpisodeEntry, reward: f32, adv: f32) -> Vec<TrainingSample> {
    let steps = e.steps.len();
    e.steps
        .iter()
        .enumerate()
        .filter(|(_, g)| !g.response_ids.is_empty())
        .map(|(i, g)| {
            let n = g.response_ids.len();
            let meta = serde_json::json!({
                "env": e.env,
                "task_id": e.task.id.as_str(),
                "episode": e.episode_id,
                "group": e.group,
                "step": i,
                "steps": steps,
                "ending": e.ending,
                "outcome": reward,
                "solved": e.solved,
                "advantage": adv,
            });
            TrainingSample {
                session_id: e.episode_id.as_str().into(),
                turn_index: i as u32,
                group_id: episode_group_id(e.group),
                prompt_ids: g.prompt_ids.clone(),
                response_ids: g.response_ids.clone(),
                rollout_logprobs: g.logprobs.clone(),
                loss_mask: RVec::from(vec![1.0f32; n]),
                weight_version: g.weight_version,
                reward,
                advantages: ROption::RSome(RVec::from(vec![adv; n])),
                teacher_logprobs: ROption::RNone,
                teacher_topk: ROption::RNone,
                metadata_json: meta.to_string().into(),
            }
        })
        .collect()
}

/// The samples of one group of generated trajectories (a generate plugin's calls for one
/// prompt): each trajectory's reward is its last sample's, normalised within the group, and the
/// advantage is given to every response token of the trajectory's samples, unless the plugin
/// gave advantages itself (then they are kept). Group id: [`episode_group_id`] of `group`.
pub fn trajectory_samples(
    trajectories: Vec<Vec<TrainingSample>>,
    group: u64,
) -> Vec<TrainingSample> {
    let rewards: Vec<f32> = trajectories
        .iter()
        .map(|t| t.last().map_or(0.0, |s| s.reward))
        .collect();
    let adv = group_advantages(&rewards, &vec![0; rewards.len()], EPISODE_GROUP_NORM);
    let gid = episode_group_id(group);
    trajectories
        .into_iter()
        .zip(adv)
        .flat_map(|(t, a)| {
            t.into_iter().map(move |mut s| {
                s.group_id = gid;
                if s.advantages.is_none() {
                    s.advantages = ROption::RSome(RVec::from(vec![a; s.response_ids.len()]));
                }
                s
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::host::Generation;
    use openclaw_plugin_api::{Message, Task};

    fn entry(sample: u32, reward: Option<f32>, steps: usize) -> EpisodeEntry {
        EpisodeEntry {
            episode_id: format!("ep-3-{sample}"),
            env: "e".into(),
            group: 3,
            group_size: 4,
            sample,
            task: Task {
                id: "t".into(),
                instruction: "i".into(),
                data_json: "{}".into(),
            },
            conversation: vec![Message::new("user", "i")],
            action_at: (0..steps as u32).map(|i| 1 + 2 * i).collect(),
            tools_json: String::new(),
            steps: (0..steps)
                .map(|i| Generation {
                    prompt_ids: vec![1; 3 + i].into(),
                    response_ids: vec![7; 2 + i].into(),
                    logprobs: vec![-0.5; 2 + i].into(),
                    weight_version: i as u64,
                    ..Default::default()
                })
                .collect(),
            step_rewards: vec![0.0; steps],
            tool_steps: 0,
            ending: if reward.is_some() { "done" } else { "failed" }.into(),
            failure: String::new(),
            reward,
            step_scores: Vec::new(),
            outcome: None,
            solved: reward.map(|r| r > 0.0),
            evaluated: true,
            details_json: "{}".into(),
        }
    }

    #[test]
    fn one_advantage_per_trajectory_is_given_to_each_of_its_steps() {
        let group = vec![
            entry(0, Some(1.0), 3),
            entry(1, Some(-1.0), 1),
            entry(2, None, 2),
            entry(3, Some(-1.0), 2),
        ];
        let adv = trajectory_advantages(&group, GroupNorm::CenterScale);
        // Rewards 1, -1, -1: mean -1/3, unbiased std 1.1547.
        assert!((adv[0].unwrap() - 1.1547).abs() < 1e-3, "{adv:?}");
        assert!((adv[1].unwrap() + 0.5774).abs() < 1e-3);
        assert_eq!(adv[2], None, "a failed episode has no advantage");
        assert_eq!(adv[1], adv[3]);
        let samples = group_samples(&group, GroupNorm::CenterScale);
        assert_eq!(
            samples.len(),
            3 + 1 + 2,
            "one sample per step of scored episodes"
        );
        let first: Vec<_> = samples
            .iter()
            .filter(|s| s.session_id == "ep-3-0")
            .collect();
        for (i, s) in first.iter().enumerate() {
            assert_eq!(s.turn_index, i as u32);
            // Exactly the step's tokens, each response token trained with the episode's advantage.
            assert_eq!(s.prompt_ids, group[0].steps[i].prompt_ids);
            assert_eq!(s.response_ids, group[0].steps[i].response_ids);
            assert_eq!(s.rollout_logprobs, group[0].steps[i].logprobs);
            assert_eq!(s.weight_version, i as u64);
            assert!(s.loss_mask.iter().all(|&m| m == 1.0));
            let a = s.advantages.as_ref().unwrap();
            assert_eq!(a.len(), s.response_ids.len());
            assert!(a.iter().all(|&x| x == adv[0].unwrap()));
            assert_eq!(s.reward, 1.0);
        }
        assert!(samples
            .iter()
            .all(|s| s.group_id == episode_group_id(3) && s.group_id != episode_group_id(4)));
    }

    #[test]
    fn generated_trajectories_get_their_groups_advantage_unless_they_bring_one() {
        let sample = |reward: f32, adv: Option<f32>| TrainingSample {
            session_id: "s".into(),
            turn_index: 0,
            group_id: 0,
            prompt_ids: vec![1].into(),
            response_ids: vec![2, 3].into(),
            rollout_logprobs: vec![-1.0, -1.0].into(),
            loss_mask: vec![1.0, 1.0].into(),
            weight_version: 0,
            reward,
            advantages: adv.map(|a| RVec::from(vec![a; 2])).into(),
            teacher_logprobs: ROption::RNone,
            teacher_topk: ROption::RNone,
            metadata_json: "{}".into(),
        };
        let out = trajectory_samples(
            vec![
                vec![sample(0.0, None), sample(1.0, None)],
                vec![sample(-1.0, None)],
                vec![sample(-1.0, Some(0.25))],
            ],
            5,
        );
        assert_eq!(out.len(), 4);
        let a: Vec<f32> = out
            .iter()
            .map(|s| s.advantages.as_ref().unwrap()[0])
            .collect();
        // Trajectory rewards 1, -1, -1 (the last sample's): the first trajectory's two samples
        // share its advantage; the plugin's own advantage is kept.
        assert!((a[0] - 1.1547).abs() < 1e-3 && a[0] == a[1], "{a:?}");
        assert!((a[2] + 0.5774).abs() < 1e-3);
        assert_eq!(a[3], 0.25);
        assert!(out.iter().all(|s| s.group_id == episode_group_id(5)));
    }

    #[test]
    fn a_group_that_agrees_teaches_nothing() {
        let group = vec![entry(0, Some(1.0), 1), entry(1, Some(1.0), 2)];
        let samples = group_samples(&group, GroupNorm::CenterScale);
        assert_eq!(samples.len(), 3);
        assert!(samples
            .iter()
            .all(|s| s.advantages.as_ref().unwrap().iter().all(|&a| a == 0.0)));
    }
}

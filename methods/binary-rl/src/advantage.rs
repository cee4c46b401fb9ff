//! Per-token advantages from rewards.

use openclaw_plugin_api::math::{self, GroupNorm};
use openclaw_plugin_api::LossBatch;

/// The advantage of every token: the batch's precomputed `advantages` when it has them,
/// otherwise each sample's reward advantage (normalised within its group by `norm`) repeated
/// over the sample's tokens.
///
/// Groups are normalised within this batch only, so a group split across micro-batches is
/// normalised per part; hosts that split groups should precompute `advantages`.
pub fn reward_advantages(batch: &LossBatch, norm: GroupNorm) -> Vec<f32> {
    if !batch.advantages.is_empty() {
        return batch.advantages.to_vec();
    }
    let per_sample = math::group_advantages(&batch.rewards, &batch.group_ids, norm);
    let mut out = Vec::with_capacity(batch.num_tokens());
    for (i, a) in per_sample.into_iter().enumerate() {
        out.extend(std::iter::repeat_n(a, batch.sample_range(i).len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> LossBatch {
        LossBatch {
            // Three samples of 2, 0 and 3 tokens.
            sample_offsets: vec![0, 2, 2, 5].into(),
            logp: vec![-1.0; 5].into(),
            old_logp: vec![-1.0; 5].into(),
            rollout_logp: vec![-1.0; 5].into(),
            loss_mask: vec![1.0; 5].into(),
            rewards: vec![1.0, -1.0, 0.0].into(),
            group_ids: vec![4, 4, 4].into(),
            step_samples: 3,
            ..Default::default()
        }
    }

    #[test]
    fn rewards_are_repeated_over_each_samples_tokens() {
        let b = batch();
        assert_eq!(
            reward_advantages(&b, GroupNorm::None),
            vec![1.0, 1.0, 0.0, 0.0, 0.0]
        );
        // mean(1, -1, 0) = 0, so centring changes nothing here.
        assert_eq!(
            reward_advantages(&b, GroupNorm::Center),
            vec![1.0, 1.0, 0.0, 0.0, 0.0]
        );
        // Unbiased std of (1, -1, 0) is 1: 1 / (1 + 1e-6).
        let s = reward_advantages(&b, GroupNorm::CenterScale);
        assert!((s[0] - 1.0 / (1.0 + 1e-6)).abs() < 1e-6, "{s:?}");
        assert_eq!(s[4], 0.0);
    }

    #[test]
    fn precomputed_advantages_win_over_rewards() {
        let mut b = batch();
        b.advantages = vec![0.5, 0.25, -1.0, 2.0, 3.0].into();
        assert_eq!(
            reward_advantages(&b, GroupNorm::CenterScale),
            vec![0.5, 0.25, -1.0, 2.0, 3.0]
        );
    }
}

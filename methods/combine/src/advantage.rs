//! The combined advantage.

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::math::{self, GroupNorm};
use openclaw_plugin_api::LossBatch;

/// The two advantage terms of every token, before weighting.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdvantageParts {
    /// `teacher_logp - old_logp` for samples with a teacher, 0 elsewhere.
    pub teacher: Vec<f32>,
    /// The reward advantage: the batch's precomputed `advantages`, or each sample's reward
    /// (normalised within its group) repeated over its tokens.
    pub reward: Vec<f32>,
}

impl AdvantageParts {
    /// Both terms for a batch. Groups are normalised within this batch only.
    pub fn new(batch: &LossBatch, norm: GroupNorm) -> Self {
        let mut teacher = vec![0.0f32; batch.num_tokens()];
        if let ROption::RSome(t_logp) = &batch.teacher_logp {
            for i in (0..batch.num_samples()).filter(|&i| batch.has_teacher(i)) {
                for t in batch.sample_range(i) {
                    teacher[t] = t_logp[t] - batch.old_logp[t];
                }
            }
        }
        let reward = if batch.advantages.is_empty() {
            let per_sample = math::group_advantages(&batch.rewards, &batch.group_ids, norm);
            let mut out = Vec::with_capacity(batch.num_tokens());
            for (i, a) in per_sample.into_iter().enumerate() {
                out.extend(std::iter::repeat_n(a, batch.sample_range(i).len()));
            }
            out
        } else {
            batch.advantages.to_vec()
        };
        AdvantageParts { teacher, reward }
    }

    /// `A_t = w_opd·teacher_t + w_rl·reward_t`. A zero weight drops its term outright, so a
    /// non-finite value there cannot leak in through `0·inf`.
    pub fn combine(&self, w_opd: f32, w_rl: f32) -> Vec<f32> {
        let term = |w: f32, x: f32| if w == 0.0 { 0.0 } else { w * x };
        self.teacher
            .iter()
            .zip(&self.reward)
            .map(|(&a, &r)| term(w_opd, a) + term(w_rl, r))
            .collect()
    }
}

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
    /// Both terms for a batch. Groups are normalised within this batch only; with
    /// `center_teacher` each sample's distillation advantages are centred on their mean over
    /// its trained tokens.
    pub fn new(batch: &LossBatch, norm: GroupNorm, center_teacher: bool) -> Self {
        let mut teacher = vec![0.0f32; batch.num_tokens()];
        if let ROption::RSome(t_logp) = &batch.teacher_logp {
            for i in (0..batch.num_samples()).filter(|&i| batch.has_teacher(i)) {
                let range = batch.sample_range(i);
                for t in range.clone() {
                    teacher[t] = t_logp[t] - batch.old_logp[t];
                }
                if center_teacher {
                    let trained: Vec<usize> = range.filter(|&t| batch.loss_mask[t] > 0.0).collect();
                    if !trained.is_empty() {
                        let mean = trained.iter().map(|&t| teacher[t] as f64).sum::<f64>()
                            / trained.len() as f64;
                        for t in trained {
                            teacher[t] -= mean as f32;
                        }
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_centred_teacher_moves_tokens_against_each_other_not_the_sample_down() {
        let batch = LossBatch {
            // Two samples of 3 and 2 tokens; the last token of the first is not trained.
            sample_offsets: vec![0, 3, 5].into(),
            logp: vec![-1.0; 5].into(),
            old_logp: vec![-1.0; 5].into(),
            rollout_logp: vec![-1.0; 5].into(),
            teacher_logp: ROption::RSome(vec![-1.5, -2.5, -9.0, -0.5, -1.5].into()),
            loss_mask: vec![1.0, 1.0, 0.0, 1.0, 1.0].into(),
            rewards: vec![1.0, -1.0].into(),
            group_ids: vec![1, 2].into(),
            step_samples: 2,
            ..Default::default()
        };
        let plain = AdvantageParts::new(&batch, GroupNorm::None, false);
        assert_eq!(plain.teacher, [-0.5, -1.5, -8.0, 0.5, -0.5]);
        let centred = AdvantageParts::new(&batch, GroupNorm::None, true);
        // Each sample's trained tokens now average 0; the untrained token is left alone.
        assert_eq!(centred.teacher, [0.5, -0.5, -8.0, 0.5, -0.5]);
        // The batch baseline: rewards minus their mean.
        let b = AdvantageParts::new(&batch, GroupNorm::Batch, false);
        assert_eq!(b.reward, [1.0, 1.0, 1.0, -1.0, -1.0]);
    }
}

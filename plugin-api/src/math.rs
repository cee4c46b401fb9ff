//! Building blocks of policy-gradient losses, shared by the method plugins, and a
//! finite-difference gradient check for any loss.
//!
//! Every per-token function returns the token's loss and its derivative with respect to the
//! policy log-probability `logp`, so a loss assembles its gradient as it goes.

use crate::loss::{LossBatch, LossOutput};
use serde::{Deserialize, Serialize};

/// One token of the PPO clipped surrogate `max(-r·A, -clip(r, 1-ε_lo, 1+ε_hi)·A)` with
/// `r = exp(logp - old_logp)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PpoToken {
    /// The token's loss.
    pub loss: f64,
    /// d loss / d logp.
    pub grad: f64,
    /// Whether the clipped branch won (the token then has no gradient).
    pub clipped: bool,
    /// The importance ratio `r`.
    pub ratio: f64,
}

/// The PPO clipped surrogate for one token. When both branches are equal the unclipped one is
/// taken, so the gradient is continuous inside the trust region.
pub fn ppo_clip(logp: f32, old_logp: f32, advantage: f32, eps_low: f32, eps_high: f32) -> PpoToken {
    let ratio = (logp as f64 - old_logp as f64).exp();
    let a = advantage as f64;
    let unclipped = -ratio * a;
    let clipped_ratio = ratio.clamp(1.0 - eps_low as f64, 1.0 + eps_high as f64);
    let clipped = -clipped_ratio * a;
    if clipped > unclipped {
        PpoToken {
            loss: clipped,
            grad: 0.0,
            clipped: true,
            ratio,
        }
    } else {
        PpoToken {
            loss: unclipped,
            grad: -ratio * a,
            clipped: false,
            ratio,
        }
    }
}

/// The low-variance ("k3") estimator of KL(π‖π_ref) for one token,
/// `exp(ref - logp) - 1 - (ref - logp)`, clamped to at most 10 as slime does. Returns the value
/// and its derivative with respect to `logp` (zero where the clamp holds).
pub fn k3_kl(logp: f32, ref_logp: f32) -> (f64, f64) {
    let r = ref_logp as f64 - logp as f64;
    let kl = r.exp() - 1.0 - r;
    if kl > 10.0 {
        (10.0, 0.0)
    } else {
        (kl, 1.0 - r.exp())
    }
}

/// A truncated importance weight `min(exp(old_logp - rollout_logp), cap)`: corrects for the
/// behaviour policy being older than the policy at the start of the step. It is a constant
/// with respect to `logp`.
pub fn truncated_importance_weight(old_logp: f32, rollout_logp: f32, cap: f32) -> f64 {
    (old_logp as f64 - rollout_logp as f64)
        .exp()
        .min(cap as f64)
}

/// How rewards are turned into advantages within a group of samples of one prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GroupNorm {
    /// `A = r` (one sample per prompt, as with live conversations).
    #[default]
    None,
    /// `A = r - mean(group)`.
    Center,
    /// `A = (r - mean(group)) / (std(group) + 1e-6)`, GRPO's normalisation.
    CenterScale,
    /// `A = r - mean(batch)`: the batch's mean reward as the baseline, for samples of one per
    /// prompt (live turns) whose rewards lean one way (REINFORCE with a mean baseline).
    Batch,
}

/// Per-sample advantages from per-sample rewards and group ids. The standard deviation is the
/// unbiased one (n - 1), as torch computes it; a group of one sample gets `r - r = 0` when
/// centred.
pub fn group_advantages(rewards: &[f32], group_ids: &[u64], norm: GroupNorm) -> Vec<f32> {
    match norm {
        GroupNorm::None => return rewards.to_vec(),
        GroupNorm::Batch => {
            let mean = rewards.iter().map(|&r| r as f64).sum::<f64>() / rewards.len().max(1) as f64;
            return rewards.iter().map(|&r| (r as f64 - mean) as f32).collect();
        }
        _ => {}
    }
    let mut groups: std::collections::HashMap<u64, Vec<usize>> = Default::default();
    for (i, g) in group_ids.iter().enumerate() {
        groups.entry(*g).or_default().push(i);
    }
    let mut out = vec![0.0f32; rewards.len()];
    for members in groups.values() {
        let n = members.len() as f64;
        let mean = members.iter().map(|&i| rewards[i] as f64).sum::<f64>() / n;
        let std = if members.len() > 1 {
            (members
                .iter()
                .map(|&i| (rewards[i] as f64 - mean).powi(2))
                .sum::<f64>()
                / (n - 1.0))
                .sqrt()
        } else {
            0.0
        };
        for &i in members {
            let centred = rewards[i] as f64 - mean;
            out[i] = match norm {
                GroupNorm::CenterScale => (centred / (std + 1e-6)) as f32,
                _ => centred as f32,
            };
        }
    }
    out
}

/// Reduces per-token losses and gradients the way slime does: a masked mean over each
/// sample's tokens, summed over samples, divided by the samples of the whole optimizer step.
/// A sample with no unmasked token contributes nothing. Returns the loss and the gradient
/// with respect to each token's `logp` (already multiplied by the reduction's weights).
pub struct SampleMean<'a> {
    batch: &'a LossBatch,
    weights: Vec<f64>,
}

impl<'a> SampleMean<'a> {
    /// Precomputes each token's weight in the reduction.
    pub fn new(batch: &'a LossBatch) -> Self {
        let mut weights = vec![0.0; batch.num_tokens()];
        let step = batch.step_samples.max(1) as f64;
        for s in 0..batch.num_samples() {
            let r = batch.sample_range(s);
            let n: f64 = batch.loss_mask[r.clone()].iter().map(|&m| m as f64).sum();
            if n > 0.0 {
                for t in r {
                    weights[t] = batch.loss_mask[t] as f64 / (n * step);
                }
            }
        }
        SampleMean { batch, weights }
    }

    /// The weight of token `t` in the reduction (0 for masked tokens).
    pub fn weight(&self, t: usize) -> f64 {
        self.weights[t]
    }

    /// The batch this reduction is over.
    pub fn batch(&self) -> &LossBatch {
        self.batch
    }

    /// The weighted mean of a per-token quantity over unmasked tokens: `Σ w_t x_t`.
    pub fn reduce(&self, per_token: impl Fn(usize) -> f64) -> f64 {
        (0..self.weights.len())
            .filter(|&t| self.weights[t] != 0.0)
            .map(|t| self.weights[t] * per_token(t))
            .sum()
    }

    /// The plain mean of a per-token quantity over unmasked tokens, for metrics.
    pub fn token_mean(&self, per_token: impl Fn(usize) -> f64) -> f64 {
        let mut sum = 0.0;
        let mut n = 0.0;
        for t in 0..self.weights.len() {
            let m = self.batch.loss_mask[t] as f64;
            if m != 0.0 {
                sum += m * per_token(t);
                n += m;
            }
        }
        if n > 0.0 {
            sum / n
        } else {
            0.0
        }
    }
}

/// The result of a finite-difference gradient check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GradCheck {
    /// Inputs checked (token log-probabilities and top-k entries).
    pub checked: usize,
    /// Inputs skipped because the loss has a kink within the step (a clip boundary).
    pub skipped_kinks: usize,
    /// The largest |analytic - numeric| over checked inputs.
    pub max_abs_error: f64,
    /// The largest |analytic - numeric| / max(|analytic| + |numeric|, `floor`).
    pub max_rel_error: f64,
    /// Where the largest relative error was (`logp[i]` or `topk[i]`).
    pub worst: String,
}

impl GradCheck {
    /// Whether every checked input agrees within `tol` (relative, with the floor applied).
    pub fn passes(&self, tol: f64) -> bool {
        self.max_rel_error <= tol
    }
}

/// Checks a loss's analytic gradient against central finite differences over every token's
/// `logp` and every top-k student log-probability. `step` is the perturbation (1e-3 suits f32
/// inputs); an input where the one-sided differences disagree by more than `kink_tol` (relative)
/// sits on a kink of the loss and is skipped.
pub fn check_gradient(
    loss: &dyn Fn(&LossBatch) -> Result<LossOutput, String>,
    batch: &LossBatch,
    step: f32,
) -> Result<GradCheck, String> {
    let base = loss(batch)?;
    let floor = 1e-3;
    let kink_tol = 0.25;
    let mut out = GradCheck::default();
    let record = |out: &mut GradCheck,
                  what: String,
                  analytic: f64,
                  f0: f64,
                  fp: f64,
                  fm: f64,
                  hp: f64,
                  hm: f64| {
        let fwd = (fp - f0) / hp;
        let bwd = (f0 - fm) / hm;
        if (fwd - bwd).abs() > kink_tol * (fwd.abs() + bwd.abs()).max(floor) {
            out.skipped_kinks += 1;
            return;
        }
        let numeric = (fp - fm) / (hp + hm);
        let abs = (analytic - numeric).abs();
        let rel = abs / (analytic.abs() + numeric.abs()).max(floor);
        out.checked += 1;
        out.max_abs_error = out.max_abs_error.max(abs);
        if rel > out.max_rel_error || out.worst.is_empty() {
            out.max_rel_error = out.max_rel_error.max(rel);
            out.worst = what;
        }
    };
    for t in 0..batch.num_tokens() {
        let mut b = batch.clone();
        let x = batch.logp[t];
        b.logp[t] = x + step;
        let hp = (b.logp[t] - x) as f64;
        let fp = loss(&b)?.loss;
        b.logp[t] = x - step;
        let hm = (x - b.logp[t]) as f64;
        let fm = loss(&b)?.loss;
        let analytic = *base.grad_logp.get(t).ok_or_else(|| {
            format!(
                "grad_logp has {} values, expected {}",
                base.grad_logp.len(),
                batch.num_tokens()
            )
        })? as f64;
        record(
            &mut out,
            format!("logp[{t}]"),
            analytic,
            base.loss,
            fp,
            fm,
            hp,
            hm,
        );
    }
    if let abi_stable::std_types::ROption::RSome(topk) = &batch.topk {
        for e in 0..topk.student_logp.len() {
            let mut b = batch.clone();
            let x = topk.student_logp[e];
            let set = |b: &mut LossBatch, v: f32| {
                if let abi_stable::std_types::ROption::RSome(t) = &mut b.topk {
                    t.student_logp[e] = v;
                }
            };
            set(&mut b, x + step);
            let hp = ((x + step) - x) as f64;
            let fp = loss(&b)?.loss;
            set(&mut b, x - step);
            let hm = (x - (x - step)) as f64;
            let fm = loss(&b)?.loss;
            // An empty grad_topk says the loss does not depend on the top-k entries; the
            // finite differences must then be zero too.
            let analytic = if base.grad_topk.is_empty() {
                0.0
            } else {
                *base.grad_topk.get(e).ok_or_else(|| {
                    format!(
                        "grad_topk has {} values, expected {}",
                        base.grad_topk.len(),
                        topk.student_logp.len()
                    )
                })? as f64
            };
            record(
                &mut out,
                format!("topk[{e}]"),
                analytic,
                base.loss,
                fp,
                fm,
                hp,
                hm,
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ppo_clip_matches_hand_computed_values() {
        // ratio = e^0.1 = 1.10517, A = 2: inside [0.8, 1.28] -> unclipped.
        let t = ppo_clip(-1.0, -1.1, 2.0, 0.2, 0.28);
        assert!((t.loss - (-2.0 * 0.1f64.exp())).abs() < 1e-6);
        assert!((t.grad - (-2.0 * 0.1f64.exp())).abs() < 1e-6);
        assert!(!t.clipped);
        // ratio = e^0.5 = 1.6487 > 1.28 with A > 0: clipped at -1.28 * A, no gradient.
        let t = ppo_clip(-0.5, -1.0, 1.0, 0.2, 0.28);
        assert!((t.loss - -1.28).abs() < 1e-6 && t.grad == 0.0 && t.clipped);
        // Same ratio with A < 0: unclipped wins (-r·A > -1.28·A), the gradient flows.
        let t = ppo_clip(-0.5, -1.0, -1.0, 0.2, 0.28);
        assert!((t.loss - 0.5f64.exp()).abs() < 1e-6 && (t.grad - 0.5f64.exp()).abs() < 1e-6);
        // ratio = e^-0.5 = 0.6065 < 0.8 with A < 0: clipped at -0.8·A = 0.8.
        let t = ppo_clip(-1.5, -1.0, -1.0, 0.2, 0.28);
        assert!((t.loss - 0.8).abs() < 1e-6 && t.clipped);
    }

    #[test]
    fn k3_is_zero_at_the_reference_and_positive_elsewhere() {
        assert_eq!(k3_kl(-1.0, -1.0), (0.0, 0.0));
        let (kl, g) = k3_kl(-1.0, -1.5);
        // r = -0.5: e^-0.5 - 1 + 0.5
        assert!((kl - ((-0.5f64).exp() - 0.5)).abs() < 1e-9);
        assert!((g - (1.0 - (-0.5f64).exp())).abs() < 1e-9);
        assert_eq!(k3_kl(-20.0, 0.0), (10.0, 0.0));
    }

    #[test]
    fn group_advantages_centre_and_scale_within_groups() {
        let r = [1.0, -1.0, 1.0, 0.5];
        let g = [7, 7, 7, 9];
        assert_eq!(group_advantages(&r, &g, GroupNorm::None), r.to_vec());
        let c = group_advantages(&r, &g, GroupNorm::Center);
        assert!((c[0] - 2.0 / 3.0).abs() < 1e-6 && (c[1] + 4.0 / 3.0).abs() < 1e-6);
        assert_eq!(c[3], 0.0);
        let s = group_advantages(&r, &g, GroupNorm::CenterScale);
        // std of [1, -1, 1] (unbiased) = sqrt(4/3)
        let std = (4.0f64 / 3.0).sqrt();
        assert!((s[1] as f64 - (-4.0 / 3.0) / (std + 1e-6)).abs() < 1e-5);
        // The batch's mean is every sample's baseline, whatever its group.
        let b = group_advantages(&r, &g, GroupNorm::Batch);
        assert_eq!(b, [0.625, -1.375, 0.625, 0.125]);
    }

    #[test]
    fn sample_mean_weights_follow_masks_and_step_size() {
        let b = LossBatch {
            sample_offsets: vec![0, 2, 2, 5].into(),
            logp: vec![0.0; 5].into(),
            old_logp: vec![0.0; 5].into(),
            rollout_logp: vec![0.0; 5].into(),
            loss_mask: vec![1.0, 1.0, 1.0, 0.0, 1.0].into(),
            rewards: vec![0.0; 3].into(),
            group_ids: vec![0; 3].into(),
            step_samples: 4,
            ..Default::default()
        };
        let m = SampleMean::new(&b);
        assert_eq!(m.weight(0), 1.0 / 8.0);
        assert_eq!(m.weight(3), 0.0);
        assert_eq!(m.weight(4), 1.0 / 8.0);
        assert_eq!(
            m.reduce(|t| t as f64),
            (0.0 + 1.0) / 8.0 + (2.0 + 4.0) / 8.0
        );
    }
}

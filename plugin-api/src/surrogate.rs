//! The PPO clipped surrogate over per-token advantages, the policy-gradient core the method
//! plugins share, with an optional k3 KL penalty against
//! the reference model and an optional truncated importance weight.

use crate::loss::{LossBatch, LossOutput, Metric};
use crate::math::{self, SampleMean};
use abi_stable::std_types::ROption;

/// The settings of the clipped surrogate every policy-gradient loss shares: a method's config
/// holds them as its top-level `eps_clip`, `eps_clip_high`, `kl_coef` and `tis_cap` keys and
/// checks them with [`ClippedSurrogate::validate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClippedSurrogate {
    /// The ratio is clipped below at `1 - eps_clip`.
    pub eps_clip: f32,
    /// The ratio is clipped above at `1 + eps_clip_high`.
    pub eps_clip_high: f32,
    /// Weight of the k3 KL penalty; 0 turns it off.
    pub kl_coef: f32,
    /// Cap of the truncated importance weight; 0 turns it off.
    pub tis_cap: f32,
}

impl ClippedSurrogate {
    /// Checks every setting's range; the error names the key and the bad value.
    pub fn validate(&self) -> Result<(), String> {
        use crate::config::{check_clip, check_non_negative};
        check_clip("eps_clip", self.eps_clip)?;
        check_clip("eps_clip_high", self.eps_clip_high)?;
        check_non_negative("kl_coef", self.kl_coef)?;
        check_non_negative("tis_cap", self.tis_cap)
    }

    /// Computes
    /// `L = SampleMean(w_t · max(-r_t·A_t, -clip(r_t)·A_t)) + kl_coef · SampleMean(k3_t)`
    /// with `r_t = exp(logp_t - old_logp_t)` and `w_t` the truncated importance weight (1 when
    /// off), its gradient with respect to `logp`, and the training metrics.
    pub fn compute(&self, batch: &LossBatch, advantages: &[f32]) -> Result<LossOutput, String> {
        if advantages.len() != batch.num_tokens() {
            return Err(format!(
                "{} advantages for {} tokens",
                advantages.len(),
                batch.num_tokens()
            ));
        }
        let ref_logp = if self.kl_coef > 0.0 {
            match &batch.ref_logp {
                ROption::RSome(r) => Some(r.as_slice()),
                ROption::RNone => {
                    return Err(format!(
                        "kl_coef = {} needs reference log-probs, but the batch has no ref_logp \
                         (give the run a reference model, or set kl_coef = 0)",
                        self.kl_coef
                    ))
                }
            }
        } else {
            None
        };
        let tis_on = self.tis_cap > 0.0;
        let mean = SampleMean::new(batch);
        let n = batch.num_tokens();

        let mut grad = vec![0.0f32; n];
        let mut pg_loss = 0.0;
        let mut kl_loss = 0.0;
        let mut clipped = vec![false; n];
        let mut tis = vec![1.0f64; n];
        for t in 0..n {
            let w = mean.weight(t);
            // Masked tokens are left out entirely, so junk values there cannot turn the loss
            // into NaN through 0 * inf.
            if w == 0.0 {
                continue;
            }
            let tok = math::ppo_clip(
                batch.logp[t],
                batch.old_logp[t],
                advantages[t],
                self.eps_clip,
                self.eps_clip_high,
            );
            clipped[t] = tok.clipped;
            if tis_on {
                // A constant with respect to logp: it scales the token's loss and gradient.
                tis[t] = math::truncated_importance_weight(
                    batch.old_logp[t],
                    batch.rollout_logp[t],
                    self.tis_cap,
                );
            }
            pg_loss += w * tis[t] * tok.loss;
            let mut g = tis[t] * tok.grad;
            if let Some(r) = ref_logp {
                let (kl, dkl) = math::k3_kl(batch.logp[t], r[t]);
                kl_loss += w * kl;
                g += self.kl_coef as f64 * dkl;
            }
            grad[t] = (w * g) as f32;
        }
        let loss = pg_loss + self.kl_coef as f64 * kl_loss;
        if !loss.is_finite() {
            return Err(non_finite(batch, advantages, loss));
        }

        let mut metrics = vec![
            Metric::new("pg_loss", pg_loss),
            Metric::new(
                "pg_clipfrac",
                mean.token_mean(|t| if clipped[t] { 1.0 } else { 0.0 }),
            ),
            Metric::new(
                "ppo_kl",
                mean.token_mean(|t| batch.old_logp[t] as f64 - batch.logp[t] as f64),
            ),
            Metric::new("mean_advantage", mean.token_mean(|t| advantages[t] as f64)),
            Metric::new(
                "train_rollout_logprob_abs_diff",
                mean.token_mean(|t| (batch.logp[t] as f64 - batch.rollout_logp[t] as f64).abs()),
            ),
        ];
        if ref_logp.is_some() {
            metrics.push(Metric::new("kl_loss", kl_loss));
        }
        if tis_on {
            metrics.push(Metric::new("tis_mean", mean.token_mean(|t| tis[t])));
        }
        Ok(LossOutput {
            loss,
            grad_logp: grad.into(),
            grad_topk: Default::default(),
            metrics: metrics.into(),
        })
    }
}

/// An error that points at the first unmasked token with a non-finite input.
fn non_finite(batch: &LossBatch, advantages: &[f32], loss: f64) -> String {
    let bad = (0..batch.num_tokens()).find(|&t| {
        batch.loss_mask[t] != 0.0
            && !(batch.logp[t].is_finite()
                && batch.old_logp[t].is_finite()
                && batch.rollout_logp[t].is_finite()
                && advantages[t].is_finite())
    });
    match bad {
        Some(t) => format!(
            "the loss is {loss}: token {t} has logp {}, old_logp {}, rollout_logp {}, advantage {}",
            batch.logp[t], batch.old_logp[t], batch.rollout_logp[t], advantages[t]
        ),
        None => format!("the loss is {loss}: an input (ref_logp?) is not finite"),
    }
}

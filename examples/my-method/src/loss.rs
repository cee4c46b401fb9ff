//! The loss itself.
//!
//! The host runs the policy, hands the loss a [`LossBatch`] of per-token numbers, and gets
//! back the loss value and dL/d`logp` for every token. It then backpropagates
//! `sum(grad · logp)` through the model, so the plugin never sees a tensor: it only has to
//! get its derivative right (the tests below check it against finite differences).
//!
//! This loss, for token `t` of sample `i` with reward `R_i`:
//!
//! ```text
//! ratio_t  = exp(logp_t - old_logp_t)
//! pg_t     = max(-ratio_t · R_i, -clamp(ratio_t, 1 - eps, 1 + eps) · R_i)
//! kl_t     = exp(a_t - logp_t) - 1 - (a_t - logp_t)      a = ref_logp, or old_logp without one
//! loss     = Σ_i mean_{t in i, unmasked}(pg_t + kl_coef · kl_t) / step_samples
//! ```

use crate::config::MyConfig;
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::math::SampleMean;
use openclaw_plugin_api::{
    HostServices, Loss, LossBatch, LossInputs, LossOutput, Metric, PluginResult,
};

/// A clipped policy-gradient loss on the per-sample reward with a KL penalty.
pub struct MyLoss {
    config: MyConfig,
}

impl Loss for MyLoss {
    // Says which inputs the host must compute: here the reference log-probabilities, only when
    // the KL penalty is on (the reference model is a second copy of the weights).
    fn inputs(config: &str) -> PluginResult<LossInputs> {
        Ok(LossInputs {
            reference_logprobs: MyConfig::parse(config)?.kl_coef > 0.0,
            teacher_logprobs: false,
        })
    }

    // Called once when the host loads the plugin. `_host` offers logging, the policy, the
    // teacher and the judge; a loss needs none of them.
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Ok(MyLoss {
            config: MyConfig::parse(config)?,
        })
    }

    // Called for every micro-batch. Errors fail the training step with this message.
    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        // Always check the array lengths first; everything below indexes freely.
        batch.validate()?;
        let eps = self.config.clip_eps as f64;
        let kl_coef = self.config.kl_coef as f64;

        // The KL anchor: the frozen reference model when the host computed it, otherwise the
        // policy at the start of this step (which keeps each update small).
        let anchor: &[f32] = match &batch.ref_logp {
            ROption::RSome(r) => r,
            ROption::RNone => &batch.old_logp,
        };

        // SampleMean gives each token its weight: a mean over each sample's unmasked tokens,
        // summed over samples, divided by the step's sample count. Multiplying each token's
        // loss and gradient by it is the whole reduction.
        let mean = SampleMean::new(batch);

        let mut grad = vec![0.0f32; batch.num_tokens()];
        let mut clipped = vec![false; batch.num_tokens()];
        let (mut pg_loss, mut kl_loss) = (0.0, 0.0);
        for i in 0..batch.num_samples() {
            let advantage = batch.rewards[i] as f64;
            for t in batch.sample_range(i) {
                let w = mean.weight(t);
                if w == 0.0 {
                    continue; // a masked token: no loss, no gradient
                }
                let logp = batch.logp[t] as f64;

                // Policy gradient with PPO clipping. d ratio / d logp = ratio.
                let ratio = (logp - batch.old_logp[t] as f64).exp();
                let unclipped = -ratio * advantage;
                let clip = -ratio.clamp(1.0 - eps, 1.0 + eps) * advantage;
                let (pg, d_pg) = if clip > unclipped {
                    // The clipped branch is a constant: this token stops pushing.
                    clipped[t] = true;
                    (clip, 0.0)
                } else {
                    (unclipped, -ratio * advantage)
                };

                // KL penalty, the low-variance "k3" estimator: always >= 0, and 0 at logp = a.
                let d = anchor[t] as f64 - logp;
                let kl = d.exp() - 1.0 - d;
                let d_kl = 1.0 - d.exp();

                pg_loss += w * pg;
                kl_loss += w * kl;
                grad[t] = (w * (d_pg + kl_coef * d_kl)) as f32;
            }
        }
        let loss = pg_loss + kl_coef * kl_loss;
        if !loss.is_finite() {
            return Err(format!(
                "the loss is {loss}: an unmasked input is not finite"
            ));
        }

        // Metrics go to the training log under these names.
        let owner = batch.token_samples(); // the sample of each token
        let metrics = vec![
            Metric::new("pg_loss", pg_loss),
            Metric::new("kl_loss", kl_loss),
            Metric::new(
                "pg_clipfrac",
                mean.token_mean(|t| if clipped[t] { 1.0 } else { 0.0 }),
            ),
            Metric::new(
                "ppo_kl",
                mean.token_mean(|t| (batch.old_logp[t] - batch.logp[t]) as f64),
            ),
            Metric::new(
                "mean_advantage",
                mean.token_mean(|t| batch.rewards[owner[t]] as f64),
            ),
            Metric::new(
                "train_rollout_logprob_abs_diff",
                mean.token_mean(|t| (batch.logp[t] - batch.rollout_logp[t]).abs() as f64),
            ),
        ];
        Ok(LossOutput {
            loss,
            grad_logp: grad.into(),
            grad_topk: Default::default(), // no top-k term in this loss
            metrics: metrics.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::math::check_gradient;
    use openclaw_plugin_api::testing::{assert_good, random_batch};

    fn loss(config: &str) -> MyLoss {
        MyLoss::new(config, HostServices::standalone()).unwrap()
    }

    fn metric(out: &LossOutput, name: &str) -> f64 {
        out.metrics
            .iter()
            .find(|m| m.name.as_str() == name)
            .unwrap()
            .value
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    /// Three samples (the second has no tokens), one masked token, step_samples 4 > 3.
    ///
    /// | token | sample | reward | logp | old  | mask | logp - old |
    /// |-------|--------|--------|------|------|------|------------|
    /// | 0     | 0      | 1      | -1.0 | -1.1 | 1    | 0.1        |
    /// | 1     | 0      | 1      | -0.5 | -1.0 | 1    | 0.5        |
    /// | 2     | 0      | 1      | -2.0 | -1.0 | 0    | (masked)   |
    /// | 3     | 2      | -1     | -1.2 | -1.0 | 1    | -0.2       |
    /// | 4     | 2      | -1     | -0.5 | -1.0 | 1    | 0.5        |
    fn hand_batch() -> LossBatch {
        LossBatch {
            sample_offsets: vec![0, 3, 3, 5].into(),
            logp: vec![-1.0, -0.5, -2.0, -1.2, -0.5].into(),
            old_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.0].into(),
            rollout_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.1].into(),
            loss_mask: vec![1.0, 1.0, 0.0, 1.0, 1.0].into(),
            rewards: vec![1.0, 0.0, -1.0].into(),
            group_ids: vec![0, 1, 2].into(),
            step_samples: 4,
            ..Default::default()
        }
    }

    #[test]
    fn hand_computed_loss_and_gradient() {
        let out = loss("").compute(&hand_batch()).unwrap();
        // Weights: 2 unmasked tokens per sample, 4 samples per step -> 1/(2·4) = 0.125.
        // Policy gradient (clip to [0.8, 1.2]):
        //   t0: ratio e^0.1 = 1.10517, R = 1  -> -1.10517, grad -1.10517
        //   t1: ratio e^0.5 = 1.64872 > 1.2, R = 1 -> clipped -1.2, grad 0
        //   t3: ratio e^-0.2 = 0.81873, R = -1 -> 0.81873, grad 0.81873
        //   t4: ratio 1.64872, R = -1 -> -r·R = 1.64872 > 1.2 -> unclipped, grad 1.64872
        // KL against old_logp (no ref_logp): d = old - logp = -0.1, -0.5, 0.2, -0.5
        //   kl = e^d - 1 - d: 0.0048374, 0.1065307, 0.0214028, 0.1065307
        //   dkl/dlogp = 1 - e^d: 0.0951626, 0.3934693, -0.2214028, 0.3934693
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let kl = |d: f64| d.exp() - 1.0 - d;
        let dkl = |d: f64| 1.0 - d.exp();
        let pg = 0.125 * (-r01 - 1.2) + 0.125 * (rm02 + r05);
        let kl_total = 0.125 * (kl(-0.1) + kl(-0.5)) + 0.125 * (kl(0.2) + kl(-0.5));
        assert!(close(
            kl_total,
            0.125 * (0.0048374 + 0.1065307 + 0.0214028 + 0.1065307)
        ));
        assert!(close(out.loss, pg + 0.02 * kl_total), "{}", out.loss);
        let want = [
            0.125 * (-r01 + 0.02 * dkl(-0.1)),
            0.125 * (0.0 + 0.02 * dkl(-0.5)),
            0.0,
            0.125 * (rm02 + 0.02 * dkl(0.2)),
            0.125 * (r05 + 0.02 * dkl(-0.5)),
        ];
        for (t, (&g, w)) in out.grad_logp.iter().zip(want).enumerate() {
            assert!(close(g as f64, w), "grad[{t}] = {g}, want {w}");
        }
        assert!(close(metric(&out, "pg_loss"), pg));
        assert!(close(metric(&out, "kl_loss"), kl_total));
        assert!(close(metric(&out, "pg_clipfrac"), 0.25));
        assert!(close(metric(&out, "ppo_kl"), -0.225));
        assert!(close(metric(&out, "mean_advantage"), 0.0));
        assert!(close(metric(&out, "train_rollout_logprob_abs_diff"), 0.35));
    }

    #[test]
    fn the_reference_model_is_the_anchor_when_present() {
        let mut b = hand_batch();
        // ref = logp everywhere: the KL term and its gradient vanish.
        b.ref_logp = ROption::RSome(b.logp.clone());
        let out = loss("").compute(&b).unwrap();
        assert!(close(metric(&out, "kl_loss"), 0.0));
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        assert!(close(out.loss, 0.125 * (-r01 - 1.2) + 0.125 * (rm02 + r05)));
    }

    #[test]
    fn invalid_batches_are_rejected() {
        let mut b = hand_batch();
        b.loss_mask.pop();
        assert!(loss("").compute(&b).unwrap_err().contains("loss_mask"));
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let l = loss("kl_coef = 0.1");
        for seed in 0..20 {
            // Random batches from the plugin API's test helpers: empty samples, masked tokens,
            // ratios on both sides of the clip. Half of them without a reference model.
            let mut b = random_batch(seed);
            if seed % 2 == 1 {
                b.ref_logp = ROption::RNone;
            }
            let check = check_gradient(&|b| l.compute(b), &b, 1e-3).unwrap();
            // Passes at 1e-3 relative error, with few kinks (clip boundaries) skipped.
            assert_good(&check, &format!("seed {seed}"));
        }
    }
}

//! The combined loss: weighted teacher and reward advantages through the clipped surrogate.

use crate::advantage::AdvantageParts;
use crate::config::CombineConfig;
use openclaw_plugin_api::math::SampleMean;
use openclaw_plugin_api::surrogate::ClippedSurrogate;
use openclaw_plugin_api::{
    HostServices, Loss, LossBatch, LossInputs, LossOutput, Metric, PluginResult,
};

/// PPO-clip on `w_opd·(teacher_logp - old_logp) + w_rl·A_rl`.
#[derive(Clone, Debug)]
pub struct CombineLoss {
    config: CombineConfig,
    surrogate: ClippedSurrogate,
}

impl CombineLoss {
    /// The loss for an already parsed configuration; validates it.
    pub fn from_config(config: CombineConfig) -> Result<Self, String> {
        config.validate()?;
        let surrogate = config.surrogate();
        Ok(CombineLoss { config, surrogate })
    }

    /// The configuration in use.
    pub fn config(&self) -> &CombineConfig {
        &self.config
    }
}

impl Loss for CombineLoss {
    fn inputs(config: &str) -> PluginResult<LossInputs> {
        let c = CombineConfig::parse(config)?;
        Ok(LossInputs {
            reference_logprobs: c.kl_coef > 0.0,
            // The distillation part reads the hinted teacher's log-probabilities.
            teacher_logprobs: c.w_opd != 0.0,
        })
    }

    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Self::from_config(CombineConfig::parse(config)?)
    }

    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        batch.validate()?;
        let parts = AdvantageParts::new(batch, self.config.group_norm, self.config.center_teacher);
        let advantages = parts.combine(self.config.w_opd, self.config.w_rl);
        let mut out = self.surrogate.compute(batch, &advantages)?;
        // The two terms separately, unweighted: shows which signal drives the update.
        let mean = SampleMean::new(batch);
        out.metrics.push(Metric::new(
            "mean_teacher_advantage",
            mean.token_mean(|t| parts.teacher[t] as f64),
        ));
        out.metrics.push(Metric::new(
            "mean_reward_advantage",
            mean.token_mean(|t| parts.reward[t] as f64),
        ));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::abi_stable::std_types::ROption;
    use openclaw_plugin_api::math::check_gradient;
    use openclaw_plugin_api::testing::{assert_good, metric, random_batch};

    fn loss(text: &str) -> CombineLoss {
        CombineLoss::new(text, HostServices::standalone()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    fn assert_grad(out: &LossOutput, want: &[f64]) {
        assert_eq!(out.grad_logp.len(), want.len());
        for (t, (&g, &w)) in out.grad_logp.iter().zip(want).enumerate() {
            assert!(close(g as f64, w), "grad[{t}] = {g}, want {w}");
        }
    }

    /// Three samples, the second empty, the third without a teacher; step_samples 4.
    ///
    /// | token | sample | logp | old  | teacher | mask | logp - old | teacher - old | reward |
    /// |-------|--------|------|------|---------|------|------------|---------------|--------|
    /// | 0     | 0      | -1.0 | -1.1 | -0.6    | 1    | 0.1        | 0.5           | 1      |
    /// | 1     | 0      | -0.5 | -1.0 | -1.5    | 1    | 0.5        | -0.5          | 1      |
    /// | 2     | 0      | -2.0 | -1.0 | -3.0    | 0    | (masked)   |               | 1      |
    /// | 3     | 2      | -1.2 | -1.0 | -0.1    | 1    | -0.2       | (no teacher)  | -1     |
    /// | 4     | 2      | -0.5 | -1.0 | -0.1    | 1    | 0.5        | (no teacher)  | -1     |
    fn hand_batch() -> LossBatch {
        LossBatch {
            sample_offsets: vec![0, 3, 3, 5].into(),
            logp: vec![-1.0, -0.5, -2.0, -1.2, -0.5].into(),
            old_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.0].into(),
            rollout_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.1].into(),
            teacher_logp: ROption::RSome(vec![-0.6, -1.5, -3.0, -0.1, -0.1].into()),
            teacher_present: vec![true, true, false].into(),
            loss_mask: vec![1.0, 1.0, 0.0, 1.0, 1.0].into(),
            rewards: vec![1.0, 0.0, -1.0].into(),
            group_ids: vec![0, 1, 2].into(),
            step_samples: 4,
            ..Default::default()
        }
    }

    // Ratios: e^0.1 = 1.1051709, e^0.5 = 1.6487213, e^-0.2 = 0.8187308.
    // Each non-empty sample has 2 unmasked tokens, step_samples 4: weights 1/(2·4) = 0.125.

    #[test]
    fn hand_computed_default_weights() {
        let out = loss("").compute(&hand_batch()).unwrap();
        // A = 1·(teacher - old) + 1·r: t0 0.5 + 1 = 1.5, t1 -0.5 + 1 = 0.5, t3 -1, t4 -1.
        // t0: r = 1.10517 in [0.8, 1.28] -> loss -1.5·1.10517 = -1.65776, grad the same
        // t1: r = 1.64872 > 1.28, A > 0 -> clipped: loss -1.28·0.5 = -0.64, grad 0
        // t3: r = 0.81873, A = -1 -> loss 0.81873, grad 0.81873
        // t4: r = 1.64872, A = -1 -> -r·A = 1.64872 > 1.28 -> unclipped, grad 1.64872
        // loss = 0.125·(-1.65776 - 0.64) + 0.125·(0.81873 + 1.64872) = 0.021212
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (-1.5 * r01 - 0.64) + 0.125 * (rm02 + r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert!(close(want, 0.0212120), "{want}");
        assert_grad(
            &out,
            &[0.125 * -1.5 * r01, 0.0, 0.0, 0.125 * rm02, 0.125 * r05],
        );
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.25));
        // (1.5 + 0.5 - 1 - 1) / 4 = 0
        assert!(close(metric(&out, "mean_advantage").unwrap(), 0.0));
        // teacher terms: (0.5 - 0.5 + 0 + 0) / 4 = 0; reward terms: (1 + 1 - 1 - 1) / 4 = 0
        assert!(close(metric(&out, "mean_teacher_advantage").unwrap(), 0.0));
        assert!(close(metric(&out, "mean_reward_advantage").unwrap(), 0.0));
        assert!(close(metric(&out, "ppo_kl").unwrap(), -0.225));
        assert!(close(
            metric(&out, "train_rollout_logprob_abs_diff").unwrap(),
            0.35
        ));
    }

    #[test]
    fn hand_computed_custom_weights() {
        let out = loss("w_opd = 2.0\nw_rl = 0.5")
            .compute(&hand_batch())
            .unwrap();
        // A = 2·(teacher - old) + 0.5·r: t0 1 + 0.5 = 1.5, t1 -1 + 0.5 = -0.5, t3 -0.5, t4 -0.5.
        // t0: loss -1.5·1.10517 = -1.65776, grad the same
        // t1: r = 1.64872, A < 0 -> -r·A = 0.82436 > -1.28·A = 0.64 -> unclipped, grad 0.82436
        // t3: r = 0.81873 >= 0.8 -> loss 0.5·0.81873 = 0.40937, grad the same
        // t4: like t1: 0.82436
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (-1.5 * r01 + 0.5 * r05) + 0.125 * (0.5 * rm02 + 0.5 * r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert_grad(
            &out,
            &[
                0.125 * -1.5 * r01,
                0.125 * 0.5 * r05,
                0.0,
                0.125 * 0.5 * rm02,
                0.125 * 0.5 * r05,
            ],
        );
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.0));
        // (1.5 - 0.5 - 0.5 - 0.5) / 4 = 0
        assert!(close(metric(&out, "mean_advantage").unwrap(), 0.0));
    }

    #[test]
    fn a_batch_without_teacher_is_pure_rl() {
        let mut b = hand_batch();
        b.teacher_logp = ROption::RNone;
        let out = loss("").compute(&b).unwrap();
        // A = r: t0 1, t1 1 (clipped at -1.28), t3 -1, t4 -1.
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (-r01 - 1.28) + 0.125 * (rm02 + r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
    }

    #[test]
    fn kl_without_reference_is_an_error() {
        let e = loss("kl_coef = 0.02").compute(&hand_batch()).unwrap_err();
        assert!(e.contains("kl_coef") && e.contains("ref_logp"), "{e}");
    }

    #[test]
    fn invalid_batches_are_rejected() {
        let mut b = hand_batch();
        b.group_ids.pop();
        let e = loss("").compute(&b).unwrap_err();
        assert!(e.contains("group_ids"), "{e}");
    }

    #[test]
    fn gradients_match_finite_differences() {
        let configs = [
            "",
            "w_opd = 0.5\nw_rl = 2.0\ngroup_norm = \"center\"",
            "kl_coef = 0.2\ntis_cap = 1.5\ngroup_norm = \"center_scale\"",
        ];
        let mut nonzero = 0;
        for text in configs {
            let l = loss(text);
            for seed in 0..12 {
                let b = random_batch(seed);
                nonzero += l
                    .compute(&b)
                    .unwrap()
                    .grad_logp
                    .iter()
                    .filter(|g| **g != 0.0)
                    .count();
                let check = check_gradient(&|b| l.compute(b), &b, 1e-3).unwrap();
                assert_good(&check, &format!("config {text:?}, seed {seed}"));
            }
        }
        assert!(nonzero > 300, "{nonzero}");
    }
}

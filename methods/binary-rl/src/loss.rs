//! The binary RL loss: reward advantages through the clipped surrogate.

use crate::advantage::reward_advantages;
use crate::config::BinaryRlConfig;
use openclaw_plugin_api::surrogate::ClippedSurrogate;
use openclaw_plugin_api::{HostServices, Loss, LossBatch, LossInputs, LossOutput, PluginResult};

/// PPO-clip on per-sample reward advantages (or the batch's precomputed advantages).
#[derive(Clone, Debug)]
pub struct BinaryRlLoss {
    config: BinaryRlConfig,
    surrogate: ClippedSurrogate,
}

impl BinaryRlLoss {
    /// The loss for an already parsed configuration; validates it.
    pub fn from_config(config: BinaryRlConfig) -> Result<Self, String> {
        config.validate()?;
        let surrogate = config.surrogate();
        Ok(BinaryRlLoss { config, surrogate })
    }

    /// The configuration in use.
    pub fn config(&self) -> &BinaryRlConfig {
        &self.config
    }
}

impl Loss for BinaryRlLoss {
    fn inputs(config: &str) -> PluginResult<LossInputs> {
        // The reference model only for a KL term.
        Ok(LossInputs {
            reference_logprobs: BinaryRlConfig::parse(config)?.kl_coef > 0.0,
            teacher_logprobs: false,
        })
    }

    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Self::from_config(BinaryRlConfig::parse(config)?)
    }

    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        batch.validate()?;
        let advantages = reward_advantages(batch, self.config.group_norm);
        self.surrogate.compute(batch, &advantages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::abi_stable::std_types::ROption;
    use openclaw_plugin_api::math::{check_gradient, GroupNorm};
    use openclaw_plugin_api::testing::{assert_good, metric, random_batch};

    fn loss(text: &str) -> BinaryRlLoss {
        BinaryRlLoss::new(text, HostServices::standalone()).unwrap()
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

    /// Three samples, the second empty; step_samples 4 > 3 samples.
    ///
    /// | token | sample | logp | old  | rollout | mask | logp - old |
    /// |-------|--------|------|------|---------|------|------------|
    /// | 0     | 0      | -1.0 | -1.1 | -1.1    | 1    | 0.1        |
    /// | 1     | 0      | -0.5 | -1.0 | -1.0    | 1    | 0.5        |
    /// | 2     | 0      | -2.0 | -1.0 | -1.0    | 0    | (masked)   |
    /// | 3     | 2      | -1.2 | -1.0 | -1.0    | 1    | -0.2       |
    /// | 4     | 2      | -0.5 | -1.0 | -1.1    | 1    | 0.5        |
    fn hand_batch() -> LossBatch {
        LossBatch {
            sample_offsets: vec![0, 3, 3, 5].into(),
            logp: vec![-1.0, -0.5, -2.0, -1.2, -0.5].into(),
            old_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.0].into(),
            rollout_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.1].into(),
            loss_mask: vec![1.0, 1.0, 0.0, 1.0, 1.0].into(),
            rewards: vec![1.0, -1.0, -1.0].into(),
            group_ids: vec![0, 1, 2].into(),
            step_samples: 4,
            ..Default::default()
        }
    }

    // Ratios: e^0.1 = 1.1051709, e^0.5 = 1.6487213, e^-0.2 = 0.8187308.
    // Each sample has 2 unmasked tokens and step_samples = 4: every weight is 1/(2·4) = 0.125.

    #[test]
    fn hand_computed_default_loss() {
        let out = loss("").compute(&hand_batch()).unwrap();
        // group_norm none: A = r, so sample 0 has A = 1 and sample 2 has A = -1.
        // t0: r = 1.10517 in [0.8, 1.28]  -> loss -r·A = -1.10517, grad -1.10517
        // t1: r = 1.64872 > 1.28, A > 0   -> clipped: loss -1.28, grad 0
        // t3: r = 0.81873 >= 0.8, A < 0   -> loss 0.81873, grad 0.81873
        // t4: r = 1.64872, A < 0: -r·A = 1.64872 > -1.28·A = 1.28 -> unclipped, grad 1.64872
        // loss = 0.125·(-1.10517 - 1.28) + 0.125·(0.81873 + 1.64872) = 0.125·0.08228 = 0.010285
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (-r01 - 1.28) + 0.125 * (rm02 + r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert!(close(want, 0.0102851), "{want}");
        assert_grad(&out, &[-0.125 * r01, 0.0, 0.0, 0.125 * rm02, 0.125 * r05]);
        assert!(close(metric(&out, "pg_loss").unwrap(), want));
        // One of four unmasked tokens (t1) took the clipped branch.
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.25));
        // old - logp over unmasked: (-0.1 - 0.5 + 0.2 - 0.5) / 4 = -0.225
        assert!(close(metric(&out, "ppo_kl").unwrap(), -0.225));
        // (1 + 1 - 1 - 1) / 4 = 0
        assert!(close(metric(&out, "mean_advantage").unwrap(), 0.0));
        // |logp - rollout|: (0.1 + 0.5 + 0.2 + 0.6) / 4 = 0.35
        assert!(close(
            metric(&out, "train_rollout_logprob_abs_diff").unwrap(),
            0.35
        ));
        assert_eq!(metric(&out, "kl_loss"), None);
        assert_eq!(metric(&out, "tis_mean"), None);
        assert!(out.grad_topk.is_empty());
    }

    #[test]
    fn hand_computed_kl_penalty() {
        let mut b = hand_batch();
        // ref - logp: t0 0, t1 -1, t3 1, t4 0 (t2 is masked).
        b.ref_logp = ROption::RSome(vec![-1.0, -1.5, 0.0, -0.2, -0.5].into());
        let out = loss("kl_coef = 0.5").compute(&b).unwrap();
        // k3 = e^d - 1 - d with d = ref - logp; dk3/dlogp = 1 - e^d.
        // t1: e^-1 - 1 + 1 = 0.36788, grad 1 - 0.36788 = 0.63212
        // t3: e^1 - 1 - 1 = 0.71828, grad 1 - e = -1.71828
        // kl_loss = 0.125·0.36788 + 0.125·0.71828 = 0.135770
        let e = 1f64.exp();
        let kl = 0.125 * ((1.0 / e) + (e - 2.0));
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let pg = 0.125 * (-r01 - 1.28) + 0.125 * (rm02 + r05);
        assert!(close(metric(&out, "kl_loss").unwrap(), kl));
        assert!(close(kl, 0.1357702), "{kl}");
        // loss = pg + 0.5·kl = 0.010285 + 0.067885 = 0.078170
        assert!(close(out.loss, pg + 0.5 * kl), "{}", out.loss);
        assert_grad(
            &out,
            &[
                0.125 * -r01,
                0.125 * (0.5 * (1.0 - 1.0 / e)),
                0.0,
                0.125 * (rm02 + 0.5 * (1.0 - e)),
                0.125 * r05,
            ],
        );
    }

    #[test]
    fn hand_computed_truncated_importance_weight() {
        let mut b = hand_batch();
        b.rollout_logp = vec![-1.1, -1.0, -1.0, -1.5, -0.9].into();
        let out = loss("tis_cap = 1.5").compute(&b).unwrap();
        // w = min(e^(old - rollout), 1.5): t0 e^0 = 1, t1 1, t3 e^0.5 = 1.6487 -> 1.5,
        // t4 e^-0.1 = 0.904837.
        let w4 = (-0.1f64).exp();
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        // loss = 0.125·(-1.10517·1 - 1.28·1) + 0.125·(0.81873·1.5 + 1.64872·0.90484) = 0.041844
        let want = 0.125 * (-r01 - 1.28) + 0.125 * (1.5 * rm02 + w4 * r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert!(close(want, 0.0418437), "{want}");
        assert_grad(
            &out,
            &[-0.125 * r01, 0.0, 0.0, 0.125 * 1.5 * rm02, 0.125 * w4 * r05],
        );
        // (1 + 1 + 1.5 + 0.904837) / 4
        assert!(close(metric(&out, "tis_mean").unwrap(), (3.5 + w4) / 4.0));
    }

    #[test]
    fn hand_computed_group_centring_counts_the_empty_sample() {
        let mut b = hand_batch();
        b.group_ids = vec![7, 7, 7].into();
        let out = loss("group_norm = \"center\"").compute(&b).unwrap();
        // mean(1, -1, -1) = -1/3: A0 = 4/3, A2 = -2/3 (the empty sample still has a reward).
        // t1 is still clipped (A > 0, r > 1.28): loss -1.28·4/3.
        let (r01, r05, rm02) = (0.1f64.exp(), 0.5f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (4.0 / 3.0) * (-r01 - 1.28) + 0.125 * (2.0 / 3.0) * (rm02 + r05);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        // (4/3 + 4/3 - 2/3 - 2/3) / 4 = 1/3
        assert!(close(metric(&out, "mean_advantage").unwrap(), 1.0 / 3.0));
    }

    #[test]
    fn precomputed_advantages_are_used_as_given() {
        let mut b = hand_batch();
        b.advantages = vec![2.0, -0.5, 9.0, 0.0, 1.0].into();
        let out = loss("group_norm = \"center_scale\"").compute(&b).unwrap();
        // t0: r = 1.10517, A = 2 -> -2.21034, grad -2.21034
        // t1: r = 1.64872, A = -0.5 -> -r·A = 0.82436 > -1.28·A = 0.64 -> unclipped
        // t3: A = 0 -> 0; t4: r = 1.64872 > 1.28, A = 1 -> clipped at -1.28
        let (r01, r05) = (0.1f64.exp(), 0.5f64.exp());
        let want = 0.125 * (-2.0 * r01 + 0.5 * r05) + 0.125 * (0.0 - 1.28);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert_grad(&out, &[-0.25 * r01, 0.125 * 0.5 * r05, 0.0, 0.0, 0.0]);
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.25));
    }

    #[test]
    fn kl_without_reference_is_an_error() {
        let e = loss("kl_coef = 0.1").compute(&hand_batch()).unwrap_err();
        assert!(e.contains("kl_coef") && e.contains("ref_logp"), "{e}");
        // Without the penalty the missing reference is fine.
        loss("kl_coef = 0.0").compute(&hand_batch()).unwrap();
    }

    #[test]
    fn invalid_batches_are_rejected() {
        let mut b = hand_batch();
        b.rollout_logp.pop();
        let e = loss("").compute(&b).unwrap_err();
        assert!(e.contains("rollout_logp"), "{e}");
        let mut b = hand_batch();
        b.step_samples = 0;
        assert!(loss("").compute(&b).unwrap_err().contains("step_samples"));
    }

    #[test]
    fn non_finite_inputs_are_an_error_not_a_nan_loss() {
        let mut b = hand_batch();
        b.old_logp[3] = f32::NEG_INFINITY;
        let e = loss("").compute(&b).unwrap_err();
        assert!(e.contains("token 3"), "{e}");
        // A non-finite value under a masked token is ignored.
        let mut b = hand_batch();
        b.old_logp[2] = f32::NAN;
        assert!(loss("").compute(&b).unwrap().loss.is_finite());
    }

    #[test]
    fn bad_configs_fail_construction() {
        let e = BinaryRlLoss::new("eps_clip_high = 2.0", HostServices::standalone())
            .err()
            .unwrap();
        assert!(e.contains("eps_clip_high = 2"), "{e}");
    }

    #[test]
    fn gradients_match_finite_differences() {
        let configs = [
            "",
            "group_norm = \"center\"",
            "group_norm = \"center_scale\"\nkl_coef = 0.1",
            "kl_coef = 0.3\ntis_cap = 1.5",
            "eps_clip = 0.1\neps_clip_high = 0.1\ntis_cap = 3.0",
        ];
        let mut nonzero = 0;
        for text in configs {
            let l = loss(text);
            for seed in 0..12 {
                let b = random_batch(seed);
                let out = l.compute(&b).unwrap();
                nonzero += out.grad_logp.iter().filter(|g| **g != 0.0).count();
                let check = check_gradient(&|b| l.compute(b), &b, 1e-3).unwrap();
                assert_good(&check, &format!("config {text:?}, seed {seed}"));
            }
        }
        // The checks compared real slopes, not only clipped (flat) tokens.
        assert!(nonzero > 500, "{nonzero}");
    }

    #[test]
    fn precomputed_group_norm_matches_math_helper() {
        // The per-sample advantage equals the helper's, broadcast.
        let b = random_batch(3);
        let per_sample = openclaw_plugin_api::math::group_advantages(
            &b.rewards,
            &b.group_ids,
            GroupNorm::Center,
        );
        let adv = reward_advantages(&b, GroupNorm::Center);
        for (t, s) in b.token_samples().into_iter().enumerate() {
            assert_eq!(adv[t], per_sample[s]);
        }
    }
}

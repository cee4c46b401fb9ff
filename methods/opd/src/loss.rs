//! The OPD loss: dispatches on the configured mode.

use crate::config::{Mode, OpdConfig};
use crate::token::teacher_advantages;
use crate::topk::topk_distillation;
use openclaw_plugin_api::surrogate::ClippedSurrogate;
use openclaw_plugin_api::{HostServices, Loss, LossBatch, LossInputs, LossOutput, PluginResult};

/// On-policy distillation: token-level PPO-clip on teacher advantages, or top-k reverse KL.
#[derive(Clone, Debug)]
pub struct OpdLoss {
    config: OpdConfig,
    surrogate: ClippedSurrogate,
}

impl OpdLoss {
    /// The loss for an already parsed configuration; validates it.
    pub fn from_config(config: OpdConfig) -> Result<Self, String> {
        config.validate()?;
        let surrogate = config.surrogate();
        Ok(OpdLoss { config, surrogate })
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpdConfig {
        &self.config
    }
}

impl Loss for OpdLoss {
    fn inputs(config: &str) -> PluginResult<LossInputs> {
        Ok(LossInputs {
            reference_logprobs: OpdConfig::parse(config)?.kl_coef > 0.0,
            teacher_logprobs: true,
        })
    }

    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Self::from_config(OpdConfig::parse(config)?)
    }

    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        batch.validate()?;
        match self.config.mode {
            Mode::Token => self.surrogate.compute(batch, &teacher_advantages(batch)?),
            Mode::Topk => topk_distillation(batch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topk::TopkRow;
    use openclaw_plugin_api::abi_stable::std_types::ROption;
    use openclaw_plugin_api::math::check_gradient;
    use openclaw_plugin_api::testing::{assert_good, metric, random_batch, random_topk_batch};
    use openclaw_plugin_api::TopKBatch;

    fn loss(text: &str) -> OpdLoss {
        OpdLoss::new(text, HostServices::standalone()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    fn assert_all_close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(close(g as f64, w), "[{i}] = {g}, want {w}");
        }
    }

    /// Three samples, the second empty, the third without a teacher; step_samples 4.
    ///
    /// | token | sample | logp | old  | teacher | mask | logp - old | teacher - old |
    /// |-------|--------|------|------|---------|------|------------|---------------|
    /// | 0     | 0      | -1.0 | -1.1 | -0.6    | 1    | 0.1        | 0.5           |
    /// | 1     | 0      | -0.5 | -1.0 | -0.5    | 1    | 0.5        | 0.5           |
    /// | 2     | 0      | -2.0 | -1.0 | -3.0    | 0    | (masked)   |               |
    /// | 3     | 2      | -1.2 | -1.0 | -0.1    | 1    | -0.2       | (no teacher)  |
    /// | 4     | 2      | -0.5 | -1.0 | -0.1    | 1    | 0.5        | (no teacher)  |
    fn hand_batch() -> LossBatch {
        LossBatch {
            sample_offsets: vec![0, 3, 3, 5].into(),
            logp: vec![-1.0, -0.5, -2.0, -1.2, -0.5].into(),
            old_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.0].into(),
            rollout_logp: vec![-1.1, -1.0, -1.0, -1.0, -1.1].into(),
            teacher_logp: ROption::RSome(vec![-0.6, -0.5, -3.0, -0.1, -0.1].into()),
            teacher_present: vec![true, true, false].into(),
            loss_mask: vec![1.0, 1.0, 0.0, 1.0, 1.0].into(),
            rewards: vec![1.0, -1.0, -1.0].into(),
            group_ids: vec![0, 1, 2].into(),
            step_samples: 4,
            ..Default::default()
        }
    }

    #[test]
    fn hand_computed_token_mode() {
        let out = loss("").compute(&hand_batch()).unwrap();
        // Each sample has 2 unmasked tokens, step_samples 4: weights 1/(2·4) = 0.125.
        // t0: r = e^0.1 = 1.10517 in [0.8, 1.2], A = 0.5 -> loss -0.55259, grad -0.55259
        // t1: r = e^0.5 = 1.64872 > 1.2 (eps_clip_high 0.2, not 0.28), A = 0.5
        //     -> clipped: loss -1.2·0.5 = -0.6, grad 0
        // t3, t4: sample 2 has no teacher -> A = 0 -> loss 0, grad 0 (the sample still counts
        //     in step_samples)
        // loss = 0.125·(-0.55259 - 0.6) = -0.144073
        let r01 = 0.1f64.exp();
        let want = 0.125 * (-0.5 * r01 - 0.6);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert!(close(want, -0.1440732), "{want}");
        assert_all_close(&out.grad_logp, &[0.125 * -0.5 * r01, 0.0, 0.0, 0.0, 0.0]);
        assert!(close(metric(&out, "pg_loss").unwrap(), want));
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.25));
        // (0.5 + 0.5 + 0 + 0) / 4
        assert!(close(metric(&out, "mean_advantage").unwrap(), 0.25));
        // old - logp: (-0.1 - 0.5 + 0.2 - 0.5) / 4
        assert!(close(metric(&out, "ppo_kl").unwrap(), -0.225));
        // |logp - rollout|: (0.1 + 0.5 + 0.2 + 0.6) / 4
        assert!(close(
            metric(&out, "train_rollout_logprob_abs_diff").unwrap(),
            0.35
        ));
        assert!(out.grad_topk.is_empty());
    }

    #[test]
    fn an_empty_teacher_present_means_every_sample_has_a_teacher() {
        let mut b = hand_batch();
        b.teacher_present = Default::default();
        let out = loss("").compute(&b).unwrap();
        // Sample 2 now has A = teacher - old = -0.1 + 1.0 = 0.9 on both tokens.
        // t3: r = e^-0.2 = 0.81873 >= 0.8 -> loss -0.9·0.81873, grad the same
        // t4: r = e^0.5 = 1.64872 > 1.2, A > 0 -> clipped at -1.2·0.9 = -1.08
        let (r01, rm02) = (0.1f64.exp(), (-0.2f64).exp());
        let want = 0.125 * (-0.5 * r01 - 0.6) + 0.125 * (-0.9 * rm02 - 1.08);
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert_all_close(
            &out.grad_logp,
            &[0.125 * -0.5 * r01, 0.0, 0.0, 0.125 * -0.9 * rm02, 0.0],
        );
        assert!(close(metric(&out, "pg_clipfrac").unwrap(), 0.5));
    }

    #[test]
    fn token_mode_without_teacher_is_an_error() {
        let mut b = hand_batch();
        b.teacher_logp = ROption::RNone;
        let e = loss("").compute(&b).unwrap_err();
        assert!(e.contains("teacher_logp"), "{e}");
    }

    #[test]
    fn token_mode_kl_without_reference_is_an_error() {
        let e = loss("kl_coef = 0.05").compute(&hand_batch()).unwrap_err();
        assert!(e.contains("kl_coef") && e.contains("ref_logp"), "{e}");
    }

    /// Three samples: sample 0 holds positions A and C (masked), sample 1 is empty, sample 2
    /// holds position B; step_samples 4, k = 2.
    fn topk_batch() -> LossBatch {
        let ln = |p: f64| p.ln() as f32;
        LossBatch {
            sample_offsets: vec![0, 2, 2, 3].into(),
            logp: vec![-1.0, -2.0, -0.5].into(),
            old_logp: vec![-1.0, -2.0, -0.5].into(),
            rollout_logp: vec![-1.5, -2.0, -0.5].into(),
            loss_mask: vec![1.0, 0.0, 1.0].into(),
            rewards: vec![1.0; 3].into(),
            group_ids: vec![0; 3].into(),
            topk: ROption::RSome(TopKBatch {
                k: 2,
                token_ids: vec![10, 11, 12, 13, 14, 15].into(),
                student_logp: vec![ln(0.5), ln(0.25), -0.1, -3.0, ln(0.6), ln(0.4)].into(),
                teacher_logp: vec![ln(0.25), ln(0.25), -5.0, -0.2, ln(0.5), ln(0.25)].into(),
            }),
            step_samples: 4,
            ..Default::default()
        }
    }

    #[test]
    fn hand_computed_topk_mode() {
        let out = loss("mode = \"topk\"").compute(&topk_batch()).unwrap();
        let ln2 = 2f64.ln();
        // Position A: student (0.5, 0.25), tail 0.25; teacher (0.25, 0.25), tail 0.5.
        //   L_A = 0.5·ln(0.5/0.25) + 0.25·ln(0.25/0.25) + 0.25·ln(0.25/0.5)
        //       = 0.5·ln2 + 0 - 0.25·ln2 = 0.25·ln2 = 0.173287
        //   dL/ds_1 = 0.5·(ln0.5 - ln0.25 - ln0.25 + ln0.5) = 0.5·2·ln2 = ln2
        //   dL/ds_2 = 0.25·(ln0.25 - ln0.25 - ln0.25 + ln0.5) = 0.25·ln2
        // Position B: student (0.6, 0.4) sums to 1, so the logsumexp is clamped at -1e-7 and
        //   the student's tail mass is 1 - e^-1e-7 ≈ 1e-7; teacher (0.5, 0.25), tail 0.25.
        //   L_B = 0.6·ln(0.6/0.5) + 0.4·ln(0.4/0.25) + p·(ln p - ln0.25), p = 1 - e^-1e-7
        //       = 0.6·0.182322 + 0.4·0.470004 - 1.47e-6 = 0.297392
        //   Clamped: dL/ds_k = e^{s_k}(s_k - t_k + 1):
        //   dL/ds_1 = 0.6·(0.182322 + 1) = 0.709393, dL/ds_2 = 0.4·(0.470004 + 1) = 0.588001
        // Each sample has one unmasked position and step_samples = 4: weights 1/4.
        let p = -(-1e-7f64).exp_m1();
        let l_a = 0.25 * ln2;
        let l_b = 0.6 * 1.2f64.ln() + 0.4 * 1.6f64.ln() + p * (p.ln() - 0.25f64.ln());
        assert!(close(l_b, 0.297392), "{l_b}");
        let want = 0.25 * l_a + 0.25 * l_b;
        assert!(close(out.loss, want), "{} vs {want}", out.loss);
        assert_all_close(
            &out.grad_topk,
            &[
                0.25 * ln2,
                0.25 * 0.25 * ln2,
                0.0, // position C is masked
                0.0,
                0.25 * 0.6 * (1.2f64.ln() + 1.0),
                0.25 * 0.4 * (1.6f64.ln() + 1.0),
            ],
        );
        assert_all_close(&out.grad_logp, &[0.0, 0.0, 0.0]);
        assert!(close(metric(&out, "kl_loss").unwrap(), want));
        // Teacher tails over counted positions: (0.5 + 0.25) / 2
        assert!(close(metric(&out, "tail_mass_teacher").unwrap(), 0.375));
        // Student tails: (0.25 + ~1e-7) / 2
        assert!(close(metric(&out, "tail_mass_student").unwrap(), 0.125));
        // |logp - rollout| over unmasked: (0.5 + 0) / 2
        assert!(close(
            metric(&out, "train_rollout_logprob_abs_diff").unwrap(),
            0.25
        ));
    }

    #[test]
    fn topk_row_is_zero_when_student_equals_teacher() {
        let row = TopkRow::new(&[-1.0, -2.0], &[-1.0, -2.0]);
        assert!(row.loss.abs() < 1e-12);
        assert!(row.grad.iter().all(|g| g.abs() < 1e-12), "{row:?}");
        // A student that gives a top-k token no mass contributes no NaN.
        let row = TopkRow::new(&[f32::NEG_INFINITY, -1.0], &[-1.0, -2.0]);
        assert!(row.loss.is_finite() && row.grad[0] == 0.0, "{row:?}");
    }

    #[test]
    fn topk_mode_skips_samples_without_a_teacher() {
        let mut b = topk_batch();
        b.teacher_present = vec![true, true, false].into();
        let out = loss("mode = \"topk\"").compute(&b).unwrap();
        // Only position A counts now: 0.25·0.25·ln2.
        assert!(close(out.loss, 0.25 * 0.25 * 2f64.ln()), "{}", out.loss);
        assert!(out.grad_topk[4..].iter().all(|g| *g == 0.0));
        assert!(close(metric(&out, "tail_mass_teacher").unwrap(), 0.5));
    }

    #[test]
    fn topk_mode_without_topk_is_an_error() {
        let mut b = topk_batch();
        b.topk = ROption::RNone;
        let e = loss("mode = \"topk\"").compute(&b).unwrap_err();
        assert!(e.contains("topk"), "{e}");
        let mut b = topk_batch();
        b.topk = ROption::RSome(TopKBatch::default());
        let e = loss("mode = \"topk\"").compute(&b).unwrap_err();
        assert!(e.contains("topk.k is 0"), "{e}");
    }

    #[test]
    fn invalid_batches_are_rejected() {
        let mut b = topk_batch();
        if let ROption::RSome(t) = &mut b.topk {
            t.teacher_logp.pop();
        }
        let e = loss("mode = \"topk\"").compute(&b).unwrap_err();
        assert!(e.contains("topk.teacher_logp"), "{e}");
        let mut b = hand_batch();
        b.teacher_present = vec![true].into();
        let e = loss("").compute(&b).unwrap_err();
        assert!(e.contains("teacher_present"), "{e}");
    }

    #[test]
    fn token_gradients_match_finite_differences() {
        let configs = [
            "",
            "eps_clip = 0.2\neps_clip_high = 0.28\nkl_coef = 0.2",
            "tis_cap = 1.2\nkl_coef = 0.05",
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

    #[test]
    fn topk_gradients_match_finite_differences() {
        let l = loss("mode = \"topk\"");
        let mut nonzero = 0;
        for seed in 0..20 {
            let b = random_topk_batch(seed);
            let out = l.compute(&b).unwrap();
            assert!(out.grad_logp.iter().all(|g| *g == 0.0));
            nonzero += out.grad_topk.iter().filter(|g| **g != 0.0).count();
            let check = check_gradient(&|b| l.compute(b), &b, 1e-3).unwrap();
            assert_good(&check, &format!("seed {seed}"));
        }
        assert!(nonzero > 500, "{nonzero}");
    }

    #[test]
    fn topk_gradient_matches_finite_differences_where_the_clamp_holds() {
        // Rows whose mass is 1 (or just above, from rounding) stay clamped under a ±1e-3 step.
        let mut b = topk_batch();
        if let ROption::RSome(t) = &mut b.topk {
            t.student_logp = vec![(0.7f32).ln(), (0.31f32).ln(), -0.1, -3.0, -0.5, -0.9].into();
        }
        let l = loss("mode = \"topk\"");
        let check = check_gradient(&|b| l.compute(b), &b, 1e-3).unwrap();
        assert!(check.passes(1e-3) && check.skipped_kinks == 0, "{check:?}");
    }
}

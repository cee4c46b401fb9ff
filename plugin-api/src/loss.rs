//! The loss kind: per-token numbers in, the loss and its gradient with respect to the policy's
//! log-probabilities out. The host owns autodiff: it backpropagates `sum(stopgrad(g) * logp)`,
//! whose gradient equals the plugin's.

use abi_stable::std_types::{ROption, RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// The per-token inputs of one loss call. Every per-token array is flat over all samples of
/// the micro-batch; sample `i` owns tokens `sample_offsets[i]..sample_offsets[i + 1]`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossBatch {
    /// `samples + 1` offsets into the per-token arrays; starts at 0, non-decreasing.
    pub sample_offsets: RVec<u32>,
    /// Log-probability of each response token under the policy being trained (the tensor the
    /// host differentiates).
    pub logp: RVec<f32>,
    /// Log-probability under the policy at the start of this optimizer step (the PPO "old"
    /// policy). Equal to `rollout_logp` when the host does not recompute it.
    pub old_logp: RVec<f32>,
    /// Log-probability the sampler recorded when it generated the token (behaviour policy).
    pub rollout_logp: RVec<f32>,
    /// Log-probability under the frozen reference model, when a KL term needs it.
    pub ref_logp: ROption<RVec<f32>>,
    /// Log-probability under the teacher (on-policy distillation).
    pub teacher_logp: ROption<RVec<f32>>,
    /// Per sample: whether `teacher_logp` holds a real teacher value for it. Empty means every
    /// sample has one.
    pub teacher_present: RVec<bool>,
    /// Per-token advantages precomputed by the host or a reward plugin; empty when the loss
    /// derives them from `rewards`.
    pub advantages: RVec<f32>,
    /// One scalar reward per sample.
    pub rewards: RVec<f32>,
    /// One group id per sample: group-relative advantages normalise within a group.
    pub group_ids: RVec<u64>,
    /// 1.0 for tokens that count, 0.0 for tokens that do not.
    pub loss_mask: RVec<f32>,
    /// Top-k inputs for distillation over a distribution, when the method asks for them.
    pub topk: ROption<TopKBatch>,
    /// The number of samples the optimizer step averages over. Micro-batches of one step share
    /// it, so that their gradients add up to the gradient of the whole batch. At least 1.
    pub step_samples: u32,
}

/// The top-k part of a loss batch: `[tokens * k]` arrays, row-major by token.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopKBatch {
    /// Entries per token.
    pub k: u32,
    /// The token ids of the entries (the teacher's top-k at that position).
    pub token_ids: RVec<u32>,
    /// The current policy's log-probability of each entry's token (differentiated).
    pub student_logp: RVec<f32>,
    /// The teacher's log-probability of each entry's token.
    pub teacher_logp: RVec<f32>,
}

/// What a loss call returns.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossOutput {
    /// The loss value.
    pub loss: f64,
    /// dL/d`logp`, one per token (zero where the loss does not depend on a token).
    pub grad_logp: RVec<f32>,
    /// dL/d`topk.student_logp`, one per top-k entry; empty when the loss has no top-k term.
    pub grad_topk: RVec<f32>,
    /// Named metrics for the training log (clip fraction, approximate KL, ...).
    pub metrics: RVec<Metric>,
}

/// One named number.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The metric's name, `snake_case`.
    pub name: RString,
    /// Its value.
    pub value: f64,
}

impl Metric {
    /// A metric from a name and a value.
    pub fn new(name: &str, value: f64) -> Self {
        Metric {
            name: name.into(),
            value,
        }
    }
}

impl LossBatch {
    /// The number of samples.
    pub fn num_samples(&self) -> usize {
        self.sample_offsets.len().saturating_sub(1)
    }

    /// The number of tokens over all samples.
    pub fn num_tokens(&self) -> usize {
        self.logp.len()
    }

    /// The token range of sample `i`.
    pub fn sample_range(&self, i: usize) -> std::ops::Range<usize> {
        self.sample_offsets[i] as usize..self.sample_offsets[i + 1] as usize
    }

    /// The index of the sample that owns each token.
    pub fn token_samples(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.num_tokens());
        for i in 0..self.num_samples() {
            out.extend(std::iter::repeat_n(i, self.sample_range(i).len()));
        }
        out
    }

    /// Whether sample `i` has a real teacher value.
    pub fn has_teacher(&self, i: usize) -> bool {
        self.teacher_logp.is_some() && (self.teacher_present.is_empty() || self.teacher_present[i])
    }

    /// Checks that every array has the length the offsets imply; the host validates batches
    /// before it sends them, and the contract harness checks that plugins reject bad ones.
    pub fn validate(&self) -> Result<(), String> {
        let offsets = &self.sample_offsets;
        if offsets.is_empty() {
            return Err("sample_offsets is empty (it needs samples + 1 entries)".into());
        }
        if offsets[0] != 0 {
            return Err(format!("sample_offsets[0] is {}, expected 0", offsets[0]));
        }
        if let Some(w) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(format!(
                "sample_offsets decrease at {}: {} then {}",
                w,
                offsets[w],
                offsets[w + 1]
            ));
        }
        let tokens = *offsets.last().unwrap() as usize;
        let samples = self.num_samples();
        let per_token = [
            ("logp", self.logp.len()),
            ("old_logp", self.old_logp.len()),
            ("rollout_logp", self.rollout_logp.len()),
            ("loss_mask", self.loss_mask.len()),
        ];
        for (name, len) in per_token {
            if len != tokens {
                return Err(format!("{name} has {len} values, expected {tokens} tokens"));
            }
        }
        for (name, arr) in [
            ("ref_logp", &self.ref_logp),
            ("teacher_logp", &self.teacher_logp),
        ] {
            if let ROption::RSome(a) = arr {
                if a.len() != tokens {
                    return Err(format!(
                        "{name} has {} values, expected {tokens} tokens",
                        a.len()
                    ));
                }
            }
        }
        if !self.advantages.is_empty() && self.advantages.len() != tokens {
            return Err(format!(
                "advantages has {} values, expected {tokens} tokens (or none)",
                self.advantages.len()
            ));
        }
        for (name, len) in [
            ("rewards", self.rewards.len()),
            ("group_ids", self.group_ids.len()),
        ] {
            if len != samples {
                return Err(format!(
                    "{name} has {len} values, expected {samples} samples"
                ));
            }
        }
        if !self.teacher_present.is_empty() && self.teacher_present.len() != samples {
            return Err(format!(
                "teacher_present has {} values, expected {samples} samples (or none)",
                self.teacher_present.len()
            ));
        }
        if let ROption::RSome(t) = &self.topk {
            let want = tokens * t.k as usize;
            for (name, len) in [
                ("topk.token_ids", t.token_ids.len()),
                ("topk.student_logp", t.student_logp.len()),
                ("topk.teacher_logp", t.teacher_logp.len()),
            ] {
                if len != want {
                    return Err(format!(
                        "{name} has {len} values, expected tokens * k = {want}"
                    ));
                }
            }
        }
        if self.step_samples == 0 {
            return Err("step_samples is 0 (it must be at least 1)".into());
        }
        Ok(())
    }
}

/// What a loss reads besides the policy's and the behaviour log-probabilities, stated by the
/// plugin from its configuration before anything is constructed, so the host computes what is
/// needed and nothing more (a reference model is a second copy of the weights).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossInputs {
    /// Reference-model log-probabilities (`LossBatch::ref_logp`, for a KL term): the host keeps
    /// the starting weights frozen and scores every batch with them.
    pub reference_logprobs: bool,
    /// Teacher log-probabilities that the reward side attaches to samples (distillation): the
    /// host gives the reward plugin a teacher model to score with.
    pub teacher_logprobs: bool,
}

impl LossInputs {
    /// What a loss that does not state its inputs gets (the default of [`Loss::inputs`], and
    /// what a host gives a library built against API 1.0): reference log-probabilities when its
    /// configuration has a positive `kl_coef` or `kl_loss_coef` (at the top level or in a
    /// `[loss]` table), and a teacher, as hosts before 1.1 always kept one. A loss that knows
    /// better says so by implementing [`Loss::inputs`].
    pub fn by_convention(config: &str) -> LossInputs {
        let positive = |t: &toml::Table| {
            ["kl_coef", "kl_loss_coef"].iter().any(|k| {
                t.get(*k)
                    .and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))
                    .is_some_and(|x| x > 0.0)
            })
        };
        let reference = config.parse::<toml::Table>().is_ok_and(|t| {
            positive(&t)
                || t.get("loss")
                    .and_then(|v| v.as_table())
                    .is_some_and(positive)
        });
        LossInputs {
            reference_logprobs: reference,
            teacher_logprobs: true,
        }
    }
}

/// A loss function, written in plain Rust. Implement it and export it with
/// [`export_plugin!`](crate::export_plugin).
pub trait Loss: Send + Sync + 'static {
    /// The inputs this loss reads under `config` (the same TOML text [`Loss::new`] gets).
    /// Called before construction, without side effects. The default is
    /// [`LossInputs::by_convention`]; state exactly what the loss reads to spare the host a
    /// model copy it does not need.
    fn inputs(config: &str) -> crate::PluginResult<LossInputs>
    where
        Self: Sized,
    {
        Ok(LossInputs::by_convention(config))
    }

    /// Builds the loss from its configuration (the plugin's default config merged with the
    /// user's, as TOML text) and the host's services.
    fn new(config: &str, host: crate::HostServices) -> crate::PluginResult<Self>
    where
        Self: Sized;

    /// Computes the loss, its gradient with respect to `batch.logp` (and `batch.topk`'s
    /// student log-probabilities when present) and metrics.
    fn compute(&self, batch: &LossBatch) -> crate::PluginResult<LossOutput>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_that_does_not_state_its_inputs_gets_the_convention() {
        let none = LossInputs::by_convention("");
        assert!(!none.reference_logprobs && none.teacher_logprobs);
        assert!(!LossInputs::by_convention("kl_coef = 0.0\neps_clip = 0.2").reference_logprobs);
        assert!(LossInputs::by_convention("kl_coef = 0.02").reference_logprobs);
        assert!(LossInputs::by_convention("kl_loss_coef = 1").reference_logprobs);
        assert!(!LossInputs::by_convention("not toml [").reference_logprobs);
        assert!(LossInputs::by_convention("[loss]\nkl_coef = 0.1").reference_logprobs);
    }

    fn batch(lens: &[u32]) -> LossBatch {
        let mut offsets = vec![0u32];
        for l in lens {
            offsets.push(offsets.last().unwrap() + l);
        }
        let t = *offsets.last().unwrap() as usize;
        LossBatch {
            sample_offsets: offsets.into(),
            logp: vec![-1.0; t].into(),
            old_logp: vec![-1.0; t].into(),
            rollout_logp: vec![-1.0; t].into(),
            loss_mask: vec![1.0; t].into(),
            rewards: vec![0.0; lens.len()].into(),
            group_ids: vec![0; lens.len()].into(),
            step_samples: lens.len().max(1) as u32,
            ..Default::default()
        }
    }

    #[test]
    fn a_well_formed_batch_validates() {
        let b = batch(&[3, 0, 2]);
        b.validate().unwrap();
        assert_eq!(b.num_samples(), 3);
        assert_eq!(b.token_samples(), vec![0, 0, 0, 2, 2]);
        assert_eq!(b.sample_range(1), 3..3);
    }

    #[test]
    fn validation_names_the_bad_field() {
        let mut b = batch(&[2, 2]);
        b.old_logp.pop();
        assert!(b.validate().unwrap_err().contains("old_logp"));

        let mut b = batch(&[2, 2]);
        b.rewards.push(1.0);
        assert!(b.validate().unwrap_err().contains("rewards"));

        let mut b = batch(&[2, 2]);
        b.sample_offsets = vec![0, 3, 2].into();
        assert!(b.validate().unwrap_err().contains("decrease"));

        let mut b = batch(&[2]);
        b.topk = ROption::RSome(TopKBatch {
            k: 2,
            token_ids: vec![1, 2, 3].into(),
            student_logp: vec![0.0; 4].into(),
            teacher_logp: vec![0.0; 4].into(),
        });
        assert!(b.validate().unwrap_err().contains("topk.token_ids"));
    }
}

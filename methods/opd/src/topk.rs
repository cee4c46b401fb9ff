//! Reverse KL from the student to the teacher over the teacher's top-k tokens plus one tail
//! bin that holds the rest of the probability mass.
//!
//! For one position with student log-probs `s_k` and teacher log-probs `t_k` at the teacher's
//! top-k token ids, each side's tail is `tail = log(1 - Σ_k exp(x_k))`, where the logsumexp is
//! clamped to at most `-1e-7` so the tail stays finite when the top-k hold (almost) all the
//! mass. The loss is
//!
//! `L = Σ_k e^{s_k}(s_k - t_k) + e^{tail_s}(tail_s - tail_t)`
//!
//! and, since `d tail_s / d s_k = -e^{s_k} / e^{tail_s}`,
//!
//! `dL/ds_k = e^{s_k}(s_k - t_k + 1) - e^{s_k}(tail_s - tail_t + 1) = e^{s_k}(s_k - t_k - tail_s + tail_t)`.
//!
//! Where the clamp holds, `tail_s` is a constant and only `e^{s_k}(s_k - t_k + 1)` remains.

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::math::SampleMean;
use openclaw_plugin_api::{LossBatch, LossOutput, Metric};

/// The largest logsumexp of a top-k row; keeps the tail bin's log-mass finite.
pub const MAX_TOPK_LOGSUMEXP: f64 = -1e-7;

/// One position of the top-k loss.
#[derive(Clone, Debug, PartialEq)]
pub struct TopkRow {
    /// The position's loss.
    pub loss: f64,
    /// dL/ds_k for each entry.
    pub grad: Vec<f64>,
    /// The student's tail probability mass `e^{tail_s}`.
    pub tail_mass_student: f64,
    /// The teacher's tail probability mass `e^{tail_t}`.
    pub tail_mass_teacher: f64,
}

/// `log(1 - Σ exp(x))` with the logsumexp clamped, and whether the clamp held.
fn tail_log_mass(x: &[f32]) -> (f64, bool) {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let lse = if max == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else {
        max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln()
    };
    let clamped = lse >= MAX_TOPK_LOGSUMEXP;
    let lse = lse.min(MAX_TOPK_LOGSUMEXP);
    // 1 - e^lse computed as -expm1(lse) keeps precision when the tail is small.
    ((-lse.exp_m1()).ln(), clamped)
}

/// `e^a · b`, taken as 0 when `a = -inf` (the limit of `x e^x`), so a top-k token the student
/// gives no mass contributes nothing instead of NaN.
fn weighted(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        0.0
    } else {
        a.exp() * b
    }
}

impl TopkRow {
    /// The loss and gradient at one position.
    pub fn new(student: &[f32], teacher: &[f32]) -> TopkRow {
        let (tail_s, clamped) = tail_log_mass(student);
        let (tail_t, _) = tail_log_mass(teacher);
        let mut loss = weighted(tail_s, tail_s - tail_t);
        let mut grad = Vec::with_capacity(student.len());
        for (&s, &t) in student.iter().zip(teacher) {
            let (s, t) = (s as f64, t as f64);
            loss += weighted(s, s - t);
            grad.push(if clamped {
                weighted(s, s - t + 1.0)
            } else {
                weighted(s, s - t - tail_s + tail_t)
            });
        }
        TopkRow {
            loss,
            grad,
            tail_mass_student: tail_s.exp(),
            tail_mass_teacher: tail_t.exp(),
        }
    }
}

/// Whether sample `i` has a teacher; in top-k mode the teacher's values live in `batch.topk`,
/// so `teacher_logp` need not be present.
fn topk_teacher_present(batch: &LossBatch, i: usize) -> bool {
    batch.teacher_present.is_empty() || batch.teacher_present[i]
}

/// The top-k distillation loss over a batch: each position's [`TopkRow`] loss reduced with
/// [`SampleMean`]. The gradient goes to `grad_topk`; `grad_logp` is all zeros. Samples without
/// a teacher contribute nothing.
pub fn topk_distillation(batch: &LossBatch) -> Result<LossOutput, String> {
    let topk = match &batch.topk {
        ROption::RSome(t) => t,
        ROption::RNone => {
            return Err(
                "mode = \"topk\" needs the teacher's top-k log-probs, but the batch has \
                        no topk (the host must compute them for this method)"
                    .into(),
            )
        }
    };
    let k = topk.k as usize;
    if k == 0 {
        return Err("topk.k is 0: top-k distillation needs at least one entry per token".into());
    }
    let mean = SampleMean::new(batch);
    let mut grad_topk = vec![0.0f32; topk.student_logp.len()];
    let mut loss = 0.0;
    let (mut tail_s, mut tail_t, mut counted) = (0.0, 0.0, 0.0);
    for i in 0..batch.num_samples() {
        if !topk_teacher_present(batch, i) {
            continue;
        }
        for t in batch.sample_range(i) {
            let w = mean.weight(t);
            if w == 0.0 {
                continue;
            }
            let entries = t * k..(t + 1) * k;
            let row = TopkRow::new(
                &topk.student_logp[entries.clone()],
                &topk.teacher_logp[entries.clone()],
            );
            loss += w * row.loss;
            for (g, d) in grad_topk[entries].iter_mut().zip(&row.grad) {
                *g = (w * d) as f32;
            }
            let m = batch.loss_mask[t] as f64;
            tail_s += m * row.tail_mass_student;
            tail_t += m * row.tail_mass_teacher;
            counted += m;
        }
    }
    if !loss.is_finite() {
        return Err(format!(
            "the top-k loss is {loss}: a student or teacher top-k log-prob is not finite"
        ));
    }
    let per_token = |x: f64| if counted > 0.0 { x / counted } else { 0.0 };
    Ok(LossOutput {
        loss,
        grad_logp: vec![0.0f32; batch.num_tokens()].into(),
        grad_topk: grad_topk.into(),
        metrics: vec![
            Metric::new("kl_loss", loss),
            Metric::new("tail_mass_teacher", per_token(tail_t)),
            Metric::new("tail_mass_student", per_token(tail_s)),
            Metric::new(
                "train_rollout_logprob_abs_diff",
                mean.token_mean(|t| (batch.logp[t] as f64 - batch.rollout_logp[t] as f64).abs()),
            ),
        ]
        .into(),
    })
}

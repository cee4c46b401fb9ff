//! Token-level distillation advantages.

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::LossBatch;

/// `A_t = teacher_logp_t - old_logp_t` for samples with a teacher, 0 for the others. Errors
/// when the batch carries no teacher log-probs at all, since then nothing would be learned.
pub fn teacher_advantages(batch: &LossBatch) -> Result<Vec<f32>, String> {
    let teacher = match &batch.teacher_logp {
        ROption::RSome(t) => t,
        ROption::RNone => {
            return Err(
                "mode = \"token\" needs teacher log-probs, but the batch has no \
                        teacher_logp (does the method's reward plugin score the teacher?)"
                    .into(),
            )
        }
    };
    let mut out = vec![0.0f32; batch.num_tokens()];
    for i in 0..batch.num_samples() {
        if batch.has_teacher(i) {
            for t in batch.sample_range(i) {
                out[t] = teacher[t] - batch.old_logp[t];
            }
        }
    }
    Ok(out)
}

//! The CPU kernels under the model: burn-flex storage (`flex`), the register-blocked SIMD
//! product and `exp2` (`simd_kernels`, one generic body that `pulp` compiles for AVX-512, AVX2,
//! NEON or plain code, chosen at run time), the many-row and few-row matmuls, the tiled causal
//! attention and the decode attention over the host KV buffer, the fused SwiGLU, and the four
//! operations the trainer's CPU step records under autodiff with a backward of their own
//! (`trained_matmul`, `trained_attention`, `logprob_gather`, `swiglu`). The quantised block
//! kernels, with one file per instruction set, are in [`crate::quant`].

pub mod causal_attention;
pub mod flex;
pub mod host_kv;
pub mod logprob_gather;
pub mod lora_rows;
pub mod prefill_matmul;
pub mod simd_kernels;
pub mod small_matmul;
pub mod swiglu;
pub mod trained_attention;
pub mod trained_matmul;
#[cfg(test)]
mod trained_ops_tests;

/// Transposes a row-major `[rows, cols]` matrix.
pub(crate) fn transpose(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

/// A fixed pairwise sum of eight partial sums.
#[inline(always)]
pub(crate) fn sum8(a: &[f32; 8]) -> f32 {
    let s = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (s[0] + s[2]) + (s[1] + s[3])
}

/// A fixed pairwise sum of sixteen partial sums.
#[inline(always)]
pub(crate) fn sum16(a: &[f32; 16]) -> f32 {
    let mut s = [0f32; 8];
    for l in 0..8 {
        s[l] = a[l] + a[l + 8];
    }
    let t = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    (t[0] + t[2]) + (t[1] + t[3])
}

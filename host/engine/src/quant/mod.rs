//! Matmuls over weights kept in GGUF's quantised blocks, for serving and judging.
//!
//! A decode step reads every weight once; with the weights dequantised to f32 that is about
//! 540 MB per step for SmolLM2-135M, against 112 MB in its 4-bit blocks as kept here (85 MB in
//! the file: scales and minimums are widened to f32 at load). Here a weight matrix stays in its
//! blocks and each block is widened to f32 in registers, once per pass, for up to eight rows of
//! activations at a time ([`QuantMatrix::matmul`], decode steps); prefill and scoring widen a
//! column panel at a time into a small buffer for the register-blocked f32 kernel
//! ([`QuantMatrix::matmul_many`]).
//!
//! Written by hand because no Rust crate computes with ggml's block formats (candle has them on
//! its own tensor type only). Q4_0, Q4_1 and Q8_0 are repacked at load into nibbles or bytes plus
//! f32 scales, so the kernel never converts an f16; every other type the GGUF loader reads
//! (Q5_0, Q5_1 and the K-quants) keeps the file's bytes and is decoded a block at a time by the
//! loader's own decoders. The kernels are compiled for AVX-512 and for AVX2 + FMA and picked at
//! run time (the binary targets the baseline x86-64; [`simd`]).
//!
//! Each output is summed over its row's blocks in the same order whatever the number of rows in
//! the call, so a sequence's logits do not depend on how many others share its decode step.
//! The order belongs to the kernel and the matrix: sixteen partial sums per output (the portable
//! and AVX-512 kernels, and AVX2 on Q8 and on rows wider than 768 values), or eight (AVX2 on
//! narrower Q4 rows, where sixteen registers cannot hold two sums for each of eight rows). The
//! decode kernels prefetch the next weight rows' blocks (a step streams every weight from
//! memory) and add up the partial-sum vectors of a pass together, sixteen at a time for a full
//! AVX-512 pass of eight rows and eight at a time on AVX2 (`x86::sum16_each`,
//! `x86::sum8_each`: the same additions as one at a time).
//!
//! The files: `storage` holds a matrix's blocks and decodes them (formats); `matmul` runs the
//! products on f32 slices, a task per range of weight rows; `portable` and `x86` are the
//! kernels a task runs, `isa` picks among them at run time; `tensor` takes and gives burn
//! tensors (what the model's projections call).

pub mod ggml;
mod isa;
mod matmul;
mod part;
mod portable;
mod storage;
mod tensor;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
pub(crate) mod tests;

pub use isa::{simd, Simd};
pub use storage::QuantMatrix;
pub use tensor::MAX_KERNEL_ROWS;

/// Rows of activations one pass over the weights serves.
const PASS_ROWS: usize = 8;
/// The widest rows (in values) for which the AVX2 kernels take passes of eight rows: Q8 in
/// halves (`x86::halves_avx2`), Q4 with eight-lane sums (`x86::lanes8_avx2`). The eight activation
/// rows (24 KiB) stay in the 32 KiB level-1 cache over a weight row. Wider rows take passes
/// of four with sixteen-lane sums. Measured on SmolLM2's batch-8 step (`decode_kernels 8`,
/// AVX2): its Q8_0 head (576 wide) 3.23-3.40 ms in passes of four, 2.88-3.03 in halves (four
/// alternations); its 1,536-wide Q4_1 projection 3.0 ms in passes of four, 8.5 in halves and
/// 3.3-3.6 in passes of eight with eight-lane sums.
const EIGHT_ROWS_MAX_COLS: usize = 768;

//! `x · W` for the many rows of a prefill or a scoring pass, on the CPU backend.
//!
//! The general matmul (burn-flex's, through the `gemm` crate) reaches about a third of the
//! core's multiply-add rate on these shapes (thousands of rows, a few hundred columns and a
//! short inner dimension), and an MLP of a 12,000-token prompt spent longer there than in its
//! attention. Here the rows are cut into tasks for the rayon pool and every task runs the
//! register-blocked kernel of [`super::simd_kernels`] over the weights in place, column panel by
//! column panel.
//!
//! Decode steps keep their own path ([`super::small_matmul`]); training (an autodiff backend)
//! and other backends keep burn's matmul.

use burn::backend::flex::FlexTensor;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;
use std::any::Any;

use super::simd_kernels::{panel, Accumulate, Operand, PAD};

/// Fewest rows this path takes; fewer go to burn's matmul.
pub const MIN_ROWS: usize = 64;
/// Rows one rayon task covers.
const TASK_ROWS: usize = 96;

/// `x [rows, k] · w [k, n]` when `B` is the CPU backend, both are contiguous f32 and there are
/// at least [`MIN_ROWS`] rows; `None` otherwise (the caller uses the general matmul).
pub fn try_matmul<B: Backend>(x: &Tensor<B, 2>, w: &Tensor<B, 2>) -> Option<Tensor<B, 2>> {
    let [m, k] = x.dims();
    let [k2, n] = w.dims();
    if m < MIN_ROWS || k != k2 || k == 0 || n == 0 {
        return None;
    }
    let xp = as_flex::<B>(x.clone())?;
    let wp = as_flex::<B>(w.clone())?;
    let (xs, ws) = (xp.as_slice::<f32>()?, wp.as_slice::<f32>()?);
    let y = matmul(xs, ws, m, k, n);
    let out = FlexTensor::from_data(TensorData::new(y, [m, n]));
    let prim: Box<dyn Any> = Box::new(out);
    let prim = *prim.downcast::<B::FloatTensorPrimitive>().ok()?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(prim)))
}

fn as_flex<B: Backend>(t: Tensor<B, 2>) -> Option<FlexTensor> {
    let TensorPrimitive::Float(p) = t.into_primitive() else {
        return None;
    };
    let p: Box<dyn Any> = Box::new(p);
    p.downcast::<FlexTensor>().ok().map(|b| *b)
}

/// `y [m, n] = x [m, k] · w [k, n]`, row-major.
pub fn matmul(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert_eq!(x.len(), m * k);
    assert_eq!(w.len(), k * n);
    // Column panels are whole vector pairs: a width that is not one is padded (weights and
    // output), once per call.
    let np = n.next_multiple_of(PAD);
    let padded_w;
    let w = if np == n {
        w
    } else {
        let mut p = vec![0f32; k * np];
        for (dst, src) in p.chunks_exact_mut(np).zip(w.chunks_exact(n)) {
            dst[..n].copy_from_slice(src);
        }
        padded_w = p;
        &padded_w
    };
    let mut y = vec![0f32; m * np];
    y.par_chunks_mut(TASK_ROWS * np)
        .zip(x.par_chunks(TASK_ROWS * k))
        .for_each(|(y, x)| Arch::new().dispatch(Rows { x, w, y, k, n: np }));
    if np != n {
        let mut compact = vec![0f32; m * n];
        for (dst, src) in compact.chunks_exact_mut(n).zip(y.chunks_exact(np)) {
            dst.copy_from_slice(&src[..n]);
        }
        y = compact;
    }
    y
}

/// One task: `y = x · w` for a slice of rows (`n` a multiple of [`PAD`]).
struct Rows<'a> {
    x: &'a [f32],
    w: &'a [f32],
    y: &'a mut [f32],
    k: usize,
    n: usize,
}

impl WithSimd for Rows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Rows { x, w, y, k, n } = self;
        let m = x.len() / k;
        for c0 in (0..n).step_by(2 * S::F32_LANES) {
            panel(
                simd,
                m,
                k,
                Operand { data: x, stride: k },
                Operand {
                    data: &w[c0..],
                    stride: n,
                },
                &mut y[c0..],
                n,
                Accumulate::No,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32)
            .map(|v| v / (1u32 << 24) as f32 - 0.5)
            .collect()
    }

    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    y[i * n + j] += x[i * k + p] * w[p * n + j];
                }
            }
        }
        y
    }

    /// Row counts that leave partial tasks and register blocks, widths that are and are not
    /// whole vector pairs.
    #[test]
    fn matches_the_plain_product() {
        for (m, k, n) in [(64, 16, 32), (300, 128, 384), (97, 40, 50), (200, 7, 64)] {
            let (x, w) = (values(m * k, 1), values(k * n, 2));
            let (ours, theirs) = (matmul(&x, &w, m, k, n), reference(&x, &w, m, k, n));
            let worst = ours
                .iter()
                .zip(&theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-4, "{m}x{k}x{n}: {worst}");
        }
    }

    /// A row's result does not depend on the rows computed beside it.
    #[test]
    fn a_row_is_computed_the_same_alone_or_in_a_batch() {
        let (m, k, n) = (130, 96, 64);
        let (x, w) = (values(m * k, 3), values(k * n, 4));
        let all = matmul(&x, &w, m, k, n);
        let row = 101;
        let mut alone = x[row * k..(row + 1) * k].to_vec();
        // Pad to the path's minimum with other rows after it.
        alone.extend_from_slice(&x[..(MIN_ROWS - 1) * k]);
        let y = matmul(&alone, &w, MIN_ROWS, k, n);
        assert_eq!(&y[..n], &all[row * n..(row + 1) * n]);
    }
}

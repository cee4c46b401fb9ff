//! RMSNorm read from HF `weight` tensors (burn calls the parameter `gamma`).

use anyhow::Result;
use burn::module::Param;
use burn::nn::RmsNorm;
use burn::prelude::*;
use rayon::prelude::*;

use super::io::{to_f32_vec, TensorExport, WeightSource};
use crate::kernels::flex::{as_flex, from_vec};

/// Rows one rayon task covers.
const TASK_ROWS: usize = 256;

/// `norm.forward(x)`, in one pass (on the rayon pool when there are many rows) when `B` is the
/// CPU backend: burn's form takes five passes over the activations (square, mean, add, sqrt,
/// divide and scale), each allocating, on one thread. The operations are burn's (its sum of
/// squares may add in another order).
pub fn rms_norm_forward<B: Backend, const D: usize>(
    norm: &RmsNorm<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let dims = x.dims();
    try_rms_norm(norm, &x, dims).unwrap_or_else(|| norm.forward(x))
}

fn try_rms_norm<B: Backend, const D: usize>(
    norm: &RmsNorm<B>,
    x: &Tensor<B, D>,
    dims: [usize; D],
) -> Option<Tensor<B, D>> {
    let xf = as_flex(x.clone())?;
    let gf = as_flex(norm.gamma.val())?;
    let (xs, gamma) = (xf.as_slice::<f32>()?, gf.as_slice::<f32>()?);
    let width = gamma.len();
    if dims[D - 1] != width || width == 0 {
        return None;
    }
    from_vec(rms_norm_rows(xs, gamma, norm.epsilon as f32), dims)
}

/// The rows of `x` (each `gamma.len()` wide) normalised and scaled. Not generic, so it is
/// compiled (and optimised) here whatever crate picks the backend.
pub fn rms_norm_rows(xs: &[f32], gamma: &[f32], eps: f32) -> Vec<f32> {
    let width = gamma.len();
    let rows = |out: &mut [f32], xs: &[f32]| {
        for (o, x) in out.chunks_exact_mut(width).zip(xs.chunks_exact(width)) {
            let mean = sum_of_squares(x) / width as f32;
            let rms = (mean + eps).sqrt();
            for ((o, &v), &g) in o.iter_mut().zip(x).zip(gamma) {
                *o = v / rms * g;
            }
        }
    };
    let mut out = vec![0f32; xs.len()];
    if xs.len() <= TASK_ROWS * width {
        // One task (a decode step, a short prompt): no hand-off to the pool.
        rows(&mut out, xs);
    } else {
        out.par_chunks_mut(TASK_ROWS * width)
            .zip(xs.par_chunks(TASK_ROWS * width))
            .for_each(|(out, xs)| rows(out, xs));
    }
    out
}

/// `Σ v²` in eight running sums, added pairwise at the end: one running sum is a chain of
/// dependent additions (576 of them, about 0.7 µs, for each of SmolLM2's rows; 61 norms of a
/// batch of eight took 0.5 ms of a decode step), eight let the compiler keep them in vectors.
fn sum_of_squares(x: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
    for c in chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v * v;
        }
    }
    crate::kernels::sum8(&acc) + tail
}

/// Builds an RMSNorm of width `dim` from `{prefix}.weight`.
pub fn load_rms_norm<B: Backend>(
    src: &mut dyn WeightSource,
    prefix: &str,
    dim: usize,
    epsilon: f64,
    device: &B::Device,
) -> Result<RmsNorm<B>> {
    let w = src.tensor(&format!("{prefix}.weight"), &[dim])?;
    Ok(RmsNorm {
        gamma: Param::from_data(TensorData::new(w, [dim]), device),
        epsilon,
    })
}

/// Writes an RMSNorm's scale as `{prefix}.weight`.
pub fn export_rms_norm<B: Backend>(norm: &RmsNorm<B>, prefix: &str, out: &mut Vec<TensorExport>) {
    let g = norm.gamma.val();
    let [dim] = g.dims();
    out.push(TensorExport::new(
        format!("{prefix}.weight"),
        vec![dim],
        to_f32_vec(g),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    #[test]
    fn the_one_pass_norm_matches_burns() {
        // Whole groups of eight, and a tail (the sum of squares runs eight sums).
        for width in [40, 43, 5] {
            check_against_burn(width);
        }
    }

    fn check_against_burn(width: usize) {
        let dev = Default::default();
        let rows = 300;
        let x: Vec<f32> = (0..rows * width)
            .map(|i| ((i * 37) % 101) as f32 * 0.03 - 1.5)
            .collect();
        let g: Vec<f32> = (0..width).map(|i| 0.5 + i as f32 * 0.01).collect();
        let norm = RmsNorm::<CpuBackend> {
            gamma: Param::from_data(TensorData::new(g, [width]), &dev),
            epsilon: 1e-6,
        };
        let x = Tensor::<CpuBackend, 3>::from_data(TensorData::new(x, [2, rows / 2, width]), &dev);
        let ours = rms_norm_forward(&norm, x.clone())
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let theirs = norm.forward(x).into_data().to_vec::<f32>().unwrap();
        for (a, b) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}

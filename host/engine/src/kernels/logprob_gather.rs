//! `log_softmax(scale · logits)` at chosen columns of each row, as one operation, with a
//! backward of its own when the backend is burn-flex under autodiff (the trainer's CPU
//! backend).
//!
//! Written by hand because burn's `log_softmax` is a chain of whole-row passes (max, subtract,
//! exp, sum, log, subtract), each recorded with its own backward, over the vocabulary-wide
//! logits, the largest tensors of a training step, and a gather after it: about eleven passes
//! over `[rows, vocab]` forward and backward, with libm's `exp` on one thread. Here forward
//! reads each row twice (its maximum, then the sum of exponentials with the vectorised `exp2`
//! of [`super::simd_kernels`]) and keeps one value per row; backward writes each row's gradient
//! once. Rows are split over the rayon pool. Any other backend (CUDA, or autodiff over it)
//! gets burn's ops. Autodiff over burn-flex takes this path whatever its checkpointing strategy
//! (the tensors do not say it): the backward keeps what it needs in its own state and asks the
//! checkpointer for nothing.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use burn::tensor::TensorPrimitive;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;
use std::any::Any;
use std::f32::consts::LOG2_E;

use super::flex::{contiguous_f32, AdTensor};
use super::simd_kernels::exp2;

/// Rows one rayon task covers.
const TASK_ROWS: usize = 16;

/// `log_softmax(scale · logits, 1)` gathered at `index` (`[rows, m]` row-major column ids):
/// `[rows, m]`. `scale` is `1 / temperature` (positive).
pub fn log_softmax_gather<B: Backend>(
    logits: Tensor<B, 2>,
    index: &[u32],
    m: usize,
    scale: f32,
) -> Tensor<B, 2> {
    let [rows, vocab] = logits.dims();
    assert_eq!(index.len(), rows * m, "index is [rows, m]");
    let fits = scale > 0.0
        && scale.is_finite()
        && rows * m > 0
        && vocab > 0
        && !super::flex::burn_ops_only();
    if fits {
        if let Some(out) = fused(logits.clone(), index, m, scale) {
            return out;
        }
    }
    let device = logits.device();
    let idx: Vec<i64> = index.iter().map(|&i| i as i64).collect();
    let idx = Tensor::<B, 2, Int>::from_data(TensorData::new(idx, [rows, m]), &device);
    let logits = if scale != 1.0 {
        logits.mul_scalar(scale)
    } else {
        logits
    };
    log_softmax(logits, 1).gather(1, idx)
}

/// The fused path, when `B` is burn-flex (values only) or burn-flex under autodiff.
fn fused<B: Backend>(
    logits: Tensor<B, 2>,
    index: &[u32],
    m: usize,
    scale: f32,
) -> Option<Tensor<B, 2>> {
    let TensorPrimitive::Float(p) = logits.into_primitive() else {
        return None;
    };
    let p: Box<dyn Any> = Box::new(p);
    let out: Box<dyn Any> = match p.downcast::<FlexTensor>() {
        Ok(plain) => Box::new(forward(&contiguous_f32(*plain)?, index, m, scale).0),
        Err(p) => Box::new(tracked(*p.downcast::<AdTensor>().ok()?, index, m, scale)?),
    };
    let out = *out.downcast::<B::FloatTensorPrimitive>().ok()?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(out)))
}

/// The operation recorded in the graph: its backward needs the logits, each row's
/// log-sum-exp, the columns and the scale.
#[derive(Debug)]
struct LogSoftmaxGather;

#[derive(Clone, Debug)]
struct State {
    logits: FlexTensor,
    shape: [usize; 2],
    lse: Vec<f32>,
    index: Vec<u32>,
    m: usize,
    scale: f32,
}

fn tracked(t: AdTensor, index: &[u32], m: usize, scale: f32) -> Option<AdTensor> {
    let logits = contiguous_f32(t.primitive.clone())?;
    let (out, lse) = forward(&logits, index, m, scale);
    let shape = [lse.len(), logits.as_slice::<f32>()?.len() / lse.len()];
    // Compute-bound: the backward keeps the logits it needs in its state rather than asking
    // a checkpointer to recompute them.
    Some(
        match LogSoftmaxGather
            .prepare::<NoCheckpointing>([t.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                State {
                    shape,
                    logits,
                    lse,
                    index: index.to_vec(),
                    m,
                    scale,
                },
                out,
            ),
            OpsKind::UnTracked(prep) => prep.finish(out),
        },
    )
}

impl Backward<Flex, 1> for LogSoftmaxGather {
    type State = State;

    fn backward(self, ops: Ops<State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            let grad = contiguous_f32(grad).expect("f32 gradients");
            let g = grad.as_slice::<f32>().expect("contiguous");
            let x = s.logits.as_slice::<f32>().expect("contiguous");
            let vocab = x.len() / s.lse.len();
            let mut dx = vec![0f32; x.len()];
            dx.par_chunks_mut(vocab * TASK_ROWS)
                .enumerate()
                .for_each(|(task, dx)| {
                    for (i, dx) in dx.chunks_exact_mut(vocab).enumerate() {
                        let r = task * TASK_ROWS + i;
                        let gr = &g[r * s.m..(r + 1) * s.m];
                        let row = &x[r * vocab..(r + 1) * vocab];
                        // d/dx_j of (scale·x_c − lse) is scale·([j = c] − p_j): every column
                        // loses scale·p_j times the row's summed gradient, the gathered ones
                        // gain theirs.
                        let total: f32 = gr.iter().sum();
                        Arch::new().dispatch(Spread {
                            row,
                            out: dx,
                            k: s.scale * LOG2_E,
                            offset: s.lse[r] * LOG2_E,
                            weight: -s.scale * total,
                        });
                        for (&c, &gc) in s.index[r * s.m..(r + 1) * s.m].iter().zip(gr) {
                            dx[c as usize] += s.scale * gc;
                        }
                    }
                });
            FlexTensor::from_data(TensorData::new(dx, s.shape))
        });
    }
}

/// Forward over contiguous `[rows, vocab]` logits: the gathered values `[rows, m]` and each
/// row's log-sum-exp of `scale · logits`.
fn forward(logits: &FlexTensor, index: &[u32], m: usize, scale: f32) -> (FlexTensor, Vec<f32>) {
    let x = logits.as_slice::<f32>().expect("contiguous f32");
    let rows = index.len() / m;
    let vocab = x.len() / rows;
    let mut lse = vec![0f32; rows];
    lse.par_chunks_mut(TASK_ROWS)
        .enumerate()
        .for_each(|(task, lse)| {
            for (i, l) in lse.iter_mut().enumerate() {
                let r = task * TASK_ROWS + i;
                *l = Arch::new().dispatch(RowLse {
                    row: &x[r * vocab..(r + 1) * vocab],
                    scale,
                });
            }
        });
    let out: Vec<f32> = index
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let r = i / m;
            scale * x[r * vocab + c as usize] - lse[r]
        })
        .collect();
    (FlexTensor::from_data(TensorData::new(out, [rows, m])), lse)
}

/// `ln Σ_j exp(scale · row[j])`, by the row's maximum first.
struct RowLse<'a> {
    row: &'a [f32],
    scale: f32,
}

impl WithSimd for RowLse<'_> {
    type Output = f32;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> f32 {
        let (head, tail) = S::as_simd_f32s(self.row);
        let mut mx = simd.splat_f32s(f32::NEG_INFINITY);
        for &v in head {
            mx = simd.max_f32s(mx, v);
        }
        let max = tail.iter().fold(simd.reduce_max_f32s(mx), |a, &v| a.max(v));
        // exp(scale · (v − max)) = exp2(v · k − max · k).
        let k = self.scale * LOG2_E;
        let (kv, off) = (simd.splat_f32s(k), simd.splat_f32s(-max * k));
        let mut acc = simd.splat_f32s(0.0);
        for &v in head {
            acc = simd.add_f32s(acc, exp2(simd, simd.mul_add_f32s(v, kv, off)));
        }
        let scalar = pulp::Scalar::new();
        let sum = tail.iter().fold(simd.reduce_sum_f32s(acc), |a, &v| {
            a + exp2(scalar, v.mul_add(k, -max * k))
        });
        self.scale * max + sum.ln()
    }
}

/// `out[j] = weight · exp2(row[j] · k − offset)`: the softmax term of a row's gradient.
struct Spread<'a> {
    row: &'a [f32],
    out: &'a mut [f32],
    k: f32,
    offset: f32,
    weight: f32,
}

impl WithSimd for Spread<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (head, tail) = S::as_simd_f32s(self.row);
        let (out, out_tail) = S::as_mut_simd_f32s(self.out);
        let (kv, off, w) = (
            simd.splat_f32s(self.k),
            simd.splat_f32s(-self.offset),
            simd.splat_f32s(self.weight),
        );
        for (o, &v) in out.iter_mut().zip(head) {
            *o = simd.mul_f32s(w, exp2(simd, simd.mul_add_f32s(v, kv, off)));
        }
        let scalar = pulp::Scalar::new();
        for (o, &v) in out_tail.iter_mut().zip(tail) {
            *o = self.weight * exp2(scalar, v.mul_add(self.k, -self.offset));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Distribution;

    type Ad = burn::backend::Autodiff<Flex>;

    /// Logits with an odd vocabulary (a SIMD tail), large values (the maximum matters),
    /// columns repeated within a row, and a temperature.
    fn case() -> (Vec<f32>, [usize; 2], Vec<u32>, usize) {
        let (rows, vocab, m) = (37, 203, 4);
        let dev = Default::default();
        let x = Tensor::<Flex, 2>::random([rows, vocab], Distribution::Normal(0.0, 6.0), &dev);
        let x: Vec<f32> = x.into_data().to_vec().unwrap();
        let index: Vec<u32> = (0..rows * m)
            .map(|i| ((i * 7919 + i / m * 13) % vocab) as u32)
            .map(|c| if c % 5 == 0 { 3 } else { c })
            .collect();
        (x, [rows, vocab], index, m)
    }

    fn burn_ops<B: Backend>(x: Tensor<B, 2>, index: &[u32], m: usize, scale: f32) -> Tensor<B, 2> {
        let [rows, _] = x.dims();
        let idx: Vec<i64> = index.iter().map(|&i| i as i64).collect();
        let idx = Tensor::<B, 2, Int>::from_data(TensorData::new(idx, [rows, m]), &x.device());
        log_softmax(x.mul_scalar(scale), 1).gather(1, idx)
    }

    fn values<B: Backend>(t: Tensor<B, 2>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
            .fold(0f32, f32::max);
        assert!(worst < tol, "worst relative difference {worst}");
    }

    #[test]
    fn values_and_gradients_match_burns_ops() {
        let (x, shape, index, m) = case();
        let dev = Default::default();
        let weights = Tensor::<Ad, 2>::random([shape[0], m], Distribution::Default, &dev);
        for scale in [1.0f32, 1.0 / 0.7] {
            let run = |fast: bool| {
                let t = Tensor::<Ad, 2>::from_data(TensorData::new(x.clone(), shape), &dev)
                    .require_grad();
                let out = if fast {
                    fused(t.clone(), &index, m, scale).expect("the fused path applies")
                } else {
                    burn_ops(t.clone(), &index, m, scale)
                };
                let grads = (out.clone() * weights.clone()).sum().backward();
                let g: Vec<f32> = t.grad(&grads).unwrap().into_data().to_vec().unwrap();
                let v: Vec<f32> = out.into_data().to_vec().unwrap();
                (v, g)
            };
            let ((v, g), (v_ref, g_ref)) = (run(true), run(false));
            close(&v, &v_ref, 1e-5);
            close(&g, &g_ref, 1e-5);
        }
    }

    #[test]
    fn the_inner_backend_and_an_untracked_tensor_give_the_same_values() {
        let (x, shape, index, m) = case();
        let dev = Default::default();
        let plain = Tensor::<Flex, 2>::from_data(TensorData::new(x.clone(), shape), &dev);
        let reference = values(burn_ops(plain.clone(), &index, m, 1.3));
        let fast = |t| fused(t, &index, m, 1.3).expect("the fused path applies");
        close(&values(fast(plain)), &reference, 1e-5);
        let untracked = Tensor::<Ad, 2>::from_data(TensorData::new(x, shape), &dev);
        let fast = |t| fused(t, &index, m, 1.3).expect("the fused path applies");
        close(&values(fast(untracked)), &reference, 1e-5);
    }
}

//! SwiGLU on the CPU backend: `silu(x W_gate) · (x W_up)`.
//!
//! Written by hand because burn-flex's `silu` calls libm's `exp` once per element on one
//! thread and the product takes another pass: for a 12,000-token prompt that was about 40 ms a
//! layer, more than the matmuls around it. [`try_swiglu`] computes both projections a column
//! panel at a time with the kernel of [`super::simd_kernels`] and combines them while the panel
//! is in the L1 cache, so neither projection is ever written out whole; [`try_silu_mul`] is the
//! product alone (for projections with adapters). Both use one vectorized `exp2`, the same for
//! every element, so an element's value does not depend on where it falls in a vector.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::prelude::*;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

use super::flex::{as_flex, as_tracked, contiguous_f32, from_tracked, from_vec, AdTensor};
use super::prefill_matmul::{rows_per_task, TASK_ROWS};

use super::simd_kernels::{exp2, panel, Accumulate, Operand, PAD};

/// Elements one rayon task covers.
const TASK: usize = 1 << 14;

/// `silu(gate) · up` when `B` is the CPU backend and both are contiguous f32 of one shape, or
/// burn-flex under autodiff (recorded as one operation with its own backward: burn records
/// `silu` and the product apart, with libm's `exp` forward and backward); `None` otherwise (the
/// caller uses burn's ops).
pub fn try_silu_mul<B: Backend, const D: usize>(
    gate: &Tensor<B, D>,
    up: &Tensor<B, D>,
) -> Option<Tensor<B, D>> {
    let dims = gate.dims();
    if dims != up.dims() || super::flex::burn_ops_only() {
        return None;
    }
    if let (Some(g), Some(u)) = (as_flex::<B, D>(gate.clone()), as_flex::<B, D>(up.clone())) {
        let out = silu_mul(g.as_slice::<f32>()?, u.as_slice::<f32>()?);
        return from_vec(out, dims);
    }
    from_tracked(tracked(as_tracked(gate)?, as_tracked(up)?, dims.to_vec())?)
}

/// The product recorded in the graph; its backward needs both inputs.
#[derive(Debug)]
struct SiluMul;

#[derive(Clone, Debug)]
struct SiluMulState {
    gate: FlexTensor,
    up: FlexTensor,
    shape: Vec<usize>,
}

fn tracked(gate: AdTensor, up: AdTensor, shape: Vec<usize>) -> Option<AdTensor> {
    let (g, u) = (
        contiguous_f32(gate.primitive.clone())?,
        contiguous_f32(up.primitive.clone())?,
    );
    let out = silu_mul(g.as_slice()?, u.as_slice()?);
    let out = FlexTensor::from_data(TensorData::new(out, shape.clone()));
    // Compute-bound: the backward keeps both inputs rather than asking a checkpointer.
    Some(
        match SiluMul
            .prepare::<NoCheckpointing>([gate.node.clone(), up.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                SiluMulState {
                    gate: g,
                    up: u,
                    shape,
                },
                out,
            ),
            OpsKind::UnTracked(prep) => prep.finish(out),
        },
    )
}

impl Backward<Flex, 2> for SiluMul {
    type State = SiluMulState;

    fn backward(self, ops: Ops<SiluMulState, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [ng, nu] = ops.parents;
        let grad = contiguous_f32(grads.consume::<Flex>(&ops.node)).expect("f32 gradients");
        let s = ops.state;
        let (dg, du) = silu_mul_backward(
            s.gate.as_slice().expect("contiguous"),
            s.up.as_slice().expect("contiguous"),
            grad.as_slice().expect("contiguous"),
        );
        if let Some(node) = ng {
            let t = FlexTensor::from_data(TensorData::new(dg, s.shape.clone()));
            grads.register::<Flex>(node.id, t);
        }
        if let Some(node) = nu {
            grads.register::<Flex>(node.id, FlexTensor::from_data(TensorData::new(du, s.shape)));
        }
    }
}

/// The gradients of `silu(gate) · up` given the output's: with `σ` the logistic of the gate,
/// `d gate = dy · up · σ (1 + gate (1 − σ))` and `d up = dy · gate · σ`.
fn silu_mul_backward(gate: &[f32], up: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    assert!(gate.len() == up.len() && up.len() == dy.len());
    let (mut dg, mut du) = (vec![0f32; gate.len()], vec![0f32; gate.len()]);
    dg.par_chunks_mut(TASK)
        .zip(du.par_chunks_mut(TASK))
        .enumerate()
        .for_each(|(i, (dg, du))| {
            let at = i * TASK..i * TASK + dg.len();
            Arch::new().dispatch(BackChunk {
                gate: &gate[at.clone()],
                up: &up[at.clone()],
                dy: &dy[at],
                dg,
                du,
            })
        });
    (dg, du)
}

struct BackChunk<'a> {
    gate: &'a [f32],
    up: &'a [f32],
    dy: &'a [f32],
    dg: &'a mut [f32],
    du: &'a mut [f32],
}

impl WithSimd for BackChunk<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        #[inline(always)]
        fn one<S: Simd>(simd: S, g: S::f32s, u: S::f32s, dy: S::f32s) -> (S::f32s, S::f32s) {
            let one = simd.splat_f32s(1.0);
            let e = exp2(
                simd,
                simd.mul_f32s(g, simd.splat_f32s(-std::f32::consts::LOG2_E)),
            );
            let sig = simd.div_f32s(one, simd.add_f32s(one, e));
            let du = simd.mul_f32s(dy, simd.mul_f32s(g, sig));
            // σ (1 + g (1 − σ))
            let slope = simd.mul_f32s(sig, simd.mul_add_f32s(g, simd.sub_f32s(one, sig), one));
            (simd.mul_f32s(simd.mul_f32s(dy, u), slope), du)
        }
        let (g, g_tail) = S::as_simd_f32s(self.gate);
        let (u, u_tail) = S::as_simd_f32s(self.up);
        let (y, y_tail) = S::as_simd_f32s(self.dy);
        let (dg, dg_tail) = S::as_mut_simd_f32s(self.dg);
        let (du, du_tail) = S::as_mut_simd_f32s(self.du);
        for ((((dg, du), &g), &u), &y) in dg.iter_mut().zip(du).zip(g).zip(u).zip(y) {
            (*dg, *du) = one(simd, g, u, y);
        }
        let scalar = pulp::Scalar::new();
        for ((((dg, du), &g), &u), &y) in dg_tail
            .iter_mut()
            .zip(du_tail)
            .zip(g_tail)
            .zip(u_tail)
            .zip(y_tail)
        {
            (*dg, *du) = one(scalar, g, u, y);
        }
    }
}

/// `out[i] = gate[i] / (1 + e^-gate[i]) · up[i]`.
pub fn silu_mul(gate: &[f32], up: &[f32]) -> Vec<f32> {
    assert_eq!(gate.len(), up.len());
    let mut out = vec![0f32; gate.len()];
    if gate.len() <= TASK {
        // One task (small inputs): no hand-off to the pool.
        Arch::new().dispatch(Chunk {
            gate,
            up,
            out: &mut out,
        });
        return out;
    }
    out.par_chunks_mut(TASK)
        .zip(gate.par_chunks(TASK).zip(up.par_chunks(TASK)))
        .for_each(|(out, (gate, up))| Arch::new().dispatch(Chunk { gate, up, out }));
    out
}

struct Chunk<'a> {
    gate: &'a [f32],
    up: &'a [f32],
    out: &'a mut [f32],
}

impl WithSimd for Chunk<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        silu_mul_into(simd, self.gate, self.up, self.out)
    }
}

/// `out = silu(gate) · up`, element by element.
#[inline(always)]
fn silu_mul_into<S: Simd>(simd: S, gate: &[f32], up: &[f32], out: &mut [f32]) {
    #[inline(always)]
    fn one<S: Simd>(simd: S, g: S::f32s, u: S::f32s) -> S::f32s {
        let e = exp2(
            simd,
            simd.mul_f32s(g, simd.splat_f32s(-std::f32::consts::LOG2_E)),
        );
        simd.mul_f32s(simd.div_f32s(g, simd.add_f32s(simd.splat_f32s(1.0), e)), u)
    }
    let (g, g_tail) = S::as_simd_f32s(gate);
    let (u, u_tail) = S::as_simd_f32s(up);
    let (o, o_tail) = S::as_mut_simd_f32s(out);
    for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
        *o = one(simd, g, u);
    }
    // The tail through the scalar form of the same arithmetic.
    let scalar = pulp::Scalar::new();
    for ((o, &g), &u) in o_tail.iter_mut().zip(g_tail).zip(u_tail) {
        *o = one(scalar, g, u);
    }
}

/// `silu(x W_gate) · (x W_up)` for `x [rows, k]` and both weights `[k, n]`, when `B` is the CPU
/// backend, all are contiguous f32, `n` is a whole number of column panels and the rows are
/// many; `None` otherwise (the caller uses the projections and [`try_silu_mul`], which give the
/// same values). Decode steps and short prompts take the projections: their few rows split by
/// columns over the pool there.
pub fn try_swiglu<B: Backend>(
    x: &Tensor<B, 2>,
    gate: &Tensor<B, 2>,
    up: &Tensor<B, 2>,
) -> Option<Tensor<B, 2>> {
    let [m, k] = x.dims();
    let [kg, n] = gate.dims();
    if m == 0
        || k == 0
        || n % PAD != 0
        || kg != k
        || up.dims() != [k, n]
        || super::small_matmul::in_decode()
        || (m <= TASK_ROWS && n > super::prefill_matmul::MIN_TASK_COLUMNS)
    {
        // Few rows over many columns (a short prompt): the projections split by columns over
        // the pool, which this fused form cannot; they give the same values.
        return None;
    }
    let (xf, gf, uf) = (
        as_flex(x.clone())?,
        as_flex(gate.clone())?,
        as_flex(up.clone())?,
    );
    let y = swiglu(
        xf.as_slice::<f32>()?,
        gf.as_slice::<f32>()?,
        uf.as_slice::<f32>()?,
        m,
        k,
        n,
    );
    from_vec(y, [m, n])
}

/// `silu(x W_gate) · (x W_up)`, row-major, `x [m, k]`, weights `[k, n]`.
pub fn swiglu(x: &[f32], w_gate: &[f32], w_up: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert_eq!(x.len(), m * k);
    assert_eq!(w_gate.len(), k * n);
    assert_eq!(w_up.len(), k * n);
    assert_eq!(n % PAD, 0, "whole column panels");
    let mut y = vec![0f32; m * n];
    let task = |x: &[f32], y: &mut [f32]| {
        Arch::new().dispatch(SwigluRows {
            x,
            w_gate,
            w_up,
            y,
            k,
            n,
        })
    };
    if m <= TASK_ROWS {
        // One task (a short prompt): no hand-off to the pool.
        task(x, &mut y);
    } else {
        let rows = rows_per_task(m);
        y.par_chunks_mut(rows * n)
            .zip(x.par_chunks(rows * k))
            .for_each(|(y, x)| task(x, y));
    }
    y
}

/// One task of [`swiglu`]: a slice of rows, column panel by column panel.
struct SwigluRows<'a> {
    x: &'a [f32],
    w_gate: &'a [f32],
    w_up: &'a [f32],
    y: &'a mut [f32],
    k: usize,
    n: usize,
}

impl WithSimd for SwigluRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let SwigluRows {
            x,
            w_gate,
            w_up,
            y,
            k,
            n,
        } = self;
        let m = x.len() / k;
        let width = 2 * S::F32_LANES;
        let mut gate = vec![0f32; m * width];
        let mut up = vec![0f32; m * width];
        for c0 in (0..n).step_by(width) {
            for (w, dst) in [(w_gate, &mut gate), (w_up, &mut up)] {
                panel(
                    simd,
                    m,
                    k,
                    Operand { data: x, stride: k },
                    Operand {
                        data: &w[c0..],
                        stride: n,
                    },
                    dst,
                    width,
                    Accumulate::No,
                );
            }
            for ((y, g), u) in y
                .chunks_exact_mut(n)
                .zip(gate.chunks_exact(width))
                .zip(up.chunks_exact(width))
            {
                silu_mul_into(simd, g, u, &mut y[c0..c0 + width]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use burn::tensor::activation::silu;

    /// The fused form equals the projections (the CPU matmul) followed by the product, element
    /// for element, for widths that are and are not whole vector pairs.
    #[test]
    fn the_fused_form_equals_projections_then_product() {
        for (m, k, n) in [(200, 24, 64), (7, 16, 32), (130, 40, 96)] {
            let values = |len: usize, seed: usize| -> Vec<f32> {
                (0..len)
                    .map(|i| ((i * 31 + seed) % 97) as f32 * 0.02 - 0.9)
                    .collect()
            };
            let (x, wg, wu) = (values(m * k, 1), values(k * n, 2), values(k * n, 3));
            let fused = swiglu(&x, &wg, &wu, m, k, n);
            let gate = super::super::prefill_matmul::matmul(&x, &wg, m, k, n);
            let up = super::super::prefill_matmul::matmul(&x, &wu, m, k, n);
            assert_eq!(fused, silu_mul(&gate, &up), "{m}x{k}x{n}");
        }
    }

    /// Against burn's `silu` and product, over the range where both matter and beyond.
    #[test]
    fn matches_burns_silu_and_product() {
        let n = 3 * TASK + 13;
        let gate: Vec<f32> = (0..n).map(|i| (i as f32 / n as f32 - 0.5) * 60.0).collect();
        let up: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let dev = Default::default();
        let g = Tensor::<CpuBackend, 2>::from_data(TensorData::new(gate, [1, n]), &dev);
        let u = Tensor::<CpuBackend, 2>::from_data(TensorData::new(up, [1, n]), &dev);
        let ours = try_silu_mul(&g, &u).expect("the CPU backend takes this path");
        let theirs = silu(g) * u;
        let (a, e) = (
            ours.into_data().to_vec::<f32>().unwrap(),
            theirs.into_data().to_vec::<f32>().unwrap(),
        );
        for (i, (x, y)) in a.iter().zip(&e).enumerate() {
            assert!(
                (x - y).abs() <= 1e-6 * y.abs().max(1.0),
                "element {i}: {x} vs {y}"
            );
        }
    }

    /// Under autodiff the product is one operation: its value and both gradients equal those
    /// of burn's `silu` and product, over a range of gates where the slope changes sign.
    #[test]
    fn the_tracked_product_has_burns_gradients() {
        type Ad = burn::backend::Autodiff<Flex>;
        let n = 2 * TASK + 77;
        let gate: Vec<f32> = (0..n).map(|i| (i as f32 / n as f32 - 0.5) * 24.0).collect();
        let up: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 * 0.3 - 1.5).collect();
        let w: Vec<f32> = (0..n).map(|i| ((i * 5) % 13) as f32 * 0.1 - 0.6).collect();
        let dev = Default::default();
        let run = |fused: bool| {
            let g =
                Tensor::<Ad, 1>::from_data(TensorData::new(gate.clone(), [n]), &dev).require_grad();
            let u =
                Tensor::<Ad, 1>::from_data(TensorData::new(up.clone(), [n]), &dev).require_grad();
            let y = if fused {
                try_silu_mul(&g, &u).expect("autodiff over burn-flex takes this path")
            } else {
                silu(g.clone()) * u.clone()
            };
            let wt = Tensor::<Ad, 1>::from_data(TensorData::new(w.clone(), [n]), &dev);
            let grads = (y.clone() * wt).sum().backward();
            let v = |t: Tensor<Flex, 1>| t.into_data().to_vec::<f32>().unwrap();
            [
                v(y.inner()),
                v(g.grad(&grads).unwrap()),
                v(u.grad(&grads).unwrap()),
            ]
        };
        let (ours, theirs) = (run(true), run(false));
        for (name, (a, e)) in ["value", "d gate", "d up"]
            .iter()
            .zip(ours.iter().zip(&theirs))
        {
            for (i, (x, y)) in a.iter().zip(e).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-5 * y.abs().max(1.0),
                    "{name} {i}: {x} vs {y}"
                );
            }
        }
    }
}

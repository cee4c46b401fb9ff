//! `x w` as one operation with a backward of its own when the backend is burn-flex under
//! autodiff (the trainer's CPU backend): the projections of a training step.
//!
//! The products are the `gemm` crate's, as in burn-flex; written here because burn-flex 0.21
//! allocates each product's output as a zeroed byte vector and then copies it into a 16-byte
//! aligned one (`FlexTensor::empty` through `Bytes::from_bytes_vec`), two extra passes over
//! every projection's output forward and over both gradients backward, a tenth of the step of
//! the 4-layer benchmark model. Here outputs are `Vec<f32>` handed to the tensor as they are,
//! and the transposes of the backward are strides, never copies.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::prelude::*;

use super::flex::{as_tracked, contiguous_f32, from_tracked, AdTensor};

/// Products with fewer multiply-adds than this stay on the calling thread (burn-flex's
/// threshold).
const PARALLEL_WORK: usize = 192 * 192 * 192;

/// `x [m, k] · w [k, n]` recorded as one operation when `B` is burn-flex under autodiff;
/// `None` for any other backend.
pub fn try_tracked_matmul<B: Backend>(x: &Tensor<B, 2>, w: &Tensor<B, 2>) -> Option<Tensor<B, 2>> {
    let ([m, k], [kw, n]) = (x.dims(), w.dims());
    if k != kw || m * k * n == 0 || super::flex::burn_ops_only() {
        return None;
    }
    from_tracked(tracked(as_tracked(x)?, as_tracked(w)?, [m, k, n])?)
}

/// A row-major operand of a product: `data[r · row + c · col]` is element `(r, c)`.
#[derive(Clone, Copy)]
struct Operand<'a> {
    data: &'a [f32],
    row: usize,
    col: usize,
}

/// `a [m, k] · b [k, n]`, row-major.
fn product(a: Operand, b: Operand, [m, k, n]: [usize; 3]) -> Vec<f32> {
    // Every element read below lies inside its slice; checked here once.
    let fits = |o: Operand, rows: usize, cols: usize| {
        (rows - 1) * o.row + (cols - 1) * o.col < o.data.len()
    };
    assert!(fits(a, m, k) && fits(b, k, n));
    let mut out = vec![0f32; m * n];
    let parallelism = if m * n * k >= PARALLEL_WORK {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the operands were checked to hold every element their strides reach; `out` is
    // `m × n` row-major, written (not read: `read_dst` false) through its own strides.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.data.as_ptr(),
            a.col as isize,
            a.row as isize,
            b.data.as_ptr(),
            b.col as isize,
            b.row as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
    out
}

/// The operation recorded in the graph.
#[derive(Debug)]
struct Matmul;

/// Both inputs, contiguous, and the sizes `[m, k, n]`.
#[derive(Clone, Debug)]
struct State {
    x: FlexTensor,
    w: FlexTensor,
    sizes: [usize; 3],
}

fn tracked(x: AdTensor, w: AdTensor, sizes: [usize; 3]) -> Option<AdTensor> {
    let [m, k, n] = sizes;
    let (xf, wf) = (
        contiguous_f32(x.primitive.clone())?,
        contiguous_f32(w.primitive.clone())?,
    );
    let y = product(
        Operand {
            data: xf.as_slice()?,
            row: k,
            col: 1,
        },
        Operand {
            data: wf.as_slice()?,
            row: n,
            col: 1,
        },
        sizes,
    );
    let y = FlexTensor::from_data(TensorData::new(y, [m, n]));
    // Compute-bound: the backward keeps both inputs rather than asking a checkpointer.
    Some(
        match Matmul
            .prepare::<NoCheckpointing>([x.node.clone(), w.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                State {
                    x: xf,
                    w: wf,
                    sizes,
                },
                y,
            ),
            OpsKind::UnTracked(prep) => prep.finish(y),
        },
    )
}

impl Backward<Flex, 2> for Matmul {
    type State = State;

    fn backward(self, ops: Ops<State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [nx, nw] = ops.parents;
        let dy = contiguous_f32(grads.consume::<Flex>(&ops.node)).expect("f32 gradients");
        let State { x, w, sizes } = ops.state;
        let [m, k, n] = sizes;
        let dy = Operand {
            data: dy.as_slice().expect("contiguous"),
            row: n,
            col: 1,
        };
        if let Some(node) = nx {
            // dx = dy wᵀ: wᵀ is w read by columns.
            let wt = Operand {
                data: w.as_slice().expect("contiguous"),
                row: 1,
                col: n,
            };
            let dx = product(dy, wt, [m, n, k]);
            grads.register::<Flex>(node.id, FlexTensor::from_data(TensorData::new(dx, [m, k])));
        }
        if let Some(node) = nw {
            // dw = xᵀ dy.
            let xt = Operand {
                data: x.as_slice().expect("contiguous"),
                row: 1,
                col: k,
            };
            let dw = product(xt, dy, [k, m, n]);
            grads.register::<Flex>(node.id, FlexTensor::from_data(TensorData::new(dw, [k, n])));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Ad = burn::backend::Autodiff<Flex>;

    fn values(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 37 + seed * 11) % 101) as f32 * 0.02 - 1.0)
            .collect()
    }

    /// The product and both gradients equal burn's matmul, for shapes below and above the
    /// parallel threshold, and with only one input tracked (a frozen base weight under LoRA).
    #[test]
    fn values_and_gradients_match_burns_matmul() {
        let dev = Default::default();
        for ([m, k, n], track_w) in [
            ([5, 3, 7], true),
            ([300, 256, 768], true),
            ([64, 96, 32], false),
        ] {
            let run = |fused: bool| {
                let x = Tensor::<Ad, 2>::from_data(TensorData::new(values(m * k, 1), [m, k]), &dev)
                    .require_grad();
                let mut w =
                    Tensor::<Ad, 2>::from_data(TensorData::new(values(k * n, 2), [k, n]), &dev);
                if track_w {
                    w = w.require_grad();
                }
                let y = if fused {
                    try_tracked_matmul(&x, &w).expect("autodiff over burn-flex")
                } else {
                    x.clone().matmul(w.clone())
                };
                let r = Tensor::<Ad, 2>::from_data(TensorData::new(values(m * n, 3), [m, n]), &dev);
                let grads = (y.clone() * r).sum().backward();
                let v = |t: Tensor<Flex, 2>| t.into_data().to_vec::<f32>().unwrap();
                (
                    v(y.inner()),
                    v(x.grad(&grads).unwrap()),
                    w.grad(&grads).map(v),
                )
            };
            let (ours, theirs) = (run(true), run(false));
            assert_eq!(ours.2.is_some(), track_w);
            let close = |a: &[f32], e: &[f32], what: &str| {
                for (i, (x, y)) in a.iter().zip(e).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                        "{m}x{k}x{n} {what} {i}: {x} vs {y}"
                    );
                }
            };
            close(&ours.0, &theirs.0, "product");
            close(&ours.1, &theirs.1, "dx");
            if let (Some(a), Some(e)) = (&ours.2, &theirs.2) {
                close(a, e, "dw");
            }
        }
    }

    #[test]
    fn other_backends_are_left_to_burn() {
        let t = Tensor::<Flex, 2>::zeros([3, 3], &Default::default());
        assert!(try_tracked_matmul(&t, &t).is_none());
    }
}

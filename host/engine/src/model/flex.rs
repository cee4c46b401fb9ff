//! The bridge between burn tensors and the CPU backend's storage, for the hand-written CPU
//! kernels beside the model (each takes its fast path only when the backend is burn-flex, and
//! leaves CUDA and autodiff to burn).

use burn::backend::flex::FlexTensor;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use std::any::Any;

/// The tensor's CPU storage, when `B` is burn-flex (not wrapped in autodiff).
pub fn as_flex<B: Backend, const D: usize>(t: Tensor<B, D>) -> Option<FlexTensor> {
    let TensorPrimitive::Float(p) = t.into_primitive() else {
        return None;
    };
    let p: Box<dyn Any> = Box::new(p);
    p.downcast::<FlexTensor>().ok().map(|b| *b)
}

/// A row-major f32 result as a tensor of `B` (burn-flex), `None` for any other backend.
pub fn from_vec<B: Backend, const D: usize>(
    data: Vec<f32>,
    shape: [usize; D],
) -> Option<Tensor<B, D>> {
    let t = FlexTensor::from_data(TensorData::new(data, shape));
    let prim: Box<dyn Any> = Box::new(t);
    let prim = *prim.downcast::<B::FloatTensorPrimitive>().ok()?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(prim)))
}

/// `x [batch, seq, heads, width]` as a contiguous `[batch, heads, seq, width]` (what the KV cache
/// keeps) on the CPU backend; other backends get burn's `swap_dims` view. burn-flex would make
/// that view contiguous later (when the cache grows) through its element-by-element strided
/// iterator; this is one plain pass per head.
pub fn heads_major<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, s, h, d] = x.dims();
    let fast = as_flex(x.clone()).and_then(|f| {
        let xs = f.as_slice::<f32>()?;
        from_vec(transpose_seq_heads(xs, [b, s, h, d]), [b, h, s, d])
    });
    fast.unwrap_or_else(|| x.swap_dims(1, 2))
}

/// `[b, s, h, d]` to `[b, h, s, d]`, row-major.
fn transpose_seq_heads(xs: &[f32], [_, s, h, d]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0f32; xs.len()];
    for (index, plane) in out.chunks_exact_mut(s * d).enumerate() {
        let (bi, head) = (index / h, index % h);
        for (i, row) in plane.chunks_exact_mut(d).enumerate() {
            let src = ((bi * s + i) * h + head) * d;
            row.copy_from_slice(&xs[src..src + d]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    #[test]
    fn heads_major_equals_burns_transpose() {
        let dims = [2, 5, 3, 4];
        let data: Vec<f32> = (0..120).map(|i| i as f32).collect();
        let x =
            Tensor::<CpuBackend, 4>::from_data(TensorData::new(data, dims), &Default::default());
        assert_eq!(
            heads_major(x.clone()).into_data().to_vec::<f32>().unwrap(),
            x.swap_dims(1, 2).into_data().to_vec::<f32>().unwrap()
        );
    }
}

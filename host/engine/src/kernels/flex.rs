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

/// The float tensor of burn-flex under autodiff (the trainer's CPU backend): the tensor and its
/// node in the graph. The operations with a backward of their own downcast to it.
pub type AdTensor =
    <burn::backend::Autodiff<burn::backend::Flex> as burn::tensor::backend::BackendTypes>::FloatTensorPrimitive;

/// The tensor's primitive with its graph node, when `B` is burn-flex under autodiff.
pub fn as_tracked<B: Backend, const D: usize>(t: &Tensor<B, D>) -> Option<AdTensor> {
    let TensorPrimitive::Float(p) = t.clone().into_primitive() else {
        return None;
    };
    let p: Box<dyn Any> = Box::new(p);
    p.downcast::<AdTensor>().ok().map(|p| *p)
}

/// An operation's output under autodiff over burn-flex as a tensor of `B` (which is that
/// backend whenever [`as_tracked`] gave its inputs).
pub fn from_tracked<B: Backend, const D: usize>(t: AdTensor) -> Option<Tensor<B, D>> {
    let t: Box<dyn Any> = Box::new(t);
    let t = *t.downcast::<B::FloatTensorPrimitive>().ok()?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(t)))
}

/// `t` as contiguous f32 storage (a copy only when its strides are not row-major; a row-major
/// view at an offset is read in place), `None` for another element type.
pub fn contiguous_f32(t: FlexTensor) -> Option<FlexTensor> {
    if t.dtype() != burn::tensor::DType::F32 {
        return None;
    }
    // `as_slice` is `None` when the strides are not row-major.
    Some(if t.as_slice::<f32>().is_some() {
        t
    } else {
        t.to_contiguous()
    })
}

#[cfg(test)]
thread_local! {
    /// Set by tests that compare the hand-written operations with burn's own.
    pub(crate) static BURN_OPS_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the hand-written operations under autodiff stand aside for burn's ops (only ever in
/// the engine's own tests, which compare the two on a whole model).
#[inline(always)]
pub(crate) fn burn_ops_only() -> bool {
    #[cfg(test)]
    return BURN_OPS_ONLY.with(|c| c.get());
    #[cfg(not(test))]
    false
}

/// Whether `B` is burn-flex itself (the CPU kernels apply), not wrapped in autodiff.
pub fn is_flex<B: Backend>(device: &B::Device) -> bool {
    as_flex(Tensor::<B, 1>::zeros([1], device)).is_some()
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
    let fast = (b * s * h * d > 0)
        .then(|| as_flex(x.clone()))
        .flatten()
        .and_then(|f| {
            let xs = f.as_slice::<f32>()?;
            from_vec(transpose_seq_heads(xs, [b, s, h, d]), [b, h, s, d])
        });
    fast.unwrap_or_else(|| x.swap_dims(1, 2))
}

/// `a` and `b` (`[batch, heads, positions, width]`, any strides with contiguous rows) joined
/// along the positions, in one copy on the CPU backend (burn-flex first makes a strided view
/// contiguous, then copies it again into the result); other backends get burn's `cat`.
pub fn cat_positions<B: Backend>(a: Tensor<B, 4>, b: Tensor<B, 4>) -> Tensor<B, 4> {
    let ([n, h, ta, d], [nb, hb, tb, db]) = (a.dims(), b.dims());
    let fast = (n == nb && h == hb && d == db)
        .then(|| {
            let (af, bf) = (as_flex(a.clone())?, as_flex(b.clone())?);
            let (ra, rb) = (Rows::of(&af, d)?, Rows::of(&bf, d)?);
            let t = ta + tb;
            let mut out = vec![0f32; n * h * t * d];
            for (index, plane) in out.chunks_exact_mut(t * d).enumerate() {
                let (bi, head) = (index / h, index % h);
                let (pa, pb) = plane.split_at_mut(ta * d);
                ra.copy_plane(bi, head, pa);
                rb.copy_plane(bi, head, pb);
            }
            from_vec(out, [n, h, t, d])
        })
        .flatten();
    fast.unwrap_or_else(|| Tensor::cat(vec![a, b], 2))
}

/// The tensor as it is when its rows are contiguous with positive strides (a transposed or
/// narrowed view, which [`Rows`] reads in place), else a contiguous copy.
pub fn readable_in_place(t: FlexTensor) -> FlexTensor {
    let l = t.layout();
    if l.has_positive_strides() && l.strides().last() == Some(&1) {
        t
    } else {
        t.to_contiguous()
    }
}

/// A 4-D f32 tensor `[batch, heads, positions, width]` read in place: its rows along the width
/// are contiguous, the other axes have any (non-negative) strides.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a> {
    data: &'a [f32],
    offset: usize,
    strides: [usize; 3],
    width: usize,
}

impl<'a> Rows<'a> {
    /// The rows of `t` (`width` wide), when it is f32 with such a layout.
    pub fn of(t: &'a FlexTensor, width: usize) -> Option<Self> {
        if t.dtype() != burn::tensor::DType::F32 {
            return None;
        }
        let l = t.layout();
        let st = l.strides();
        if st.len() != 4 || (st[3] != 1 && width > 1) || st.iter().any(|&x| x < 0) {
            return None;
        }
        Some(Rows {
            data: t.storage::<f32>(),
            offset: l.start_offset(),
            strides: [st[0] as usize, st[1] as usize, st[2] as usize],
            width,
        })
    }

    /// Rows `width` wide of `data` at `offset + b·strides[0] + h·strides[1] + i·strides[2]`.
    pub fn new(data: &'a [f32], offset: usize, strides: [usize; 3], width: usize) -> Self {
        Rows {
            data,
            offset,
            strides,
            width,
        }
    }

    /// Row `[b, h, i, ..]`.
    pub fn row(&self, b: usize, h: usize, i: usize) -> &'a [f32] {
        let o = self.offset + b * self.strides[0] + h * self.strides[1] + i * self.strides[2];
        &self.data[o..o + self.width]
    }

    /// Rows `0..` of `(b, h)` into `out` (whole rows), in one copy when they are adjacent.
    fn copy_plane(&self, b: usize, h: usize, out: &mut [f32]) {
        if self.strides[2] == self.width {
            let o = self.offset + b * self.strides[0] + h * self.strides[1];
            out.copy_from_slice(&self.data[o..o + out.len()]);
        } else {
            for (i, row) in out.chunks_exact_mut(self.width).enumerate() {
                row.copy_from_slice(self.row(b, h, i));
            }
        }
    }
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
    fn joining_views_along_positions_equals_burns_cat() {
        let dev = Default::default();
        let data: Vec<f32> = (0..2 * 3 * 10 * 4).map(|i| i as f32).collect();
        let full = Tensor::<CpuBackend, 4>::from_data(TensorData::new(data, [2, 3, 10, 4]), &dev);
        // A narrowed view (a cached prefix) and a transposed one (new keys).
        let a = full.clone().slice([0..2, 0..3, 0..7, 0..4]);
        let b = Tensor::<CpuBackend, 4>::from_data(
            full.clone()
                .slice([0..2, 0..3, 7..10, 0..4])
                .swap_dims(1, 2)
                .into_data(),
            &dev,
        )
        .swap_dims(1, 2);
        assert_eq!(
            cat_positions(a.clone(), b.clone())
                .into_data()
                .to_vec::<f32>()
                .unwrap(),
            Tensor::cat(vec![a, b], 2)
                .into_data()
                .to_vec::<f32>()
                .unwrap()
        );
        assert_eq!(
            cat_positions(
                full.clone().slice([0..2, 0..3, 0..7, 0..4]),
                full.clone().slice([0..2, 0..3, 7..10, 0..4])
            )
            .into_data()
            .to_vec::<f32>()
            .unwrap(),
            full.into_data().to_vec::<f32>().unwrap()
        );
    }

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

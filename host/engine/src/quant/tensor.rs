//! The block matrices on burn tensors: the CPU backend's tensors go to the slice products
//! in place, other backends (autodiff, CUDA) multiply by a dequantised copy.

use burn::prelude::*;

use super::storage::QuantMatrix;
use crate::kernels::flex::{as_flex, from_vec};

/// Most activation rows the block kernel takes (a decode step's batch).
pub const MAX_KERNEL_ROWS: usize = 64;

impl QuantMatrix {
    /// `x [m, cols]` times the transpose on the CPU backend: inside a decode step
    /// ([`crate::kernels::small_matmul::decode_scope`]) the block kernel for up to
    /// [`MAX_KERNEL_ROWS`] rows, otherwise (prefill, scoring) [`Self::matmul_many`]; other
    /// backends (autodiff, CUDA) take the general matmul on a dequantised copy.
    pub fn forward<B: Backend>(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [m, k] = x.dims();
        assert_eq!(
            k, self.cols,
            "input width {k} for a [{}, {k}] matrix",
            self.rows
        );
        let decode = m <= MAX_KERNEL_ROWS && crate::kernels::small_matmul::in_decode();
        let fast = (m > 0)
            .then(|| as_flex::<B, 2>(x.clone()))
            .flatten()
            .and_then(|f| {
                let xs = f.as_slice::<f32>()?;
                let y = if decode {
                    self.matmul(xs, m)
                } else {
                    self.matmul_many(xs, m)
                };
                from_vec::<B, 2>(y, [m, self.rows])
            });
        if let Some(y) = fast {
            return y;
        }
        let w = self.decoded(&x.device());
        x.matmul(w)
    }

    /// [`Self::forward`] of matrices that read the same `x`, in one parallel region
    /// ([`Self::matmul_group`]), inside a decode step on the CPU backend; `None` elsewhere
    /// (the caller takes each matrix's [`Self::forward`]).
    pub fn forward_group<B: Backend, const N: usize>(
        mats: [&Self; N],
        x: &Tensor<B, 2>,
    ) -> Option<[Tensor<B, 2>; N]> {
        let [m, k] = x.dims();
        let decode = m > 0 && m <= MAX_KERNEL_ROWS && crate::kernels::small_matmul::in_decode();
        if !decode || mats.iter().any(|q| q.cols != k) {
            return None;
        }
        let f = as_flex::<B, 2>(x.clone())?;
        let ys = Self::matmul_group(mats, f.as_slice::<f32>()?, m);
        let out: Vec<Tensor<B, 2>> = ys
            .into_iter()
            .zip(mats)
            .map(|(y, q)| from_vec::<B, 2>(y, [m, q.rows]))
            .collect::<Option<_>>()?;
        out.try_into().ok()
    }

    /// The matrix decoded to f32 on `device`, as the `[cols, rows]` transpose a matmul takes
    /// (the general path of backends without the block kernels). Row-major as decoded, used
    /// through a transposed view: a transposing copy of a whole weight each forward pass
    /// (training over blocks) costs more than the matmul's strided read.
    pub fn decoded<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2> {
        Tensor::<B, 2>::from_data(
            TensorData::new(self.dequantise(), [self.rows, self.cols]),
            device,
        )
        .transpose()
    }
}

//! A model's tensors on their way in and out, under Hugging Face names and layouts: the source
//! a model is built from and the exports it writes. Files of any format implement and consume
//! these ([`crate::weights`]), so the model does not depend on them.

use anyhow::Result;
use burn::prelude::*;

use crate::quant::QuantMatrix;

/// Where a model's tensors come from while it is being built (a checkpoint, a random initialiser).
pub trait WeightSource {
    /// The tensor `name` (HF name and layout) as f32 values; errors if it is absent or its shape
    /// is not `shape`.
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>>;

    /// The weight matrix `name` (`[d_out, d_in]`) in its quantised blocks, when this source
    /// keeps them (a GGUF file loaded for serving); `None` to read it with [`Self::tensor`].
    fn blocks(&mut self, _name: &str, _shape: &[usize]) -> Result<Option<QuantMatrix>> {
        Ok(None)
    }
}

/// One tensor of a model, ready to be written under its HF name.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorExport {
    /// HF tensor name, e.g. `model.layers.0.mlp.up_proj.weight`.
    pub name: String,
    /// Shape in HF layout.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

impl TensorExport {
    /// Bundles a name, shape and values.
    pub fn new(name: String, shape: Vec<usize>, data: Vec<f32>) -> Self {
        TensorExport { name, shape, data }
    }
}

/// Copies a float tensor to the host as f32, whatever the backend's float type.
pub fn to_f32_vec<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("float tensor data converts to f32")
}

//! RMSNorm read from HF `weight` tensors (burn calls the parameter `gamma`).

use anyhow::Result;
use burn::module::Param;
use burn::nn::RmsNorm;
use burn::prelude::*;

use crate::weights::{TensorExport, WeightSource};

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
        crate::weights::to_f32_vec(g),
    ));
}

//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use anyhow::Result;
use burn::prelude::*;
use burn::tensor::activation::silu;

use super::io::{TensorExport, WeightSource};
use super::projection::Projection;

/// SwiGLU MLP weights, named as in HF.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// Gate projection `[hidden, intermediate]`.
    pub gate_proj: Projection<B>,
    /// Up projection `[hidden, intermediate]`.
    pub up_proj: Projection<B>,
    /// Down projection `[intermediate, hidden]`.
    pub down_proj: Projection<B>,
}

impl<B: Backend> Mlp<B> {
    /// Reads `{prefix}.{gate,up,down}_proj`.
    pub fn load(
        src: &mut dyn WeightSource,
        prefix: &str,
        hidden: usize,
        inter: usize,
        device: &B::Device,
    ) -> Result<Self> {
        let mut proj = |name: &str, d_in: usize, d_out: usize| {
            Projection::<B>::load(src, &format!("{prefix}.{name}"), d_in, d_out, false, device)
        };
        Ok(Mlp {
            gate_proj: proj("gate_proj", hidden, inter)?,
            up_proj: proj("up_proj", hidden, inter)?,
            down_proj: proj("down_proj", inter, hidden)?,
        })
    }

    /// Writes the MLP under HF names.
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        for (p, name) in [
            (&self.gate_proj, "gate_proj"),
            (&self.up_proj, "up_proj"),
            (&self.down_proj, "down_proj"),
        ] {
            p.export(&format!("{prefix}.{name}"), out);
        }
    }

    /// Applies the MLP to `[..., hidden]`.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        if let Some(y) = self.try_fused(&x) {
            return y;
        }
        let [gate, up] = Projection::forward_group([&self.gate_proj, &self.up_proj], x);
        let product = match crate::kernels::swiglu::try_silu_mul(&gate, &up) {
            Some(p) => p,
            None => silu(gate) * up,
        };
        self.down_proj.forward(product)
    }

    /// The CPU backend's fused gate and up projections and product (see [`crate::kernels::swiglu`]),
    /// when both are bare f32 weights (no adapter, no bias, no blocks).
    fn try_fused<const D: usize>(&self, x: &Tensor<B, D>) -> Option<Tensor<B, D>> {
        let gate = self.gate_proj.plain_weight()?;
        let up = self.up_proj.plain_weight()?;
        let dims = x.dims();
        let k = dims[D - 1];
        let rows = dims.iter().product::<usize>() / k.max(1);
        let x2 = x.clone().reshape([rows, k]);
        let product = crate::kernels::swiglu::try_swiglu(&x2, &gate, &up)?;
        let mut out = dims;
        out[D - 1] = product.dims()[1];
        Some(self.down_proj.forward(product.reshape(out)))
    }
}

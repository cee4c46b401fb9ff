//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use anyhow::Result;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::silu;

use super::linear::{
    adapted_forward, adapted_forward_group, export_projection, load_projection, Blocks, LoraAdapter,
};
use crate::weights::{TensorExport, WeightSource};

/// SwiGLU MLP weights, named as in HF.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// Gate projection `[hidden, intermediate]`.
    pub gate_proj: Linear<B>,
    /// Up projection `[hidden, intermediate]`.
    pub up_proj: Linear<B>,
    /// Down projection `[intermediate, hidden]`.
    pub down_proj: Linear<B>,
    /// LoRA adapter on `gate_proj` (training only).
    pub gate_lora: Option<LoraAdapter<B>>,
    /// LoRA adapter on `up_proj` (training only).
    pub up_lora: Option<LoraAdapter<B>>,
    /// LoRA adapter on `down_proj` (training only).
    pub down_lora: Option<LoraAdapter<B>>,
    /// `gate_proj`'s weight in quantised blocks (serving a GGUF file), see [`Blocks`].
    #[module(skip)]
    pub gate_blocks: Blocks,
    /// `up_proj`'s weight in quantised blocks.
    #[module(skip)]
    pub up_blocks: Blocks,
    /// `down_proj`'s weight in quantised blocks.
    #[module(skip)]
    pub down_blocks: Blocks,
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
            load_projection::<B>(src, &format!("{prefix}.{name}"), d_in, d_out, false, device)
        };
        let (gate_proj, gate_blocks) = proj("gate_proj", hidden, inter)?;
        let (up_proj, up_blocks) = proj("up_proj", hidden, inter)?;
        let (down_proj, down_blocks) = proj("down_proj", inter, hidden)?;
        Ok(Mlp {
            gate_proj,
            up_proj,
            down_proj,
            gate_lora: None,
            up_lora: None,
            down_lora: None,
            gate_blocks,
            up_blocks,
            down_blocks,
        })
    }

    /// Writes the MLP under HF names.
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        for (layer, blocks, name) in [
            (&self.gate_proj, &self.gate_blocks, "gate_proj"),
            (&self.up_proj, &self.up_blocks, "up_proj"),
            (&self.down_proj, &self.down_blocks, "down_proj"),
        ] {
            export_projection(layer, blocks, &format!("{prefix}.{name}"), out);
        }
    }

    /// Applies the MLP to `[..., hidden]`.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        if let Some(y) = self.try_fused(&x) {
            return y;
        }
        let [gate, up] = adapted_forward_group(
            [
                (&self.gate_proj, &self.gate_blocks, self.gate_lora.as_ref()),
                (&self.up_proj, &self.up_blocks, self.up_lora.as_ref()),
            ],
            x,
        );
        let product = match crate::kernels::swiglu::try_silu_mul(&gate, &up) {
            Some(p) => p,
            None => silu(gate) * up,
        };
        adapted_forward(
            &self.down_proj,
            &self.down_blocks,
            self.down_lora.as_ref(),
            product,
        )
    }

    /// The CPU backend's fused gate and up projections and product (see [`crate::kernels::swiglu`]),
    /// when neither projection has an adapter or a bias.
    fn try_fused<const D: usize>(&self, x: &Tensor<B, D>) -> Option<Tensor<B, D>> {
        if self.gate_lora.is_some()
            || self.up_lora.is_some()
            || self.gate_blocks.is_some()
            || self.up_blocks.is_some()
            || self.gate_proj.bias.is_some()
            || self.up_proj.bias.is_some()
        {
            return None;
        }
        let dims = x.dims();
        let k = dims[D - 1];
        let rows = dims.iter().product::<usize>() / k.max(1);
        let product = crate::kernels::swiglu::try_swiglu(
            &x.clone().reshape([rows, k]),
            &self.gate_proj.weight.val(),
            &self.up_proj.weight.val(),
        )?;
        let mut out = dims;
        out[D - 1] = product.dims()[1];
        Some(adapted_forward(
            &self.down_proj,
            &self.down_blocks,
            self.down_lora.as_ref(),
            product.reshape(out),
        ))
    }
}

//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`.

use anyhow::Result;
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::activation::silu;

use super::linear::{adapted_forward, export_linear, load_linear, LoraAdapter};
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
        Ok(Mlp {
            gate_proj: load_linear(
                src,
                &format!("{prefix}.gate_proj"),
                hidden,
                inter,
                false,
                device,
            )?,
            up_proj: load_linear(
                src,
                &format!("{prefix}.up_proj"),
                hidden,
                inter,
                false,
                device,
            )?,
            down_proj: load_linear(
                src,
                &format!("{prefix}.down_proj"),
                inter,
                hidden,
                false,
                device,
            )?,
            gate_lora: None,
            up_lora: None,
            down_lora: None,
        })
    }

    /// Writes the MLP under HF names.
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        export_linear(&self.gate_proj, &format!("{prefix}.gate_proj"), out);
        export_linear(&self.up_proj, &format!("{prefix}.up_proj"), out);
        export_linear(&self.down_proj, &format!("{prefix}.down_proj"), out);
    }

    /// Applies the MLP to `[..., hidden]`.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        if let Some(y) = self.try_fused(&x) {
            return y;
        }
        let gate = adapted_forward(&self.gate_proj, self.gate_lora.as_ref(), x.clone());
        let up = adapted_forward(&self.up_proj, self.up_lora.as_ref(), x);
        let product = match super::swiglu::try_silu_mul(&gate, &up) {
            Some(p) => p,
            None => silu(gate) * up,
        };
        adapted_forward(&self.down_proj, self.down_lora.as_ref(), product)
    }

    /// The CPU backend's fused gate and up projections and product (see [`super::swiglu`]),
    /// when neither projection has an adapter or a bias.
    fn try_fused<const D: usize>(&self, x: &Tensor<B, D>) -> Option<Tensor<B, D>> {
        if self.gate_lora.is_some()
            || self.up_lora.is_some()
            || self.gate_proj.bias.is_some()
            || self.up_proj.bias.is_some()
        {
            return None;
        }
        let dims = x.dims();
        let k = dims[D - 1];
        let rows = dims.iter().product::<usize>() / k.max(1);
        let product = super::swiglu::try_swiglu(
            &x.clone().reshape([rows, k]),
            &self.gate_proj.weight.val(),
            &self.up_proj.weight.val(),
        )?;
        let mut out = dims;
        out[D - 1] = product.dims()[1];
        Some(adapted_forward(
            &self.down_proj,
            self.down_lora.as_ref(),
            product.reshape(out),
        ))
    }
}

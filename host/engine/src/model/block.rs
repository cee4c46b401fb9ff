//! One pre-norm decoder layer: attention and MLP, each with a residual connection.

use anyhow::Result;
use burn::nn::RmsNorm;
use burn::prelude::*;

use super::attention::{Attention, AttnContext, LayerCache};
use super::io::{TensorExport, WeightSource};
use super::mlp::Mlp;
use super::norm::{export_rms_norm, load_rms_norm, rms_norm_forward};
use crate::config::ModelConfig;

/// A decoder layer, with HF field names.
#[derive(Module, Debug)]
pub struct DecoderLayer<B: Backend> {
    /// Norm before attention.
    pub input_layernorm: RmsNorm<B>,
    /// Self-attention.
    pub self_attn: Attention<B>,
    /// Norm before the MLP.
    pub post_attention_layernorm: RmsNorm<B>,
    /// Feed-forward block.
    pub mlp: Mlp<B>,
}

impl<B: Backend> DecoderLayer<B> {
    /// Reads `model.layers.{index}`.
    pub fn load(
        src: &mut dyn WeightSource,
        index: usize,
        cfg: &ModelConfig,
        device: &B::Device,
    ) -> Result<Self> {
        let p = format!("model.layers.{index}");
        let (d, eps) = (cfg.hidden_size, cfg.rms_norm_eps);
        Ok(DecoderLayer {
            input_layernorm: load_rms_norm(src, &format!("{p}.input_layernorm"), d, eps, device)?,
            self_attn: Attention::load(src, &format!("{p}.self_attn"), cfg, device)?,
            post_attention_layernorm: load_rms_norm(
                src,
                &format!("{p}.post_attention_layernorm"),
                d,
                eps,
                device,
            )?,
            mlp: Mlp::load(src, &format!("{p}.mlp"), d, cfg.intermediate_size, device)?,
        })
    }

    /// Writes the layer under `model.layers.{index}`.
    pub fn export(&self, index: usize, out: &mut Vec<TensorExport>) {
        let p = format!("model.layers.{index}");
        export_rms_norm(&self.input_layernorm, &format!("{p}.input_layernorm"), out);
        self.self_attn.export(&format!("{p}.self_attn"), out);
        export_rms_norm(
            &self.post_attention_layernorm,
            &format!("{p}.post_attention_layernorm"),
            out,
        );
        self.mlp.export(&format!("{p}.mlp"), out);
    }

    /// Its seven projections: q, k, v, o, gate, up, down.
    pub fn projections(&self) -> [&super::projection::Projection<B>; 7] {
        let (a, m) = (&self.self_attn, &self.mlp);
        [
            &a.q_proj,
            &a.k_proj,
            &a.v_proj,
            &a.o_proj,
            &m.gate_proj,
            &m.up_proj,
            &m.down_proj,
        ]
    }

    /// Runs the layer on `[batch, seq, hidden]`.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        ctx: &AttnContext<B>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 3> {
        let h = x.clone()
            + self
                .self_attn
                .forward(rms_norm_forward(&self.input_layernorm, x), ctx, cache);
        h.clone()
            + self
                .mlp
                .forward(rms_norm_forward(&self.post_attention_layernorm, h))
    }
}

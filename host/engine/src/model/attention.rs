//! Grouped-query self-attention with optional per-head q/k RMSNorm (Qwen3) and q/k/v bias (Qwen2).

use anyhow::Result;
use burn::nn::{Linear, RmsNorm};
use burn::prelude::*;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;

use super::linear::{adapted_forward, export_projection, load_projection, Blocks, LoraAdapter};
use super::norm::{export_rms_norm, load_rms_norm, rms_norm_forward};
use super::rope::RopeTables;
use crate::config::ModelConfig;
use crate::weights::{TensorExport, WeightSource};

/// One layer's attention weights.
#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// Query projection `[hidden, heads*head_dim]`.
    pub q_proj: Linear<B>,
    /// Key projection `[hidden, kv_heads*head_dim]`.
    pub k_proj: Linear<B>,
    /// Value projection `[hidden, kv_heads*head_dim]`.
    pub v_proj: Linear<B>,
    /// Output projection `[heads*head_dim, hidden]`.
    pub o_proj: Linear<B>,
    /// Per-head query norm (Qwen3 only).
    pub q_norm: Option<RmsNorm<B>>,
    /// Per-head key norm (Qwen3 only).
    pub k_norm: Option<RmsNorm<B>>,
    /// Number of query heads.
    pub n_heads: usize,
    /// Number of key/value heads.
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// LoRA adapter on `q_proj` (training only).
    pub q_lora: Option<LoraAdapter<B>>,
    /// LoRA adapter on `k_proj` (training only).
    pub k_lora: Option<LoraAdapter<B>>,
    /// LoRA adapter on `v_proj` (training only).
    pub v_lora: Option<LoraAdapter<B>>,
    /// LoRA adapter on `o_proj` (training only).
    pub o_lora: Option<LoraAdapter<B>>,
    /// `q_proj`'s weight in quantised blocks (serving a GGUF file), see [`Blocks`].
    #[module(skip)]
    pub q_blocks: Blocks,
    /// `k_proj`'s weight in quantised blocks.
    #[module(skip)]
    pub k_blocks: Blocks,
    /// `v_proj`'s weight in quantised blocks.
    #[module(skip)]
    pub v_blocks: Blocks,
    /// `o_proj`'s weight in quantised blocks.
    #[module(skip)]
    pub o_blocks: Blocks,
}

/// The keys and values one layer has seen so far for a group of sequences:
/// `[batch, kv_heads, positions, head_dim]`.
#[derive(Clone, Debug)]
pub struct LayerCache<B: Backend> {
    /// Cached keys (after RoPE).
    pub k: Option<Tensor<B, 4>>,
    /// Cached values.
    pub v: Option<Tensor<B, 4>>,
}

impl<B: Backend> Default for LayerCache<B> {
    fn default() -> Self {
        LayerCache { k: None, v: None }
    }
}

impl<B: Backend> LayerCache<B> {
    /// Appends new keys/values along the position axis and returns the full cache.
    fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let k = match self.k.take() {
            Some(old) => super::flex::cat_positions(old, k),
            None => k,
        };
        let v = match self.v.take() {
            Some(old) => super::flex::cat_positions(old, v),
            None => v,
        };
        self.k = Some(k.clone());
        self.v = Some(v.clone());
        (k, v)
    }
}

/// Per-forward inputs shared by every layer.
#[derive(Clone, Debug)]
pub struct AttnContext<B: Backend> {
    /// RoPE tables for the new tokens.
    pub rope: RopeTables<B>,
    /// Keys no query may see, `[batch, 1, 1, keys]`, true = hidden (padding holes in a batch).
    pub key_mask: Option<Tensor<B, 4, Bool>>,
}

impl<B: Backend> Attention<B> {
    /// Reads the layer `{prefix}` (e.g. `model.layers.0.self_attn`).
    pub fn load(
        src: &mut dyn WeightSource,
        prefix: &str,
        cfg: &ModelConfig,
        device: &B::Device,
    ) -> Result<Self> {
        let (d, h, kvh, hd) = (
            cfg.hidden_size,
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        );
        let f = cfg.attention;
        let norm = |src: &mut dyn WeightSource, name: &str| -> Result<Option<RmsNorm<B>>> {
            if f.qk_norm {
                Ok(Some(load_rms_norm(
                    src,
                    &format!("{prefix}.{name}"),
                    hd,
                    cfg.rms_norm_eps,
                    device,
                )?))
            } else {
                Ok(None)
            }
        };
        let mut proj = |name: &str, d_in: usize, d_out: usize, bias: bool| {
            load_projection::<B>(src, &format!("{prefix}.{name}"), d_in, d_out, bias, device)
        };
        let (q_proj, q_blocks) = proj("q_proj", d, h * hd, f.qkv_bias)?;
        let (k_proj, k_blocks) = proj("k_proj", d, kvh * hd, f.qkv_bias)?;
        let (v_proj, v_blocks) = proj("v_proj", d, kvh * hd, f.qkv_bias)?;
        let (o_proj, o_blocks) = proj("o_proj", h * hd, d, f.o_bias)?;
        Ok(Attention {
            q_proj,
            k_proj,
            v_proj,
            o_proj,
            q_norm: norm(src, "q_norm")?,
            k_norm: norm(src, "k_norm")?,
            n_heads: h,
            n_kv_heads: kvh,
            head_dim: hd,
            q_lora: None,
            k_lora: None,
            v_lora: None,
            o_lora: None,
            q_blocks,
            k_blocks,
            v_blocks,
            o_blocks,
        })
    }

    /// Writes the layer's tensors under HF names.
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        for (layer, blocks, name) in [
            (&self.q_proj, &self.q_blocks, "q_proj"),
            (&self.k_proj, &self.k_blocks, "k_proj"),
            (&self.v_proj, &self.v_blocks, "v_proj"),
            (&self.o_proj, &self.o_blocks, "o_proj"),
        ] {
            export_projection(layer, blocks, &format!("{prefix}.{name}"), out);
        }
        if let Some(n) = &self.q_norm {
            export_rms_norm(n, &format!("{prefix}.q_norm"), out);
        }
        if let Some(n) = &self.k_norm {
            export_rms_norm(n, &format!("{prefix}.k_norm"), out);
        }
    }

    /// Attends `x` (`[batch, seq, hidden]`) to the cache plus itself, causally.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        ctx: &AttnContext<B>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 3> {
        let [b, s, _] = x.dims();
        let (h, kvh, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let g = h / kvh;

        let q = adapted_forward(
            &self.q_proj,
            &self.q_blocks,
            self.q_lora.as_ref(),
            x.clone(),
        )
        .reshape([b, s, h, hd]);
        let k = adapted_forward(
            &self.k_proj,
            &self.k_blocks,
            self.k_lora.as_ref(),
            x.clone(),
        )
        .reshape([b, s, kvh, hd]);
        let v = adapted_forward(&self.v_proj, &self.v_blocks, self.v_lora.as_ref(), x)
            .reshape([b, s, kvh, hd]);
        let q = match &self.q_norm {
            Some(n) => rms_norm_forward(n, q),
            None => q,
        };
        let k = match &self.k_norm {
            Some(n) => rms_norm_forward(n, k),
            None => k,
        };
        let q = ctx.rope.apply_q(q).swap_dims(1, 2);
        let k = ctx.rope.apply_k(k).swap_dims(1, 2);
        let v = super::flex::heads_major(v);
        let (k, v) = match cache {
            Some(c) => c.append(k, v),
            None => (k, v),
        };

        let out = if s == 1 {
            // Decode: the g query heads sharing a kv head attend to it as g query rows, so the
            // cache is read in place instead of being copied g times (no repeat_kv).
            let q = q.reshape([b, kvh, g, hd]);
            let opts = AttentionModuleOptions {
                scale: None,
                softcap: None,
                is_causal: false,
            };
            attention(q, k, v, ctx.key_mask.clone(), None, opts).reshape([b, 1, h * hd])
        } else if let Some(out) = ctx
            .key_mask
            .is_none()
            .then(|| super::causal_attention::try_causal(&q, &k, &v))
            .flatten()
        {
            // Prefill / scoring on the CPU: the tiled kernel (causal tiles skipped, tiles in
            // parallel, every input read in place, the heads written side by side).
            out
        } else {
            // Prefill / full forward: causal masking needs one query row per position, so the
            // kv heads are expanded to the query heads.
            let (k, v) = if g > 1 {
                (repeat_kv(k, g), repeat_kv(v, g))
            } else {
                (k, v)
            };
            let opts = AttentionModuleOptions {
                scale: None,
                softcap: None,
                is_causal: true,
            };
            attention(q, k, v, ctx.key_mask.clone(), None, opts)
                .swap_dims(1, 2)
                .reshape([b, s, h * hd])
        };
        adapted_forward(&self.o_proj, &self.o_blocks, self.o_lora.as_ref(), out)
    }
}

/// `[b, kvh, t, hd]` -> `[b, kvh*g, t, hd]`, each kv head repeated for its g query heads.
fn repeat_kv<B: Backend>(x: Tensor<B, 4>, g: usize) -> Tensor<B, 4> {
    let [b, kvh, t, hd] = x.dims();
    x.unsqueeze_dim::<5>(2)
        .expand([b, kvh, g, t, hd])
        .reshape([b, kvh * g, t, hd])
}

//! The decoder of Qwen3, Qwen2 and Llama, generic over the burn backend, read top-down as one
//! model: [`Model`] (embedding, [`block::Block`]s, final norm, head), each block an
//! [`attention::Attention`] and an [`mlp::Mlp`] around RMSNorms ([`norm`]), positions by RoPE
//! ([`rope`]), projections through [`projection`] (dense, or quantised blocks from
//! `crate::quant`, each with an optional LoRA adapter). Tensors come in and go out through
//! [`io`]. The CPU kernels under them are in `crate::kernels`.
//!
//! The three architectures differ in a few places only, all read from `config.json` into
//! [`crate::config::ModelConfig`]:
//!
//! - **Qwen3**: RMSNorm on each head's queries and keys before RoPE
//!   ([`crate::config::AttentionFlags::qk_norm`]), no projection bias, `head_dim` given by the
//!   config (128 when it says nothing).
//! - **Qwen2**: no q/k norm; a bias on the q, k and v projections (`qkv_bias`).
//! - **Llama**: no q/k norm; biases only where the config's `attention_bias` asks (`qkv_bias`,
//!   `o_bias`); `head_dim` derived from the hidden size.
//!
//! All three use the default RoPE (scaled variants are refused when the config is read).
//!
//! Tied embeddings (`tie_word_embeddings`) and the sequence-classification head of Qwen3 reward
//! models are switches of the config too, not architectures of their own.

pub mod attention;
pub mod block;
mod finite;
pub mod io;
pub mod mlp;
pub mod norm;
pub mod projection;
pub mod rope;

use anyhow::{bail, Result};
use burn::module::Param;
use burn::nn::{Embedding, RmsNorm};
use burn::prelude::*;

use crate::config::ModelConfig;
use crate::generate::kv_cache::KvCache;
use attention::AttnContext;
use block::DecoderLayer;
use io::{to_f32_vec, TensorExport, WeightSource};
use norm::{export_rms_norm, load_rms_norm, rms_norm_forward};
use projection::{Projection, Weight};
use rope::{Rope, RopeTables};

/// The decoder stack (`model.*` in HF names).
#[derive(Module, Debug)]
pub struct Backbone<B: Backend> {
    /// Token embeddings `[vocab, hidden]`; `None` when tied to the head (see [`Model::lm_head`]).
    pub embed_tokens: Option<Embedding<B>>,
    /// Decoder layers.
    pub layers: Vec<DecoderLayer<B>>,
    /// Final norm.
    pub norm: RmsNorm<B>,
}

/// A complete model: backbone plus a language-model head or a classification head.
#[derive(Module, Debug)]
pub struct Model<B: Backend> {
    /// The decoder stack.
    pub model: Backbone<B>,
    /// Language-model head `[hidden, vocab]`. With tied embeddings this is the only copy of the
    /// embedding matrix: rows are looked up from its columns. Stored head-side because the head
    /// matmul runs every decode step and is about twice as fast on a contiguous `[hidden, vocab]`
    /// matrix as on the transpose of `[vocab, hidden]`. `None` for classifiers.
    pub lm_head: Option<Projection<B>>,
    /// Classification head `[hidden, num_labels]` (sequence classifiers only).
    pub score: Option<Projection<B>>,
    /// The configuration the weights were built for.
    #[module(skip)]
    pub config: ModelConfig,
    /// RoPE frequencies.
    #[module(skip)]
    pub rope: Rope,
}

impl<B: Backend> Model<B> {
    /// Builds the model, reading every tensor the configuration calls for from `src`.
    pub fn from_source(
        config: ModelConfig,
        src: &mut dyn WeightSource,
        device: &B::Device,
    ) -> Result<Self> {
        config
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid model config: {e}"))?;
        let (v, d) = (config.vocab_size, config.hidden_size);
        let classifier = config.architecture.is_classifier();
        let tied = config.tie_word_embeddings && !classifier;
        let (embed_tokens, tied_head) = if tied {
            // HF's `[vocab, hidden]` embedding is exactly a Linear(hidden -> vocab) weight; kept
            // in blocks, the embedding rows are decoded from them.
            let head = Projection::<B>::load(src, "model.embed_tokens", d, v, false, device)?;
            (None, Some(head))
        } else {
            let emb = src.tensor("model.embed_tokens.weight", &[v, d])?;
            let weight = Param::from_data(TensorData::new(emb, [v, d]), device);
            (Some(Embedding { weight }), None)
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| DecoderLayer::load(src, i, &config, device))
            .collect::<Result<Vec<_>>>()?;
        let norm = load_rms_norm(src, "model.norm", d, config.rms_norm_eps, device)?;
        let (lm_head, score) = if classifier {
            let n = config.num_labels;
            let score = Projection::<B>::load_dense(src, "score", d, n, false, device)?;
            (None, Some(score))
        } else if tied {
            (tied_head, None)
        } else {
            let head = Projection::<B>::load(src, "lm_head", d, v, false, device)?;
            (Some(head), None)
        };
        let rope = Rope::new(config.rope_theta, config.head_dim);
        Ok(Model {
            model: Backbone {
                embed_tokens,
                layers,
                norm,
            },
            lm_head,
            score,
            config,
            rope,
        })
    }

    /// Every projection: each layer's q, k, v, o, gate, up and down, then the heads.
    pub fn projections(&self) -> impl Iterator<Item = &Projection<B>> {
        self.model
            .layers
            .iter()
            .flat_map(|l| l.projections())
            .chain(&self.lm_head)
            .chain(&self.score)
    }

    /// Whether any weight is held in quantised blocks ([`crate::GgufWeights::Blocks`]).
    pub fn is_quantised(&self) -> bool {
        self.projections().any(|p| p.quantised().is_some())
    }

    /// The model with every quantised weight dequantised to f32 (what training, LoRA adapters
    /// and merges need); the same model when none is quantised.
    pub fn dequantised(&self) -> Self {
        let mut m = self.clone();
        if !m.is_quantised() {
            return m;
        }
        let device = m.device();
        let layers = m.model.layers.iter_mut().flat_map(|l| {
            let (a, f) = (&mut l.self_attn, &mut l.mlp);
            [
                &mut a.q_proj,
                &mut a.k_proj,
                &mut a.v_proj,
                &mut a.o_proj,
                &mut f.gate_proj,
                &mut f.up_proj,
                &mut f.down_proj,
            ]
        });
        for p in layers.chain(&mut m.lm_head).chain(&mut m.score) {
            p.dequantise(&device);
        }
        m
    }

    /// Every tensor under its HF name and layout (what a checkpoint of this model holds).
    pub fn export(&self) -> Vec<TensorExport> {
        let mut out = Vec::new();
        match (&self.model.embed_tokens, &self.lm_head) {
            (Some(e), _) => {
                let w = e.weight.val();
                let dims = w.dims().to_vec();
                out.push(TensorExport::new(
                    "model.embed_tokens.weight".into(),
                    dims,
                    to_f32_vec(w),
                ));
            }
            // Tied: the head's `[vocab, hidden]` HF form is the embedding; HF files omit lm_head.
            (None, Some(h)) => h.export("model.embed_tokens", &mut out),
            (None, None) => unreachable!("a model has an embedding or a tied head"),
        }
        for (i, layer) in self.model.layers.iter().enumerate() {
            layer.export(i, &mut out);
        }
        export_rms_norm(&self.model.norm, "model.norm", &mut out);
        if let (Some(h), Some(_)) = (&self.lm_head, &self.model.embed_tokens) {
            h.export("lm_head", &mut out);
        }
        if let Some(h) = &self.score {
            h.export("score", &mut out);
        }
        out
    }

    /// Token embeddings `[batch, seq, hidden]`.
    pub fn embed(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let head = match (&self.model.embed_tokens, &self.lm_head) {
            (Some(e), _) => return e.forward(tokens),
            (None, Some(h)) => h,
            (None, None) => unreachable!("a model has an embedding or a tied head"),
        };
        let [b, s] = tokens.dims();
        match &head.weight {
            Weight::Quantised(q) => {
                let device = tokens.device();
                let ids: Vec<usize> = tokens
                    .into_data()
                    .convert::<i64>()
                    .into_vec::<i64>()
                    .expect("int tensor data")
                    .into_iter()
                    .map(|t| t as usize)
                    .collect();
                let d = q.dims()[1];
                Tensor::from_data(TensorData::new(q.rows_f32(&ids), [b, s, d]), &device)
            }
            Weight::Dense(w) => {
                let w = w.val();
                let d = w.dims()[0];
                // Columns of the `[hidden, vocab]` head are the embedding rows.
                w.select(1, tokens.reshape([b * s]))
                    .transpose()
                    .reshape([b, s, d])
            }
        }
    }

    /// The device the weights live on.
    pub fn device(&self) -> B::Device {
        self.model.norm.gamma.val().device()
    }

    /// An empty KV cache for this model's layers.
    pub fn new_cache(&self) -> KvCache<B> {
        KvCache::new(self.model.layers.len())
    }

    /// Final hidden states `[batch, seq, hidden]` of `tokens`, appended to `cache` when given.
    pub fn hidden(
        &self,
        tokens: Tensor<B, 2, Int>,
        ctx: &AttnContext<B>,
        mut cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 3> {
        let mut x = self.embed(tokens);
        for (i, layer) in self.model.layers.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|c| c.layer_mut(i));
            x = layer.forward(x, ctx, layer_cache);
        }
        if let Some(c) = cache {
            c.advance(x.dims()[1]);
        }
        rms_norm_forward(&self.model.norm, x)
    }

    /// RoPE tables for `positions` (row-major `[batch][seq]`).
    pub fn rope_tables(
        &self,
        positions: &[usize],
        batch: usize,
        seq: usize,
        device: &B::Device,
    ) -> RopeTables<B> {
        self.rope.tables(positions, batch, seq, device)
    }

    /// RoPE tables for positions `0..seq` in every row.
    pub fn rope_from_zero(&self, batch: usize, seq: usize, device: &B::Device) -> RopeTables<B> {
        self.rope.tables_from_zero(batch, seq, device)
    }

    /// Hidden states of a full sequence from position 0 with no cache (training, scoring).
    pub fn hidden_full(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [b, s] = tokens.dims();
        let ctx = AttnContext {
            rope: self.rope_from_zero(b, s, &tokens.device()),
            key_mask: None,
        };
        self.hidden(tokens, &ctx, None)
    }

    /// Language-model logits for rows of hidden states: `[n, hidden]` -> `[n, vocab]`.
    ///
    /// # Panics
    /// On a sequence classifier (it has no language-model head).
    pub fn lm_logits(&self, hidden: Tensor<B, 2>) -> Tensor<B, 2> {
        let head = self
            .lm_head
            .as_ref()
            .expect("a causal LM has a language-model head");
        head.forward(hidden)
    }

    /// The output head decoded from its blocks once, as a `[hidden, vocab]` tensor, on backends
    /// without the block kernels (a training forward over blocks: autodiff, CUDA), so a pass
    /// that takes its logits in chunks shares one f32 copy instead of decoding (and keeping for
    /// the backward pass) one per chunk; `None` when the head is f32 or the CPU kernels read
    /// the blocks.
    pub fn decoded_head(&self) -> Option<Tensor<B, 2>> {
        let q = self.lm_head.as_ref()?.quantised()?;
        let device = self.device();
        if crate::kernels::flex::is_flex::<B>(&device) {
            return None;
        }
        Some(q.decoded(&device))
    }

    /// [`Model::lm_logits`], through `decoded` (from [`Model::decoded_head`]) when given.
    pub fn lm_logits_with(
        &self,
        hidden: Tensor<B, 2>,
        decoded: Option<&Tensor<B, 2>>,
    ) -> Tensor<B, 2> {
        match decoded {
            // A language-model head has no bias (`from_source` reads none).
            Some(w) => hidden.matmul(w.clone()),
            None => self.lm_logits(hidden),
        }
    }

    /// Full-sequence logits `[batch, seq, vocab]` (no cache, positions from 0).
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Result<Tensor<B, 3>> {
        if self.score.is_some() {
            bail!("forward: a sequence classifier has no language-model head; use classify");
        }
        let h = self.hidden_full(tokens);
        let [b, s, d] = h.dims();
        Ok(self
            .lm_logits(h.reshape([b * s, d]))
            .reshape([b, s, self.config.vocab_size]))
    }

    /// Classification logits for rows of hidden states: `[n, hidden]` -> `[n, num_labels]`.
    pub fn score_logits(&self, hidden: Tensor<B, 2>) -> Result<Tensor<B, 2>> {
        match &self.score {
            Some(h) => Ok(h.forward(hidden)),
            None => bail!(
                "{} has no classification head",
                self.config.architecture.name()
            ),
        }
    }
}

//! Grouped-query self-attention with optional per-head q/k RMSNorm (Qwen3) and q/k/v bias (Qwen2).

use anyhow::Result;
use burn::nn::RmsNorm;
use burn::prelude::*;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;

use super::io::{TensorExport, WeightSource};
use super::norm::{export_rms_norm, load_rms_norm, rms_norm_forward};
use super::projection::Projection;
use super::rope::RopeTables;
use crate::config::ModelConfig;
use crate::kernels::flex::{readable_in_place, Rows};
use crate::kernels::host_kv::{decode_attention, HostKv, MAX_RESERVE_AHEAD};

/// One layer's attention weights.
#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// Query projection `[hidden, heads*head_dim]`.
    pub q_proj: Projection<B>,
    /// Key projection `[hidden, kv_heads*head_dim]`.
    pub k_proj: Projection<B>,
    /// Value projection `[hidden, kv_heads*head_dim]`.
    pub v_proj: Projection<B>,
    /// Output projection `[heads*head_dim, hidden]`.
    pub o_proj: Projection<B>,
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
}

/// The keys and values one layer has seen so far for a group of sequences:
/// `[batch, kv_heads, positions, head_dim]`.
#[derive(Clone, Debug)]
pub struct LayerCache<B: Backend> {
    store: Store<B>,
    /// Positions the cache is expected to reach ([`LayerCache::reserve`]).
    expected: usize,
}

#[derive(Clone, Debug)]
enum Store<B: Backend> {
    Empty,
    /// Tensors of any backend, grown by concatenation (CUDA, autodiff, and snapshots taken in
    /// until the next step on the CPU).
    Tensors {
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
    },
    /// The CPU backend's buffers, written and read in place.
    Host(HostKv),
}

impl<B: Backend> Default for LayerCache<B> {
    fn default() -> Self {
        LayerCache {
            store: Store::Empty,
            expected: 0,
        }
    }
}

/// What [`LayerCache::attend`] did with a forward pass's queries.
enum Attended<B: Backend> {
    /// The attention's output, `[batch, queries, heads · head_dim]`, computed on the cache in
    /// place.
    Out(Tensor<B, 3>),
    /// The new keys and values were cached; these are all of them, for the general attention.
    KeysValues(Tensor<B, 4>, Tensor<B, 4>),
}

impl<B: Backend> LayerCache<B> {
    /// A cache holding `k` and `v` (`[batch, kv_heads, positions, head_dim]`).
    pub fn from_tensors(k: Tensor<B, 4>, v: Tensor<B, 4>) -> Self {
        LayerCache {
            store: Store::Tensors { k, v },
            expected: 0,
        }
    }

    /// The cached keys and values as tensors (a copy when they are in host buffers).
    pub fn tensors(&self) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
        match &self.store {
            Store::Empty => None,
            Store::Tensors { k, v } => Some((k.clone(), v.clone())),
            Store::Host(kv) => self.host_tensors(kv, 0..kv.dims()[0], kv.len()),
        }
    }

    /// Batch row `row`'s first `len` positions, `[1, kv_heads, len, head_dim]` each (a view of
    /// tensors, a copy of host buffers).
    pub fn row_tensors(&self, row: usize, len: usize) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
        match &self.store {
            Store::Empty => None,
            Store::Tensors { k, v } => {
                let [_, kvh, _, hd] = k.dims();
                let dv = v.dims()[3];
                Some((
                    k.clone().slice([row..row + 1, 0..kvh, 0..len, 0..hd]),
                    v.clone().slice([row..row + 1, 0..kvh, 0..len, 0..dv]),
                ))
            }
            Store::Host(kv) => self.host_tensors(kv, row..row + 1, len),
        }
    }

    fn host_tensors(
        &self,
        kv: &HostKv,
        rows: std::ops::Range<usize>,
        len: usize,
    ) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
        let [_, kvh, d, dv] = kv.dims();
        let n = rows.len();
        let (k, v) = kv.to_vecs(rows, len);
        Some((
            crate::kernels::flex::from_vec(k, [n, kvh, len, d])?,
            crate::kernels::flex::from_vec(v, [n, kvh, len, dv])?,
        ))
    }

    /// Expects the cache to reach `positions`: host buffers reserve room for them (up to
    /// [`MAX_RESERVE_AHEAD`] beyond what is cached), so decode steps write in place.
    pub fn reserve(&mut self, positions: usize) {
        self.expected = positions;
        if let Store::Host(kv) = &mut self.store {
            kv.reserve(positions.min(kv.len() + MAX_RESERVE_AHEAD));
        }
    }

    /// Keeps only the given batch rows, in that order (none: the cache is emptied).
    pub fn retain_rows(&mut self, rows: &[usize]) {
        if rows.is_empty() {
            // burn's CUDA select launches a kernel over zero elements for an empty index list,
            // which the driver refuses (CUDA_ERROR_INVALID_VALUE; cubecl 0.10, fixed upstream by
            // tracel-ai/cubecl#1349), and the error surfaces at the next read of any tensor:
            // every generation's last step did this.
            self.store = Store::Empty;
            return;
        }
        match &mut self.store {
            Store::Empty => {}
            Store::Host(kv) => kv.retain_rows(rows),
            Store::Tensors { k, v } => {
                let idx = Tensor::<B, 1, Int>::from_data(
                    TensorData::new(
                        rows.iter().map(|&r| r as i64).collect::<Vec<_>>(),
                        [rows.len()],
                    ),
                    &k.device(),
                );
                *k = k.clone().select(0, idx.clone());
                *v = v.clone().select(0, idx);
            }
        }
    }

    /// Caches the new keys and values (`[batch, kv_heads, s, head_dim]`) and attends `q`
    /// (`[batch, heads, s, head_dim]`) to the whole cache when that can be done in place: on
    /// the CPU backend, a decode step (one query per row, any key mask) or a prefill without a
    /// key mask. Otherwise hands back every key and value for the general attention.
    fn attend(
        &mut self,
        q: &Tensor<B, 4>,
        k: Tensor<B, 4>,
        v: Tensor<B, 4>,
        key_mask: Option<&Tensor<B, 4, Bool>>,
    ) -> Attended<B> {
        if !self.append_on_host(&k, &v) {
            let (k, v) = match std::mem::replace(&mut self.store, Store::Empty) {
                Store::Tensors { k: ok, v: ov } => (
                    crate::kernels::flex::cat_positions(ok, k),
                    crate::kernels::flex::cat_positions(ov, v),
                ),
                Store::Empty => (k, v),
                Store::Host(_) => {
                    unreachable!("host buffers hold burn-flex f32 keys, which append_on_host takes")
                }
            };
            self.store = Store::Tensors {
                k: k.clone(),
                v: v.clone(),
            };
            return Attended::KeysValues(k, v);
        }
        let Store::Host(kv) = &self.store else {
            unreachable!("append_on_host leaves host buffers")
        };
        let [b, h, s, d] = q.dims();
        assert_eq!(s, k.dims()[2], "one new key per query");
        let dv = kv.dims()[3];
        let out = host_readable(q).and_then(|qf| {
            let qr = Rows::of(&qf, d)?;
            if s == 1 {
                let hidden =
                    key_mask.map(|m| m.to_data().to_vec::<bool>().expect("a key mask is boolean"));
                let out = decode_attention(qr, kv, h, hidden.as_deref());
                crate::kernels::flex::from_vec(out, [b, 1, h * dv])
            } else if key_mask.is_none() {
                let shape = crate::kernels::causal_attention::Shape {
                    heads: h,
                    kv_heads: kv.dims()[1],
                    queries: s,
                    keys: kv.len(),
                    dim: d,
                    value_dim: dv,
                };
                let out = crate::kernels::causal_attention::causal_attention(
                    qr,
                    kv.keys(),
                    kv.values(),
                    b,
                    shape,
                );
                crate::kernels::flex::from_vec(out, [b, s, h * dv])
            } else {
                None
            }
        });
        match out {
            Some(out) => Attended::Out(out),
            None => {
                let (k, v) = self.tensors().expect("just appended");
                Attended::KeysValues(k, v)
            }
        }
    }

    /// Appends the new keys and values to host buffers, moving anything cached as tensors
    /// there first, when all of them are burn-flex f32 with readable rows; false, with nothing
    /// changed, otherwise.
    fn append_on_host(&mut self, k: &Tensor<B, 4>, v: &Tensor<B, 4>) -> bool {
        let (Some(kf), Some(vf)) = (host_readable(k), host_readable(v)) else {
            return false;
        };
        let [b, kvh, s, d] = k.dims();
        let dv = v.dims()[3];
        let (Some(kr), Some(vr)) = (Rows::of(&kf, d), Rows::of(&vf, dv)) else {
            return false;
        };
        let room =
            |cached: usize| (cached + s).max(self.expected.min(cached + s + MAX_RESERVE_AHEAD));
        match &self.store {
            Store::Host(kv) => assert_eq!(
                kv.dims(),
                [b, kvh, d, dv],
                "new keys and values match the cache's rows"
            ),
            Store::Empty => self.store = Store::Host(HostKv::new(b, kvh, d, dv, room(0))),
            Store::Tensors { k: ok, v: ov } => {
                let t = ok.dims()[2];
                let (Some(okf), Some(ovf)) = (host_readable(ok), host_readable(ov)) else {
                    return false;
                };
                let (Some(okr), Some(ovr)) = (Rows::of(&okf, d), Rows::of(&ovf, dv)) else {
                    return false;
                };
                let mut kv = HostKv::new(b, kvh, d, dv, room(t));
                kv.append(okr, ovr, t);
                self.store = Store::Host(kv);
            }
        }
        let Store::Host(kv) = &mut self.store else {
            unreachable!("host buffers were just made")
        };
        kv.append(kr, vr, s);
        true
    }
}

/// The storage of `t` with rows [`Rows`] can read in place, when `t` is a burn-flex tensor.
fn host_readable<B: Backend>(t: &Tensor<B, 4>) -> Option<burn::backend::flex::FlexTensor> {
    crate::kernels::flex::as_flex(t.clone()).map(readable_in_place)
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
            Projection::<B>::load(src, &format!("{prefix}.{name}"), d_in, d_out, bias, device)
        };
        let q_proj = proj("q_proj", d, h * hd, f.qkv_bias)?;
        let k_proj = proj("k_proj", d, kvh * hd, f.qkv_bias)?;
        let v_proj = proj("v_proj", d, kvh * hd, f.qkv_bias)?;
        let o_proj = proj("o_proj", h * hd, d, f.o_bias)?;
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
        })
    }

    /// Writes the layer's tensors under HF names.
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        for (p, name) in [
            (&self.q_proj, "q_proj"),
            (&self.k_proj, "k_proj"),
            (&self.v_proj, "v_proj"),
            (&self.o_proj, "o_proj"),
        ] {
            p.export(&format!("{prefix}.{name}"), out);
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

        let [q, k, v] = Projection::forward_group([&self.q_proj, &self.k_proj, &self.v_proj], x);
        let q = q.reshape([b, s, h, hd]);
        let k = k.reshape([b, s, kvh, hd]);
        let v = v.reshape([b, s, kvh, hd]);
        let q = match &self.q_norm {
            Some(n) => rms_norm_forward(n, q),
            None => q,
        };
        let k = match &self.k_norm {
            Some(n) => rms_norm_forward(n, k),
            None => k,
        };
        let q = ctx.rope.apply_q(q);
        let k = ctx.rope.apply_k(k);
        if cache.is_none() && ctx.key_mask.is_none() && s > 1 {
            // A training forward on the CPU: attention as one operation with its own backward.
            if let Some(out) = crate::kernels::trained_attention::try_tracked_causal(&q, &k, &v) {
                return self.o_proj.forward(out);
            }
        }
        let q = q.swap_dims(1, 2);
        let k = k.swap_dims(1, 2);
        let v = crate::kernels::flex::heads_major(v);
        let (k, v) = match cache {
            Some(c) => match c.attend(&q, k, v, ctx.key_mask.as_ref()) {
                Attended::Out(out) => return self.o_proj.forward(out),
                Attended::KeysValues(k, v) => (k, v),
            },
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
            .then(|| crate::kernels::causal_attention::try_causal(&q, &k, &v))
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
        self.o_proj.forward(out)
    }
}

/// `[b, kvh, t, hd]` -> `[b, kvh*g, t, hd]`, each kv head repeated for its g query heads.
fn repeat_kv<B: Backend>(x: Tensor<B, 4>, g: usize) -> Tensor<B, 4> {
    let [b, kvh, t, hd] = x.dims();
    x.unsqueeze_dim::<5>(2)
        .expand([b, kvh, g, t, hd])
        .reshape([b, kvh * g, t, hd])
}

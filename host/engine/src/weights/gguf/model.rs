//! Building a [`Model`] from a llama.cpp GGUF file: the configuration from its metadata, HF tensor
//! names from llama.cpp's, and the q/k row order llama.cpp's converter changed put back.
//!
//! Only `general.architecture = "llama"` is mapped; every tensor is dequantised to f32.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use burn::prelude::*;
use serde_json::{json, Map, Value};

use super::reader::GgufFile;
use crate::config::ModelConfig;
use crate::model::Model;
use crate::quant::QuantMatrix;
use crate::weights::{GgufWeights, WeightSource};

/// The llama.cpp name of HF tensor `hf` (e.g. `model.layers.3.self_attn.q_proj.weight` ->
/// `blk.3.attn_q.weight`), or `None` for names llama.cpp's Llama layout has no equivalent of.
pub fn gguf_name(hf: &str) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let short = LAYER_NAMES
        .iter()
        .find(|(_, h)| *h == module)
        .map(|(g, _)| *g)?;
    Some(format!("blk.{layer}.{short}.{suffix}"))
}

/// The HF name of llama.cpp tensor `gguf` (the inverse of [`gguf_name`]).
pub fn hf_name(gguf: &str) -> Option<String> {
    match gguf {
        "token_embd.weight" => return Some("model.embed_tokens.weight".into()),
        "output_norm.weight" => return Some("model.norm.weight".into()),
        "output.weight" => return Some("lm_head.weight".into()),
        _ => {}
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let long = LAYER_NAMES
        .iter()
        .find(|(g, _)| *g == module)
        .map(|(_, h)| *h)?;
    Some(format!("model.layers.{layer}.{long}.{suffix}"))
}

/// Per-layer module names: llama.cpp's, then HF's.
const LAYER_NAMES: [(&str, &str); 9] = [
    ("attn_norm", "input_layernorm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("ffn_norm", "post_attention_layernorm"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];

/// Undoes `convert_hf_to_gguf.py`'s `LlamaModel.permute` on a row-major `[rows, cols]` q or k
/// weight (or bias, `cols = 1`) with `n_head` heads.
///
/// The converter reorders each head's rows from HF's rotate-half RoPE pairing (`i`, `i + d/2`)
/// to llama.cpp's interleaved pairing (`2i`, `2i + 1`): it does
/// `w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2)`, so GGUF row `h*d + 2j + t` is HF row
/// `h*d + t*d/2 + j`. This crate's RoPE is rotate-half, so the HF order is wanted back.
pub fn unpermute_qk(data: &[f32], n_head: usize, rows: usize, cols: usize) -> Result<Vec<f32>> {
    if data.len() != rows * cols || n_head == 0 || !rows.is_multiple_of(2 * n_head) {
        bail!("cannot un-permute a [{rows}, {cols}] q/k tensor with {n_head} heads");
    }
    let d = rows / n_head;
    let half = d / 2;
    let mut out = vec![0f32; data.len()];
    for h in 0..n_head {
        for j in 0..half {
            for t in 0..2 {
                let src = (h * d + 2 * j + t) * cols;
                let dst = (h * d + t * half + j) * cols;
                out[dst..dst + cols].copy_from_slice(&data[src..src + cols]);
            }
        }
    }
    Ok(out)
}

/// The [`ModelConfig`] a Llama GGUF file describes (`general.architecture` must be `llama`).
///
/// The result goes through [`ModelConfig::from_json`], so it saves as a transformers
/// `config.json`. Embeddings are tied exactly when the file has no `output.weight`.
pub fn config_from_gguf(file: &GgufFile) -> Result<ModelConfig> {
    let shown = file.path().display();
    let arch = file.get_str("general.architecture")?;
    if arch != "llama" {
        bail!("{shown}: GGUF architecture `{arch}` is not supported (supported: llama)");
    }
    let key = |k: &str| format!("llama.{k}");
    let opt_u64 = |k: &str| -> Result<Option<u64>> {
        match file.get(&key(k)) {
            None => Ok(None),
            Some(_) => file.get_u64(&key(k)).map(Some),
        }
    };
    if opt_u64("expert_count")?.unwrap_or(0) > 0 {
        bail!("{shown}: mixture-of-experts Llama files are not supported");
    }
    if let Some(kind) = file.get(&key("rope.scaling.type")).and_then(|v| v.as_str()) {
        if kind != "none" {
            bail!("{shown}: RoPE scaling `{kind}` is not supported");
        }
    }
    let hidden = file.get_u64(&key("embedding_length"))?;
    let heads = file.get_u64(&key("attention.head_count"))?;
    if heads == 0 {
        bail!("{shown}: llama.attention.head_count is 0");
    }
    let kv_heads = opt_u64("attention.head_count_kv")?.unwrap_or(heads);
    let head_dim = opt_u64("attention.key_length")?.unwrap_or(hidden / heads);
    if let Some(rope_dim) = opt_u64("rope.dimension_count")? {
        if rope_dim != head_dim {
            bail!("{shown}: partial RoPE ({rope_dim} of {head_dim} dims) is not supported");
        }
    }
    let embd = file.shape("token_embd.weight")?;
    let vocab = match opt_u64("vocab_size")? {
        Some(v) => v,
        None => embd[0] as u64,
    };
    let mut obj: Map<String, Value> = Map::new();
    let mut set = |k: &str, v: Value| {
        obj.insert(k.to_string(), v);
    };
    set("architectures", json!(["LlamaForCausalLM"]));
    set("model_type", json!("llama"));
    set("vocab_size", json!(vocab));
    set("hidden_size", json!(hidden));
    set(
        "intermediate_size",
        json!(file.get_u64(&key("feed_forward_length"))?),
    );
    set(
        "num_hidden_layers",
        json!(file.get_u64(&key("block_count"))?),
    );
    set("num_attention_heads", json!(heads));
    set("num_key_value_heads", json!(kv_heads));
    set("head_dim", json!(head_dim));
    // llama.cpp's own defaults when a key is absent.
    let eps = match file.get(&key("attention.layer_norm_rms_epsilon")) {
        Some(_) => file.get_f64(&key("attention.layer_norm_rms_epsilon"))?,
        None => 1e-5,
    };
    let theta = match file.get(&key("rope.freq_base")) {
        Some(_) => file.get_f64(&key("rope.freq_base"))?,
        None => 10_000.0,
    };
    set("rms_norm_eps", json!(eps));
    set("rope_theta", json!(theta));
    if let Some(ctx) = opt_u64("context_length")? {
        set("max_position_embeddings", json!(ctx));
    }
    set(
        "tie_word_embeddings",
        json!(file.tensor("output.weight").is_none()),
    );
    // Bias on q means the file has attention biases (HF `attention_bias` covers all four).
    set(
        "attention_bias",
        json!(file.tensor("blk.0.attn_q.bias").is_some()),
    );
    for (gguf, hf) in [
        ("tokenizer.ggml.bos_token_id", "bos_token_id"),
        ("tokenizer.ggml.eos_token_id", "eos_token_id"),
    ] {
        if let Ok(id) = file.get_u32(gguf) {
            set(hf, json!(id));
        }
    }
    ModelConfig::from_json(obj).map_err(|e| anyhow!("{shown}: {e}"))
}

/// The tensors of a Llama GGUF file under HF names and layouts.
#[derive(Debug)]
pub struct GgufSource {
    file: GgufFile,
    n_head: usize,
    n_kv_head: usize,
    form: GgufWeights,
}

impl GgufSource {
    /// Wraps an open file whose configuration is `config` (from [`config_from_gguf`]).
    pub fn new(file: GgufFile, config: &ModelConfig) -> Self {
        GgufSource {
            file,
            n_head: config.num_attention_heads,
            n_kv_head: config.num_key_value_heads,
            form: GgufWeights::F32,
        }
    }

    /// The same source handing out quantised weights in their blocks ([`WeightSource::blocks`]).
    pub fn keeping_blocks(mut self) -> Self {
        self.form = GgufWeights::Blocks;
        self
    }

    /// The GGUF name of HF tensor `name`, checked to exist with shape `shape`.
    fn checked_name(&self, name: &str, shape: &[usize]) -> Result<String> {
        let shown = self.file.path().display().to_string();
        let gname =
            gguf_name(name).ok_or_else(|| anyhow!("{shown}: no GGUF tensor for HF {name}"))?;
        if self.file.tensor(&gname).is_none() {
            bail!("{shown}: tensor {gname} (HF {name}) is missing");
        }
        let got = self.file.shape(&gname)?;
        if got != shape {
            bail!(
                "{shown}: tensor {gname} (HF {name}) has shape {got:?}, the config expects \
                 {shape:?}"
            );
        }
        Ok(gname)
    }

    /// The head count whose q/k row order the converter changed, for q and k projections.
    fn permuted_heads(&self, name: &str) -> Option<usize> {
        if name.contains(".self_attn.q_proj.") {
            Some(self.n_head)
        } else if name.contains(".self_attn.k_proj.") {
            Some(self.n_kv_head)
        } else {
            None
        }
    }
}

impl WeightSource for GgufSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let gname = self.checked_name(name, shape)?;
        let data = self.file.read_f32(&gname)?;
        match self.permuted_heads(name) {
            Some(n) => {
                let cols = shape.get(1).copied().unwrap_or(1);
                unpermute_qk(&data, n, shape[0], cols)
            }
            None => Ok(data),
        }
    }

    fn blocks(&mut self, name: &str, shape: &[usize]) -> Result<Option<QuantMatrix>> {
        if self.form != GgufWeights::Blocks || shape.len() != 2 {
            return Ok(None);
        }
        let gname = self.checked_name(name, shape)?;
        let ty = self.file.tensor(&gname).expect("checked").ggml_type;
        if !QuantMatrix::keeps(ty) {
            return Ok(None);
        }
        let raw = self.file.read_raw(&gname)?;
        let shown = self.file.path().display();
        let q = QuantMatrix::from_gguf(ty, shape[0], shape[1], &raw)
            .map_err(|e| anyhow!("{shown}: tensor {gname}: {e}"))?;
        Ok(Some(match self.permuted_heads(name) {
            Some(n) => {
                // The row each HF row comes from: the permutation applied to row numbers.
                let rows: Vec<f32> = (0..shape[0]).map(|r| r as f32).collect();
                let order = unpermute_qk(&rows, n, shape[0], 1)?;
                q.permute_rows(&order.iter().map(|&r| r as usize).collect::<Vec<_>>())
            }
            None => q,
        }))
    }
}

/// Loads a Llama GGUF file onto `device`, dequantising every tensor to the backend's float type.
pub fn load_gguf_model<B: Backend>(path: &Path, device: &B::Device) -> Result<Model<B>> {
    load_gguf_model_with(path, device, GgufWeights::F32)
}

/// Loads a Llama GGUF file onto `device`, its quantised weights in the form `form` names.
pub fn load_gguf_model_with<B: Backend>(
    path: &Path,
    device: &B::Device,
    form: GgufWeights,
) -> Result<Model<B>> {
    let file = GgufFile::open(path)?;
    let config = config_from_gguf(&file)?;
    let src = GgufSource::new(file, &config);
    let mut src = match form {
        GgufWeights::F32 => src,
        GgufWeights::Blocks => src.keeping_blocks(),
    };
    Model::from_source(config, &mut src, device)
}

/// The GGUF file `path` names: `path` itself when it is a `.gguf` file, or the only `.gguf`
/// in a directory that has no `config.json`. `None` when `path` is a safetensors checkpoint
/// (or nothing loadable); an error when a directory holds several `.gguf` files.
pub fn gguf_path(path: &Path) -> Result<Option<PathBuf>> {
    let is_gguf = |p: &Path| {
        p.is_file()
            && p.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    };
    if is_gguf(path) {
        return Ok(Some(path.to_path_buf()));
    }
    if !path.is_dir() || path.join("config.json").is_file() {
        return Ok(None);
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_gguf(p))
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => bail!(
            "{} holds several .gguf files ({}); pass the one to load",
            path.display(),
            found
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
/// The converter's permute written out as numpy does it: `reshape(n, 2, d/2, cols)` (so the
/// source row of index `(h, t, j)` is `h*d + t*d/2 + j`), `swapaxes(1, 2)` (index becomes
/// `(h, j, t)`), `reshape(rows, cols)` (flat row `h*d + j*2 + t`).
pub(crate) fn converter_permute(w: &[f32], n_head: usize, rows: usize, cols: usize) -> Vec<f32> {
    let d = rows / n_head;
    let half = d / 2;
    let mut out = vec![0f32; w.len()];
    for h in 0..n_head {
        for j in 0..half {
            for t in 0..2 {
                let src = h * d + t * half + j;
                let dst = h * d + j * 2 + t;
                for c in 0..cols {
                    out[dst * cols + c] = w[src * cols + c];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpermute_inverts_the_converter() {
        // One head of 4 rows: HF [a, b, c, d] is stored as [a, c, b, d].
        let hf = [10.0, 11.0, 12.0, 13.0];
        let stored = converter_permute(&hf, 1, 4, 1);
        assert_eq!(stored, vec![10.0, 12.0, 11.0, 13.0]);
        assert_eq!(unpermute_qk(&stored, 1, 4, 1).unwrap(), hf);

        // Head width 6 (the permutation is not its own inverse there), 3 heads, 5 columns.
        let (n, rows, cols) = (3, 18, 5);
        let hf: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let stored = converter_permute(&hf, n, rows, cols);
        assert_ne!(stored, hf);
        assert_ne!(
            converter_permute(&stored, n, rows, cols),
            hf,
            "a self-inverse case would not tell the directions apart"
        );
        assert_eq!(unpermute_qk(&stored, n, rows, cols).unwrap(), hf);
        assert!(unpermute_qk(&stored, 4, rows, cols).is_err());
    }

    #[test]
    fn names_map_both_ways() {
        for (g, h) in [
            ("token_embd.weight", "model.embed_tokens.weight"),
            ("output_norm.weight", "model.norm.weight"),
            ("output.weight", "lm_head.weight"),
            (
                "blk.0.attn_norm.weight",
                "model.layers.0.input_layernorm.weight",
            ),
            (
                "blk.12.attn_q.weight",
                "model.layers.12.self_attn.q_proj.weight",
            ),
            ("blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"),
            (
                "blk.3.attn_v.weight",
                "model.layers.3.self_attn.v_proj.weight",
            ),
            (
                "blk.29.attn_output.weight",
                "model.layers.29.self_attn.o_proj.weight",
            ),
            (
                "blk.1.ffn_norm.weight",
                "model.layers.1.post_attention_layernorm.weight",
            ),
            (
                "blk.1.ffn_gate.weight",
                "model.layers.1.mlp.gate_proj.weight",
            ),
            ("blk.1.ffn_up.weight", "model.layers.1.mlp.up_proj.weight"),
            (
                "blk.1.ffn_down.weight",
                "model.layers.1.mlp.down_proj.weight",
            ),
        ] {
            assert_eq!(hf_name(g).as_deref(), Some(h), "{g}");
            assert_eq!(gguf_name(h).as_deref(), Some(g), "{h}");
        }
        assert_eq!(hf_name("rope_freqs.weight"), None);
        assert_eq!(gguf_name("model.layers.0.self_attn.q_norm.weight"), None);
        assert_eq!(gguf_name("model.layers.x.mlp.up_proj.weight"), None);
    }
}

//! Writing a model as an HF checkpoint: `config.json` plus safetensors (single or sharded).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use burn::prelude::*;
use safetensors::tensor::TensorView;
use safetensors::Dtype;

use super::load::{INDEX_FILE, SINGLE_FILE};
use super::TensorExport;
use crate::model::Model;

/// Element type of the written tensors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SaveDtype {
    /// 32-bit float (exact).
    #[default]
    F32,
    /// bfloat16 (round to nearest even, as torch's `.to(torch.bfloat16)`).
    BF16,
}

/// How to write a checkpoint.
#[derive(Clone, Debug, Default)]
pub struct SaveOptions {
    /// Element type of the tensors.
    pub dtype: SaveDtype,
    /// Split into `model-0000i-of-0000n.safetensors` shards of at most this many bytes (None: one file).
    pub max_shard_bytes: Option<u64>,
}

fn encode(t: &TensorExport, dtype: SaveDtype) -> Vec<u8> {
    match dtype {
        SaveDtype::F32 => t.data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        SaveDtype::BF16 => t
            .data
            .iter()
            .flat_map(|v| half::bf16::from_f32(*v).to_bits().to_le_bytes())
            .collect(),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Writes to `path` through a temporary file, so readers never see a half-written file.
fn write_atomic(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = path.with_extension("tmp-write");
    write(&tmp)?;
    std::fs::rename(&tmp, path)
        .map_err(|e| anyhow::anyhow!("cannot move {} into place: {e}", path.display()))
}

fn write_shard(path: &Path, tensors: &[(&TensorExport, Vec<u8>)], dtype: Dtype) -> Result<()> {
    let views = tensors
        .iter()
        .map(|(t, bytes)| {
            Ok((
                t.name.clone(),
                TensorView::new(dtype, t.shape.clone(), bytes)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()
        .map_err(|e| anyhow::anyhow!("cannot encode tensors: {e}"))?;
    // transformers refuses safetensors files without this metadata.
    let meta = Some(
        [("format".to_string(), "pt".to_string())]
            .into_iter()
            .collect(),
    );
    write_atomic(path, |tmp| {
        safetensors::serialize_to_file(views, meta, tmp)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", tmp.display()))
    })
}

/// Saves `model` into `dir` (created if needed) as `config.json` plus HF-named safetensors.
pub fn save_model<B: Backend>(model: &Model<B>, dir: &Path, opts: &SaveOptions) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let (st_dtype, torch_dtype) = match opts.dtype {
        SaveDtype::F32 => (Dtype::F32, "float32"),
        SaveDtype::BF16 => (Dtype::BF16, "bfloat16"),
    };
    let mut cfg = model.config.to_json();
    // transformers 4 reads `torch_dtype`, 5 reads `dtype`.
    cfg["torch_dtype"] = serde_json::json!(torch_dtype);
    cfg["dtype"] = serde_json::json!(torch_dtype);
    let cfg_text = serde_json::to_string_pretty(&cfg)?;
    write_atomic(&dir.join("config.json"), |p| {
        write_file(p, cfg_text.as_bytes())
    })?;

    let tensors = model.export();
    let encoded: Vec<(&TensorExport, Vec<u8>)> =
        tensors.iter().map(|t| (t, encode(t, opts.dtype))).collect();
    let total: u64 = encoded.iter().map(|(_, b)| b.len() as u64).sum();

    // Remove the other layout's files so a directory never holds two disagreeing checkpoints.
    let remove_shards = || -> Result<()> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().to_string();
            if name.starts_with("model-") && name.ends_with(".safetensors") {
                let p = dir.join(name);
                std::fs::remove_file(&p)
                    .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", p.display()))?;
            }
        }
        Ok(())
    };
    match opts.max_shard_bytes {
        Some(limit) if total > limit => {
            let mut shards: Vec<Vec<(&TensorExport, Vec<u8>)>> = vec![Vec::new()];
            let mut size = 0u64;
            for item in encoded {
                let n = item.1.len() as u64;
                if size > 0 && size + n > limit {
                    shards.push(Vec::new());
                    size = 0;
                }
                size += n;
                shards.last_mut().expect("one shard").push(item);
            }
            let _ = std::fs::remove_file(dir.join(SINGLE_FILE));
            remove_shards()?;
            let count = shards.len();
            let mut weight_map = BTreeMap::new();
            for (i, shard) in shards.iter().enumerate() {
                let file = format!("model-{:05}-of-{:05}.safetensors", i + 1, count);
                write_shard(&dir.join(&file), shard, st_dtype)?;
                for (t, _) in shard {
                    weight_map.insert(t.name.clone(), file.clone());
                }
            }
            let index =
                serde_json::json!({"metadata": {"total_size": total}, "weight_map": weight_map});
            let text = serde_json::to_string_pretty(&index)?;
            write_atomic(&dir.join(INDEX_FILE), |p| write_file(p, text.as_bytes()))?;
        }
        _ => {
            let _ = std::fs::remove_file(dir.join(INDEX_FILE));
            remove_shards()?;
            write_shard(&dir.join(SINGLE_FILE), &encoded, st_dtype)?;
        }
    }
    Ok(())
}

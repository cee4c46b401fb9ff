//! Loading a model directory: `config.json` plus `model.safetensors` or a sharded
//! `model.safetensors.index.json` (or a GGUF file, handed to [`super::gguf`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use burn::prelude::*;

use super::safetensors::SafetensorsFile;
use super::WeightSource;
use crate::config::ModelConfig;
use crate::model::Model;

/// Single-file weights name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// Shard index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

/// Tensors of a checkpoint directory, single-file or sharded.
#[derive(Debug)]
pub struct FileSource {
    dir: PathBuf,
    files: Vec<SafetensorsFile>,
    by_name: HashMap<String, usize>,
}

/// Opens the weights of a model directory (every file's header is validated now).
pub fn open_weights(dir: &Path) -> Result<FileSource> {
    let single = dir.join(SINGLE_FILE);
    let index = dir.join(INDEX_FILE);
    // Same preference as transformers: the single file first, then the index.
    let paths: Vec<PathBuf> = if single.is_file() {
        vec![single]
    } else if index.is_file() {
        let text = std::fs::read_to_string(&index)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", index.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not valid JSON: {e}", index.display()))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .with_context(|| format!("{}: missing `weight_map`", index.display()))?;
        let mut files: Vec<String> = map
            .values()
            .filter_map(|f| f.as_str().map(String::from))
            .collect();
        files.sort();
        files.dedup();
        files.iter().map(|f| dir.join(f)).collect()
    } else {
        bail!(
            "missing weights file: {} has neither {SINGLE_FILE} nor {INDEX_FILE}",
            dir.display()
        );
    };
    let mut files = Vec::new();
    let mut by_name = HashMap::new();
    for p in paths {
        if !p.is_file() {
            bail!("missing weights file {}", p.display());
        }
        let f = SafetensorsFile::open(&p)?;
        for name in f.names() {
            by_name.insert(name.to_string(), files.len());
        }
        files.push(f);
    }
    Ok(FileSource {
        dir: dir.to_path_buf(),
        files,
        by_name,
    })
}

impl FileSource {
    /// Whether the checkpoint holds `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }
}

impl WeightSource for FileSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let Some(&i) = self.by_name.get(name) else {
            bail!(
                "tensor {name} is missing from the weights in {}",
                self.dir.display()
            );
        };
        let file = &mut self.files[i];
        let info = file.info(name).expect("indexed tensor exists");
        if info.shape != shape {
            bail!(
                "tensor {name} in {}: shape {:?} does not match the config (expected {:?})",
                file.path().display(),
                info.shape,
                shape
            );
        }
        file.read_f32(name)
    }
}

/// Loads `config.json` and the safetensors weights of `dir` onto `device`, converting every
/// tensor to the backend's float type.
///
/// `dir` may instead be a llama.cpp `.gguf` file, or a directory without `config.json` holding
/// exactly one `.gguf` (see [`super::gguf::gguf_path`]); that is loaded with
/// [`super::gguf::load_gguf_model`].
pub fn load_model<B: Backend>(dir: &Path, device: &B::Device) -> Result<Model<B>> {
    load_model_with(dir, device, &LoadConfig::default())
}

/// How the weights of a GGUF file are held once loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GgufWeights {
    /// Every tensor dequantised to f32: what training, LoRA and exports need.
    #[default]
    F32,
    /// Quantised projection weights stay in their blocks and are dequantised inside the matmul
    /// kernels (serving, judging, evaluation): about a sixth of the memory and of the bytes a
    /// decode step reads, for 4-bit files. Norms and f32/f16 tensors are read as f32 either way.
    Blocks,
}

/// How [`load_model_with`] reads a model.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadConfig {
    /// The form of a GGUF file's weights (safetensors checkpoints always load as f32).
    pub gguf: GgufWeights,
}

/// [`load_model`] with the form of GGUF weights chosen by `cfg`.
pub fn load_model_with<B: Backend>(
    dir: &Path,
    device: &B::Device,
    cfg: &LoadConfig,
) -> Result<Model<B>> {
    if let Some(file) = super::gguf::gguf_path(dir)? {
        return super::gguf::load_gguf_model_with(&file, device, cfg.gguf);
    }
    let config = ModelConfig::from_path(dir)?;
    let mut src = open_weights(dir)?;
    Model::from_source(config, &mut src, device)
}

//! Loading a resolved model: weights with any LoRA adapters merged, tokenizer, chat template.

use crate::resolve::{resolve, ModelSource};
use crate::text::tokenizer_and_template;
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_chat::{ChatTemplate, Tokenizer};
use openclaw_engine::{GgufWeights, Model, ModelConfig};
use openclaw_metrics::progress::Progress;
use std::path::{Path, PathBuf};

/// How to read a `--model-path`.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The save directory the word `latest` refers to (`--save-dir`, `CKPT_SAVE_DIR`).
    pub save_dir: PathBuf,
    /// Where the tokenizer and chat template come from when not from the model
    /// (`--tokenizer`).
    pub tokenizer: Option<PathBuf>,
    /// How a GGUF file's quantised weights are held: in their blocks for serving, judging and
    /// evaluation (the default), f32 where they are trained.
    pub gguf: GgufWeights,
}

impl Default for LoadOptions {
    /// `latest` in `CKPT_SAVE_DIR` when set, else `./checkpoints` (the run's default
    /// `--save-dir`); the model's own tokenizer.
    fn default() -> Self {
        LoadOptions {
            save_dir: std::env::var_os("CKPT_SAVE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("checkpoints")),
            tokenizer: None,
            gguf: GgufWeights::Blocks,
        }
    }
}

/// Everything a model path gives: its weights, ready to serve, and its text side. A clone shares
/// the weights (burn tensors and quantised blocks are reference-counted).
#[derive(Clone)]
pub struct ModelFiles<B: Backend> {
    /// Where the weights came from.
    pub source: ModelSource,
    /// The model's configuration.
    pub config: ModelConfig,
    /// The weights, LoRA adapters merged in (one matmul per projection, the same outputs); a
    /// GGUF file's quantised weights in the form [`LoadOptions::gguf`] names.
    pub model: Model<B>,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The chat template.
    pub template: ChatTemplate,
}

impl<B: Backend> ModelFiles<B> {
    /// Resolves `spec` (see [`resolve`]) and loads it on `device`.
    pub fn load(spec: &str, opts: &LoadOptions, device: &B::Device) -> Result<Self> {
        let source = resolve(spec, &opts.save_dir)?;
        Self::load_source(source, opts, device)
    }

    /// Loads `path` (anything [`resolve`] takes but `latest`) on `device`.
    pub fn load_path(path: &Path, device: &B::Device) -> Result<Self> {
        Self::load(&path.to_string_lossy(), &LoadOptions::default(), device)
    }

    /// Loads a resolved source on `device`.
    pub fn load_source(
        source: ModelSource,
        opts: &LoadOptions,
        device: &B::Device,
    ) -> Result<Self> {
        let model = load_weights_with::<B>(&source, device, opts.gguf)?;
        let (tokenizer, template) = tokenizer_and_template(&source, opts.tokenizer.as_deref())?;
        if tokenizer.vocab_size() > model.config.vocab_size {
            bail!(
                "the tokenizer of {} has {} tokens but the model only {}: they do not belong together",
                source.path().display(),
                tokenizer.vocab_size(),
                model.config.vocab_size
            );
        }
        Ok(ModelFiles {
            config: model.config.clone(),
            source,
            model,
            tokenizer,
            template,
        })
    }

    /// The directory or file the weights came from.
    pub fn path(&self) -> &Path {
        self.source.path()
    }
}

/// Loads of at least this many bytes of weights show their progress (a small model loads
/// before anyone would look).
const SHOWN_LOAD_BYTES: u64 = 256 << 20;

/// Bytes of weight files at `path`: the file, or a directory's safetensors, GGUF and bin files.
fn weight_bytes(path: &Path) -> u64 {
    if path.is_file() {
        return path.metadata().map_or(0, |m| m.len());
    }
    std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            [".safetensors", ".gguf", ".bin"]
                .iter()
                .any(|x| name.ends_with(x))
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The weights of `source` on `device` in f32 (what training needs), LoRA adapters merged.
pub fn load_weights<B: Backend>(source: &ModelSource, device: &B::Device) -> Result<Model<B>> {
    load_weights_with(source, device, GgufWeights::F32)
}

/// The weights of `source` on `device`, a GGUF file's quantised weights in the form `gguf`
/// names (a model with LoRA adapters is merged, so in f32), LoRA adapters merged.
pub fn load_weights_with<B: Backend>(
    source: &ModelSource,
    device: &B::Device,
    gguf: GgufWeights,
) -> Result<Model<B>> {
    let path = source.path();
    // Any directory that lists checksums is checked, whatever else in it is damaged.
    if path.is_dir() {
        crate::checkpoints::verify_checksums(path)?;
    }
    let cfg = openclaw_engine::LoadConfig { gguf };
    let bytes = weight_bytes(path);
    let progress = (bytes >= SHOWN_LOAD_BYTES)
        .then(|| Progress::start(&format!("loading {}", path.display()), None));
    let model = openclaw_engine::load_model_with::<B>(path, device, &cfg)
        .with_context(|| format!("cannot load the model in {}", path.display()))?;
    if let Some(p) = progress {
        p.finish(&format!("{:.0} MiB of weights", bytes as f64 / 1048576.0));
    }
    let model = if source.has_adapters() {
        let (with_adapters, _) = openclaw_engine::lora::load_adapters(model, path)?;
        openclaw_engine::lora::merged(&with_adapters)
    } else {
        model
    };
    if let Some(name) = model.non_finite_weight() {
        anyhow::bail!(
            "the model in {} has non-finite values (NaN or infinity) in `{name}`; refusing to serve or train it (an earlier checkpoint may be whole)",
            path.display()
        );
    }
    Ok(model)
}

//! Loading what an evaluation runs: anything `--model-path` takes (a model directory, a
//! checkpoint with LoRA adapters merged, a save directory, `checkpoint-latest`, `latest`, a GGUF
//! file), through `openclaw-model-store` like every other command.

use anyhow::Result;
use burn::prelude::Backend;
use openclaw_engine::CpuBackend;
use openclaw_model_store::{LoadOptions, ModelFiles};
use std::path::Path;

/// A model ready to sample from, with the text side it was trained with.
pub type EvalModel = ModelFiles<CpuBackend>;

/// Loads `model_path` for evaluation on backend `B`, on `device`; `latest` is the newest
/// checkpoint in `save_dir`, and `tokenizer` (`--tokenizer`) supplies the text side a
/// checkpoint lacks.
pub fn load_on<B: Backend>(
    model_path: &str,
    save_dir: &Path,
    tokenizer: Option<&Path>,
    device: &B::Device,
) -> Result<ModelFiles<B>> {
    let opts = LoadOptions {
        save_dir: save_dir.to_path_buf(),
        tokenizer: tokenizer.map(Path::to_path_buf),
        gguf: openclaw_engine::GgufWeights::Blocks,
    };
    ModelFiles::load(model_path, &opts, device)
}

/// Loads `model_path` on the CPU (see [`load_on`]; `latest` looks in `CKPT_SAVE_DIR`, else
/// `./checkpoints`).
pub fn load(model_path: &Path, tokenizer: Option<&Path>) -> Result<EvalModel> {
    load_on::<CpuBackend>(
        &model_path.to_string_lossy(),
        &LoadOptions::default().save_dir,
        tokenizer,
        &Default::default(),
    )
}

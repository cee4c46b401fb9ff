//! Export: any model path (a checkpoint with or without LoRA adapters, a model directory, a
//! GGUF file) as a standard Hugging Face model directory with the adapters merged in.

use std::path::Path;

use anyhow::{bail, Context, Result};
use burn::prelude::*;
use openclaw_engine::{save_model, SaveOptions};

use crate::load::load_weights;
use crate::resolve::resolve;
use crate::text::{tokenizer_files, TOKENIZER_FILES};

/// Writes the model at `model_path` to `out_dir` as `config.json` + safetensors (adapters
/// merged, written as `opts` says), plus tokenizer files: those of `tokenizer_dir` when given
/// (`tokenizer.json` must be among them), then the model's own (for a GGUF file, built from its
/// metadata; for a checkpoint without them, its base model's). The result loads with
/// `transformers`' `from_pretrained` and with [`openclaw_engine::load_model`]. Runs on `device`.
pub fn export<B: Backend>(
    model_path: &Path,
    out_dir: &Path,
    tokenizer_dir: Option<&Path>,
    opts: &SaveOptions,
    device: &B::Device,
) -> Result<()> {
    if same_dir(model_path, out_dir) {
        bail!("export: the output directory is the checkpoint itself");
    }
    if let Some(t) = tokenizer_dir {
        if !t.join("tokenizer.json").is_file() {
            bail!("export: {} has no tokenizer.json", t.display());
        }
    }
    let source = resolve(&model_path.to_string_lossy(), Path::new(""))?;
    let model = load_weights::<B>(&source, device)
        .with_context(|| format!("export: cannot load {}", model_path.display()))?;
    save_model(&model, out_dir, opts)?;
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let dst = out_dir.join(name);
        if !dst.exists() {
            std::fs::write(&dst, bytes)
                .with_context(|| format!("export: cannot write {}", dst.display()))?;
        }
        Ok(())
    };
    if let Some(t) = tokenizer_dir {
        for name in TOKENIZER_FILES {
            let src = t.join(name);
            if src.is_file() {
                let bytes = std::fs::read(&src)
                    .with_context(|| format!("export: cannot read {}", src.display()))?;
                write(name, &bytes)?;
            }
        }
    }
    match tokenizer_files(&source, None) {
        Ok(files) => {
            for (name, bytes) in files {
                write(&name, &bytes)?;
            }
        }
        // The given tokenizer is enough.
        Err(_) if tokenizer_dir.is_some() => {}
        Err(e) => return Err(e.context("export: no tokenizer to write beside the weights")),
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

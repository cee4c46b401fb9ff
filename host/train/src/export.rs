//! Export: a checkpoint (or any model directory, with or without LoRA adapters) as a standard
//! Hugging Face model directory with the adapters merged in.

use std::path::Path;

use anyhow::{bail, Context, Result};
use burn::prelude::*;
use openclaw_engine::{load_model, save_model, SaveOptions};

use crate::lora;

/// Tokenizer and generation files copied next to the weights when present.
pub const TOKENIZER_FILES: [&str; 8] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
];

/// Writes `checkpoint_dir`'s model to `out_dir` as `config.json` + safetensors (adapters
/// merged, written as `opts` says), plus the tokenizer files of `tokenizer_dir` when given
/// (`tokenizer.json` must be among them). The result loads with `transformers`'
/// `from_pretrained` and with [`openclaw_engine::load_model`]. Runs on `device`.
pub fn export<B: Backend>(
    checkpoint_dir: &Path,
    out_dir: &Path,
    tokenizer_dir: Option<&Path>,
    opts: &SaveOptions,
    device: &B::Device,
) -> Result<()> {
    if same_dir(checkpoint_dir, out_dir) {
        bail!("export: the output directory is the checkpoint itself");
    }
    if let Some(t) = tokenizer_dir {
        if !t.join("tokenizer.json").is_file() {
            bail!("export: {} has no tokenizer.json", t.display());
        }
    }
    let base = load_model::<B>(checkpoint_dir, device)
        .with_context(|| format!("export: cannot load {}", checkpoint_dir.display()))?;
    let model = if checkpoint_dir.join(lora::ADAPTER_CONFIG).is_file() {
        let (with_adapters, _) = lora::load_adapters(base, checkpoint_dir)?;
        lora::merged(&with_adapters)
    } else {
        base
    };
    save_model(&model, out_dir, opts)?;
    for dir in tokenizer_dir
        .into_iter()
        .chain(std::iter::once(checkpoint_dir))
    {
        for name in TOKENIZER_FILES {
            let (src, dst) = (dir.join(name), out_dir.join(name));
            if src.is_file() && !dst.exists() {
                std::fs::copy(&src, &dst).with_context(|| {
                    format!("export: cannot copy {} to {}", src.display(), dst.display())
                })?;
            }
        }
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

//! `openclaw-host export`: a checkpoint (or any model path) as a standard Hugging Face model
//! directory (LoRA merged, config, tokenizer files) that transformers, vLLM or SGLang load.

use anyhow::{bail, Result};
use openclaw_engine::{CpuBackend, SaveDtype, SaveOptions};
use openclaw_model_store::ModelSource;
use std::path::Path;

/// Exports `checkpoint` (anything `--model-path` takes; `latest` is the newest checkpoint in
/// `save_dir`) to `out`.
pub fn run(
    checkpoint: &str,
    save_dir: &Path,
    out: &Path,
    tokenizer: Option<&Path>,
    dtype: &str,
) -> Result<i32> {
    let dtype = match dtype {
        "float32" | "f32" => SaveDtype::F32,
        "bfloat16" | "bf16" => SaveDtype::BF16,
        other => bail!("--dtype {other}: expected float32 or bfloat16"),
    };
    let source = openclaw_model_store::resolve(checkpoint, save_dir)?;
    if let ModelSource::Directory(d) = &source {
        if !d.join("config.json").is_file() {
            bail!(
                "{} is not a checkpoint or model directory (no config.json)",
                d.display()
            );
        }
    }
    openclaw_model_store::export::<CpuBackend>(
        source.path(),
        out,
        tokenizer,
        &SaveOptions {
            dtype,
            max_shard_bytes: None,
        },
        &Default::default(),
    )?;
    println!("exported {} to {}", source.path().display(), out.display());
    Ok(0)
}

//! `openclaw-host export`: a checkpoint as a standard Hugging Face model directory (LoRA
//! merged, config, tokenizer files) that transformers, vLLM or SGLang load.

use crate::policy::files::tokenizer_dir;
use anyhow::{bail, Result};
use openclaw_engine::{CpuBackend, SaveDtype, SaveOptions};
use std::path::{Path, PathBuf};

/// Exports `checkpoint` (a checkpoint directory, or `latest` in `save_dir`) to `out`.
pub fn run(
    checkpoint: &str,
    save_dir: &Path,
    out: &Path,
    tokenizer: Option<&Path>,
    dtype: &str,
) -> Result<i32> {
    let dir = if checkpoint == "latest" {
        openclaw_train::resolve_checkpoint(save_dir, "latest")?
    } else {
        PathBuf::from(checkpoint)
    };
    if !dir.join("config.json").is_file() {
        bail!(
            "{} is not a checkpoint or model directory (no config.json)",
            dir.display()
        );
    }
    let dtype = match dtype {
        "float32" | "f32" => SaveDtype::F32,
        "bfloat16" | "bf16" => SaveDtype::BF16,
        other => bail!("--dtype {other}: expected float32 or bfloat16"),
    };
    let tok = tokenizer_dir(&dir, tokenizer)?;
    openclaw_train::export::<CpuBackend>(
        &dir,
        out,
        Some(&tok),
        &SaveOptions {
            dtype,
            max_shard_bytes: None,
        },
        &Default::default(),
    )?;
    println!("exported {} to {}", dir.display(), out.display());
    Ok(0)
}

//! A `--model-path` (or `latest`) to the weights it names.

use crate::checkpoints::{
    has_latest_pointer, is_complete, latest_checkpoint, list_checkpoints, written_by_trainer,
    CHECKPOINT_LATEST, COMPLETE_MARKER,
};
use anyhow::{bail, Result};
use openclaw_engine::weights::gguf::gguf_path;
use std::path::{Path, PathBuf};

/// Where a model's weights are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// A directory with `config.json` and safetensors: a Hugging Face model or a whole
    /// checkpoint (which may carry LoRA adapters).
    Directory(PathBuf),
    /// A GGUF file.
    Gguf(PathBuf),
}

impl ModelSource {
    /// The directory or file.
    pub fn path(&self) -> &Path {
        match self {
            ModelSource::Directory(p) | ModelSource::Gguf(p) => p,
        }
    }

    /// Whether the weights come with LoRA adapters to merge.
    pub fn has_adapters(&self) -> bool {
        matches!(self, ModelSource::Directory(d) if d.join(openclaw_engine::lora::ADAPTER_CONFIG).is_file())
    }
}

/// Resolves `spec`: `latest` is the newest whole checkpoint of `save_dir`; a save directory or
/// its `checkpoint-latest` is its newest whole checkpoint; a GGUF file (or a directory holding
/// exactly one) is itself; a directory with `config.json` is itself (refused when it is a
/// checkpoint that was not fully written). Errors say what the path lacks.
pub fn resolve(spec: &str, save_dir: &Path) -> Result<ModelSource> {
    if spec.trim().is_empty() {
        bail!("no model given: set MODEL_PATH or --model-path (a model directory, a checkpoint, a save directory, `latest` or a .gguf file)");
    }
    if spec == "latest" {
        return Ok(ModelSource::Directory(latest_checkpoint(save_dir)?));
    }
    let path = Path::new(spec);
    if path.symlink_metadata().is_err() {
        bail!("model path {} does not exist", path.display());
    }
    // `checkpoint-latest` (the symlink, or the older text file): the checkpoint it names, by its
    // real directory (so logs and reports show which step it was).
    if path.file_name().is_some_and(|n| n == CHECKPOINT_LATEST) {
        let dir = path.parent().unwrap_or(Path::new("."));
        return Ok(ModelSource::Directory(latest_checkpoint(dir)?));
    }
    if let Some(file) = gguf_path(path)? {
        return Ok(ModelSource::Gguf(file));
    }
    if path.join("config.json").is_file() {
        if written_by_trainer(path) && !is_complete(path) {
            bail!(
                "checkpoint {} is incomplete (no {COMPLETE_MARKER}): it was not fully written",
                path.display()
            );
        }
        return Ok(ModelSource::Directory(path.to_path_buf()));
    }
    if path.is_dir() && (has_latest_pointer(path) || !list_checkpoints(path)?.is_empty()) {
        return Ok(ModelSource::Directory(latest_checkpoint(path)?));
    }
    if path.is_dir() {
        bail!(
            "{} is not a model: no config.json, no .gguf file and no complete checkpoint in it",
            path.display()
        );
    }
    bail!(
        "{} is not a model: expected a directory or a .gguf file",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoints::point_latest;

    fn checkpoint(save: &Path, step: u64, whole: bool) -> PathBuf {
        let d = save.join(format!("checkpoint-{step}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("config.json"), "{}").unwrap();
        std::fs::write(
            d.join("trainer_state.json"),
            r#"{"format": 1, "rng_state": 0}"#,
        )
        .unwrap();
        if whole {
            std::fs::write(d.join(COMPLETE_MARKER), "1\n").unwrap();
        }
        d
    }

    #[test]
    fn every_spelling_of_a_checkpoint_resolves_to_it() {
        let t = tempfile::tempdir().unwrap();
        let save = t.path().join("ckpt");
        checkpoint(&save, 1, true);
        let two = checkpoint(&save, 2, true);
        checkpoint(&save, 3, false);
        point_latest(&save, "checkpoint-2").unwrap();
        let want = ModelSource::Directory(two.clone());
        assert_eq!(resolve("latest", &save).unwrap(), want);
        assert_eq!(
            resolve(save.to_str().unwrap(), Path::new("x")).unwrap(),
            want
        );
        let link = save.join(CHECKPOINT_LATEST);
        assert_eq!(
            resolve(link.to_str().unwrap(), Path::new("x")).unwrap(),
            want
        );
        assert_eq!(
            resolve(two.to_str().unwrap(), Path::new("x")).unwrap(),
            want
        );
        let e = resolve(save.join("checkpoint-3").to_str().unwrap(), Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("incomplete"), "{e}");
    }

    #[test]
    fn gguf_files_and_bad_paths() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("m.gguf");
        std::fs::write(&f, b"GGUF").unwrap();
        assert_eq!(
            resolve(f.to_str().unwrap(), Path::new("x")).unwrap(),
            ModelSource::Gguf(f.clone())
        );
        assert_eq!(
            resolve(t.path().to_str().unwrap(), Path::new("x")).unwrap(),
            ModelSource::Gguf(f)
        );
        let e = resolve("", Path::new("x")).unwrap_err().to_string();
        assert!(e.contains("MODEL_PATH"), "{e}");
        let e = resolve("/no/such/model", Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        let e = resolve(empty.path().to_str().unwrap(), Path::new("x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no config.json"), "{e}");
        let e = resolve("latest", &empty.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no complete checkpoint"), "{e}");
    }
}

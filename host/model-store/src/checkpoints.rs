//! The layout of a save directory, shared by the trainer that writes it and every command that
//! reads it:
//!
//! ```text
//! <save-dir>/checkpoint-<step>/        one whole checkpoint (COMPLETE_MARKER written last)
//! <save-dir>/checkpoint-latest         symlink to the newest whole one, replaced atomically
//! <save-dir>/.checkpoint-<step>.tmp/   a checkpoint being written (never read)
//! ```
//!
//! `checkpoint-latest` is a symlink so that it is a path like any other: `--model-path
//! <save-dir>/checkpoint-latest` opens the checkpoint it points at. Runs from before it became a
//! symlink wrote a text file holding the directory's name; readers accept both.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The entry in the save directory naming the newest complete checkpoint.
pub const CHECKPOINT_LATEST: &str = "checkpoint-latest";
/// Written last inside a checkpoint; its presence means the checkpoint is whole.
pub const COMPLETE_MARKER: &str = "checkpoint.complete";
/// The trainer state inside a checkpoint.
pub const TRAINER_STATE: &str = "trainer_state.json";
/// Every file of a checkpoint with its CRC-32, written just before [`COMPLETE_MARKER`] and
/// checked at load: a flipped byte in a weight otherwise loads silently.
pub const CHECKSUMS: &str = "checksums.json";

/// The files of `dir` (and of its folders), as paths relative to it, sorted.
fn files_of(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(dir.join(&rel))
            .with_context(|| format!("cannot list {}", dir.join(&rel).display()))?
        {
            let entry = entry?;
            let kind = entry.file_type()?;
            let name = rel.join(entry.file_name());
            if kind.is_dir() {
                stack.push(name);
            } else if kind.is_file() {
                out.push(name);
            }
        }
    }
    out.retain(|p| p != Path::new(CHECKSUMS) && p != Path::new(COMPLETE_MARKER));
    out.sort();
    Ok(out)
}

/// The CRC-32 of the file at `path`, read in pieces.
fn crc_of(path: &Path) -> Result<u32> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize())
}

/// Writes [`CHECKSUMS`] for every file now in the checkpoint being written at `dir`.
pub fn write_checksums(dir: &Path) -> Result<()> {
    let mut files = serde_json::Map::new();
    for rel in files_of(dir)? {
        let crc = crc_of(&dir.join(&rel))?;
        files.insert(
            rel.to_string_lossy().into_owned(),
            serde_json::Value::String(format!("{crc:08x}")),
        );
    }
    let text = serde_json::to_string_pretty(&serde_json::json!({"crc32": files}))?;
    std::fs::write(dir.join(CHECKSUMS), text)
        .with_context(|| format!("cannot write {}", dir.join(CHECKSUMS).display()))
}

/// Checks every file [`CHECKSUMS`] lists in the checkpoint `dir` against its CRC-32; a
/// checkpoint written before checksums (none listed) passes. Errors name the file.
pub fn verify_checksums(dir: &Path) -> Result<()> {
    let path = dir.join(CHECKSUMS);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        // Written before checksums were kept.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not JSON (the checkpoint is damaged)", path.display()))?;
    let files = v["crc32"].as_object().with_context(|| {
        format!(
            "{}: no `crc32` table (the checkpoint is damaged)",
            path.display()
        )
    })?;
    for (rel, want) in files {
        let file = dir.join(rel);
        if rel.split('/').any(|c| c == ".." || c.is_empty()) {
            bail!(
                "{}: lists `{rel}`, not a file of the checkpoint",
                path.display()
            );
        }
        if !file.is_file() {
            bail!(
                "checkpoint {}: {rel} is missing (the checkpoint was changed after it was written; an earlier one may be whole)",
                dir.display()
            );
        }
        let got = format!("{:08x}", crc_of(&file)?);
        if Some(got.as_str()) != want.as_str() {
            bail!(
                "checkpoint {}: {rel} does not match its checksum (CRC-32 {got}, written {}): the file is damaged or changed since; an earlier checkpoint may be whole",
                dir.display(),
                want.as_str().unwrap_or("?")
            );
        }
    }
    Ok(())
}

/// `checkpoint-<step>`.
pub fn checkpoint_name(step: u64) -> String {
    format!("checkpoint-{step}")
}

/// The step of a `checkpoint-<step>` name.
pub fn parse_step(name: &str) -> Option<u64> {
    name.strip_prefix("checkpoint-")?.parse().ok()
}

/// Whether `dir` is a whole checkpoint.
pub fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE_MARKER).is_file()
}

/// Whether `dir` holds a `trainer_state.json` of this trainer (whole or not). Hugging Face
/// trainer checkpoints also have a `trainer_state.json`, of another shape, and no marker.
pub fn written_by_trainer(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(TRAINER_STATE))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("format").is_some() && v.get("rng_state").is_some())
}

/// The complete checkpoints in `save_dir`, oldest first.
pub fn list_checkpoints(save_dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    if !save_dir.is_dir() {
        return Ok(out);
    }
    for entry in std::fs::read_dir(save_dir)
        .with_context(|| format!("cannot list {}", save_dir.display()))?
    {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(step) = parse_step(&name) {
            let p = entry.path();
            // Not through the symlink: `checkpoint-latest` has no step and is skipped above.
            if p.is_dir() && is_complete(&p) {
                out.push((step, p));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether `dir` has a `checkpoint-latest` entry (symlink or the older text file).
pub fn has_latest_pointer(dir: &Path) -> bool {
    dir.join(CHECKPOINT_LATEST).symlink_metadata().is_ok()
}

/// The checkpoint `checkpoint-latest` in `save_dir` names, when it names a whole one.
fn pointed(save_dir: &Path) -> Option<PathBuf> {
    let link = save_dir.join(CHECKPOINT_LATEST);
    let name = match std::fs::read_link(&link) {
        Ok(target) => target,
        Err(_) => PathBuf::from(std::fs::read_to_string(&link).ok()?.trim()),
    };
    let dir = save_dir.join(&name);
    let step = dir.file_name()?.to_str().and_then(parse_step);
    (step.is_some() && is_complete(&dir)).then_some(dir)
}

/// The newest whole checkpoint of `save_dir`: the one `checkpoint-latest` names, or the
/// newest complete one when the pointer is missing or names an incomplete directory.
pub fn latest_checkpoint(save_dir: &Path) -> Result<PathBuf> {
    if let Some(dir) = pointed(save_dir) {
        return Ok(dir);
    }
    match list_checkpoints(save_dir)?.pop() {
        Some((_, p)) => Ok(p),
        None if save_dir.is_dir() => bail!("no complete checkpoint in {}", save_dir.display()),
        None => bail!(
            "no complete checkpoint: the save directory {} does not exist",
            save_dir.display()
        ),
    }
}

/// Points `save_dir/checkpoint-latest` at `save_dir/name`, atomically: a new symlink is made
/// under a temporary name and renamed over the old entry (a symlink or an older text file), so
/// a reader sees the old checkpoint or the new one, never neither.
pub fn point_latest(save_dir: &Path, name: &str) -> Result<()> {
    let link = save_dir.join(CHECKPOINT_LATEST);
    let tmp = save_dir.join(format!(".{CHECKPOINT_LATEST}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    #[cfg(unix)]
    std::os::unix::fs::symlink(name, &tmp)
        .with_context(|| format!("cannot create the symlink {}", tmp.display()))?;
    #[cfg(not(unix))]
    std::fs::write(&tmp, format!("{name}\n"))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &link).with_context(|| format!("cannot replace {}", link.display()))?;
    std::fs::File::open(save_dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", save_dir.display()))
}

/// Resolves a checkpoint given as `spec`: `latest` means the newest whole checkpoint of
/// `save_dir`; a save directory (one with checkpoints or a `checkpoint-latest`) or a
/// `checkpoint-latest` entry means that directory's newest; anything else is a checkpoint
/// directory, which must be complete.
pub fn resolve_checkpoint(save_dir: &Path, spec: &str) -> Result<PathBuf> {
    if spec == "latest" {
        return latest_checkpoint(save_dir);
    }
    let spec_path = Path::new(spec);
    // `checkpoint-latest` (the symlink, or the older text file): its directory's newest, named
    // by its real directory.
    if spec_path
        .file_name()
        .is_some_and(|n| n == CHECKPOINT_LATEST)
        && spec_path.symlink_metadata().is_ok()
    {
        return latest_checkpoint(spec_path.parent().unwrap_or(Path::new(".")));
    }
    if has_latest_pointer(spec_path) || !list_checkpoints(spec_path)?.is_empty() {
        return latest_checkpoint(spec_path);
    }
    if !spec_path.is_dir() {
        bail!("checkpoint {} does not exist", spec_path.display());
    }
    if !is_complete(spec_path) {
        bail!(
            "checkpoint {} is incomplete (no {COMPLETE_MARKER}): it was not fully written",
            spec_path.display()
        );
    }
    Ok(spec_path.to_path_buf())
}

/// The base model a checkpoint's `trainer_state.json` names (the run's `--model-path`).
pub fn base_model_of(checkpoint: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(checkpoint.join(TRAINER_STATE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let base = v["config"]["base_model"].as_str()?;
    (!base.is_empty()).then(|| PathBuf::from(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_byte_or_a_missing_file_fails_the_checksums_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("model.safetensors"), vec![7u8; 4096]).unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/tokenizer.json"), "{}").unwrap();
        // A checkpoint from before checksums passes.
        verify_checksums(d).unwrap();
        write_checksums(d).unwrap();
        verify_checksums(d).unwrap();
        // One exponent byte of one weight.
        let mut w = std::fs::read(d.join("model.safetensors")).unwrap();
        w[2051] ^= 0x40;
        std::fs::write(d.join("model.safetensors"), &w).unwrap();
        let e = verify_checksums(d).unwrap_err().to_string();
        assert!(
            e.contains("model.safetensors does not match its checksum"),
            "{e}"
        );
        w[2051] ^= 0x40;
        std::fs::write(d.join("model.safetensors"), &w).unwrap();
        verify_checksums(d).unwrap();
        std::fs::remove_file(d.join("sub/tokenizer.json")).unwrap();
        let e = verify_checksums(d).unwrap_err().to_string();
        assert!(e.contains("sub/tokenizer.json is missing"), "{e}");
    }

    fn whole(save: &Path, step: u64) -> PathBuf {
        let d = save.join(checkpoint_name(step));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(COMPLETE_MARKER), format!("{step}\n")).unwrap();
        d
    }

    #[test]
    fn the_pointer_is_a_symlink_replaced_atomically() {
        let t = tempfile::tempdir().unwrap();
        let one = whole(t.path(), 1);
        point_latest(t.path(), "checkpoint-1").unwrap();
        let link = t.path().join(CHECKPOINT_LATEST);
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(latest_checkpoint(t.path()).unwrap(), one);
        // A path like any other: it opens the checkpoint.
        assert!(link.join(COMPLETE_MARKER).is_file());
        let two = whole(t.path(), 2);
        point_latest(t.path(), "checkpoint-2").unwrap();
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("checkpoint-2")
        );
        assert_eq!(resolve_checkpoint(t.path(), "latest").unwrap(), two);
        assert_eq!(
            resolve_checkpoint(Path::new("unused"), link.to_str().unwrap()).unwrap(),
            two
        );
        // No stray temporary, and the listing skips the pointer.
        assert!(!t.path().join(".checkpoint-latest.tmp").exists());
        assert_eq!(list_checkpoints(t.path()).unwrap().len(), 2);
    }

    #[test]
    fn an_older_text_pointer_still_resolves_and_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let one = whole(t.path(), 1);
        whole(t.path(), 3);
        std::fs::write(t.path().join(CHECKPOINT_LATEST), "checkpoint-1\n").unwrap();
        assert_eq!(latest_checkpoint(t.path()).unwrap(), one);
        let as_path = t.path().join(CHECKPOINT_LATEST);
        assert_eq!(
            resolve_checkpoint(t.path(), as_path.to_str().unwrap()).unwrap(),
            one
        );
        point_latest(t.path(), "checkpoint-3").unwrap();
        assert!(as_path.symlink_metadata().unwrap().file_type().is_symlink());
    }

    #[test]
    fn an_incomplete_target_falls_back_to_the_newest_whole_one() {
        let t = tempfile::tempdir().unwrap();
        let one = whole(t.path(), 1);
        std::fs::create_dir_all(t.path().join("checkpoint-2")).unwrap();
        point_latest(t.path(), "checkpoint-2").unwrap();
        assert_eq!(latest_checkpoint(t.path()).unwrap(), one);
        let e = resolve_checkpoint(t.path(), t.path().join("checkpoint-2").to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("incomplete"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        let e = latest_checkpoint(empty.path()).unwrap_err().to_string();
        assert!(e.contains("no complete checkpoint"), "{e}");
        let e = latest_checkpoint(&empty.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}

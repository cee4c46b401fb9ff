//! Source archives (`.tar.gz`): written from a crate's tree by `plugins package`, unpacked
//! with every entry checked, since an archive comes from elsewhere.

use anyhow::{bail, Context, Result};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::path::{Component, Path};
use tar::{Archive, EntryType};

/// The most bytes an archive may unpack to.
const MAX_BYTES: u64 = 1 << 30;
/// The most entries it may hold.
const MAX_ENTRIES: usize = 100_000;

/// Unpacks a `.tar.gz` into a new temporary folder. Only plain files and folders with
/// relative paths are accepted: an absolute path, `..`, a link or a device is refused, as is
/// an archive that unpacks to more than 1 GiB or 100,000 entries.
pub fn unpack(bytes: &[u8], root: &Path) -> Result<tempfile::TempDir> {
    unpack_tar(GzDecoder::new(bytes), root)
}

/// [`unpack`] for an uncompressed tar stream, into a private folder under the
/// installed-plugins directory `root`.
pub fn unpack_tar(reader: impl std::io::Read, root: &Path) -> Result<tempfile::TempDir> {
    let dest = openclaw_plugins::install::scratch(root, "archive-")?;
    let mut ar = Archive::new(reader);
    let (mut total, mut count) = (0u64, 0usize);
    for entry in ar.entries().context("not a .tar.gz")? {
        let mut entry = entry.context("a damaged archive entry")?;
        let kind = entry.header().entry_type();
        // `git archive` writes a global header (the commit id).
        if kind == EntryType::XGlobalHeader {
            continue;
        }
        let path = entry.path().context("an entry's path")?.into_owned();
        if path
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            bail!("the archive holds {}, outside its folder", path.display());
        }
        if !matches!(kind, EntryType::Regular | EntryType::Directory) {
            bail!(
                "the archive holds {} of type {kind:?}; only files and folders are accepted",
                path.display()
            );
        }
        count += 1;
        total += entry.size();
        if count > MAX_ENTRIES || total > MAX_BYTES {
            bail!("the archive unpacks to more than {MAX_ENTRIES} entries or {MAX_BYTES} bytes");
        }
        if !entry.unpack_in(dest.path())? {
            bail!("the archive entry {} was refused", path.display());
        }
    }
    Ok(dest)
}

/// Writes the files of a crate's tree (as `tree_sha256` counts them: all but the top-level
/// `.git/` and `target/`) into a `.tar.gz` at `out`, under `prefix/`, with fixed times and
/// owners so the same tree gives the same bytes.
pub fn pack(dir: &Path, prefix: &str, out: &Path) -> Result<()> {
    let file =
        std::fs::File::create(out).with_context(|| format!("cannot write {}", out.display()))?;
    let gz = GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (_, rel) in openclaw_plugins::installed::tree_files(dir)? {
        let bytes = std::fs::read(dir.join(&rel))?;
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(EntryType::Regular);
        tar.append_data(&mut header, Path::new(prefix).join(&rel), bytes.as_slice())?;
    }
    tar.into_inner()?.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_tree_unpacks_to_the_same_sum_and_hostile_archives_are_refused() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("src")).unwrap();
        std::fs::write(src.path().join("Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(src.path().join("src/lib.rs"), "// x\n").unwrap();
        std::fs::create_dir_all(src.path().join("target")).unwrap();
        std::fs::write(src.path().join("target/junk"), "x").unwrap();
        let out = tempfile::tempdir().unwrap();
        let a = out.path().join("a.tar.gz");
        let b = out.path().join("b.tar.gz");
        pack(src.path(), "p", &a).unwrap();
        pack(src.path(), "p", &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let scratch = tempfile::tempdir().unwrap();
        let unpacked = unpack(&std::fs::read(&a).unwrap(), scratch.path()).unwrap();
        assert_eq!(
            openclaw_plugins::installed::tree_sha256(&unpacked.path().join("p")).unwrap(),
            openclaw_plugins::installed::tree_sha256(src.path()).unwrap()
        );

        // Hand-made hostile archives.
        let hostile = |name: &str, kind: EntryType| {
            let mut tar =
                tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::default()));
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(1);
            // `set_path` refuses `..`; write the name bytes directly as an attacker would.
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if kind == EntryType::Symlink {
                h.set_link_name("/etc").unwrap();
                h.set_size(0);
            }
            h.set_cksum();
            let data: &[u8] = if kind == EntryType::Symlink {
                b""
            } else {
                b"x"
            };
            tar.append(&h, data).unwrap();
            tar.into_inner().unwrap().finish().unwrap()
        };
        let e = unpack(&hostile("../evil", EntryType::Regular), scratch.path()).unwrap_err();
        assert!(format!("{e:#}").contains("outside its folder"), "{e:#}");
        let e = unpack(&hostile("/etc/evil", EntryType::Regular), scratch.path()).unwrap_err();
        assert!(format!("{e:#}").contains("outside its folder"), "{e:#}");
        let e = unpack(&hostile("link", EntryType::Symlink), scratch.path()).unwrap_err();
        assert!(format!("{e:#}").contains("only files and folders"), "{e:#}");
    }
}

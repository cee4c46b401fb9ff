//! `buffer check` and `buffer repair`: every damaged span listed, every whole record kept.

use super::segment::{scan_segment, segment_bytes, segments, Damage, Scan};
use super::{sync_dir, MAGIC};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `buffer check` found in one segment.
#[derive(Debug)]
pub struct SegmentCheck {
    /// The file.
    pub path: PathBuf,
    /// Whole records in it.
    pub records: usize,
    /// Its damaged spans.
    pub damage: Vec<Damage>,
    /// Whether its only damage is a torn tail the next open cuts (newest segment only).
    pub torn_tail: bool,
}

/// Reads every segment of the buffer in `dir` and reports every damaged span; changes nothing.
pub fn check(dir: &Path) -> Result<Vec<SegmentCheck>> {
    if !dir.is_dir() {
        bail!("buffer directory {} does not exist", dir.display());
    }
    let segs = segments(dir)?;
    let mut out = Vec::new();
    for (i, (_, path)) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        let Some(bytes) = segment_bytes(path)? else {
            out.push(SegmentCheck {
                path: path.clone(),
                records: 0,
                damage: vec![Damage {
                    start: 0,
                    end: std::fs::metadata(path)?.len(),
                    why: "a segment header cut short".into(),
                    cut_short: true,
                }],
                torn_tail: last,
            });
            continue;
        };
        let scan = scan_segment(path, &bytes)?;
        out.push(SegmentCheck {
            path: path.clone(),
            records: scan.records.len(),
            torn_tail: last && !scan.damage.is_empty() && scan.torn_tail_only(),
            damage: scan.damage,
        });
    }
    Ok(out)
}

/// What `buffer repair` did to one segment.
#[derive(Debug)]
pub struct Repaired {
    /// The segment, rewritten with its whole records.
    pub path: PathBuf,
    /// Where the original went.
    pub original: PathBuf,
    /// Whole records kept.
    pub kept: usize,
    /// Damaged bytes left out.
    pub dropped_bytes: u64,
}

/// Rewrites every damaged segment of the buffer in `dir` with every whole record it holds, in
/// order, byte for byte; the original is renamed beside it (`….log.damaged`), never deleted.
/// Refused while another process has the buffer open.
pub fn repair(dir: &Path) -> Result<Vec<Repaired>> {
    if !dir.is_dir() {
        bail!("{}: no buffer directory", dir.display());
    }
    let _lock = crate::dir_lock::DirLock::acquire(dir, "buffer directory", "--rl-buffer-dir")?;
    let mut done = Vec::new();
    for c in check(dir)? {
        if c.damage.is_empty() {
            continue;
        }
        let bytes = segment_bytes(&c.path)?.unwrap_or_default();
        let scan = if bytes.is_empty() {
            Scan::default()
        } else {
            scan_segment(&c.path, &bytes)?
        };
        let mut fresh = MAGIC.to_vec();
        for (off, len, _) in &scan.records {
            fresh.extend_from_slice(&bytes[*off as usize..(*off + *len) as usize]);
        }
        let mut original = c.path.with_extension("log.damaged");
        let mut n = 1;
        while original.exists() {
            original = c.path.with_extension(format!("log.damaged.{n}"));
            n += 1;
        }
        // Crash-safe: the new file is whole on disk before it replaces the segment, and the
        // original keeps a second name (a hard link) before that; at every moment the segment
        // is the original or the repaired copy.
        let tmp = c.path.with_extension("log.repair-tmp");
        let mut f = File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(&fresh)
            .and_then(|_| f.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::hard_link(&c.path, &original)
            .with_context(|| format!("keeping {} as {}", c.path.display(), original.display()))?;
        std::fs::rename(&tmp, &c.path)
            .with_context(|| format!("replacing {}", c.path.display()))?;
        sync_dir(dir);
        done.push(Repaired {
            path: c.path,
            original,
            kept: scan.records.len(),
            dropped_bytes: c.damage.iter().map(|d| d.end - d.start).sum(),
        });
    }
    Ok(done)
}

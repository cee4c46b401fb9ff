//! One segment file: its name, its magic, and the walk over its framed records that finds the
//! whole ones and every damaged span between them.

use super::{disk, Envelope, HEADER, MAGIC, MAX_RECORD};
use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

pub(super) fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("segment-{n:08}.log"))
}

pub(super) fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix("segment-")
            .and_then(|s| s.strip_suffix(".log"))
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push((n, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// A span of a segment that holds no whole record.
#[derive(Clone, Debug, PartialEq)]
pub struct Damage {
    /// Byte offset where it starts.
    pub start: u64,
    /// Byte offset where the next whole record starts (the file's length when none does).
    pub end: u64,
    /// What was found at `start`.
    pub why: String,
    /// Whether it is the shape of a write cut short: a record header, or a record, shorter
    /// than it says (a bad checksum on a whole-length record is not).
    pub cut_short: bool,
}

/// A walk over one segment's bytes: its whole records (with their offsets and lengths) and
/// every damaged span between them.
#[derive(Debug, Default)]
pub struct Scan {
    /// `(offset, frame length, record)` of every whole record, in file order.
    pub records: Vec<(u64, u64, Envelope)>,
    /// Damaged spans, in file order.
    pub damage: Vec<Damage>,
    /// Bytes of the segment.
    pub len: u64,
}

impl Scan {
    /// Whether its only damage is a torn tail: one record cut short (shorter than its header
    /// says) with no whole record after it, as a crash mid-write leaves.
    pub fn torn_tail_only(&self) -> bool {
        matches!(self.damage.as_slice(), [d] if d.end == self.len && d.cut_short)
    }

    /// Bytes before the first damage.
    pub fn valid_prefix(&self) -> u64 {
        self.damage.first().map_or(self.len, |d| d.start)
    }
}

/// The whole frame at `pos` (its end and payload), or what is wrong there and whether it is
/// the shape of a write cut short.
fn frame_at(bytes: &[u8], pos: usize) -> Result<(usize, &[u8]), (String, bool)> {
    if bytes.len() - pos < 8 {
        return Err(("a record header cut short".into(), true));
    }
    let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
    if len > MAX_RECORD {
        return Err((
            format!("a record length of {len} bytes, past the limit"),
            false,
        ));
    }
    let end = pos + 8 + len as usize;
    if end > bytes.len() {
        // A record whose bytes to the end of the file match its checksum is whole: its length
        // field is what is damaged, and a whole record is never cut as a torn tail.
        if crc32fast::hash(&bytes[pos + 8..]) == crc {
            return Err(("a whole record whose length field is damaged".into(), false));
        }
        return Err((
            format!(
                "a record of {len} bytes that runs {} bytes past the end of the file",
                end - bytes.len()
            ),
            true,
        ));
    }
    let payload = &bytes[pos + 8..end];
    if crc32fast::hash(payload) != crc {
        return Err(("a checksum mismatch".into(), false));
    }
    // Every payload is a JSON object: zeroed bytes (length 0, checksum 0) are not a record.
    if payload.first() != Some(&b'{') {
        return Err(("bytes that are not a record (zeros?)".into(), false));
    }
    Ok((end, payload))
}

/// The next offset after `from` where a whole record starts. A payload is a JSON object, so
/// only offsets framing `{…}` are checksummed (a damaged length makes any byte a candidate).
fn next_whole(bytes: &[u8], from: usize) -> Option<usize> {
    (from..bytes.len().saturating_sub(8)).find(|&q| {
        let len = u32::from_le_bytes(bytes[q..q + 4].try_into().expect("4 bytes")) as usize;
        let end = q + 8 + len;
        len >= 2
            && len <= MAX_RECORD as usize
            && end <= bytes.len()
            && bytes[q + 8] == b'{'
            && bytes[end - 1] == b'}'
            && frame_at(bytes, q).is_ok()
    })
}

/// Walks a segment's bytes (after its magic), resynchronising after each damaged span.
pub fn scan_segment(path: &Path, bytes: &[u8]) -> Result<Scan> {
    let mut scan = Scan {
        len: bytes.len() as u64,
        ..Scan::default()
    };
    let mut pos = HEADER;
    while pos < bytes.len() {
        match frame_at(bytes, pos) {
            Ok((end, payload)) => {
                let env = disk::decode(payload).map_err(|e| {
                    anyhow!(
                        "buffer segment {} has an unreadable record at byte {pos}: {e} (written by another version?)",
                        path.display()
                    )
                })?;
                scan.records.push((pos as u64, (end - pos) as u64, env));
                pos = end;
            }
            Err((why, cut_short)) => {
                let next = next_whole(bytes, pos + 1);
                // Zeros to the end of the file are a tail whose data never reached the disk
                // (the file grew, its pages did not): the shape of a write cut short too.
                let cut_short = cut_short || bytes[pos..].iter().all(|&b| b == 0);
                scan.damage.push(Damage {
                    start: pos as u64,
                    end: next.unwrap_or(bytes.len()) as u64,
                    why,
                    cut_short,
                });
                match next {
                    Some(q) => pos = q,
                    None => break,
                }
            }
        }
    }
    Ok(scan)
}

/// Reads a segment file: its bytes, checked for the magic (`None`: shorter than the magic).
pub(super) fn segment_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read buffer segment {}", path.display()))?;
    if bytes.len() < HEADER {
        return Ok(None);
    }
    if &bytes[..HEADER] != MAGIC {
        bail!(
            "{} is not an openclaw-host buffer segment (bad magic); move it out of the buffer directory",
            path.display()
        );
    }
    Ok(Some(bytes))
}

/// Reads one segment. Returns the records and the length of its valid prefix. Only a genuine
/// torn tail of the newest segment (`last`) is accepted, with a warning, to be cut on open;
/// any other damage is an error that changes nothing.
pub(super) fn read_segment(
    path: &Path,
    last: bool,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Envelope>, u64)> {
    let Some(bytes) = segment_bytes(path)? else {
        if last {
            warnings.push(format!(
                "{}: torn segment header, rewritten",
                path.display()
            ));
            return Ok((Vec::new(), 0));
        }
        bail!(
            "buffer segment {} is shorter than its header",
            path.display()
        );
    };
    let scan = scan_segment(path, &bytes)?;
    if let Some(d) = scan.damage.first() {
        if !(last && scan.torn_tail_only()) {
            let after = scan.records.iter().filter(|r| r.0 >= d.end).count();
            bail!(
                "buffer segment {} is damaged at bytes {}..{} ({}){}; nothing was changed: `openclaw-host buffer check` lists every damaged span and `buffer repair` keeps every whole record (the original file is kept)",
                path.display(),
                d.start,
                d.end,
                d.why,
                if after > 0 {
                    format!(", with {after} whole records after it")
                } else {
                    String::new()
                }
            );
        }
        warnings.push(format!(
            "{}: {} at byte {} (a write cut short by a crash); the partial record is dropped",
            path.display(),
            d.why,
            d.start
        ));
    }
    let valid = scan.valid_prefix();
    Ok((scan.records.into_iter().map(|r| r.2).collect(), valid))
}

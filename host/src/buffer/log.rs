//! The append-only log under `--rl-buffer-dir`: segment files of length- and checksum-framed
//! records, with a stated fsync policy.
//!
//! Segment `segment-NNNNNNNN.log` starts with an 8-byte magic; each record is
//! `[payload length: u32 LE][crc32 of payload: u32 LE][payload: JSON Envelope]`. A record is
//! durable when `append` returns under `FsyncPolicy::EveryRecord`, and within the interval
//! under `FsyncPolicy::Interval`. On open, a torn last record (a crash mid-write) is cut off with
//! a warning; a bad checksum in the middle of a segment is an error that names the file and
//! offset, and nothing is deleted.

use super::record::{Envelope, Record};
use anyhow::{anyhow, bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 8] = b"OCLBUF01";
const HEADER: usize = 8;
/// Records larger than this are refused: a length field beyond it means a torn or corrupt frame.
const MAX_RECORD: u32 = 256 << 20;

/// When appended records reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fsync before `append` returns: a returned record survives power loss.
    EveryRecord,
    /// fsync at most this often from a background thread: a crash of the process loses
    /// nothing (the data is in the page cache), power loss may lose the last interval.
    Interval(Duration),
}

impl FsyncPolicy {
    /// `0` means every record, `N` an interval of N milliseconds (the `fsync_interval_ms` key).
    pub fn from_millis(ms: u64) -> Self {
        if ms == 0 {
            FsyncPolicy::EveryRecord
        } else {
            FsyncPolicy::Interval(Duration::from_millis(ms))
        }
    }
}

/// Options of a log.
#[derive(Clone, Copy, Debug)]
pub struct LogOptions {
    /// The fsync policy.
    pub fsync: FsyncPolicy,
    /// A new segment starts when the current one reaches this size.
    pub segment_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            fsync: FsyncPolicy::EveryRecord,
            segment_bytes: 64 << 20,
        }
    }
}

struct Writer {
    dir: PathBuf,
    file: File,
    segment: u64,
    size: u64,
    next_seq: u64,
    dirty: bool,
}

/// An open log, appendable from many threads.
pub struct Log {
    writer: Arc<Mutex<Writer>>,
    options: LogOptions,
}

/// What opening a log found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Every record, in order.
    pub records: Vec<Envelope>,
    /// Problems repaired on the way (a torn tail), for the log.
    pub warnings: Vec<String>,
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("segment-{n:08}.log"))
}

fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn sync_dir(dir: &Path) {
    // Makes a new segment's directory entry durable; not all platforms allow it, and a
    // failure only weakens durability of the file's name, so it is not an error.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Reads one segment. Returns the records and the length of its valid prefix; `last` says
/// whether a torn tail may be cut (only the newest segment can have one).
fn read_segment(
    path: &Path,
    last: bool,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Envelope>, u64)> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read buffer segment {}", path.display()))?;
    if bytes.len() < HEADER {
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
    }
    if &bytes[..HEADER] != MAGIC {
        bail!(
            "{} is not an openclaw-host buffer segment (bad magic); move it out of the buffer directory",
            path.display()
        );
    }
    let mut records = Vec::new();
    let mut pos = HEADER;
    while pos < bytes.len() {
        let torn = |what: &str, warnings: &mut Vec<String>| -> Result<()> {
            if last {
                warnings.push(format!(
                    "{}: {what} at byte {pos} (a write cut short by a crash); the partial record is dropped",
                    path.display()
                ));
                Ok(())
            } else {
                bail!(
                    "buffer segment {} is damaged at byte {pos}: {what}",
                    path.display()
                )
            }
        };
        if bytes.len() - pos < 8 {
            torn("a torn record header", warnings)?;
            break;
        }
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap());
        let end = pos + 8 + len as usize;
        if len > MAX_RECORD || end > bytes.len() {
            torn("a record longer than the file", warnings)?;
            break;
        }
        let payload = &bytes[pos + 8..end];
        if crc32fast::hash(payload) != crc {
            if end == bytes.len() {
                torn("a checksum mismatch in the last record", warnings)?;
                break;
            }
            bail!(
                "buffer segment {} is corrupt at byte {pos} (checksum mismatch with records after it); nothing was changed: move the file aside to continue",
                path.display()
            );
        }
        let env: Envelope = serde_json::from_slice(payload).map_err(|e| {
            anyhow!(
                "buffer segment {} has an unreadable record at byte {pos}: {e} (written by another version?)",
                path.display()
            )
        })?;
        records.push(env);
        pos = end;
    }
    Ok((records, pos as u64))
}

impl Log {
    /// Opens (creating if needed) the log in `dir` and replays it.
    pub fn open(dir: &Path, options: LogOptions) -> Result<(Log, Replay)> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create buffer directory {}", dir.display()))?;
        let segs = segments(dir)?;
        let mut replay = Replay::default();
        let mut last_valid = 0;
        for (i, (_, path)) in segs.iter().enumerate() {
            let last = i + 1 == segs.len();
            let (records, valid) = read_segment(path, last, &mut replay.warnings)?;
            replay.records.extend(records);
            last_valid = valid;
        }
        for w in 1..replay.records.len() {
            if replay.records[w].seq <= replay.records[w - 1].seq {
                bail!(
                    "buffer {} has records out of order (seq {} after {})",
                    dir.display(),
                    replay.records[w].seq,
                    replay.records[w - 1].seq
                );
            }
        }
        let next_seq = replay.records.last().map(|r| r.seq + 1).unwrap_or(1);
        let (segment, file, size) = match segs.last() {
            Some((n, path)) => {
                let mut f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                let len = f.metadata()?.len();
                if last_valid < HEADER as u64 {
                    f.set_len(0)?;
                    f.seek(SeekFrom::Start(0))?;
                    f.write_all(MAGIC)?;
                    f.sync_data()?;
                    last_valid = HEADER as u64;
                } else if last_valid < len {
                    // Cut the torn tail so new records follow the last whole one.
                    f.set_len(last_valid)?;
                    f.sync_data()?;
                }
                f.seek(SeekFrom::Start(last_valid))?;
                (*n, f, last_valid)
            }
            None => {
                let (f, size) = new_segment(dir, 1)?;
                (1, f, size)
            }
        };
        let writer = Arc::new(Mutex::new(Writer {
            dir: dir.to_path_buf(),
            file,
            segment,
            size,
            next_seq,
            dirty: false,
        }));
        if let FsyncPolicy::Interval(every) = options.fsync {
            spawn_flusher(Arc::downgrade(&writer), every);
        }
        Ok((Log { writer, options }, replay))
    }

    /// Appends a record and returns its sequence number; durable per the fsync policy when
    /// this returns.
    pub fn append(&self, record: &Record) -> Result<u64> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| anyhow!("buffer writer poisoned"))?;
        let seq = w.next_seq;
        let env = Envelope {
            seq,
            at_ms: now_ms(),
            record: record.clone(),
        };
        let payload = serde_json::to_vec(&env)?;
        if payload.len() as u64 > MAX_RECORD as u64 {
            bail!(
                "a {} record of {} bytes is larger than the buffer's limit",
                record.kind(),
                payload.len()
            );
        }
        if w.size + payload.len() as u64 + 8 > self.options.segment_bytes && w.size > HEADER as u64
        {
            w.file.sync_data()?;
            let next = w.segment + 1;
            let (f, size) = new_segment(&w.dir, next)?;
            w.file = f;
            w.segment = next;
            w.size = size;
        }
        // One write per record, so a crash tears at most this record.
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        w.file
            .write_all(&frame)
            .context("cannot write to the buffer")?;
        w.size += frame.len() as u64;
        match self.options.fsync {
            FsyncPolicy::EveryRecord => w.file.sync_data().context("cannot fsync the buffer")?,
            FsyncPolicy::Interval(_) => w.dirty = true,
        }
        w.next_seq += 1;
        Ok(seq)
    }

    /// Forces everything appended so far to disk.
    pub fn sync(&self) -> Result<()> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| anyhow!("buffer writer poisoned"))?;
        w.file.sync_data()?;
        w.dirty = false;
        Ok(())
    }

    /// The sequence number the next record will get.
    pub fn next_seq(&self) -> u64 {
        self.writer.lock().map(|w| w.next_seq).unwrap_or(0)
    }

    /// Reads every record of the log in `dir` without opening it for writing (export).
    pub fn read_all(dir: &Path) -> Result<Replay> {
        if !dir.is_dir() {
            bail!("buffer directory {} does not exist", dir.display());
        }
        let segs = segments(dir)?;
        let mut replay = Replay::default();
        for (i, (_, path)) in segs.iter().enumerate() {
            let (records, _) = read_segment(path, i + 1 == segs.len(), &mut replay.warnings)?;
            replay.records.extend(records);
        }
        Ok(replay)
    }
}

fn new_segment(dir: &Path, n: u64) -> Result<(File, u64)> {
    let path = segment_path(dir, n);
    let mut f = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create buffer segment {}", path.display()))?;
    f.write_all(MAGIC)?;
    f.sync_data()?;
    sync_dir(dir);
    Ok((f, HEADER as u64))
}

fn spawn_flusher(writer: Weak<Mutex<Writer>>, every: Duration) {
    std::thread::Builder::new()
        .name("buffer-fsync".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let Some(w) = writer.upgrade() else { return };
            let Ok(mut w) = w.lock() else { return };
            if w.dirty {
                if let Err(e) = w.file.sync_data() {
                    tracing::error!("buffer fsync failed: {e}");
                }
                w.dirty = false;
            }
        })
        .expect("spawn the buffer fsync thread");
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Ok(w) = self.writer.lock() {
            let _ = w.file.sync_data();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(i: u32) -> Record {
        Record::SessionClosed {
            session_id: format!("s{i}"),
            reason: "done".into(),
        }
    }

    #[test]
    fn records_round_trip_with_increasing_sequence_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert!(replay.records.is_empty());
        assert_eq!(log.append(&closed(1)).unwrap(), 1);
        assert_eq!(log.append(&closed(2)).unwrap(), 2);
        drop(log);
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert_eq!(replay.records.len(), 2);
        assert_eq!(replay.records[1].record, closed(2));
        assert_eq!(log.append(&closed(3)).unwrap(), 3);
    }

    #[test]
    fn a_torn_last_record_is_dropped_with_a_warning_and_writing_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        for i in 0..3 {
            log.append(&closed(i)).unwrap();
        }
        drop(log);
        let seg = segment_path(dir.path(), 1);
        let len = std::fs::metadata(&seg).unwrap().len();
        // Cut the last record in half, as a crash mid-write would.
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(len - 10)
            .unwrap();
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert_eq!(replay.records.len(), 2);
        assert_eq!(replay.warnings.len(), 1, "{:?}", replay.warnings);
        assert!(replay.warnings[0].contains("cut short"));
        assert_eq!(log.append(&closed(9)).unwrap(), 3);
        drop(log);
        let replay = Log::read_all(dir.path()).unwrap();
        assert_eq!(replay.records.len(), 3);
        assert!(replay.warnings.is_empty());
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_and_nothing_is_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        for i in 0..3 {
            log.append(&closed(i)).unwrap();
        }
        drop(log);
        let seg = segment_path(dir.path(), 1);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[HEADER + 12] ^= 0xff; // inside the first record's payload
        std::fs::write(&seg, &bytes).unwrap();
        let e = Log::open(dir.path(), LogOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("corrupt at byte 8"), "{e}");
        assert_eq!(std::fs::read(&seg).unwrap(), bytes, "the file is untouched");
    }

    #[test]
    fn segments_rotate_and_replay_across_them() {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogOptions {
            fsync: FsyncPolicy::Interval(Duration::from_millis(5)),
            segment_bytes: 200,
        };
        let (log, _) = Log::open(dir.path(), opts).unwrap();
        for i in 0..20 {
            log.append(&closed(i)).unwrap();
        }
        drop(log);
        assert!(segments(dir.path()).unwrap().len() > 3);
        let (_, replay) = Log::open(dir.path(), opts).unwrap();
        let seqs: Vec<u64> = replay.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (1..=20).collect::<Vec<_>>());
    }

    #[test]
    fn a_foreign_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("segment-00000001.log"), b"hello, not a log").unwrap();
        let e = Log::open(dir.path(), LogOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not an openclaw-host buffer segment"), "{e}");
    }
}

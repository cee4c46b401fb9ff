//! The append-only log under `--rl-buffer-dir`: segment files of length- and checksum-framed
//! records, with a stated fsync policy.
//!
//! Segment `segment-NNNNNNNN.log` starts with an 8-byte magic; each record is
//! `[payload length: u32 LE][crc32 of payload: u32 LE][payload: JSON]`, the payload in the
//! buffer's own format ([`crate::record::disk`]). A record is
//! durable when `append` returns under `FsyncPolicy::EveryRecord`, and within the interval
//! under `FsyncPolicy::Interval`. On open, a genuine torn tail (the newest segment's last record
//! cut short, with no whole record after it: a crash mid-write) is cut off with a warning; any
//! other damage (a bad length or checksum with whole records after it, anywhere) is an error
//! that names the file and the span, and nothing is changed: `buffer check` lists every damaged
//! span, `buffer repair` rewrites a segment with every whole record and keeps the original. A
//! write that fails (a full disk) is cut back to the last whole record before the error
//! returns, so later records never follow a partial one.

mod repair;
mod segment;

pub use repair::{check, repair, Repaired, SegmentCheck};
pub use segment::{scan_segment, Damage, Scan};

use super::record::{disk, Envelope, Record};
use anyhow::{anyhow, bail, Context, Result};
use segment::{read_segment, segment_path, segments};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 8] = b"OCLBUF01";
/// The file holding the sequence numbers' floor: no record ever had a number at or above it,
/// so numbers go on from there after any loss of a tail (power loss under an fsync interval).
const SEQ_FLOOR: &str = "seq-floor";
/// Numbers reserved at a time: one fsync of the floor per this many records, and a reopen
/// skips at most this many.
const SEQ_RESERVE: u64 = 1024;
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
    /// Shared with the fsync of a group commit, which runs outside this lock.
    file: Arc<File>,
    segment: u64,
    size: u64,
    next_seq: u64,
    /// The persisted floor: `next_seq` stays below it.
    seq_floor: u64,
    dirty: bool,
    /// Why the log cannot be appended to any more (a failed write that could not be cut back,
    /// or a failed fsync, after which what reached the disk is unknown).
    broken: Option<String>,
    /// The last append's failure, until an append succeeds: since when, and why.
    failing: Option<(std::time::Instant, String)>,
}

/// An open log, appendable from many threads.
///
/// With [`FsyncPolicy::EveryRecord`] appends commit in groups: a record is written under the
/// writer's lock, then its appender waits for an fsync that covers it. One appender at a time
/// runs the fsync, for every record written so far, while others go on writing; those then share
/// the next one. Each `append` still returns only once its record is on the disk.
pub struct Log {
    writer: Arc<Mutex<Writer>>,
    options: LogOptions,
    /// The sequence number below which every record is known durable; held while an fsync
    /// runs, so appenders queue behind it and one fsync serves them all.
    durable: Mutex<u64>,
    /// fsyncs run by commits, for measuring how many records one serves.
    commits: std::sync::atomic::AtomicU64,
    /// This process's exclusive hold on the directory: one writer per buffer.
    _lock: crate::dir_lock::DirLock,
}

/// What opening a log found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Every record, in order.
    pub records: Vec<Envelope>,
    /// Problems repaired on the way (a torn tail), for the log.
    pub warnings: Vec<String>,
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

impl Log {
    /// Opens (creating if needed) the log in `dir` and replays it.
    pub fn open(dir: &Path, options: LogOptions) -> Result<(Log, Replay)> {
        // Before anything is read: a second writer would cut the first's tail as torn.
        let lock = crate::dir_lock::DirLock::acquire(dir, "buffer directory", "--rl-buffer-dir")?;
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
        // Numbers go on from the buffer's own high-water mark (its persisted floor), never
        // from what survived alone: records lost with a tail may have been trained already.
        let floor = read_seq_floor(dir)?;
        let next_seq = replay
            .records
            .last()
            .map(|r| r.seq + 1)
            .unwrap_or(1)
            .max(floor);
        let seq_floor = next_seq + SEQ_RESERVE;
        write_seq_floor(dir, seq_floor)?;
        let (segment, file, size) = match segs.last() {
            Some((n, path)) => {
                let mut f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                let at = || format!("cannot repair the torn tail of {}", path.display());
                let len = f.metadata().with_context(at)?.len();
                if last_valid < HEADER as u64 {
                    f.set_len(0)
                        .and_then(|_| f.seek(SeekFrom::Start(0)))
                        .and_then(|_| f.write_all(MAGIC))
                        .and_then(|_| f.sync_data())
                        .with_context(at)?;
                    last_valid = HEADER as u64;
                } else if last_valid < len {
                    // Cut the torn tail so new records follow the last whole one.
                    f.set_len(last_valid)
                        .and_then(|_| f.sync_data())
                        .with_context(at)?;
                }
                f.seek(SeekFrom::Start(last_valid)).with_context(at)?;
                (*n, f, last_valid)
            }
            None => {
                let (f, size) = new_segment(dir, 1)?;
                (1, f, size)
            }
        };
        let writer = Arc::new(Mutex::new(Writer {
            dir: dir.to_path_buf(),
            file: Arc::new(file),
            segment,
            size,
            next_seq,
            seq_floor,
            dirty: false,
            broken: None,
            failing: None,
        }));
        if let FsyncPolicy::Interval(every) = options.fsync {
            spawn_flusher(Arc::downgrade(&writer), every);
        }
        Ok((
            Log {
                writer,
                options,
                durable: Mutex::new(next_seq),
                commits: std::sync::atomic::AtomicU64::new(0),
                _lock: lock,
            },
            replay,
        ))
    }

    /// Why the log cannot take records now, and for how long it has not: `None` while it
    /// can (its last append succeeded, or there was none).
    /// An append in progress holds the writer; then this answers `None` rather than wait, so
    /// a write stuck in the kernel cannot block health checks or a stop.
    pub fn unwritable(&self) -> Option<(Duration, String)> {
        let w = match self.writer.try_lock() {
            Ok(w) => w,
            Err(std::sync::TryLockError::WouldBlock) => return None,
            Err(std::sync::TryLockError::Poisoned(_)) => {
                return Some((
                    Duration::ZERO,
                    "the buffer writer's lock is poisoned".into(),
                ))
            }
        };
        if let Some(why) = &w.broken {
            return Some((
                w.failing.as_ref().map_or(Duration::ZERO, |f| f.0.elapsed()),
                why.clone(),
            ));
        }
        w.failing
            .as_ref()
            .map(|(since, why)| (since.elapsed(), why.clone()))
    }

    /// Appends a record and returns its sequence number; durable per the fsync policy when
    /// this returns.
    pub fn append(&self, record: &Record) -> Result<u64> {
        let written = {
            let mut w = self
                .writer
                .lock()
                .map_err(|_| anyhow!("buffer writer poisoned"))?;
            Self::append_locked(&mut w, record, self.options)
        };
        let r = match (written, self.options.fsync) {
            (Ok(seq), FsyncPolicy::EveryRecord) => self.commit(seq).map(|()| seq),
            (r, _) => r,
        };
        let mut w = self
            .writer
            .lock()
            .map_err(|_| anyhow!("buffer writer poisoned"))?;
        let too_large =
            |e: &anyhow::Error| e.to_string().contains("larger than the buffer's limit");
        match &r {
            Ok(_) => w.failing = None,
            // A record too large says nothing of the disk.
            Err(e) if too_large(e) => {}
            Err(e) => {
                let why = format!("{e:#}");
                match &mut w.failing {
                    Some((_, last)) => *last = why,
                    None => w.failing = Some((std::time::Instant::now(), why)),
                }
            }
        }
        r
    }

    fn append_locked(w: &mut Writer, record: &Record, options: LogOptions) -> Result<u64> {
        if let Some(why) = &w.broken {
            bail!("the buffer cannot be written since {why}; restart to reopen it");
        }
        if w.next_seq >= w.seq_floor {
            let floor = w.next_seq + SEQ_RESERVE;
            write_seq_floor(&w.dir, floor)?;
            w.seq_floor = floor;
        }
        let seq = w.next_seq;
        let payload = disk::encode(seq, now_ms(), record)?;
        if payload.len() as u64 > MAX_RECORD as u64 {
            bail!(
                "a {} record of {} bytes is larger than the buffer's limit",
                record.kind(),
                payload.len()
            );
        }
        if w.size + payload.len() as u64 + 8 > options.segment_bytes && w.size > HEADER as u64 {
            if let Err(e) = w.file.sync_data() {
                w.broken = Some(format!("an fsync failed ({e})"));
                return Err(anyhow!(e).context("cannot fsync the buffer"));
            }
            let next = w.segment + 1;
            let (f, size) = new_segment(&w.dir, next)?;
            w.file = Arc::new(f);
            w.segment = next;
            w.size = size;
        }
        // One write per record, so a crash tears at most this record.
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        if let Err(e) = (&*w.file).write_all(&frame) {
            // Cut back to the last whole record, so nothing is ever appended after a partial
            // one (a full disk must not make the records before it unreadable).
            let size = w.size;
            let cut = w
                .file
                .set_len(size)
                .and_then(|_| (&*w.file).seek(SeekFrom::Start(size)).map(|_| ()));
            if let Err(c) = cut {
                w.broken = Some(format!(
                    "a failed write ({e}) could not be cut back to byte {size} ({c})"
                ));
            }
            return Err(anyhow!(e).context(format!(
                "cannot write a {} record to the buffer (segment {}); nothing of it was kept",
                record.kind(),
                w.segment
            )));
        }
        w.size += frame.len() as u64;
        // Every record: `append` commits it (`commit`) after this lock is released.
        w.dirty = true;
        w.next_seq += 1;
        Ok(seq)
    }

    /// Returns once record `seq` (already written) is on the disk: at once when an fsync since
    /// covered it, else after one fsync of everything written so far. Segments before the
    /// current one were fsynced when the writer moved on from them.
    fn commit(&self, seq: u64) -> Result<()> {
        let mut durable = self
            .durable
            .lock()
            .map_err(|_| anyhow!("buffer fsync lock poisoned"))?;
        if *durable > seq {
            return Ok(());
        }
        let (file, upto) = {
            let w = self
                .writer
                .lock()
                .map_err(|_| anyhow!("buffer writer poisoned"))?;
            // After a failed fsync a retry may report success for pages never written.
            if let Some(why) = &w.broken {
                bail!("the buffer cannot be written since {why}; restart to reopen it");
            }
            (w.file.clone(), w.next_seq)
        };
        if let Err(e) = file.sync_data() {
            if let Ok(mut w) = self.writer.lock() {
                w.broken = Some(format!("an fsync failed ({e})"));
            }
            return Err(anyhow!(e).context("cannot fsync the buffer"));
        }
        // A rotation's fsync of the same file may have run meanwhile and taken the error this
        // one would have reported (the kernel reports a write-back error once): it marked the
        // log broken, so check again before calling anything durable.
        if let Some(why) = self
            .writer
            .lock()
            .map_err(|_| anyhow!("buffer writer poisoned"))?
            .broken
            .clone()
        {
            bail!("the buffer cannot be written since {why}; restart to reopen it");
        }
        *durable = upto;
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// How many fsyncs group commits have run (fewer than appends when appenders overlap).
    pub fn commit_fsyncs(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forces everything appended so far to disk (as a commit does, so a failure breaks the
    /// log for every appender rather than being taken from one of them).
    pub fn sync(&self) -> Result<()> {
        let next = self.next_seq();
        if next > 0 {
            self.commit(next - 1)?;
        }
        if let Ok(mut w) = self.writer.lock() {
            w.dirty = false;
        }
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

/// The persisted floor of sequence numbers (0 for a buffer without one).
fn read_seq_floor(dir: &Path) -> Result<u64> {
    let path = dir.join(SEQ_FLOOR);
    match std::fs::read_to_string(&path) {
        Ok(t) => {
            let floor: u64 = t.trim().parse().with_context(|| {
                format!(
                    "{}: not a number; it holds the buffer's next sequence number",
                    path.display()
                )
            })?;
            if floor > u64::MAX / 2 {
                bail!(
                    "{}: {floor} is not a plausible sequence number",
                    path.display()
                );
            }
            Ok(floor)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(anyhow!(e).context(format!("cannot read {}", path.display()))),
    }
}

/// Replaces the floor durably (a new file renamed over the old).
fn write_seq_floor(dir: &Path, floor: u64) -> Result<()> {
    let path = dir.join(SEQ_FLOOR);
    let tmp = dir.join(format!("{SEQ_FLOOR}.tmp"));
    let mut f = File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    f.write_all(format!("{floor}\n").as_bytes())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    sync_dir(dir);
    Ok(())
}

fn new_segment(dir: &Path, n: u64) -> Result<(File, u64)> {
    let path = segment_path(dir, n);
    let mut f = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot create buffer segment {}", path.display()))?;
    if let Err(e) = f.write_all(MAGIC).and_then(|_| f.sync_data()) {
        // Gone again, so the next try (when space is back) can make it.
        let _ = std::fs::remove_file(&path);
        return Err(anyhow!(e).context(format!("cannot create buffer segment {}", path.display())));
    }
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
                    w.broken = Some(format!("a background fsync failed ({e})"));
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
mod tests;

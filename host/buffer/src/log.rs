//! The append-only log under `--rl-buffer-dir`: segment files of length- and checksum-framed
//! records, with a stated fsync policy.
//!
//! Segment `segment-NNNNNNNN.log` starts with an 8-byte magic; each record is
//! `[payload length: u32 LE][crc32 of payload: u32 LE][payload: JSON Envelope]`. A record is
//! durable when `append` returns under `FsyncPolicy::EveryRecord`, and within the interval
//! under `FsyncPolicy::Interval`. On open, a genuine torn tail (the newest segment's last record
//! cut short, with no whole record after it: a crash mid-write) is cut off with a warning; any
//! other damage (a bad length or checksum with whole records after it, anywhere) is an error
//! that names the file and the span, and nothing is changed: `buffer check` lists every damaged
//! span, `buffer repair` rewrites a segment with every whole record and keeps the original. A
//! write that fails (a full disk) is cut back to the last whole record before the error
//! returns, so later records never follow a partial one.

use super::record::{Envelope, Record};
use anyhow::{anyhow, bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
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
                let env: Envelope = serde_json::from_slice(payload).map_err(|e| {
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
fn segment_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
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
fn read_segment(
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
mod tests {
    use super::*;

    /// A buffer with `n` records, closed again.
    fn written(n: u32) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        for i in 0..n {
            log.append(&closed(i)).unwrap();
        }
        dir
    }

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
        // After a reopen, numbers go on above the persisted floor.
        assert!(log.append(&closed(3)).unwrap() > 2);
    }

    #[test]
    fn a_torn_last_record_is_dropped_with_a_warning_and_writing_resumes() {
        let dir = written(3);
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
        assert!(log.append(&closed(9)).unwrap() > 3);
        drop(log);
        let replay = Log::read_all(dir.path()).unwrap();
        assert_eq!(replay.records.len(), 3);
        assert!(replay.warnings.is_empty());
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_and_nothing_is_deleted() {
        let dir = written(3);
        let seg = segment_path(dir.path(), 1);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[HEADER + 12] ^= 0xff; // inside the first record's payload
        std::fs::write(&seg, &bytes).unwrap();
        let e = Log::open(dir.path(), LogOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("damaged at bytes 8.."), "{e}");
        assert!(
            e.contains("checksum mismatch") && e.contains("2 whole records after it"),
            "{e}"
        );
        assert_eq!(std::fs::read(&seg).unwrap(), bytes, "the file is untouched");
    }

    /// Every byte of a middle record and of the last one flipped in turn, and the last record
    /// cut at every byte: no open ever drops a whole record (a flip is refused, naming the
    /// span), and a cut tail is cut.
    #[test]
    fn no_single_byte_flip_or_truncation_loses_a_whole_record() {
        let dir = written(4);
        let seg = segment_path(dir.path(), 1);
        let clean = std::fs::read(&seg).unwrap();
        let offs = offsets(dir.path());
        let (mut tried, mut refused, mut cut) = (0, 0, 0);
        for (first, last) in [(offs[1], offs[2]), (offs[3], clean.len())] {
            for at in first..last {
                let mut bytes = clean.clone();
                bytes[at] ^= 0x5a;
                std::fs::write(&seg, &bytes).unwrap();
                tried += 1;
                match Log::read_all(dir.path()) {
                    Err(_) => {
                        refused += 1;
                        assert_eq!(std::fs::read(&seg).unwrap(), bytes);
                    }
                    Ok(r) => {
                        assert_eq!(r.records.len(), 4, "a flip at byte {at} lost a record");
                        cut += 1;
                    }
                }
            }
        }
        for at in offs[3]..clean.len() {
            std::fs::write(&seg, &clean[..at]).unwrap();
            tried += 1;
            let r = Log::read_all(dir.path()).unwrap();
            assert_eq!(r.records.len(), 3, "truncated at {at}");
            assert_eq!(r.warnings.len(), usize::from(at > offs[3]));
        }
        assert!(
            tried > 300 && refused > 200 && cut == 0,
            "{tried} {refused} {cut}"
        );
    }

    #[test]
    fn sequence_numbers_never_repeat_after_a_lost_tail() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        let mut seqs: Vec<u64> = (0..3).map(|i| log.append(&closed(i)).unwrap()).collect();
        drop(log);
        // Power loss under an fsync interval: the last two records never reached the disk.
        let seg = segment_path(dir.path(), 1);
        let keep = offsets(dir.path())[1];
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(keep as u64)
            .unwrap();
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert_eq!(replay.records.len(), 1);
        let next = log.append(&closed(7)).unwrap();
        assert!(
            next > *seqs.iter().max().unwrap(),
            "{next} reuses one of {seqs:?}"
        );
        seqs.push(next);
        drop(log);
        // And the floor moves on as numbers are used.
        std::fs::write(dir.path().join(SEQ_FLOOR), "5\n").unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert_eq!(log.append(&closed(8)).unwrap(), next + 1);
        assert!(read_seq_floor(dir.path()).unwrap() > next + 1);
        std::fs::write(dir.path().join(SEQ_FLOOR), "many").unwrap();
        drop(log);
        let e = Log::open(dir.path(), LogOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("seq-floor") && e.contains("not a number"), "{e}");
    }

    #[test]
    fn a_zeroed_tail_is_cut_and_zeros_mid_segment_are_refused() {
        let dir = written(3);
        let seg = segment_path(dir.path(), 1);
        let clean = std::fs::read(&seg).unwrap();
        // Power loss after the file grew but before its last page was written.
        let mut bytes = clean.clone();
        bytes.extend_from_slice(&[0u8; 300]);
        std::fs::write(&seg, &bytes).unwrap();
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        assert_eq!(
            (replay.records.len(), replay.warnings.len()),
            (3, 1),
            "{:?}",
            replay.warnings
        );
        drop(log);
        assert_eq!(std::fs::read(&seg).unwrap(), clean, "the zeros were cut");
        let at = offsets(dir.path())[1];
        let mut bytes = clean.clone();
        bytes[at..at + 8].fill(0);
        std::fs::write(&seg, &bytes).unwrap();
        let e = Log::open(dir.path(), LogOptions::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("not a record") && e.contains("1 whole records after it"),
            "{e}"
        );
        assert_eq!(check(dir.path()).unwrap()[0].damage.len(), 1);
    }

    /// Offsets of the records of segment 1.
    fn offsets(dir: &Path) -> Vec<usize> {
        let bytes = std::fs::read(segment_path(dir, 1)).unwrap();
        scan_segment(Path::new("s"), &bytes)
            .unwrap()
            .records
            .iter()
            .map(|r| r.0 as usize)
            .collect()
    }

    #[test]
    fn a_length_pointing_past_the_end_mid_segment_is_not_taken_for_a_torn_tail() {
        let dir = written(6);
        let seg = segment_path(dir.path(), 1);
        let at = offsets(dir.path())[2];
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[at..at + 4].copy_from_slice(&(1u32 << 20).to_le_bytes());
        std::fs::write(&seg, &bytes).unwrap();
        for e in [
            Log::open(dir.path(), LogOptions::default()).err().unwrap(),
            Log::read_all(dir.path()).err().unwrap(),
        ] {
            let e = e.to_string();
            assert!(e.contains(&format!("damaged at bytes {at}..")), "{e}");
            assert!(
                e.contains("past the end of the file") && e.contains("3 whole records after it"),
                "{e}"
            );
        }
        assert_eq!(std::fs::read(&seg).unwrap(), bytes, "nothing was cut");
    }

    #[test]
    fn check_lists_every_damaged_span_and_repair_keeps_every_whole_record() {
        let dir = written(6);
        let seg = segment_path(dir.path(), 1);
        let offs = offsets(dir.path());
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[offs[1] + 12] ^= 0xff;
        bytes[offs[3]..offs[3] + 4].copy_from_slice(&7u32.to_le_bytes());
        std::fs::write(&seg, &bytes).unwrap();
        let found = check(dir.path()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].records, 4);
        let spans: Vec<(u64, u64)> = found[0].damage.iter().map(|d| (d.start, d.end)).collect();
        assert_eq!(
            spans,
            vec![
                (offs[1] as u64, offs[2] as u64),
                (offs[3] as u64, offs[4] as u64)
            ]
        );
        assert!(!found[0].torn_tail);
        let done = repair(dir.path()).unwrap();
        assert_eq!((done.len(), done[0].kept), (1, 4));
        assert_eq!(
            std::fs::read(&done[0].original).unwrap(),
            bytes,
            "the original is kept"
        );
        let (log, replay) = Log::open(dir.path(), LogOptions::default()).unwrap();
        let kept: Vec<Record> = replay.records.iter().map(|r| r.record.clone()).collect();
        assert_eq!(kept, vec![closed(0), closed(2), closed(4), closed(5)]);
        assert!(replay.warnings.is_empty());
        assert!(
            log.append(&closed(9)).unwrap() > 6,
            "numbers go on after the highest"
        );
        assert!(check(dir.path()).unwrap()[0].damage.is_empty());
    }

    /// A full disk (a real 64 KiB tmpfs; needs root to mount, as CI has): the failed write is
    /// cut back, nothing acknowledged is lost, and writing resumes when space comes back.
    #[test]
    fn a_failed_write_is_cut_back_and_writing_resumes_when_space_returns() {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
        if !mounted {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg(self.0).status();
            }
        }
        let _unmount = Unmount(dir.path());
        let filler = dir.path().join("filler");
        std::fs::write(&filler, vec![0u8; 16 << 10]).unwrap();
        let buf = dir.path().join("rl_buffer");
        let (log, _) = Log::open(&buf, LogOptions::default()).unwrap();
        let big = |i: u32| Record::SessionClosed {
            session_id: format!("s{i}"),
            reason: "x".repeat(3000),
        };
        let mut acked = Vec::new();
        let err = loop {
            let i = acked.len() as u32;
            match log.append(&big(i)) {
                Ok(seq) => acked.push(seq),
                Err(e) => break format!("{e:#}"),
            }
            assert!(acked.len() < 100, "the tmpfs never filled");
        };
        assert!(
            err.contains("nothing of it was kept") && err.contains("No space"),
            "{err}"
        );
        let (_, why) = log.unwritable().expect("it says it cannot write");
        assert!(why.contains("No space"), "{why}");
        let seg = segment_path(&buf, 1);
        let before = std::fs::read(&seg).unwrap();
        let scan = scan_segment(&seg, &before).unwrap();
        assert!(scan.damage.is_empty(), "{:?}", scan.damage);
        assert_eq!(scan.records.len(), acked.len());
        // Space comes back: the next record follows the last whole one.
        std::fs::remove_file(&filler).unwrap();
        log.append(&big(99)).unwrap();
        assert!(log.unwritable().is_none());
        drop(log);
        let (_, replay) = Log::open(&buf, LogOptions::default()).unwrap();
        assert!(replay.warnings.is_empty(), "{:?}", replay.warnings);
        assert_eq!(replay.records.len(), acked.len() + 1);
    }

    /// Appenders on many threads, each append durable when it returns: every record is there,
    /// in sequence order, and the fsyncs never outnumber the appends.
    #[test]
    fn concurrent_appends_commit_in_groups_and_all_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = Log::open(dir.path(), LogOptions::default()).unwrap();
        let log = Arc::new(log);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|i| log.append(&closed(t * 100 + i)).unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut seqs: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        seqs.sort();
        seqs.dedup();
        assert_eq!(seqs.len(), 400);
        assert!(log.commit_fsyncs() <= 400 && log.commit_fsyncs() > 0);
        let read = Log::read_all(dir.path()).unwrap();
        assert_eq!(read.records.len(), 400);
        assert!(read.records.windows(2).all(|w| w[0].seq < w[1].seq));
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

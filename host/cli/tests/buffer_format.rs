//! The buffer's on-disk format is its own, versioned apart from the plugin ABI: a segment
//! written by this version (`fixtures/buffer-v1`, one record of every kind, committed as bytes)
//! must read back to the same records. A change to a type the buffer stores that changes what
//! is on disk fails here, so it comes with a new segment format (and a reader for the old one),
//! never as a silent change to acknowledged records.

use openclaw_buffer::record::disk;
use openclaw_buffer::{Log, LogOptions};
use serde_json::Value;
use std::path::Path;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/buffer-v1")
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    out.sort();
    out
}

fn expected() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture().join("records.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Normalises a record to JSON with absent optional fields dropped, so that the comparison is
/// about what the records say.
fn normal(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, normal(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(normal).collect()),
        other => other,
    }
}

#[test]
fn a_segment_of_format_1_reads_back_to_the_same_records() {
    let tmp = tempfile::tempdir().unwrap();
    // Read a copy: opening a log may repair a torn tail, and the fixture must stay as it is.
    let segments = segments(&fixture());
    assert_eq!(segments.len(), 1, "{segments:?}");
    let name = segments[0].file_name().unwrap();
    std::fs::copy(&segments[0], tmp.path().join(name)).unwrap();
    let bytes = std::fs::read(tmp.path().join(name)).unwrap();
    assert_eq!(&bytes[..8], b"OCLBUF01", "segment format 1");
    let replay = Log::read_all(tmp.path()).unwrap();
    assert!(replay.warnings.is_empty(), "{:?}", replay.warnings);
    let got: Vec<Value> = replay
        .records
        .iter()
        .map(|e| normal(disk::record_to_json(&e.record)))
        .collect();
    let want: Vec<Value> = expected().into_iter().map(normal).collect();
    assert_eq!(got, want);
    let seqs: Vec<u64> = replay.records.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
}

/// Writes the fixture segment from `records.json` with today's writer (a tool, not a check):
/// `cargo test -p openclaw-host --test buffer_format -- --ignored`.
#[test]
#[ignore = "rewrites the committed fixture; run it only to make a new one"]
fn write_the_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(tmp.path(), LogOptions::default()).unwrap();
    for v in expected() {
        let r = disk::record_from_json(v).unwrap();
        log.append(&r).unwrap();
    }
    drop(log);
    for old in segments(&fixture()) {
        std::fs::remove_file(old).unwrap();
    }
    for s in segments(tmp.path()) {
        std::fs::copy(&s, fixture().join(s.file_name().unwrap())).unwrap();
    }
}

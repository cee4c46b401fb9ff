//! Fuzzing, bounded for CI: the readers of bytes a stranger controls (a chat request's body, a
//! legacy completion's, a feedback's, a buffer segment on disk, a GGUF file) take inputs mutated from the seed corpus kept
//! in `host/cli/tests/fuzz-corpus/` (flipped and overwritten bytes, cuts, insertions of bytes that
//! parsers trip on, repeated spans) and must answer each with a value or an error: no panic,
//! no abort on a huge length, no hang.
//!
//! `PROPTEST_CASES=20000 cargo test -p openclaw-host --test fuzz` runs longer; a failing input
//! is shrunk and its seed saved in `tests/fuzz-corpus/regressions.txt`, which every later run
//! tries first.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openclaw_buffer::{Log, LogOptions};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// Cases per reader in the default run: about three seconds in all on two cores.
const CASES: u32 = 2000;

fn corpus(kind: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the fuzz corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let seeds: Vec<(PathBuf, Vec<u8>)> = files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    assert!(
        !seeds.is_empty(),
        "the fuzz corpus {} is empty",
        dir.display()
    );
    seeds
}

/// One change to an input; positions are taken modulo its length.
#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, bits: u8 },
    Overwrite { at: usize, bytes: Vec<u8> },
    Insert { at: usize, bytes: Vec<u8> },
    Cut { at: usize, len: usize },
    Truncate { at: usize },
    Repeat { at: usize, len: usize, times: u8 },
}

/// Bytes that make parsers take their rare branches: JSON syntax and extreme numbers, and
/// lengths and counts of all ones or just past a boundary in little-endian binary.
fn tricky() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 1..16),
        Just(b"\"".to_vec()),
        Just(b"{".to_vec()),
        Just(b"[".to_vec()),
        Just(b"]}".to_vec()),
        Just(b"null".to_vec()),
        Just(b"1e999".to_vec()),
        Just(b"-0.0".to_vec()),
        Just(b"18446744073709551616".to_vec()),
        Just(b"\\ud800".to_vec()),
        Just(b"\\u0000".to_vec()),
        Just("\u{10ffff}é".as_bytes().to_vec()),
        Just(vec![0xff; 8]),
        Just(vec![0x00; 8]),
        Just(u32::MAX.to_le_bytes().to_vec()),
        Just((u32::MAX / 2 + 1).to_le_bytes().to_vec()),
        Just(u64::MAX.to_le_bytes().to_vec()),
        Just((1u64 << 40).to_le_bytes().to_vec()),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, bits)| Mutation::Flip { at, bits }),
        (any::<usize>(), tricky()).prop_map(|(at, bytes)| Mutation::Overwrite { at, bytes }),
        (any::<usize>(), tricky()).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1..64usize).prop_map(|(at, len)| Mutation::Cut { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), 1..64usize, 2..40u8).prop_map(|(at, len, times)| Mutation::Repeat {
            at,
            len,
            times
        }),
    ]
}

fn apply(seed: &[u8], ms: &[Mutation]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for m in ms {
        let n = b.len().max(1);
        match m {
            Mutation::Flip { at, bits } => {
                if let Some(x) = b.get_mut(at % n) {
                    *x ^= bits;
                }
            }
            Mutation::Overwrite { at, bytes } => {
                let at = at % n;
                for (i, x) in bytes.iter().enumerate() {
                    if let Some(y) = b.get_mut(at + i) {
                        *y = *x;
                    }
                }
            }
            Mutation::Insert { at, bytes } => {
                let at = (at % n).min(b.len());
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Cut { at, len } => {
                let at = (at % n).min(b.len());
                let end = (at + len).min(b.len());
                b.drain(at..end);
            }
            Mutation::Truncate { at } => b.truncate(at % n),
            Mutation::Repeat { at, len, times } => {
                let at = (at % n).min(b.len());
                let end = (at + len).min(b.len());
                let span = b[at..end].to_vec();
                for _ in 0..*times {
                    b.splice(end..end, span.iter().copied());
                }
            }
        }
    }
    b
}

/// A seed of `kind` and the changes made to it.
fn input(kind: &str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = corpus(kind);
    (0..seeds.len(), prop::collection::vec(mutation(), 0..6))
        .prop_map(move |(i, ms)| apply(&seeds[i].1, &ms))
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(CASES),
        // Shrinking a failure is bounded too, so a CI run ends.
        max_shrink_time: 60_000,
        // Failures found are kept with the corpus, and tried first in every later run.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/fuzz-corpus/regressions.txt",
        ))),
        ..ProptestConfig::default()
    }
}

/// Fails when one input took longer than a human would wait for an error.
fn timely(started: Instant, what: &str) -> Result<(), TestCaseError> {
    let took = started.elapsed();
    prop_assert!(
        took < Duration::from_secs(5),
        "{what} took {:.1} s on one input",
        took.as_secs_f64()
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// The chat request parser answers any body with a request or an OpenAI-shaped error.
    #[test]
    fn the_request_parser_answers_every_body(body in input("requests")) {
        let started = Instant::now();
        let headers = axum::http::HeaderMap::new();
        match openclaw_server::protocol::parse(&body, &headers) {
            Ok(r) => prop_assert!(!r.messages.is_empty()),
            Err(e) => prop_assert!(e.status.is_client_error(), "{}: {}", e.status, e.message),
        }
        timely(started, "parsing a request")?;
    }

    /// The legacy completions parser answers any body with a request or a named 4xx.
    #[test]
    fn the_completions_parser_answers_every_body(body in input("completions")) {
        let started = Instant::now();
        if let Err(e) = openclaw_server::protocol::parse_completion(&body) {
            prop_assert!(e.status.is_client_error(), "{}: {}", e.status, e.message);
        }
        timely(started, "parsing a completion request")?;
    }

    /// The feedback parser answers any body with a feedback or a named 4xx.
    #[test]
    fn the_feedback_parser_answers_every_body(body in input("feedback")) {
        let started = Instant::now();
        match openclaw_server::feedback::parse(&body) {
            Ok(f) => prop_assert!((-1.0..=1.0).contains(&f.reward)),
            Err(e) => prop_assert!(e.status.is_client_error(), "{}: {}", e.status, e.message),
        }
        timely(started, "parsing a feedback")?;
    }

    /// A buffer directory whose newest segment holds any bytes is opened (a torn tail cut) or
    /// refused with the damage named; `buffer check` reports on it either way.
    #[test]
    fn the_buffer_frame_reader_answers_every_segment(bytes in input("segments")) {
        let started = Instant::now();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("segment-00000001.log"), &bytes).unwrap();
        // `buffer check` lists the damage, or names the file it cannot read as a segment.
        if let Err(e) = openclaw_buffer::log::check(dir.path()) {
            prop_assert!(format!("{e:#}").contains("segment-00000001.log"), "{:#}", e);
        }
        match Log::open(dir.path(), LogOptions::default()) {
            Ok((_, replay)) => {
                // Sequence numbers read back strictly increase.
                for w in replay.records.windows(2) {
                    prop_assert!(w[0].seq < w[1].seq);
                }
            }
            Err(e) => {
                let e = format!("{e:#}");
                prop_assert!(e.contains("segment") || e.contains("buffer"), "{}", e);
            }
        }
        timely(started, "reading a segment")?;
    }

    /// A GGUF file of any bytes opens or is refused with an error; a tensor it lists reads
    /// or is refused too.
    #[test]
    fn the_gguf_reader_answers_every_file(bytes in input("gguf")) {
        let started = Instant::now();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        if let Ok(mut g) = openclaw_engine::weights::gguf::GgufFile::open(file.path()) {
            let names: Vec<String> = g.tensors().iter().map(|t| t.name.clone()).collect();
            for n in names.iter().take(4) {
                let _ = g.read_f32(n);
            }
            let _ = openclaw_engine::weights::gguf::config_from_gguf(&g);
        }
        timely(started, "reading a GGUF file")?;
    }
}

/// The seeds are whole inputs, so mutations start from the readers' deep paths.
#[test]
fn every_seed_of_the_corpus_is_read_whole() {
    let headers = axum::http::HeaderMap::new();
    for (path, body) in corpus("requests") {
        if let Err(e) = openclaw_server::protocol::parse(&body, &headers) {
            panic!("{}: {}", path.display(), e.message);
        }
    }
    for (path, body) in corpus("completions") {
        if let Err(e) = openclaw_server::protocol::parse_completion(&body) {
            panic!("{}: {}", path.display(), e.message);
        }
    }
    for (path, body) in corpus("feedback") {
        if let Err(e) = openclaw_server::feedback::parse(&body) {
            panic!("{}: {}", path.display(), e.message);
        }
    }
    for (path, bytes) in corpus("segments") {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("segment-00000001.log"), &bytes).unwrap();
        let (_, replay) = Log::open(dir.path(), LogOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert!(!replay.records.is_empty(), "{}", path.display());
        assert!(
            replay.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            replay.warnings
        );
    }
    for (path, _) in corpus("gguf") {
        let mut g = openclaw_engine::weights::gguf::GgufFile::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        let names: Vec<String> = g.tensors().iter().map(|t| t.name.clone()).collect();
        assert_eq!(names.len(), 3);
        for n in names {
            g.read_f32(&n)
                .unwrap_or_else(|e| panic!("{}: {n}: {e:#}", path.display()));
        }
    }
}

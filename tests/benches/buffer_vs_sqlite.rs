//! The durable buffer beside SQLite in WAL mode, doing the same appends in one process on the
//! same disk: appends per second and p99 append latency, at equal durability.
//!
//! - fsync per record, one writer: `--fsync-interval-ms 0` against SQLite with
//!   `synchronous=FULL`, one insert per transaction (both: durable when the call returns).
//! - fsync per record, 8 writers: the same, from 8 threads (the buffer commits overlapping
//!   appends in groups; SQLite serialises its writers, one WAL fsync per transaction), with a
//!   connection per writer (contending through SQLite's busy handler) and with one connection
//!   shared behind a lock (no contention inside SQLite).
//! - fsync at intervals, one writer: `--fsync-interval-ms 100` against `synchronous=NORMAL`
//!   (both: a process crash loses nothing, power loss may lose the latest records; SQLite's
//!   NORMAL syncs only at WAL checkpoints, so it may lose more than 100 ms: this case favours it).
//!
//! Each record is a ~1.5 KB record as the buffer writes it: SQLite stores the same JSON
//! envelope (sequence number, time, record) as a blob under an integer key; the buffer adds
//! its 8-byte frame. Run with
//! `cargo bench -p openclaw-integration-tests --bench buffer_vs_sqlite` (`BENCH_APPENDS` sets
//! the appends per case, default 2,000).

use openclaw_buffer::record::disk;
use openclaw_buffer::{FsyncPolicy, Log, LogOptions, Record};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one side measured.
struct Measured {
    per_second: f64,
    p99: Duration,
    max: Duration,
    note: String,
}

fn record(i: usize) -> Record {
    Record::SessionClosed {
        session_id: format!("bench-{i}"),
        reason: "x".repeat(1500),
    }
}

/// The 99th percentile and the largest latency.
fn tail(mut lat: Vec<Duration>) -> (Duration, Duration) {
    lat.sort();
    (
        lat[(lat.len() * 99 / 100).min(lat.len() - 1)],
        lat[lat.len() - 1],
    )
}

/// Runs `n` appends split over `writers` threads, each through `append`; returns the rate, the
/// p99 and the largest latency.
fn drive(
    n: usize,
    writers: usize,
    append: Arc<dyn Fn(usize) + Send + Sync>,
) -> (f64, Duration, Duration) {
    let lat = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let start = Instant::now();
    let threads: Vec<_> = (0..writers)
        .map(|t| {
            let (append, lat) = (append.clone(), lat.clone());
            std::thread::spawn(move || {
                let mut mine = Vec::with_capacity(n / writers);
                for i in (t..n).step_by(writers) {
                    let at = Instant::now();
                    append(i);
                    mine.push(at.elapsed());
                }
                lat.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let took = start.elapsed();
    let lat = Arc::try_unwrap(lat).unwrap().into_inner().unwrap();
    let (p99, max) = tail(lat);
    (n as f64 / took.as_secs_f64(), p99, max)
}

fn ours(n: usize, writers: usize, fsync: FsyncPolicy) -> Measured {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let (log, _) = Log::open(
        dir.path(),
        LogOptions {
            fsync,
            ..Default::default()
        },
    )
    .unwrap();
    let log = Arc::new(log);
    let l = log.clone();
    let (per_second, p99, max) = drive(
        n,
        writers,
        Arc::new(move |i| {
            l.append(&record(i)).unwrap();
        }),
    );
    // Counted before the final sync, which is the benchmark's own.
    let fsyncs = log.commit_fsyncs();
    log.sync().unwrap();
    let note = if fsyncs > 0 {
        format!("{:.1} records per fsync", n as f64 / fsyncs as f64)
    } else {
        String::new()
    };
    Measured {
        per_second,
        p99,
        max,
        note,
    }
}

fn sqlite(n: usize, writers: usize, synchronous: &str, connections: usize) -> Measured {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let path = dir.path().join("buffer.db");
    let open = || {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.busy_timeout(Duration::from_secs(60)).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "synchronous", synchronous).unwrap();
        c
    };
    open()
        .execute(
            "CREATE TABLE IF NOT EXISTS records (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)",
            [],
        )
        .unwrap();
    let conns: Vec<Mutex<rusqlite::Connection>> =
        (0..connections).map(|_| Mutex::new(open())).collect();
    let conns = Arc::new(conns);
    let c = conns.clone();
    let (per_second, p99, max) = drive(
        n,
        writers,
        Arc::new(move |i| {
            let body = disk::encode(
                i as u64,
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64,
                &record(i),
            )
            .unwrap();
            let conn = c[i % c.len()].lock().unwrap();
            // Autocommit: one transaction (and, with FULL, one WAL fsync) per record.
            conn.execute(
                "INSERT INTO records (seq, body) VALUES (?1, ?2)",
                rusqlite::params![i as i64, body],
            )
            .unwrap();
        }),
    );
    Measured {
        per_second,
        p99,
        max,
        note: format!(
            "synchronous={synchronous}{}",
            if connections > 1 {
                format!(", {connections} connections")
            } else {
                String::new()
            }
        ),
    }
}

fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_string();
    let avx512 = info.contains("avx512f");
    format!(
        "{model}, {} threads, {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        if avx512 {
            "AVX-512"
        } else {
            "AVX2, no AVX-512"
        }
    )
}

fn main() {
    let n: usize = std::env::var("BENCH_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!("buffer vs SQLite (WAL), {n} appends of ~1.5 KB per case");
    println!("CPU: {}", cpu());
    println!(
        "disk: the file system of {}",
        std::env::temp_dir().display()
    );
    println!("SQLite {} (bundled)", rusqlite::version());
    println!();
    println!("| case | buffer appends/s | SQLite appends/s | ratio | buffer p99 / max | SQLite p99 / max | notes |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let cases: [(&str, usize, FsyncPolicy, &str, usize); 4] = [
        (
            "fsync per record, 1 writer",
            1,
            FsyncPolicy::EveryRecord,
            "FULL",
            1,
        ),
        (
            "fsync per record, 8 writers",
            8,
            FsyncPolicy::EveryRecord,
            "FULL",
            8,
        ),
        (
            "fsync per record, 8 writers",
            8,
            FsyncPolicy::EveryRecord,
            "FULL",
            1,
        ),
        (
            "fsync every 100 ms, 1 writer",
            1,
            FsyncPolicy::Interval(Duration::from_millis(100)),
            "NORMAL",
            1,
        ),
    ];
    for (name, writers, fsync, sync, connections) in cases {
        let a = ours(n, writers, fsync);
        let b = sqlite(n, writers, sync, connections);
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} | {:.2} / {:.1} ms | {:.2} / {:.1} ms | {}; {} |",
            a.per_second,
            b.per_second,
            a.per_second / b.per_second,
            a.p99.as_secs_f64() * 1e3,
            a.max.as_secs_f64() * 1e3,
            b.p99.as_secs_f64() * 1e3,
            b.max.as_secs_f64() * 1e3,
            if a.note.is_empty() { "buffer" } else { &a.note },
            b.note
        );
    }
}

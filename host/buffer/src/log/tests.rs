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

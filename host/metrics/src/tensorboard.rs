//! Scalars as a TensorBoard event file, so `tensorboard --logdir` can chart a run.
//!
//! The `Event` protobufs and the TFRecord frame around each are encoded by hand: a scalar needs
//! four protobuf fields and a 16-byte frame, while a protobuf code generator and the TensorFlow
//! `.proto` files would be far more code and build than that.
//!
//! The messages written, with the field numbers of TensorFlow's `event.proto` and
//! `summary.proto`:
//!
//! ```text
//! Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//! Summary { repeated Value value = 1; }
//! Value   { string tag = 1; float simple_value = 2; }
//! ```

use crate::unix_now;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The first event of every file; readers take it to mean "Event protos follow".
const FILE_VERSION: &str = "brain.Event:2";

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Bytes before the data of a record: its length and that length's masked CRC.
const HEADER: usize = 12;

/// Writes scalars to a new TensorBoard event file.
///
/// Records are buffered in memory: TensorBoard sees them only once they reach the file, which
/// happens when the buffer fills or on [`EventWriter::flush`]. Call `flush` after each logging
/// step that should show up while the run goes on (the scalars of one optimiser step, say), and
/// before the process exits; dropping the writer flushes too, but drops any error with it.
///
/// Non-finite values are written as they are: TensorBoard reads NaN and infinities and marks
/// them in its charts, which shows that a run diverged where skipping them would hide it.
#[derive(Debug)]
pub struct EventWriter {
    file: BufWriter<File>,
    path: PathBuf,
    /// One record at a time, reused so a scalar allocates nothing once warm.
    record: Vec<u8>,
    /// The encoded `Summary` of the event being built; its length precedes it in the event.
    summary: Vec<u8>,
}

impl EventWriter {
    /// Creates `dir` if missing and in it `events.out.tfevents.<unix_secs>.<hostname>.<pid>`,
    /// then writes and flushes the file-version event, stamped with the current time.
    ///
    /// A second writer of this process in the same directory and second gets `.1`, `.2`, ...
    /// after the name instead of overwriting the first file.
    pub fn create(dir: impl AsRef<Path>) -> io::Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        let now = unix_now();
        let base = format!(
            "events.out.tfevents.{:010}.{}.{}",
            now as u64,
            hostname(),
            std::process::id()
        );
        let (file, path) = create_new(dir, &base)?;
        let mut writer = EventWriter {
            file: BufWriter::new(file),
            path,
            record: Vec::new(),
            summary: Vec::new(),
        };
        writer.begin_record();
        encode_version_event(&mut writer.record, now);
        writer.end_record()?;
        writer.flush()?;
        Ok(writer)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `value` under `tag` at `step`, as an `f32` (TensorBoard's `simple_value`; values
    /// beyond its range become infinities). `wall_time` is seconds since the Unix epoch.
    /// Buffered: see [`EventWriter::flush`].
    pub fn scalar(&mut self, tag: &str, step: i64, value: f64, wall_time: f64) -> io::Result<()> {
        self.scalars(step, wall_time, [(tag, value)])
    }

    /// Writes several tagged values of one `step` as one event. Buffered: see
    /// [`EventWriter::flush`].
    pub fn scalars<'a>(
        &mut self,
        step: i64,
        wall_time: f64,
        values: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> io::Result<()> {
        self.summary.clear();
        for (tag, value) in values {
            encode_value(&mut self.summary, tag, value as f32);
        }
        self.begin_record();
        encode_summary_event(&mut self.record, wall_time, step, &self.summary);
        self.end_record()
    }

    /// Hands every buffered record to the operating system, where TensorBoard can read it.
    /// No `fsync`: the records survive the process, not a crash of the machine.
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Leaves room for the header; the event is encoded after it.
    fn begin_record(&mut self) {
        self.record.clear();
        self.record.resize(HEADER, 0);
    }

    /// Frames the encoded event and buffers the whole record with one write.
    fn end_record(&mut self) -> io::Result<()> {
        frame(&mut self.record);
        self.file.write_all(&self.record)
    }
}

/// Opens `dir/base` only if it does not exist, else the first free `dir/base.<n>`.
fn create_new(dir: &Path, base: &str) -> io::Result<(File, PathBuf)> {
    let mut path = dir.join(base);
    let mut n = 0u32;
    loop {
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                n += 1;
                path = dir.join(format!("{base}.{n}"));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The kernel's host name; std has no portable call, and it only names the file.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().replace('/', "_"))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Completes a record whose event starts at `HEADER`: fills in the header, appends the footer.
fn frame(record: &mut Vec<u8>) {
    let len = ((record.len() - HEADER) as u64).to_le_bytes();
    record[..8].copy_from_slice(&len);
    record[8..HEADER].copy_from_slice(&masked_crc32c(&len).to_le_bytes());
    let data_crc = masked_crc32c(&record[HEADER..]);
    record.extend_from_slice(&data_crc.to_le_bytes());
}

/// TFRecord's checksum: CRC-32C, rotated and offset so that a CRC stored inside checksummed
/// data does not make a trivial checksum of its own.
fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn put_key(buf: &mut Vec<u8>, field: u8, wire: u8) {
    // Every field number here is below 16, so the key is one byte.
    buf.push(field << 3 | wire);
}

fn put_bytes(buf: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    put_key(buf, field, LEN);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
}

/// `wall_time` and `step` of an `Event`. Proto3 leaves fields at their default out, and so do
/// we, so the bytes match those of TensorFlow's own writer.
fn encode_event_head(buf: &mut Vec<u8>, wall_time: f64, step: i64) {
    if wall_time.to_bits() != 0 {
        put_key(buf, 1, FIXED64);
        buf.extend_from_slice(&wall_time.to_le_bytes());
    }
    if step != 0 {
        put_key(buf, 2, VARINT);
        // Negative int64s are their two's complement as a ten-byte varint.
        put_varint(buf, step as u64);
    }
}

fn encode_version_event(buf: &mut Vec<u8>, wall_time: f64) {
    encode_event_head(buf, wall_time, 0);
    put_bytes(buf, 3, FILE_VERSION.as_bytes());
}

fn encode_summary_event(buf: &mut Vec<u8>, wall_time: f64, step: i64, summary: &[u8]) {
    encode_event_head(buf, wall_time, step);
    // `summary` is in a oneof, so it is written even when empty.
    put_bytes(buf, 5, summary);
}

/// Appends one `Summary.value` entry.
fn encode_value(buf: &mut Vec<u8>, tag: &str, value: f32) {
    let tag_len = if tag.is_empty() {
        0
    } else {
        1 + varint_len(tag.len() as u64) + tag.len()
    };
    put_key(buf, 1, LEN);
    put_varint(buf, (tag_len + 5) as u64);
    if !tag.is_empty() {
        put_bytes(buf, 1, tag.as_bytes());
    }
    // `simple_value` is in a oneof, so it is written even when zero.
    put_key(buf, 2, FIXED32);
    buf.extend_from_slice(&value.to_le_bytes());
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    fn record_of(encode: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut record = vec![0; HEADER];
        encode(&mut record);
        frame(&mut record);
        record
    }

    fn scalars_record(step: i64, wall_time: f64, values: &[(&str, f64)]) -> Vec<u8> {
        let mut summary = Vec::new();
        for &(tag, value) in values {
            encode_value(&mut summary, tag, value as f32);
        }
        record_of(|b| encode_summary_event(b, wall_time, step, &summary))
    }

    /// The data of one record, without its frame.
    fn data(record: &[u8]) -> &[u8] {
        &record[HEADER..record.len() - 4]
    }

    /// The data of each record, checking each length and both CRCs on the way.
    fn records(mut bytes: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
            let len_crc = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
            assert_eq!(len_crc, masked_crc32c(&bytes[..8]), "length CRC");
            let data = &bytes[HEADER..HEADER + len];
            let data_crc =
                u32::from_le_bytes(bytes[HEADER + len..HEADER + len + 4].try_into().unwrap());
            assert_eq!(data_crc, masked_crc32c(data), "data CRC");
            out.push(data);
            bytes = &bytes[HEADER + len + 4..];
        }
        out
    }

    #[derive(Debug, PartialEq)]
    enum Field<'a> {
        Varint(u64),
        Fixed64([u8; 8]),
        Bytes(&'a [u8]),
        Fixed32([u8; 4]),
    }

    /// The top-level fields of a protobuf message, in order.
    fn fields(mut b: &[u8]) -> Vec<(u8, Field<'_>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut v = 0;
            for shift in (0..).step_by(7) {
                let byte = b[0];
                *b = &b[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            v
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let field = match key & 7 {
                0 => Field::Varint(varint(&mut b)),
                1 => Field::Fixed64(b[..8].try_into().unwrap()),
                2 => {
                    let len = varint(&mut b) as usize;
                    Field::Bytes(&b[..len])
                }
                5 => Field::Fixed32(b[..4].try_into().unwrap()),
                wire => panic!("wire type {wire}"),
            };
            b = &b[match &field {
                Field::Varint(_) => 0,
                Field::Fixed64(_) => 8,
                Field::Bytes(s) => s.len(),
                Field::Fixed32(_) => 4,
            }..];
            out.push(((key >> 3) as u8, field));
        }
        out
    }

    #[test]
    fn masked_crc_of_known_input() {
        // CRC-32C's check value is 0xe3069283; the masked values are those of
        // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(masked_crc32c(b"123456789"), 0xc78a_b0e5);
        assert_eq!(masked_crc32c(b""), 0xa282_ead8);
    }

    // The golden records below are the output of the Python `tensorboard` package (2.21.0,
    // protobuf 7.36.2): `RecordWriter(io.BytesIO()).write(event.SerializeToString())` from
    // `tensorboard.summary.writer.record_writer`, with `event` built from
    // `tensorboard.compat.proto.event_pb2.Event` and `summary_pb2.Summary(value=[...])`.

    #[test]
    fn scalar_event_matches_tensorboard_bytes() {
        // Event(wall_time=1700000000.25, step=3,
        //       summary=Summary(value=[Value(tag="train/loss", simple_value=0.5)]))
        let golden = unhex(
            "200000000000000029eda9500900001040fc54d94110032a130a110a0a747261696e2f6c6f73\
             73150000003f8d3d56af",
        );
        assert_eq!(
            scalars_record(3, 1_700_000_000.25, &[("train/loss", 0.5)]),
            golden
        );
    }

    #[test]
    fn version_event_matches_tensorboard_bytes() {
        // Event(wall_time=1700000000.25, file_version="brain.Event:2")
        let golden = unhex(
            "1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e743a32338d\
             2fe9",
        );
        assert_eq!(
            record_of(|b| encode_version_event(b, 1_700_000_000.25)),
            golden
        );
    }

    #[test]
    fn defaults_zeros_nan_and_negative_steps_match_tensorboard_bytes() {
        // Event(wall_time=1700000000.25, step=0, summary=Summary(value=[
        //     Value(tag="a", simple_value=-0.0), Value(tag="b", simple_value=nan),
        //     Value(tag="c", simple_value=0.0)])).SerializeToString()
        let golden = unhex(
            "0900001040fc54d9412a1e0a080a016115000000800a080a0162150000c07f0a080a01631500\
             000000",
        );
        let values = [("a", -0.0), ("b", f64::NAN), ("c", 0.0)];
        assert_eq!(
            data(&scalars_record(0, 1_700_000_000.25, &values)),
            &golden[..],
            "step 0 is left out, every simple_value is written",
        );
        // Event(wall_time=1700000000.25, step=-1,
        //       summary=Summary(value=[Value(tag="x", simple_value=1.0)])).SerializeToString()
        let golden = unhex("0900001040fc54d94110ffffffffffffffffff012a0a0a080a0178150000803f");
        let record = scalars_record(-1, 1_700_000_000.25, &[("x", 1.0)]);
        assert_eq!(data(&record), &golden[..]);
    }

    #[test]
    fn varint_lengths() {
        for v in [0, 1, 127, 128, 16_383, 16_384, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(varint_len(v), buf.len(), "{v}");
        }
    }

    #[test]
    fn written_file_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let logdir = dir.path().join("run/nested");
        let before = unix_now();
        let mut writer = EventWriter::create(&logdir).unwrap();
        writer
            .scalar("train/loss", 3, 0.5, 1_700_000_000.25)
            .unwrap();
        writer
            .scalars(4, 1_700_000_001.0, [("a", 1.5), ("b", f64::INFINITY)])
            .unwrap();
        writer.flush().unwrap();

        let name = writer.path().file_name().unwrap().to_str().unwrap();
        let prefix = format!("events.out.tfevents.{:010}.", before as u64);
        assert!(name.starts_with(&prefix), "{name}");
        assert!(
            name.ends_with(&format!(".{}", std::process::id())),
            "{name}"
        );

        let bytes = std::fs::read(writer.path()).unwrap();
        let records = records(&bytes);
        assert_eq!(records.len(), 3);

        let version = fields(records[0]);
        let Field::Fixed64(wall) = version[0].1 else {
            panic!("{version:?}")
        };
        let wall = f64::from_le_bytes(wall);
        assert!(wall >= before && wall <= unix_now(), "{wall}");
        assert_eq!(version[1], (3, Field::Bytes(FILE_VERSION.as_bytes())));

        let expected = scalars_record(3, 1_700_000_000.25, &[("train/loss", 0.5)]);
        assert_eq!(records[1], data(&expected));

        let event = fields(records[2]);
        assert_eq!(event[1], (2, Field::Varint(4)));
        let Field::Bytes(summary) = event[2].1 else {
            panic!("{event:?}")
        };
        let values: Vec<_> = fields(summary)
            .into_iter()
            .map(|(n, v)| {
                assert_eq!(n, 1);
                let Field::Bytes(v) = v else { panic!() };
                let f = fields(v);
                let (Field::Bytes(tag), Field::Fixed32(x)) = (&f[0].1, &f[1].1) else {
                    panic!("{f:?}")
                };
                (
                    std::str::from_utf8(tag).unwrap().to_owned(),
                    f32::from_le_bytes(*x),
                )
            })
            .collect();
        assert_eq!(
            values,
            [("a".to_owned(), 1.5), ("b".to_owned(), f32::INFINITY)]
        );
    }

    #[test]
    fn taken_names_get_a_counter() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<_> = (0..3)
            .map(|_| create_new(dir.path(), "events.out.tfevents.x").unwrap().1)
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            [
                "events.out.tfevents.x",
                "events.out.tfevents.x.1",
                "events.out.tfevents.x.2"
            ]
        );
    }
}

//! Dequantisers on hand-built blocks, the reader on hand-built files (every error case), and a
//! check of the real SmolLM2 file when `scripts/fetch-smollm2.sh` has fetched it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use half::{bf16, f16};

use super::model::{config_from_gguf, converter_permute, gguf_name, gguf_path, load_gguf_model};
use super::reader::{GgufFile, MetaType, MetaValue};
use crate::config::{Architecture, ModelConfig};
use crate::model::projection::Projection;
use crate::quant::ggml::{dequantize, k_scale_min, GgmlType, SUPPORTED};
use crate::weights::{random_model, to_f32_vec};
use crate::{CpuBackend, Model};
use burn::prelude::*;

// ---------------------------------------------------------------------------------------------
// Building blocks and files

fn f16_bytes(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_bits().to_le_bytes()
}

/// Little-endian writer for GGUF bytes.
#[derive(Default)]
struct W(Vec<u8>);

impl W {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    fn value(&mut self, v: &MetaValue) {
        match v {
            MetaValue::U8(x) => self.0.push(*x),
            MetaValue::I8(x) => self.0.push(*x as u8),
            MetaValue::U16(x) => self.0.extend_from_slice(&x.to_le_bytes()),
            MetaValue::I16(x) => self.0.extend_from_slice(&x.to_le_bytes()),
            MetaValue::U32(x) => self.u32(*x),
            MetaValue::I32(x) => self.0.extend_from_slice(&x.to_le_bytes()),
            MetaValue::F32(x) => self.0.extend_from_slice(&x.to_le_bytes()),
            MetaValue::Bool(x) => self.0.push(*x as u8),
            MetaValue::String(s) => self.str(s),
            MetaValue::Array(t, vs) => {
                self.u32(meta_id(*t));
                self.u64(vs.len() as u64);
                for x in vs {
                    self.value(x);
                }
            }
            MetaValue::U64(x) => self.u64(*x),
            MetaValue::I64(x) => self.0.extend_from_slice(&x.to_le_bytes()),
            MetaValue::F64(x) => self.0.extend_from_slice(&x.to_le_bytes()),
        }
    }

    fn kv(&mut self, key: &str, v: &MetaValue) {
        self.str(key);
        self.u32(meta_id(v.meta_type()));
        self.value(v);
    }

    fn pad_to(&mut self, align: usize) {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
    }
}

/// The GGUF id of a metadata type, written out independently of `MetaType::from_id`.
fn meta_id(t: MetaType) -> u32 {
    match t {
        MetaType::U8 => 0,
        MetaType::I8 => 1,
        MetaType::U16 => 2,
        MetaType::I16 => 3,
        MetaType::U32 => 4,
        MetaType::I32 => 5,
        MetaType::F32 => 6,
        MetaType::Bool => 7,
        MetaType::String => 8,
        MetaType::Array => 9,
        MetaType::U64 => 10,
        MetaType::I64 => 11,
        MetaType::F64 => 12,
    }
}

/// A tensor to write: ggml dims, ggml type id, raw data, and optionally a forced offset.
struct T {
    name: &'static str,
    dims: Vec<u64>,
    ty: u32,
    data: Vec<u8>,
    offset: Option<u64>,
}

fn t(name: &'static str, dims: &[u64], ty: u32, data: Vec<u8>) -> T {
    T {
        name,
        dims: dims.to_vec(),
        ty,
        data,
        offset: None,
    }
}

/// A GGUF file: header, metadata, tensor infos with aligned offsets, padding, tensor data (each
/// tensor padded to `align` except the last, so the file ends where the last tensor does; with
/// no tensors, it ends after the metadata). `align` must agree with any `general.alignment` in
/// `kvs`.
fn build(version: u32, kvs: &[(&str, MetaValue)], tensors: &[T], align: usize) -> Vec<u8> {
    build_parts(version, kvs, tensors, align).0
}

/// [`build`], also returning where the tensor infos end (before the alignment padding).
fn build_parts(
    version: u32,
    kvs: &[(&str, MetaValue)],
    tensors: &[T],
    align: usize,
) -> (Vec<u8>, usize) {
    let mut w = W::default();
    w.0.extend_from_slice(b"GGUF");
    w.u32(version);
    w.u64(tensors.len() as u64);
    w.u64(kvs.len() as u64);
    for (k, v) in kvs {
        w.kv(k, v);
    }
    let mut next = 0usize;
    for t in tensors {
        w.str(t.name);
        w.u32(t.dims.len() as u32);
        for &d in &t.dims {
            w.u64(d);
        }
        w.u32(t.ty);
        w.u64(t.offset.unwrap_or(next as u64));
        next = (next + t.data.len()).next_multiple_of(align);
    }
    let header_end = w.0.len();
    if tensors.is_empty() {
        return (w.0, header_end);
    }
    w.pad_to(align);
    for (i, t) in tensors.iter().enumerate() {
        w.0.extend_from_slice(&t.data);
        if i + 1 < tensors.len() {
            w.pad_to(align);
        }
    }
    (w.0, header_end)
}

/// Writes `bytes` to a temporary file and opens it; the file lives as long as the handle.
fn open_bytes(bytes: &[u8]) -> (tempfile::NamedTempFile, anyhow::Result<GgufFile>) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f.flush().unwrap();
    let g = GgufFile::open(f.path());
    (f, g)
}

fn open_err(bytes: &[u8]) -> String {
    match open_bytes(bytes).1 {
        Ok(_) => panic!("expected the file to be rejected"),
        Err(e) => format!("{e:#}"),
    }
}

fn s(v: &str) -> MetaValue {
    MetaValue::String(v.into())
}

fn f32_data(vals: &[f32]) -> Vec<u8> {
    vals.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A Q8_0 block with scale `d` and quants `q`.
fn q8_0_block(d: f32, q: [i8; 32]) -> Vec<u8> {
    let mut b = f16_bytes(d).to_vec();
    b.extend(q.iter().map(|&x| x as u8));
    b
}

fn ramp_i8(start: i8) -> [i8; 32] {
    std::array::from_fn(|i| start.wrapping_add(i as i8))
}

/// The metadata of the sample file: every scalar type, a string array, nested and empty arrays.
fn sample_kvs(alignment: Option<u32>) -> Vec<(&'static str, MetaValue)> {
    let mut kvs = vec![
        ("general.architecture", s("llama")),
        ("test.u8", MetaValue::U8(200)),
        ("test.i8", MetaValue::I8(-100)),
        ("test.u16", MetaValue::U16(60_000)),
        ("test.i16", MetaValue::I16(-30_000)),
        ("test.u32", MetaValue::U32(4_000_000_000)),
        ("test.i32", MetaValue::I32(-2_000_000_000)),
        ("test.f32", MetaValue::F32(1.5e-5)),
        ("test.bool", MetaValue::Bool(true)),
        ("test.u64", MetaValue::U64(u64::MAX - 1)),
        ("test.i64", MetaValue::I64(i64::MIN + 1)),
        ("test.f64", MetaValue::F64(-2.5e300)),
        (
            "tokenizer.ggml.tokens",
            MetaValue::Array(
                MetaType::String,
                vec![s("<s>"), s("héllo"), s(""), s("▁world")],
            ),
        ),
        (
            "tokenizer.ggml.scores",
            MetaValue::Array(
                MetaType::F32,
                vec![MetaValue::F32(0.0), MetaValue::F32(-1.25)],
            ),
        ),
        (
            "tokenizer.ggml.token_type",
            MetaValue::Array(MetaType::I32, vec![MetaValue::I32(3), MetaValue::I32(1)]),
        ),
        (
            "test.nested",
            MetaValue::Array(
                MetaType::Array,
                vec![
                    MetaValue::Array(
                        MetaType::I16,
                        vec![MetaValue::I16(1), MetaValue::I16(-2), MetaValue::I16(3)],
                    ),
                    MetaValue::Array(MetaType::U8, vec![]),
                    MetaValue::Array(MetaType::String, vec![s("x")]),
                ],
            ),
        ),
        ("test.empty", MetaValue::Array(MetaType::F64, vec![])),
    ];
    if let Some(a) = alignment {
        kvs.push(("general.alignment", MetaValue::U32(a)));
    }
    kvs
}

/// Three tensors of different types: F32 [2, 3], Q8_0 [2, 32], F16 [4].
fn sample_tensors() -> Vec<T> {
    let mut q8 = q8_0_block(0.25, ramp_i8(-16));
    q8.extend(q8_0_block(-2.0, ramp_i8(90)));
    let f16s: Vec<u8> = [1.0f32, -0.5, 65504.0, 0.1]
        .iter()
        .flat_map(|&v| f16_bytes(v))
        .collect();
    vec![
        t(
            "a.f32",
            &[3, 2],
            0,
            f32_data(&[0.0, 1.0, 2.0, 3.0, 4.0, -5.5]),
        ),
        t("b.q8_0", &[32, 2], 8, q8),
        t("c.f16", &[4], 1, f16s),
    ]
}

fn sample_file(alignment: Option<u32>) -> Vec<u8> {
    let align = alignment.unwrap_or(32) as usize;
    build(3, &sample_kvs(alignment), &sample_tensors(), align)
}

// ---------------------------------------------------------------------------------------------
// Dequantisers on hand-built blocks

#[test]
fn q4_0_block_with_known_nibbles() {
    // Byte j: element j in the low nibble (value j), element 16 + j in the high one (15 - j).
    let mut b = f16_bytes(0.5).to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let v = dequantize(GgmlType::Q4_0, &b, 32).unwrap();
    for j in 0..16 {
        assert_eq!(v[j], (j as f32 - 8.0) * 0.5, "element {j}");
        assert_eq!(v[16 + j], (7.0 - j as f32) * 0.5, "element {}", 16 + j);
    }
    assert_eq!(&v[..4], &[-4.0, -3.5, -3.0, -2.5]);
    assert_eq!(v[31], -4.0);
}

#[test]
fn q4_1_block_with_a_min() {
    let mut b = f16_bytes(0.5).to_vec();
    b.extend(f16_bytes(-1.0));
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let v = dequantize(GgmlType::Q4_1, &b, 32).unwrap();
    for j in 0..16 {
        assert_eq!(v[j], j as f32 * 0.5 - 1.0);
        assert_eq!(v[16 + j], (15 - j) as f32 * 0.5 - 1.0);
    }
    assert_eq!((v[0], v[15], v[16]), (-1.0, 6.5, 6.5));
}

#[test]
fn q8_0_blocks_including_extremes() {
    let mut q = ramp_i8(-16);
    q[0] = -128;
    q[31] = 127;
    let mut b = q8_0_block(0.25, q);
    b.extend(q8_0_block(-3.0, [1; 32]));
    let v = dequantize(GgmlType::Q8_0, &b, 64).unwrap();
    assert_eq!(v[0], -32.0);
    assert_eq!(v[1], -15.0 * 0.25);
    assert_eq!(v[16], 0.0);
    assert_eq!(v[31], 31.75);
    assert!(v[32..].iter().all(|&x| x == -3.0));
}

#[test]
fn q5_0_and_q5_1_fifth_bits() {
    // Low 16 bits of qh = 0x5555: even elements 0..16 get the fifth bit; high 16 bits 0xAAAA:
    // odd elements 16..32 do.
    let qh = 0xAAAA_5555u32.to_le_bytes();
    let qs: Vec<u8> = (0..16u8).map(|j| j | (j << 4)).collect();
    let q = |e: usize| -> f32 {
        let j = e % 16;
        let fifth = if e < 16 {
            j.is_multiple_of(2)
        } else {
            j % 2 == 1
        };
        (j + if fifth { 16 } else { 0 }) as f32
    };

    let mut b0 = f16_bytes(0.5).to_vec();
    b0.extend(qh);
    b0.extend(&qs);
    let v = dequantize(GgmlType::Q5_0, &b0, 32).unwrap();
    for (e, &x) in v.iter().enumerate() {
        assert_eq!(x, (q(e) - 16.0) * 0.5, "Q5_0 element {e}");
    }

    let mut b1 = f16_bytes(0.5).to_vec();
    b1.extend(f16_bytes(-2.0));
    b1.extend(qh);
    b1.extend(&qs);
    let v = dequantize(GgmlType::Q5_1, &b1, 32).unwrap();
    for (e, &x) in v.iter().enumerate() {
        assert_eq!(x, q(e) * 0.5 - 2.0, "Q5_1 element {e}");
    }
}

#[test]
fn f16_bf16_f32_f64_round_trips() {
    let vals = [
        0.0f32,
        -0.0,
        1.0,
        -1.5,
        65504.0,
        6.103_515_6e-5, // smallest normal f16
        5.960_464_5e-8, // smallest subnormal f16
        0.1,
        f32::INFINITY,
    ];
    let b: Vec<u8> = vals.iter().flat_map(|&v| f16_bytes(v)).collect();
    let v = dequantize(GgmlType::F16, &b, vals.len()).unwrap();
    for (&x, &want) in v.iter().zip(&vals) {
        assert_eq!(x.to_bits(), f16::from_f32(want).to_f32().to_bits());
    }
    assert_eq!(
        &v[..7],
        &vals[..7],
        "exactly representable values come back exactly"
    );

    let vals = [1.0f32, -3.0e38, 1.0e-30, 0.1, -2.0];
    let b: Vec<u8> = vals
        .iter()
        .flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes())
        .collect();
    let v = dequantize(GgmlType::BF16, &b, vals.len()).unwrap();
    for (&x, &want) in v.iter().zip(&vals) {
        assert_eq!(x, bf16::from_f32(want).to_f32());
    }
    assert_eq!((v[0], v[4]), (1.0, -2.0));

    let vals = [1.5f32, -7.25e-20, f32::MAX];
    assert_eq!(
        dequantize(GgmlType::F32, &f32_data(&vals), 3).unwrap(),
        vals
    );
    let b: Vec<u8> = [0.5f64, -1e10]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(dequantize(GgmlType::F64, &b, 2).unwrap(), [0.5, -1e10]);
}

/// Packs 8 six-bit (scale, min) pairs the way Q4_K/Q5_K store them, from the layout description:
/// bytes 0..4 / 4..8 hold scales / mins 0..4 in their low 6 bits and the high 2 bits of scales /
/// mins 4..8 in their top 2 bits; bytes 8..12 hold the low 4 bits of scale (low nibble) and min
/// (high nibble) 4..8.
fn pack_k_scales(sc: [u8; 8], mn: [u8; 8]) -> [u8; 12] {
    let mut s = [0u8; 12];
    for j in 0..4 {
        s[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        s[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
        s[j + 8] = (sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4);
    }
    s
}

const K_SC: [u8; 8] = [1, 2, 3, 4, 17, 33, 50, 63];
const K_MN: [u8; 8] = [0, 5, 10, 15, 20, 40, 60, 63];

#[test]
fn k_scale_min_unpacks_all_eight_pairs() {
    for (sc, mn) in [
        (K_SC, K_MN),
        ([63; 8], [63; 8]),
        ([0; 8], [63; 8]),
        (
            [48, 16, 32, 63, 15, 16, 47, 0],
            [1, 62, 31, 32, 63, 48, 17, 33],
        ),
    ] {
        let packed = pack_k_scales(sc, mn);
        for j in 0..8 {
            assert_eq!(
                k_scale_min(j, &packed),
                (sc[j], mn[j]),
                "sub-block {j} of {sc:?}/{mn:?}"
            );
        }
    }
}

#[test]
fn q4_k_block_by_element() {
    let (d, dmin) = (0.25f32, 0.5f32);
    let qs: Vec<u8> = (0..128u32).map(|i| ((i * 7 + 3) % 256) as u8).collect();
    let mut b = f16_bytes(d).to_vec();
    b.extend(f16_bytes(dmin));
    b.extend(pack_k_scales(K_SC, K_MN));
    b.extend(&qs);
    let v = dequantize(GgmlType::Q4_K, &b, 256).unwrap();
    for (e, &x) in v.iter().enumerate() {
        // Element e is in sub-block e / 32; 64-element chunk c uses qs[32c..32c + 32], low
        // nibbles for its first 32 elements and high nibbles for the rest.
        let (c, w) = (e / 64, e % 64);
        let byte = qs[32 * c + w % 32];
        let q = if w < 32 { byte & 0x0F } else { byte >> 4 };
        let sb = e / 32;
        let want = d * K_SC[sb] as f32 * q as f32 - dmin * K_MN[sb] as f32;
        assert_eq!(x, want, "element {e}");
    }
}

#[test]
fn q5_k_block_by_element() {
    let (d, dmin) = (0.25f32, 0.5f32);
    let qh: Vec<u8> = (0..32u32).map(|i| ((i * 37 + 11) % 256) as u8).collect();
    let qs: Vec<u8> = (0..128u32).map(|i| ((i * 7 + 3) % 256) as u8).collect();
    let mut b = f16_bytes(d).to_vec();
    b.extend(f16_bytes(dmin));
    b.extend(pack_k_scales(K_SC, K_MN));
    b.extend(&qh);
    b.extend(&qs);
    let v = dequantize(GgmlType::Q5_K, &b, 256).unwrap();
    for (e, &x) in v.iter().enumerate() {
        // As Q4_K, with the fifth bit of sub-block sb's element l in bit sb of qh[l].
        let (c, w) = (e / 64, e % 64);
        let l = w % 32;
        let byte = qs[32 * c + l];
        let low = if w < 32 { byte & 0x0F } else { byte >> 4 };
        let sb = e / 32;
        let q = low | (((qh[l] >> sb) & 1) << 4);
        let want = d * K_SC[sb] as f32 * q as f32 - dmin * K_MN[sb] as f32;
        assert_eq!(x, want, "element {e}");
    }
}

#[test]
fn q6_k_block_by_element() {
    let d = 0.125f32;
    let ql: Vec<u8> = (0..128u32).map(|i| ((i * 11 + 5) % 256) as u8).collect();
    let qh: Vec<u8> = (0..64u32).map(|i| ((i * 29 + 7) % 256) as u8).collect();
    let scales: [i8; 16] = [
        -128, -3, 0, 1, 5, 17, 63, 127, -1, 2, -64, 9, 33, -17, 4, 100,
    ];
    let mut b = ql.clone();
    b.extend(&qh);
    b.extend(scales.iter().map(|&x| x as u8));
    b.extend(f16_bytes(d));
    let v = dequantize(GgmlType::Q6_K, &b, 256).unwrap();
    for (e, &x) in v.iter().enumerate() {
        // Each 128-element half h uses ql[64h..], qh[32h..]; its quarter k (32 elements) takes
        // low bits from ql (low nibbles of the first 64 bytes for k = 0, 1, high nibbles for
        // k = 2, 3) and bits 2k..2k+2 of qh[l]; scale e / 16.
        let (h, k, l) = (e / 128, (e % 128) / 32, e % 32);
        let byte = ql[64 * h + l + 32 * (k % 2)];
        let low = if k < 2 { byte & 0x0F } else { byte >> 4 };
        let high = (qh[32 * h + l] >> (2 * k)) & 3;
        let q = (low | (high << 4)) as i32 - 32;
        let want = d * scales[e / 16] as f32 * q as f32;
        assert_eq!(x, want, "element {e}");
    }
}

/// Values from llama.cpp's Python reference (gguf-py 0.19 `gguf.quants.dequantize`) on blocks of
/// bytes `(i * 73 + 41) % 256` with the scale fields overwritten: the sum and some elements.
#[test]
fn blocks_match_gguf_py_reference() {
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 73 + 41) % 256) as u8).collect()
    }
    fn set(b: &mut [u8], at: usize, v: f32) {
        b[at..at + 2].copy_from_slice(&f16_bytes(v));
    }
    type Case = (
        GgmlType,
        usize,
        Vec<(usize, f32)>,
        f64,
        &'static [(usize, f32)],
    );
    let cases: Vec<Case> = vec![
        (
            GgmlType::Q4_0,
            18,
            vec![(0, 0.5)],
            -16.5,
            &[
                (0, 1.5),
                (1, -2.0),
                (15, -3.0),
                (16, 1.5),
                (17, -4.0),
                (31, -4.0),
            ],
        ),
        (
            GgmlType::Q4_1,
            20,
            vec![(0, 0.5), (2, -2.0)],
            48.5,
            &[
                (0, 4.5),
                (1, 1.0),
                (15, 0.0),
                (16, 0.0),
                (17, 2.5),
                (31, 2.5),
            ],
        ),
        (
            GgmlType::Q5_0,
            22,
            vec![(0, 0.5)],
            -22.5,
            &[
                (0, 7.5),
                (1, 4.0),
                (15, -5.0),
                (16, 6.5),
                (17, -7.0),
                (31, 1.0),
            ],
        ),
        (
            GgmlType::Q5_1,
            24,
            vec![(0, 0.5), (2, -2.0)],
            186.5,
            &[
                (0, 6.5),
                (1, 3.0),
                (15, 10.0),
                (16, 9.5),
                (17, 11.5),
                (31, 3.5),
            ],
        ),
        (
            GgmlType::Q8_0,
            34,
            vec![(0, 0.25)],
            -12.0,
            &[
                (0, -17.25),
                (1, 1.0),
                (15, 0.5),
                (16, 18.75),
                (17, -27.0),
                (31, -27.5),
            ],
        ),
        (
            GgmlType::Q4_K,
            144,
            vec![(0, 0.0625), (2, 0.125)],
            2683.5,
            &[
                (0, 1.1875),
                (1, -4.5),
                (31, -6.125),
                (32, 7.875),
                (63, 5.125),
                (64, 17.0625),
                (100, 36.0),
                (127, 26.0),
                (128, 8.6875),
                (200, 3.1875),
                (255, -2.875),
            ],
        ),
        (
            GgmlType::Q5_K,
            176,
            vec![(0, 0.0625), (2, 0.125)],
            6228.5,
            &[
                (0, 14.1875),
                (1, -4.5),
                (31, -6.125),
                (32, 10.625),
                (63, 7.875),
                (64, 17.0625),
                (100, 41.0),
                (127, 31.0),
                (128, 29.6875),
                (200, 3.1875),
                (255, -2.875),
            ],
        ),
        (
            GgmlType::Q6_K,
            210,
            vec![(208, 0.0625)],
            -927.75,
            &[
                (0, 10.0625),
                (1, -2.875),
                (15, 46.0),
                (16, -21.875),
                (31, -100.0),
                (32, 69.1875),
                (63, 120.0),
                (64, 1.625),
                (100, -133.375),
                (127, -3.0),
                (128, -21.4375),
                (200, -26.5625),
                (255, 18.0),
            ],
        ),
    ];
    for (ty, n_bytes, scales, sum, picks) in cases {
        let mut b = pattern(n_bytes);
        for (at, v) in scales {
            set(&mut b, at, v);
        }
        let n = ty.block_layout().unwrap().0;
        let v = dequantize(ty, &b, n).unwrap();
        assert_eq!(v.iter().map(|&x| x as f64).sum::<f64>(), sum, "{ty} sum");
        for &(i, want) in picks {
            assert_eq!(v[i], want, "{ty} element {i}");
        }
    }
}

#[test]
fn dequantize_rejects_bad_input() {
    let e = dequantize(GgmlType::Q2_K, &[0; 84], 256)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("type Q2_K is not supported (supported: F32, F16, BF16"),
        "{e}"
    );
    let e = dequantize(GgmlType::Q8_0, &[0; 34], 16)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a whole number of 32-element blocks"), "{e}");
    let e = dequantize(GgmlType::Q4_0, &[0; 17], 32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("take 18 bytes, got 17"), "{e}");
}

#[test]
fn ggml_type_ids_round_trip() {
    for id in 0..64 {
        assert_eq!(GgmlType::from_id(id).id(), id);
    }
    assert_eq!(GgmlType::from_id(12), GgmlType::Q4_K);
    assert_eq!(GgmlType::from_id(30), GgmlType::BF16);
    assert_eq!(GgmlType::from_id(4), GgmlType::Unknown(4));
    assert_eq!(GgmlType::Unknown(99).to_string(), "unknown type id 99");
    for ty in SUPPORTED {
        assert!(ty.block_layout().is_some(), "{ty}");
    }
}

// ---------------------------------------------------------------------------------------------
// The reader on hand-built files

#[test]
fn reads_a_hand_built_file_exactly() {
    let bytes = sample_file(Some(64));
    let (_tmp, g) = open_bytes(&bytes);
    let mut g = g.unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.data_start() % 64, 0);
    assert!(g.data_start() < bytes.len() as u64);

    let want: BTreeMap<String, MetaValue> = sample_kvs(Some(64))
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    assert_eq!(g.metadata(), &want);

    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(g.get_u32("test.u8").unwrap(), 200);
    assert_eq!(g.get_u32("test.u32").unwrap(), 4_000_000_000);
    assert_eq!(g.get_u64("test.u64").unwrap(), u64::MAX - 1);
    assert_eq!(g.get_i64("test.i64").unwrap(), i64::MIN + 1);
    assert_eq!(g.get_i64("test.i32").unwrap(), -2_000_000_000);
    assert_eq!(g.get_f32("test.f32").unwrap(), 1.5e-5);
    assert_eq!(g.get_f64("test.f64").unwrap(), -2.5e300);
    assert!(g.get_bool("test.bool").unwrap());
    assert_eq!(
        g.get_str_array("tokenizer.ggml.tokens").unwrap(),
        ["<s>", "héllo", "", "▁world"]
    );
    assert_eq!(
        g.get_f32_array("tokenizer.ggml.scores").unwrap(),
        [0.0, -1.25]
    );
    assert_eq!(
        g.get_i64_array("tokenizer.ggml.token_type").unwrap(),
        [3, 1]
    );
    let nested = g.get_array("test.nested").unwrap();
    assert_eq!(nested.len(), 3);
    assert_eq!(nested[0].as_array().unwrap()[1], MetaValue::I16(-2));
    assert_eq!(nested[1], MetaValue::Array(MetaType::U8, vec![]));
    assert_eq!(
        g.get("test.empty"),
        Some(&MetaValue::Array(MetaType::F64, vec![]))
    );

    let names: Vec<&str> = g.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["a.f32", "b.q8_0", "c.f16"]);
    let offsets: Vec<u64> = g.tensors().iter().map(|t| t.offset).collect();
    assert_eq!(offsets, [0, 64, 192]);
    assert_eq!(g.tensor("b.q8_0").unwrap().dims, [32, 2]);
    assert_eq!(g.tensor("b.q8_0").unwrap().ggml_type, GgmlType::Q8_0);
    assert_eq!(g.shape("a.f32").unwrap(), [2, 3]);
    assert_eq!(g.shape("b.q8_0").unwrap(), [2, 32]);
    assert_eq!(g.shape("c.f16").unwrap(), [4]);

    assert_eq!(
        g.read_f32("a.f32").unwrap(),
        [0.0, 1.0, 2.0, 3.0, 4.0, -5.5]
    );
    let q = g.read_f32("b.q8_0").unwrap();
    let want: Vec<f32> = (0..32)
        .map(|i| (i - 16) as f32 * 0.25)
        .chain((0..32).map(|i| (90 + i) as f32 * -2.0))
        .collect();
    assert_eq!(q, want);
    let h = g.read_f32("c.f16").unwrap();
    assert_eq!(h, [1.0, -0.5, 65504.0, f16::from_f32(0.1).to_f32()]);
    // Reads are independent of order.
    assert_eq!(g.read_f32("a.f32").unwrap()[5], -5.5);
    assert_eq!(g.read_raw("c.f16").unwrap().len(), 8);
}

#[test]
fn default_alignment_is_32_and_version_2_reads() {
    for version in [2, 3] {
        let mut bytes = sample_file(None);
        bytes[4..8].copy_from_slice(&u32::to_le_bytes(version));
        let (_tmp, g) = open_bytes(&bytes);
        let mut g = g.unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.alignment(), 32);
        assert_eq!(g.data_start() % 32, 0);
        let offsets: Vec<u64> = g.tensors().iter().map(|t| t.offset).collect();
        assert_eq!(offsets, [0, 32, 128]);
        assert_eq!(g.read_f32("a.f32").unwrap()[4], 4.0);
        assert_eq!(g.read_f32("b.q8_0").unwrap()[63], 121.0 * -2.0);
    }
}

#[test]
fn rejects_bad_magic_and_short_files() {
    let mut bytes = sample_file(None);
    bytes[..4].copy_from_slice(b"GGML");
    let e = open_err(&bytes);
    assert!(
        e.contains("is not a GGUF file") && e.contains("\"GGML\""),
        "{e}"
    );
    let e = open_err(b"GG");
    assert!(
        e.contains("is not a GGUF file") && e.contains("2 bytes"),
        "{e}"
    );
    let e = open_err(b"{\"safetensors\": 1}");
    assert!(e.contains("is not a GGUF file"), "{e}");
    let missing = GgufFile::open("/nonexistent/model.gguf")
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("cannot open GGUF file /nonexistent/model.gguf"),
        "{missing}"
    );
}

#[test]
fn rejects_unsupported_versions() {
    let mut bytes = sample_file(None);
    bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    let e = open_err(&bytes);
    assert!(
        e.contains("GGUF version 1, which is not supported (supported: 2 and 3"),
        "{e}"
    );
    bytes[4..8].copy_from_slice(&4u32.to_le_bytes());
    assert!(open_err(&bytes).contains("GGUF version 4"));
    bytes[4..8].copy_from_slice(&3u32.to_be_bytes());
    let e = open_err(&bytes);
    assert!(e.contains("big-endian GGUF file"), "{e}");
}

#[test]
fn every_truncation_is_reported() {
    let (bytes, header_end) = build_parts(3, &sample_kvs(Some(64)), &sample_tensors(), 64);
    assert!(open_bytes(&bytes).1.is_ok());
    for cut in 0..bytes.len() {
        let e = open_err(&bytes[..cut]);
        let ok = if cut < 4 {
            e.contains("is not a GGUF file")
        } else if cut < header_end {
            e.contains("truncated GGUF file")
        } else {
            e.contains("extends past the end of the file")
        };
        assert!(ok, "cut at {cut} (header ends at {header_end}): {e}");
    }
}

#[test]
fn truncation_names_what_was_being_read() {
    let bytes = sample_file(None);
    let find = |needle: &[u8]| {
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
    };
    // Inside the third token string.
    let cut = find("▁world".as_bytes()) + 2;
    let e = open_err(&bytes[..cut]);
    assert!(
        e.contains("truncated GGUF file: it ends inside metadata entry #12 (\"tokenizer.ggml.tokens\") (string value"),
        "{e}"
    );
    // Inside the dims of the second tensor info.
    let cut = find(b"b.q8_0") + 6 + 4 + 3;
    let e = open_err(&bytes[..cut]);
    assert!(e.contains("tensor info #1 (\"b.q8_0\") (dimensions"), "{e}");
    // Inside the header counts.
    let e = open_err(&bytes[..12]);
    assert!(e.contains("inside the header (tensor count"), "{e}");
}

#[test]
fn rejects_unknown_metadata_types() {
    let mut w = W::default();
    w.0.extend_from_slice(b"GGUF");
    w.u32(3);
    w.u64(0);
    w.u64(2);
    w.kv("general.architecture", &s("llama"));
    w.str("weird.key");
    w.u32(13);
    w.u32(0);
    let e = open_err(&w.0);
    assert!(
        e.contains("metadata key \"weird.key\" has unknown value type 13"),
        "{e}"
    );

    let mut w = W::default();
    w.0.extend_from_slice(b"GGUF");
    w.u32(3);
    w.u64(0);
    w.u64(1);
    w.str("weird.array");
    w.u32(9);
    w.u32(42);
    w.u64(1);
    w.u32(0);
    let e = open_err(&w.0);
    assert!(
        e.contains("(\"weird.array\") is an array of unknown value type 42"),
        "{e}"
    );
}

#[test]
fn rejects_malformed_metadata() {
    let one =
        |key: &str, v: MetaValue| build(3, &[("general.architecture", s("x")), (key, v)], &[], 32);

    let mut bytes = one("flag", MetaValue::Bool(true));
    *bytes.last_mut().unwrap() = 2;
    assert!(open_err(&bytes).contains("bool value byte 2"));

    let bytes = build(
        3,
        &[("k", MetaValue::U8(1)), ("k", MetaValue::U8(2))],
        &[],
        32,
    );
    assert!(open_err(&bytes).contains("metadata key \"k\" appears twice"));

    let bytes = one("general.alignment", MetaValue::U32(0));
    assert!(open_err(&bytes).contains("general.alignment must be a positive integer"));

    let mut bytes = one("k", s("ab"));
    *bytes.last_mut().unwrap() = 0xFF;
    assert!(open_err(&bytes).contains("is not valid UTF-8"));

    // An array claiming more elements than the file could hold fails before allocating them.
    let mut w = W::default();
    w.0.extend_from_slice(b"GGUF");
    w.u32(3);
    w.u64(0);
    w.u64(1);
    w.str("huge");
    w.u32(9);
    w.u32(8);
    w.u64(u64::MAX / 2);
    let e = open_err(&w.0);
    assert!(
        e.contains("truncated GGUF file") && e.contains("array elements"),
        "{e}"
    );
}

#[test]
fn unsupported_tensor_types_are_named_on_read() {
    let tensors = vec![
        t("blk.0.ffn_down.weight", &[256], 10, vec![0; 84]),
        t("odd", &[8], 99, vec![0; 8]),
        t("ok", &[2], 0, f32_data(&[1.0, 2.0])),
    ];
    let bytes = build(3, &[("general.architecture", s("llama"))], &tensors, 32);
    let (_tmp, g) = open_bytes(&bytes);
    let mut g = g.unwrap();
    let e = g.read_f32("blk.0.ffn_down.weight").unwrap_err().to_string();
    assert!(
        e.contains(
            "tensor blk.0.ffn_down.weight has type Q2_K, which is not supported (supported: F32, \
             F16, BF16, F64, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)"
        ),
        "{e}"
    );
    let e = g.read_f32("odd").unwrap_err().to_string();
    assert!(
        e.contains("tensor odd has type unknown type id 99, which is not supported"),
        "{e}"
    );
    // Raw bytes of a known-size type are still readable.
    assert_eq!(g.read_raw("blk.0.ffn_down.weight").unwrap().len(), 84);
    assert_eq!(g.read_f32("ok").unwrap(), [1.0, 2.0]);
}

#[test]
fn rejects_tensors_outside_the_file_or_misaligned() {
    let mut tensors = sample_tensors();
    tensors[1].offset = Some(4096);
    let e = open_err(&build(3, &[], &tensors, 32));
    assert!(
        e.contains("tensor b.q8_0 (Q8_0, dims [32, 2], 68 bytes at file offset")
            && e.contains("extends past the end of the file"),
        "{e}"
    );

    let mut tensors = sample_tensors();
    tensors[1].offset = Some(40);
    let e = open_err(&build(3, &[], &tensors, 32));
    assert!(
        e.contains("tensor b.q8_0 has data offset 40, not a multiple of the alignment 32"),
        "{e}"
    );

    let tensors = vec![t("short", &[16], 8, vec![0; 34])];
    let e = open_err(&build(3, &[], &tensors, 32));
    assert!(e.contains("dims[0] must be a multiple of 32"), "{e}");

    let tensors = vec![t("x", &[1, 1, 1, 1, 1], 0, vec![0; 4])];
    assert!(open_err(&build(3, &[], &tensors, 32)).contains("has 5 dimensions"));

    let tensors = vec![t("x", &[1], 0, vec![0; 4]), t("x", &[1], 0, vec![0; 4])];
    assert!(open_err(&build(3, &[], &tensors, 32)).contains("tensor x appears twice"));
}

#[test]
fn getters_report_missing_and_mistyped_keys() {
    let (_tmp, g) = open_bytes(&sample_file(None));
    let mut g = g.unwrap();
    let e = g.get_str("llama.block_count").unwrap_err().to_string();
    assert!(
        e.contains("metadata key llama.block_count is missing"),
        "{e}"
    );
    let e = g.get_u32("general.architecture").unwrap_err().to_string();
    assert!(
        e.contains("general.architecture is a string, expected an integer"),
        "{e}"
    );
    let e = g.get_u32("test.u64").unwrap_err().to_string();
    assert!(
        e.contains("test.u64 is a u64, expected an integer that fits in u32"),
        "{e}"
    );
    assert!(
        g.get_u32("test.i8").is_err(),
        "negative values do not fit in u32"
    );
    let e = g
        .get_str_array("tokenizer.ggml.scores")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is an array of 2 f32, expected an array of strings"),
        "{e}"
    );
    assert!(g.get_f32("test.u32").is_err());
    assert!(g.get_bool("test.u8").is_err());
    let e = g.read_f32("missing.weight").unwrap_err().to_string();
    assert!(
        e.contains("no tensor named missing.weight (the file has 3 tensors)"),
        "{e}"
    );
    assert!(g.shape("missing.weight").is_err());
}

// ---------------------------------------------------------------------------------------------
// Llama models from GGUF files

/// A random Llama model and the GGUF file llama.cpp's converter would write for it (F32 tensors,
/// llama.cpp names, q/k rows permuted), with `general.architecture = arch`.
fn tiny_llama_gguf(arch: &str, tied: bool) -> (Model<CpuBackend>, Vec<u8>) {
    let cfg = ModelConfig::from_json_str(
        &serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": 40, "hidden_size": 24, "intermediate_size": 32,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "tie_word_embeddings": tied,
            "max_position_embeddings": 64
        })
        .to_string(),
    )
    .unwrap();
    let model = random_model::<CpuBackend>(cfg.clone(), 7, &Default::default()).unwrap();
    let tensors: Vec<T> = model
        .export()
        .into_iter()
        .map(|e| {
            let name = gguf_name(&e.name).unwrap();
            let (rows, cols) = (e.shape[0], e.shape.get(1).copied().unwrap_or(1));
            let data = if name.contains("attn_q.") {
                converter_permute(&e.data, cfg.num_attention_heads, rows, cols)
            } else if name.contains("attn_k.") {
                converter_permute(&e.data, cfg.num_key_value_heads, rows, cols)
            } else {
                e.data
            };
            let dims: Vec<u64> = e.shape.iter().rev().map(|&d| d as u64).collect();
            // The builder takes `'static` names; a few leaked strings in a test are harmless.
            t(Box::leak(name.into_boxed_str()), &dims, 0, f32_data(&data))
        })
        .collect();
    let kvs = vec![
        ("general.architecture", s(arch)),
        ("llama.block_count", MetaValue::U32(2)),
        ("llama.context_length", MetaValue::U32(64)),
        ("llama.embedding_length", MetaValue::U32(24)),
        ("llama.feed_forward_length", MetaValue::U32(32)),
        ("llama.attention.head_count", MetaValue::U32(4)),
        ("llama.attention.head_count_kv", MetaValue::U32(2)),
        ("llama.rope.freq_base", MetaValue::F32(100_000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-5),
        ),
        ("llama.rope.dimension_count", MetaValue::U32(6)),
    ];
    (model, build(3, &kvs, &tensors, 32))
}

#[test]
fn llama_gguf_loads_to_the_same_model() {
    for tied in [true, false] {
        let (original, bytes) = tiny_llama_gguf("llama", tied);
        let (file, g) = open_bytes(&bytes);
        let cfg = config_from_gguf(&g.unwrap()).unwrap();
        assert_eq!(cfg.architecture, Architecture::LlamaForCausalLM);
        assert_eq!(cfg.tie_word_embeddings, tied);
        assert_eq!((cfg.head_dim, cfg.vocab_size), (6, 40));
        assert_eq!((cfg.rope_theta, cfg.max_position_embeddings), (1e5, 64));
        assert!((cfg.rms_norm_eps - 1e-5).abs() < 1e-12);
        assert!(!cfg.attention.qk_norm);

        let loaded: Model<CpuBackend> = load_gguf_model(file.path(), &Default::default()).unwrap();
        // Same tensors under HF names (q/k back in HF row order), hence the same logits.
        let (a, b) = (original.export(), loaded.export());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((&x.name, &x.shape), (&y.name, &y.shape));
            assert_eq!(x.data, y.data, "{}", x.name);
        }
        let ids =
            Tensor::<CpuBackend, 2, Int>::from_data([[1, 5, 9, 2, 33, 7]], &Default::default());
        let la = to_f32_vec(original.forward(ids.clone()).unwrap());
        let lb = to_f32_vec(loaded.forward(ids).unwrap());
        assert_eq!(la, lb);
    }
}

/// A random Llama model written as a GGUF file with its projections quantised (q, k Q4_0;
/// v, o Q8_0; the MLP Q4_1; the tied embedding Q8_0), as llama.cpp's quantiser lays them out.
fn tiny_quantised_llama_gguf() -> Vec<u8> {
    use crate::quant::tests::{quantise_q4_0, quantise_q4_1, quantise_q8_0};
    let cfg = ModelConfig::from_json_str(
        &serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": 48, "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true,
            "max_position_embeddings": 64
        })
        .to_string(),
    )
    .unwrap();
    let model = random_model::<CpuBackend>(cfg.clone(), 5, &Default::default()).unwrap();
    let tensors: Vec<T> = model
        .export()
        .into_iter()
        .map(|e| {
            let name = gguf_name(&e.name).unwrap();
            let (rows, cols) = (e.shape[0], e.shape.get(1).copied().unwrap_or(1));
            let data = if name.contains("attn_q.") {
                converter_permute(&e.data, cfg.num_attention_heads, rows, cols)
            } else if name.contains("attn_k.") {
                converter_permute(&e.data, cfg.num_key_value_heads, rows, cols)
            } else {
                e.data
            };
            let (ty, bytes) = if e.shape.len() == 1 {
                (0, f32_data(&data))
            } else if name.contains("attn_q.") || name.contains("attn_k.") {
                (2, quantise_q4_0(&data))
            } else if name.contains("ffn_") {
                (3, quantise_q4_1(&data))
            } else {
                (8, quantise_q8_0(&data))
            };
            let dims: Vec<u64> = e.shape.iter().rev().map(|&d| d as u64).collect();
            t(Box::leak(name.into_boxed_str()), &dims, ty, bytes)
        })
        .collect();
    let kvs = vec![
        ("general.architecture", s("llama")),
        ("llama.block_count", MetaValue::U32(2)),
        ("llama.context_length", MetaValue::U32(64)),
        ("llama.embedding_length", MetaValue::U32(64)),
        ("llama.feed_forward_length", MetaValue::U32(96)),
        ("llama.attention.head_count", MetaValue::U32(4)),
        ("llama.attention.head_count_kv", MetaValue::U32(2)),
        ("llama.rope.freq_base", MetaValue::F32(10_000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-5),
        ),
    ];
    build(3, &kvs, &tensors, 32)
}

#[test]
fn quantised_weights_kept_in_blocks_give_the_dequantised_model_logits() {
    use crate::weights::GgufWeights;
    let bytes = tiny_quantised_llama_gguf();
    let (file, _) = open_bytes(&bytes);
    let dev = Default::default();
    let f32_model: Model<CpuBackend> =
        super::load_gguf_model_with(file.path(), &dev, GgufWeights::F32).unwrap();
    let blocks: Model<CpuBackend> =
        super::load_gguf_model_with(file.path(), &dev, GgufWeights::Blocks).unwrap();
    assert!(!f32_model.is_quantised());
    assert!(blocks.is_quantised());
    // Every projection and the tied head are in blocks; the rest is f32 as before.
    let ty = |p: &Projection<CpuBackend>| p.quantised().unwrap().ty();
    let a = &blocks.model.layers[1].self_attn;
    assert_eq!(ty(&a.q_proj), GgmlType::Q4_0);
    assert_eq!(ty(&a.o_proj), GgmlType::Q8_0);
    assert_eq!(ty(&blocks.model.layers[0].mlp.down_proj), GgmlType::Q4_1);
    assert_eq!(ty(blocks.lm_head.as_ref().unwrap()), GgmlType::Q8_0);
    // The blocks decode to exactly the tensors the f32 load reads (q/k rows un-permuted too).
    let (ea, eb) = (f32_model.export(), blocks.export());
    assert_eq!(ea, eb);
    assert_eq!(blocks.dequantised().export(), ea);

    let ids =
        Tensor::<CpuBackend, 2, Int>::from_data([[1, 5, 9, 2, 33, 7], [40, 3, 3, 17, 0, 47]], &dev);
    let want = to_f32_vec(f32_model.forward(ids.clone()).unwrap());
    let got = to_f32_vec(blocks.forward(ids.clone()).unwrap());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, (x, y)) in got.iter().zip(&want).enumerate() {
        assert!((x - y).abs() <= 1e-5 * scale, "logit {i}: {x} vs {y}");
    }
    // The dequantised copy is the f32 model, bit for bit.
    assert_eq!(to_f32_vec(blocks.dequantised().forward(ids).unwrap()), want);
}

#[test]
fn lora_over_quantised_blocks_trains_and_serves_as_over_the_dequantised_weights() {
    use crate::lora::{adapter_tensors, attach, has_adapters, merged, LoraConfig};
    use crate::weights::GgufWeights;
    use burn::module::{AutodiffModule, Param};
    type A = burn::backend::Autodiff<CpuBackend>;
    let bytes = tiny_quantised_llama_gguf();
    let (file, _) = open_bytes(&bytes);
    let dev = Default::default();
    let cfg = LoraConfig {
        rank: 4,
        ..LoraConfig::default()
    };
    let ids = Tensor::<A, 2, Int>::from_data([[1, 5, 9, 2, 33, 7], [40, 3, 3, 17, 0, 47]], &dev);
    let with_adapters = |w: GgufWeights| -> Model<A> {
        let mut m = attach(
            super::load_gguf_model_with::<A>(file.path(), &dev, w).unwrap(),
            &cfg,
            7,
        )
        .unwrap();
        // Non-zero up-projections (fresh ones are zero), the same in both models.
        for (i, layer) in m.model.layers.iter_mut().enumerate() {
            let (a, f) = (&mut layer.self_attn, &mut layer.mlp);
            for (j, lora) in [&mut a.q_proj.lora, &mut f.down_proj.lora]
                .into_iter()
                .enumerate()
            {
                let l = lora.as_mut().unwrap();
                let [r, n] = l.b.val().dims();
                let data: Vec<f32> = (0..r * n)
                    .map(|x| ((x * 7 + i * 3 + j) % 11) as f32 / 50.0 - 0.1)
                    .collect();
                l.b = Param::from_data(TensorData::new(data, [r, n]), &dev);
            }
        }
        m
    };
    let over_blocks = with_adapters(GgufWeights::Blocks);
    let over_f32 = with_adapters(GgufWeights::F32);
    // The adapters sit on the blocks: nothing was dequantised into the model.
    assert!(over_blocks.is_quantised() && has_adapters(&over_blocks));
    assert!(!over_f32.is_quantised());

    // Training: the same loss and the same adapter gradients.
    let weights = |n: usize| (0..n).map(|i| ((i % 13) as f32 - 6.0) / 10.0).collect();
    let loss_and_grads = |m: &Model<A>| {
        let logits = m.forward(ids.clone()).unwrap();
        let dims = logits.dims();
        let w =
            Tensor::<A, 3>::from_data(TensorData::new(weights(dims.iter().product()), dims), &dev);
        let loss = (logits * w).sum();
        let value = to_f32_vec(loss.clone().inner())[0];
        let grads = loss.backward();
        let mut g = Vec::new();
        for layer in &m.model.layers {
            for lora in [&layer.self_attn.q_proj.lora, &layer.mlp.down_proj.lora] {
                let l = lora.as_ref().unwrap();
                g.extend(to_f32_vec(l.a.grad(&grads).unwrap()));
                g.extend(to_f32_vec(l.b.grad(&grads).unwrap()));
            }
        }
        (value, g)
    };
    let (lb, gb) = loss_and_grads(&over_blocks);
    let (lf, gf) = loss_and_grads(&over_f32);
    assert!(
        (lb - lf).abs() <= 1e-5 * lf.abs().max(1.0),
        "loss {lb} vs {lf}"
    );
    let scale = gf.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.0);
    for (i, (x, y)) in gb.iter().zip(&gf).enumerate() {
        assert!((x - y).abs() <= 1e-4 * scale, "gradient {i}: {x} vs {y}");
    }

    // A pass taking its logits in chunks decodes the head once, with the same logits.
    let head = over_blocks
        .decoded_head()
        .expect("autodiff has no block kernels");
    let h = over_blocks.hidden_full(ids.clone());
    let [b, n, d] = h.dims();
    let h = h.reshape([b * n, d]);
    let got = to_f32_vec(over_blocks.lm_logits_with(h.clone(), Some(&head)).inner());
    let want = to_f32_vec(over_blocks.lm_logits(h).inner());
    assert_eq!(got.len(), want.len());
    for (x, y) in got.iter().zip(&want) {
        assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs {y}");
    }
    assert!(
        over_blocks.valid().decoded_head().is_none(),
        "the CPU kernels read the blocks"
    );

    // Serving: the blocks with the adapters beside them give the logits of the merged f32
    // weights (what serving gets without blocks), and the adapters export alike.
    let (served, merged_f32) = (over_blocks.valid(), merged(&over_f32.valid()));
    assert!(served.is_quantised() && !has_adapters(&merged_f32));
    let ids = Tensor::<CpuBackend, 2, Int>::from_data(ids.into_data(), &dev);
    let want = to_f32_vec(merged_f32.forward(ids.clone()).unwrap());
    let got = to_f32_vec(served.forward(ids).unwrap());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, (x, y)) in got.iter().zip(&want).enumerate() {
        assert!((x - y).abs() <= 1e-5 * scale, "logit {i}: {x} vs {y}");
    }
    let names = |m: &Model<CpuBackend>| -> Vec<(String, Vec<f32>)> {
        adapter_tensors(m)
            .into_iter()
            .map(|t| (t.name, t.data))
            .collect()
    };
    assert_eq!(names(&served), names(&over_f32.valid()));
}

#[test]
fn gguf_paths_resolve_and_other_architectures_are_named() {
    let (_, bytes) = tiny_llama_gguf("llama", true);
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("tiny.gguf");
    std::fs::write(&one, &bytes).unwrap();
    assert_eq!(gguf_path(&one).unwrap(), Some(one.clone()));
    assert_eq!(gguf_path(dir.path()).unwrap(), Some(one.clone()));
    let m: Model<CpuBackend> = crate::load_model(dir.path(), &Default::default()).unwrap();
    assert_eq!(m.config.architecture, Architecture::LlamaForCausalLM);
    std::fs::write(dir.path().join("other.GGUF"), &bytes).unwrap();
    let err = gguf_path(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("several .gguf") && err.contains("tiny.gguf"),
        "{err}"
    );
    // A safetensors checkpoint directory is not taken for a GGUF one.
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    assert_eq!(gguf_path(dir.path()).unwrap(), None);

    let (_, bytes) = tiny_llama_gguf("qwen2", true);
    let (file, _) = open_bytes(&bytes);
    let err = format!(
        "{:#}",
        load_gguf_model::<CpuBackend>(file.path(), &Default::default()).unwrap_err()
    );
    assert!(
        err.contains("architecture `qwen2` is not supported"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// The real file, when fetched

/// SmolLM2-135M-Instruct (Q4_1) as `scripts/fetch-smollm2.sh` fetches it (the test command
/// does): `None`, saying the test is skipped, when it is absent, except under
/// `OPENCLAW_REQUIRE_ASSETS=1` (CI), where a missing file fails the test.
fn smollm2() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
        "{} is absent and OPENCLAW_REQUIRE_ASSETS=1: run scripts/fetch-smollm2.sh",
        path.display()
    );
    eprintln!(
        "SKIPPED: {} is absent (run scripts/fetch-smollm2.sh)",
        path.display()
    );
    None
}

/// SmolLM2-135M-Instruct (Q4_1): its header, metadata and tensor table.
#[test]
fn smollm2_gguf_when_fetched() {
    let Some(path) = smollm2() else { return };
    let mut g = GgufFile::open(&path).unwrap();
    println!(
        "{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at {}",
        path.display(),
        g.version(),
        g.metadata().len(),
        g.tensors().len(),
        g.alignment(),
        g.data_start()
    );
    let arch = g.get_str("general.architecture").unwrap().to_string();
    println!("general.architecture = {arch}");
    for key in [
        "block_count",
        "context_length",
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "attention.head_count_kv",
        "rope.dimension_count",
        "vocab_size",
    ] {
        let k = format!("{arch}.{key}");
        println!("{k} = {}", g.get_u64(&k).unwrap());
    }
    for key in ["rope.freq_base", "attention.layer_norm_rms_epsilon"] {
        let k = format!("{arch}.{key}");
        println!("{k} = {}", g.get_f32(&k).unwrap());
    }
    let tokens = g.get_str_array("tokenizer.ggml.tokens").unwrap();
    let n_merges = g
        .get_array("tokenizer.ggml.merges")
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "tokenizer.ggml.model = {}, pre = {:?}, {} tokens (first {:?}), {} merges, bos {:?}, \
         eos {:?}, chat_template present: {}",
        g.get_str("tokenizer.ggml.model").unwrap(),
        g.get_str("tokenizer.ggml.pre").ok(),
        tokens.len(),
        &tokens[..3],
        n_merges,
        g.get_u32("tokenizer.ggml.bos_token_id").ok(),
        g.get_u32("tokenizer.ggml.eos_token_id").ok(),
        g.get_str("tokenizer.chat_template").is_ok()
    );
    assert_eq!(arch, "llama");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(g.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(g.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(g.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(g.get_f32("llama.rope.freq_base").unwrap(), 100_000.0);
    assert_eq!(g.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(tokens.len(), 49_152);
    assert!(g.get_str("tokenizer.chat_template").is_ok());

    let infos = g.tensors().to_vec();
    for t in infos.iter().take(12) {
        println!("  {} {:?} {}", t.name, t.shape(), t.ggml_type);
    }
    let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let mut max_abs = 0f32;
    for t in &infos {
        let v = g.read_f32(&t.name).unwrap();
        assert_eq!(v.len() as u64, t.n_elements(), "{}", t.name);
        assert!(
            v.iter().all(|x| x.is_finite()),
            "{} has non-finite values",
            t.name
        );
        max_abs = v.iter().fold(max_abs, |m, x| m.max(x.abs()));
        let e = by_type.entry(t.ggml_type.to_string()).or_default();
        e.0 += 1;
        e.1 += t.n_elements();
    }
    let total: u64 = by_type.values().map(|e| e.1).sum();
    println!(
        "dequantised all {} tensors, {total} values, all finite, max |x| = {max_abs}",
        infos.len()
    );
    for (ty, (n, elems)) in &by_type {
        println!("  {ty}: {n} tensors, {elems} values");
    }
}

/// SmolLM2's Q4_1 file served from its blocks gives the logits of the same file dequantised at
/// load (the only difference is the order of the sums), and the same next tokens.
#[test]
fn smollm2_in_blocks_matches_smollm2_dequantised_when_fetched() {
    use crate::weights::GgufWeights;
    let Some(path) = smollm2() else { return };
    let dev = Default::default();
    let f32_model: Model<CpuBackend> =
        super::load_gguf_model_with(&path, &dev, GgufWeights::F32).unwrap();
    let blocks: Model<CpuBackend> =
        super::load_gguf_model_with(&path, &dev, GgufWeights::Blocks).unwrap();
    let kept: usize = blocks
        .projections()
        .map(|p| {
            p.quantised()
                .expect("every projection is quantised in this file")
                .bytes()
        })
        .sum();
    println!("weights kept in blocks: {:.1} MB", kept as f64 / 1e6);
    // "<|im_start|>user\nWhat is 2+2?<|im_end|>" in SmolLM2's vocabulary, near enough.
    let ids = Tensor::<CpuBackend, 2, Int>::from_data(
        [[1, 4093, 198, 1780, 314, 216, 34, 28, 34, 47, 2]],
        &dev,
    );
    let want = to_f32_vec(f32_model.forward(ids.clone()).unwrap());
    let got = to_f32_vec(blocks.forward(ids).unwrap());
    let vocab = 49_152;
    let mut worst = 0f32;
    for (row_w, row_g) in want.chunks(vocab).zip(got.chunks(vocab)) {
        let scale = row_w.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (a, b) in row_w.iter().zip(row_g) {
            worst = worst.max((a - b).abs() / scale);
        }
        let argmax = |r: &[f32]| {
            r.iter()
                .enumerate()
                .fold(
                    (0, f32::MIN),
                    |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) },
                )
                .0
        };
        assert_eq!(argmax(row_w), argmax(row_g), "the next token changed");
    }
    println!("largest logit difference: {worst:e} of the row's largest logit");
    assert!(worst < 1e-4, "logits differ by {worst:e} of their scale");
}

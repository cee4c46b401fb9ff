//! ggml tensor types and their dequantisation to f32.
//!
//! Block layouts follow ggml's `ggml-common.h`; all multi-byte fields are little-endian. Every
//! quantised type stores a row as a run of fixed-size blocks, so a tensor's bytes are
//! `n_elements / block_elements * block_bytes`, and the dequantised values come out in the same
//! order as the elements (ggml's `dims[0]` fastest).

use std::fmt;

use anyhow::{bail, Result};
use half::{bf16, f16};

/// A ggml tensor element type, by its id in GGUF tensor infos.
#[allow(non_camel_case_types)] // ggml's own spelling (Q4_K, IQ2_XXS), which users grep for
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// Blocks of 32: f16 scale + 4-bit quants, value = (q - 8) * d.
    Q4_0,
    /// Blocks of 32: f16 scale and min + 4-bit quants, value = q * d + m.
    Q4_1,
    /// Blocks of 32: f16 scale + 5-bit quants, value = (q - 16) * d.
    Q5_0,
    /// Blocks of 32: f16 scale and min + 5-bit quants, value = q * d + m.
    Q5_1,
    /// Blocks of 32: f16 scale + 32 signed bytes, value = q * d.
    Q8_0,
    /// Blocks of 32: f16 scale and sum + 32 signed bytes (an activation format).
    Q8_1,
    /// K-quant, 2 bits.
    Q2_K,
    /// K-quant, 3 bits.
    Q3_K,
    /// K-quant super-blocks of 256: 8 sub-blocks with 6-bit scales and mins, 4-bit quants.
    Q4_K,
    /// K-quant super-blocks of 256: as Q4_K with a fifth bit per quant.
    Q5_K,
    /// K-quant super-blocks of 256: 16 sub-blocks with 8-bit scales, 6-bit quants.
    Q6_K,
    /// K-quant, 8 bits (an activation format).
    Q8_K,
    /// i-quant.
    IQ2_XXS,
    /// i-quant.
    IQ2_XS,
    /// i-quant.
    IQ3_XXS,
    /// i-quant.
    IQ1_S,
    /// i-quant.
    IQ4_NL,
    /// i-quant.
    IQ3_S,
    /// i-quant.
    IQ2_S,
    /// i-quant.
    IQ4_XS,
    /// 8-bit integer.
    I8,
    /// 16-bit integer.
    I16,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 64-bit float.
    F64,
    /// i-quant.
    IQ1_M,
    /// bfloat16.
    BF16,
    /// Ternary quant.
    TQ1_0,
    /// Ternary quant.
    TQ2_0,
    /// Microscaling FP4.
    MXFP4,
    /// A type id this reader does not know.
    Unknown(u32),
}

/// Types [`dequantize`] converts to f32, in the order error messages list them.
pub const SUPPORTED: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::F64,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// Elements in a K-quant super-block.
const QK_K: usize = 256;

impl GgmlType {
    /// The type with ggml id `id` (`Unknown` when this reader does not know it).
    pub fn from_id(id: u32) -> Self {
        use GgmlType::*;
        match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            16 => IQ2_XXS,
            17 => IQ2_XS,
            18 => IQ3_XXS,
            19 => IQ1_S,
            20 => IQ4_NL,
            21 => IQ3_S,
            22 => IQ2_S,
            23 => IQ4_XS,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            29 => IQ1_M,
            30 => BF16,
            34 => TQ1_0,
            35 => TQ2_0,
            39 => MXFP4,
            other => Unknown(other),
        }
    }

    /// The ggml id of this type.
    pub fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            IQ2_XXS => 16,
            IQ2_XS => 17,
            IQ3_XXS => 18,
            IQ1_S => 19,
            IQ4_NL => 20,
            IQ3_S => 21,
            IQ2_S => 22,
            IQ4_XS => 23,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            IQ1_M => 29,
            BF16 => 30,
            TQ1_0 => 34,
            TQ2_0 => 35,
            MXFP4 => 39,
            Unknown(id) => id,
        }
    }

    /// `(elements per block, bytes per block)`; `None` for an unknown type. Known even for types
    /// that are not dequantised, so the reader can bounds-check every tensor in a file.
    pub fn block_layout(self) -> Option<(usize, usize)> {
        use GgmlType::*;
        Some(match self {
            F32 | I32 => (1, 4),
            F16 | BF16 | I16 => (1, 2),
            F64 | I64 => (1, 8),
            I8 => (1, 1),
            Q4_0 | IQ4_NL => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            MXFP4 => (32, 17),
            Q2_K => (QK_K, 84),
            Q3_K => (QK_K, 110),
            Q4_K => (QK_K, 144),
            Q5_K => (QK_K, 176),
            Q6_K => (QK_K, 210),
            Q8_K => (QK_K, 292),
            IQ2_XXS => (QK_K, 66),
            IQ2_XS => (QK_K, 74),
            IQ3_XXS => (QK_K, 98),
            IQ1_S => (QK_K, 50),
            IQ3_S => (QK_K, 110),
            IQ2_S => (QK_K, 82),
            IQ4_XS => (QK_K, 136),
            IQ1_M => (QK_K, 56),
            TQ1_0 => (QK_K, 54),
            TQ2_0 => (QK_K, 66),
            Unknown(_) => return None,
        })
    }

    /// Whether [`dequantize`] handles this type.
    pub fn is_supported(self) -> bool {
        SUPPORTED.contains(&self)
    }

    /// Bytes taken by `n_elements` elements; `None` for an unknown type, a count that is not a
    /// whole number of blocks, or an overflow.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (block, bytes) = self.block_layout()?;
        let (block, bytes) = (block as u64, bytes as u64);
        if !n_elements.is_multiple_of(block) {
            return None;
        }
        (n_elements / block).checked_mul(bytes)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgmlType::Unknown(id) => write!(f, "unknown type id {id}"),
            // The Debug names are ggml's names.
            other => write!(f, "{other:?}"),
        }
    }
}

/// The supported types as a comma-separated list, for error messages.
pub fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Converts `data`, holding `n_elements` elements of type `ty`, to f32 in element order.
///
/// Errors if the type is not supported, `n_elements` is not a whole number of blocks, or `data`
/// is not exactly the size those elements take.
pub fn dequantize(ty: GgmlType, data: &[u8], n_elements: usize) -> Result<Vec<f32>> {
    if !ty.is_supported() {
        bail!(
            "type {ty} is not supported (supported: {})",
            supported_list()
        );
    }
    let Some(want) = ty.bytes_for(n_elements as u64) else {
        let (block, _) = ty.block_layout().expect("supported types have a layout");
        bail!("{n_elements} elements of {ty} are not a whole number of {block}-element blocks");
    };
    if data.len() as u64 != want {
        bail!(
            "{n_elements} elements of {ty} take {want} bytes, got {}",
            data.len()
        );
    }
    let mut out = vec![0f32; n_elements];
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                *o = bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
            }
        }
        GgmlType::F64 => {
            for (o, c) in out.iter_mut().zip(data.chunks_exact(8)) {
                *o = f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32;
            }
        }
        GgmlType::Q8_0 => blocks(data, &mut out, 34, 32, block_q8_0),
        GgmlType::Q4_0 => blocks(data, &mut out, 18, 32, block_q4_0),
        GgmlType::Q4_1 => blocks(data, &mut out, 20, 32, block_q4_1),
        GgmlType::Q5_0 => blocks(data, &mut out, 22, 32, block_q5_0),
        GgmlType::Q5_1 => blocks(data, &mut out, 24, 32, block_q5_1),
        GgmlType::Q4_K => blocks(data, &mut out, 144, QK_K, block_q4_k),
        GgmlType::Q5_K => blocks(data, &mut out, 176, QK_K, block_q5_k),
        GgmlType::Q6_K => blocks(data, &mut out, 210, QK_K, block_q6_k),
        _ => unreachable!("{ty} is in SUPPORTED but has no decoder"),
    }
    Ok(out)
}

/// Decodes one block (its bytes) into its values.
pub(crate) type BlockDecoder = fn(&[u8], &mut [f32]);

/// The decoder of one block of a quantised type (block bytes -> `elements` f32 values), for
/// kernels that dequantise block by block; `None` for unquantised or unsupported types.
pub(crate) fn block_decoder(ty: GgmlType) -> Option<BlockDecoder> {
    Some(match ty {
        GgmlType::Q8_0 => block_q8_0,
        GgmlType::Q4_0 => block_q4_0,
        GgmlType::Q4_1 => block_q4_1,
        GgmlType::Q5_0 => block_q5_0,
        GgmlType::Q5_1 => block_q5_1,
        GgmlType::Q4_K => block_q4_k,
        GgmlType::Q5_K => block_q5_k,
        GgmlType::Q6_K => block_q6_k,
        _ => return None,
    })
}

/// Applies `f` to each (block bytes, block output) pair.
fn blocks(data: &[u8], out: &mut [f32], bytes: usize, elems: usize, f: fn(&[u8], &mut [f32])) {
    for (b, o) in data.chunks_exact(bytes).zip(out.chunks_exact_mut(elems)) {
        f(b, o);
    }
}

/// The f16 at `b[at..at + 2]` as f32.
fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Q8_0: d (f16), qs[32] (i8).
fn block_q8_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in out.iter_mut().zip(&b[2..34]) {
        *o = q as i8 as f32 * d;
    }
}

/// Q4_0: d (f16), qs[16]; byte j holds element j in its low nibble and element j + 16 in its
/// high nibble (halves, not interleaved pairs).
fn block_q4_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let (lo, hi) = out.split_at_mut(16);
    for (j, &q) in b[2..18].iter().enumerate() {
        lo[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
        hi[j] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

/// Q4_1: d (f16), m (f16), qs[16], nibbles as in Q4_0.
fn block_q4_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let (lo, hi) = out.split_at_mut(16);
    for (j, &q) in b[4..20].iter().enumerate() {
        lo[j] = (q & 0x0F) as f32 * d + m;
        hi[j] = (q >> 4) as f32 * d + m;
    }
}

/// Q5_0: d (f16), qh (u32: bit i is the fifth bit of element i), qs[16] as in Q4_0.
fn block_q5_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let (lo, hi) = out.split_at_mut(16);
    for (j, &q) in b[6..22].iter().enumerate() {
        let h0 = ((qh >> j) & 1) << 4;
        let h1 = ((qh >> (j + 16)) & 1) << 4;
        lo[j] = (((q & 0x0F) as u32 | h0) as i32 - 16) as f32 * d;
        hi[j] = (((q >> 4) as u32 | h1) as i32 - 16) as f32 * d;
    }
}

/// Q5_1: d (f16), m (f16), qh (u32), qs[16], bits as in Q5_0.
fn block_q5_1(b: &[u8], out: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let (lo, hi) = out.split_at_mut(16);
    for (j, &q) in b[8..24].iter().enumerate() {
        let h0 = ((qh >> j) & 1) << 4;
        let h1 = ((qh >> (j + 16)) & 1) << 4;
        lo[j] = ((q & 0x0F) as u32 | h0) as f32 * d + m;
        hi[j] = ((q >> 4) as u32 | h1) as f32 * d + m;
    }
}

/// The 6-bit (scale, min) of sub-block `j` (0..8) from the 12 packed bytes of Q4_K/Q5_K.
///
/// Bytes 0..4 hold scales 0..4 in their low 6 bits, bytes 4..8 mins 0..4 likewise; sub-blocks
/// 4..8 keep their low 4 bits in bytes 8..12 (scale low nibble, min high nibble) and their high
/// 2 bits in the top bits of bytes 0..4 (scales) and 4..8 (mins).
pub fn k_scale_min(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        let sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        let mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        (sc, mn)
    }
}

/// Q4_K: d (f16), dmin (f16), scales[12], qs[128]. Each 64 elements share 32 bytes of qs: the
/// first 32 elements are the low nibbles (sub-block 2i), the next 32 the high nibbles (2i + 1);
/// value = d * scale * q - dmin * min.
fn block_q4_k(b: &[u8], out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (i, (chunk, q)) in out
        .chunks_exact_mut(64)
        .zip(qs.chunks_exact(32))
        .enumerate()
    {
        let (sc0, m0) = k_scale_min(2 * i, scales);
        let (sc1, m1) = k_scale_min(2 * i + 1, scales);
        let (d0, m0) = (d * sc0 as f32, dmin * m0 as f32);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (lo, hi) = chunk.split_at_mut(32);
        for (l, &byte) in q.iter().enumerate() {
            lo[l] = d0 * (byte & 0x0F) as f32 - m0;
            hi[l] = d1 * (byte >> 4) as f32 - m1;
        }
    }
}

/// Q5_K: d, dmin (f16), scales[12], qh[32], qs[128]. As Q4_K, plus a fifth bit from qh: for the
/// 64-element chunk i, bit 2i of qh[l] belongs to element l of its low half, bit 2i + 1 to
/// element l of its high half.
fn block_q5_k(b: &[u8], out: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (i, (chunk, q)) in out
        .chunks_exact_mut(64)
        .zip(qs.chunks_exact(32))
        .enumerate()
    {
        let (sc0, m0) = k_scale_min(2 * i, scales);
        let (sc1, m1) = k_scale_min(2 * i + 1, scales);
        let (d0, m0) = (d * sc0 as f32, dmin * m0 as f32);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (lo, hi) = chunk.split_at_mut(32);
        for (l, &byte) in q.iter().enumerate() {
            let h0 = ((qh[l] >> (2 * i)) & 1) << 4;
            let h1 = ((qh[l] >> (2 * i + 1)) & 1) << 4;
            lo[l] = d0 * ((byte & 0x0F) | h0) as f32 - m0;
            hi[l] = d1 * ((byte >> 4) | h1) as f32 - m1;
        }
    }
}

/// Q6_K: ql[128], qh[64], scales[16] (i8), d (f16). Each 128 elements use 64 bytes of ql, 32 of
/// qh and 8 scales: element l + 32k (k in 0..4, l in 0..32) takes its low 4 bits from
/// ql[l + 32 * (k % 2)] (low nibble for k < 2, high for k >= 2) and its high 2 bits from bits
/// 2k..2k+2 of qh[l]; its scale is scales[l / 16 + 2k]. value = d * scale * (q - 32).
fn block_q6_k(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 208);
    for half_idx in 0..2 {
        let ql = &b[64 * half_idx..64 * half_idx + 64];
        let qh = &b[128 + 32 * half_idx..128 + 32 * half_idx + 32];
        let sc = &b[192 + 8 * half_idx..192 + 8 * half_idx + 8];
        let y = &mut out[128 * half_idx..128 * half_idx + 128];
        for l in 0..32 {
            let is = l / 16;
            let h = qh[l];
            let q = [
                (ql[l] & 0x0F) | ((h & 3) << 4),
                (ql[l + 32] & 0x0F) | (((h >> 2) & 3) << 4),
                (ql[l] >> 4) | (((h >> 4) & 3) << 4),
                (ql[l + 32] >> 4) | (((h >> 6) & 3) << 4),
            ];
            for (k, &qk) in q.iter().enumerate() {
                let scale = sc[is + 2 * k] as i8 as f32;
                y[l + 32 * k] = d * scale * (qk as i32 - 32) as f32;
            }
        }
    }
}

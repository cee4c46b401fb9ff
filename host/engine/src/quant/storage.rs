//! A weight matrix in its quantised blocks: the formats it keeps (repacked Q4 and Q8, or the
//! file's bytes), and decoding them to f32 a block or a row at a time.

use std::fmt;

use anyhow::{bail, Result};
use half::f16;
use rayon::prelude::*;

use super::ggml::{block_decoder, BlockDecoder, GgmlType};

/// A weight matrix `[rows, cols]` (Hugging Face's `[d_out, d_in]`, GGUF's row order) kept in
/// its quantised blocks.
#[derive(Clone)]
pub struct QuantMatrix {
    pub(super) ty: GgmlType,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) blocks: Blocks,
}

/// How a [`QuantMatrix`] keeps its values.
#[derive(Clone)]
pub(super) enum Blocks {
    /// Q4_0 and Q4_1: 16 bytes of nibbles per 32 values (byte `j` holds value `j` low and
    /// `j + 16` high); value = `q * scale + min` (Q4_0's `min` is `-8 * scale`).
    Q4 {
        quants: Vec<u8>,
        scales: Vec<f32>,
        mins: Vec<f32>,
    },
    /// Q8_0: 32 signed bytes per 32 values; value = `q * scale`.
    Q8 { quants: Vec<i8>, scales: Vec<f32> },
    /// Any other quantised type: the file's blocks, decoded one at a time.
    Raw {
        data: Vec<u8>,
        block: usize,
        block_bytes: usize,
        decode: BlockDecoder,
    },
}

impl fmt::Debug for QuantMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuantMatrix({} [{}, {}])", self.ty, self.rows, self.cols)
    }
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

impl QuantMatrix {
    /// Whether weights of type `ty` can stay in their blocks (a quantised type the loader decodes).
    pub fn keeps(ty: GgmlType) -> bool {
        block_decoder(ty).is_some()
    }

    /// Wraps a row-major `[rows, cols]` tensor of type `ty` as stored in a GGUF file.
    pub fn from_gguf(ty: GgmlType, rows: usize, cols: usize, data: &[u8]) -> Result<Self> {
        let Some(decode) = block_decoder(ty) else {
            bail!("{ty} weights cannot be kept quantised (not a quantised type this loader reads)");
        };
        let (block, block_bytes) = ty.block_layout().expect("a decodable type has a layout");
        if cols == 0 || rows == 0 {
            bail!("a {ty} matrix of [{rows}, {cols}] has no values");
        }
        if !cols.is_multiple_of(block) {
            bail!("a {ty} matrix needs rows of whole {block}-value blocks, got {cols} columns");
        }
        let n_blocks = rows * cols / block;
        if data.len() != n_blocks * block_bytes {
            bail!(
                "[{rows}, {cols}] of {ty} takes {} bytes, got {}",
                n_blocks * block_bytes,
                data.len()
            );
        }
        let chunks = data.chunks_exact(block_bytes);
        let blocks = match ty {
            GgmlType::Q4_0 | GgmlType::Q4_1 => {
                let mut quants = Vec::with_capacity(n_blocks * 16);
                let mut scales = Vec::with_capacity(n_blocks);
                let mut mins = Vec::with_capacity(n_blocks);
                for b in chunks {
                    let d = f16_at(b, 0);
                    let (m, qs) = if ty == GgmlType::Q4_0 {
                        (-8.0 * d, &b[2..18])
                    } else {
                        (f16_at(b, 2), &b[4..20])
                    };
                    scales.push(d);
                    mins.push(m);
                    quants.extend_from_slice(qs);
                }
                Blocks::Q4 {
                    quants,
                    scales,
                    mins,
                }
            }
            GgmlType::Q8_0 => {
                let mut quants = Vec::with_capacity(n_blocks * 32);
                let mut scales = Vec::with_capacity(n_blocks);
                for b in chunks {
                    scales.push(f16_at(b, 0));
                    quants.extend(b[2..34].iter().map(|&q| q as i8));
                }
                Blocks::Q8 { quants, scales }
            }
            _ => Blocks::Raw {
                data: data.to_vec(),
                block,
                block_bytes,
                decode,
            },
        };
        Ok(QuantMatrix {
            ty,
            rows,
            cols,
            blocks,
        })
    }

    /// The block type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// `[rows, cols]`.
    pub fn dims(&self) -> [usize; 2] {
        [self.rows, self.cols]
    }

    /// Bytes the matrix takes in memory.
    pub fn bytes(&self) -> usize {
        match &self.blocks {
            Blocks::Q4 {
                quants,
                scales,
                mins,
            } => quants.len() + 4 * (scales.len() + mins.len()),
            Blocks::Q8 { quants, scales } => quants.len() + 4 * scales.len(),
            Blocks::Raw { data, .. } => data.len(),
        }
    }

    /// The same matrix with its rows reordered: row `i` of the result is row `order[i]`.
    pub fn permute_rows(&self, order: &[usize]) -> Self {
        assert_eq!(order.len(), self.rows, "one source row per row");
        let gather = |len: usize| -> Vec<std::ops::Range<usize>> {
            order.iter().map(|&r| r * len..(r + 1) * len).collect()
        };
        let blocks_per_row = self.cols / self.block_len();
        let blocks = match &self.blocks {
            Blocks::Q4 {
                quants,
                scales,
                mins,
            } => Blocks::Q4 {
                quants: gather(16 * blocks_per_row)
                    .into_iter()
                    .flat_map(|r| quants[r].to_vec())
                    .collect(),
                scales: gather(blocks_per_row)
                    .into_iter()
                    .flat_map(|r| scales[r].to_vec())
                    .collect(),
                mins: gather(blocks_per_row)
                    .into_iter()
                    .flat_map(|r| mins[r].to_vec())
                    .collect(),
            },
            Blocks::Q8 { quants, scales } => Blocks::Q8 {
                quants: gather(32 * blocks_per_row)
                    .into_iter()
                    .flat_map(|r| quants[r].to_vec())
                    .collect(),
                scales: gather(blocks_per_row)
                    .into_iter()
                    .flat_map(|r| scales[r].to_vec())
                    .collect(),
            },
            Blocks::Raw {
                data,
                block,
                block_bytes,
                decode,
            } => Blocks::Raw {
                data: gather(block_bytes * blocks_per_row)
                    .into_iter()
                    .flat_map(|r| data[r].to_vec())
                    .collect(),
                block: *block,
                block_bytes: *block_bytes,
                decode: *decode,
            },
        };
        QuantMatrix { blocks, ..*self }
    }

    fn block_len(&self) -> usize {
        match &self.blocks {
            Blocks::Q4 { .. } | Blocks::Q8 { .. } => 32,
            Blocks::Raw { block, .. } => *block,
        }
    }

    /// Rows `ids` as f32, one after another (an embedding lookup).
    pub fn rows_f32(&self, ids: &[usize]) -> Vec<f32> {
        let mut out = vec![0f32; ids.len() * self.cols];
        for (o, &r) in out.chunks_exact_mut(self.cols).zip(ids) {
            assert!(r < self.rows, "row {r} of {}", self.rows);
            self.decode_row(r, o);
        }
        out
    }

    /// The whole matrix as row-major f32 `[rows, cols]`.
    pub fn dequantise(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows * self.cols];
        out.par_chunks_mut(self.cols)
            .enumerate()
            .for_each(|(r, o)| self.decode_row(r, o));
        out
    }

    /// The transpose of the matrix as row-major f32 `[cols, rows]` (burn's linear layout).
    pub fn dequantise_transposed(&self) -> Vec<f32> {
        let w = self.dequantise();
        crate::kernels::transpose(&w, self.rows, self.cols)
    }

    /// Row `r` as f32 into `out` (`cols` values).
    pub(super) fn decode_row(&self, r: usize, out: &mut [f32]) {
        let nb = self.cols / self.block_len();
        match &self.blocks {
            Blocks::Q4 {
                quants,
                scales,
                mins,
            } => {
                let dec = Q4Decoder {
                    quants,
                    scales,
                    mins,
                };
                for (b, o) in out.chunks_exact_mut(32).enumerate() {
                    dec.decode(r * nb + b, o);
                }
            }
            Blocks::Q8 { quants, scales } => {
                let dec = Q8Decoder { quants, scales };
                for (b, o) in out.chunks_exact_mut(32).enumerate() {
                    dec.decode(r * nb + b, o);
                }
            }
            Blocks::Raw {
                data,
                block,
                block_bytes,
                decode,
            } => {
                for (b, o) in out.chunks_exact_mut(*block).enumerate() {
                    let at = (r * nb + b) * block_bytes;
                    decode(&data[at..at + block_bytes], o);
                }
            }
        }
    }
}

/// One block type's decoder: block `index` (row-major over the matrix) into `N` f32 values.
pub(super) trait Decode: Sync {
    /// Values per block.
    const N: usize;
    /// Block `index` into `out[..N]`.
    fn decode(&self, index: usize, out: &mut [f32]);
}

/// Reads [`Blocks::Q4`].
pub(super) struct Q4Decoder<'a> {
    pub(super) quants: &'a [u8],
    pub(super) scales: &'a [f32],
    pub(super) mins: &'a [f32],
}

impl Decode for Q4Decoder<'_> {
    const N: usize = 32;
    #[inline(always)]
    fn decode(&self, index: usize, out: &mut [f32]) {
        let q: &[u8; 16] = self.quants[index * 16..index * 16 + 16]
            .try_into()
            .expect("16 bytes");
        let (d, m) = (self.scales[index], self.mins[index]);
        let (lo, hi) = out[..32].split_at_mut(16);
        for j in 0..16 {
            lo[j] = (q[j] & 0x0F) as f32 * d + m;
            hi[j] = (q[j] >> 4) as f32 * d + m;
        }
    }
}

/// Reads [`Blocks::Q8`].
pub(super) struct Q8Decoder<'a> {
    pub(super) quants: &'a [i8],
    pub(super) scales: &'a [f32],
}

impl Decode for Q8Decoder<'_> {
    const N: usize = 32;
    #[inline(always)]
    fn decode(&self, index: usize, out: &mut [f32]) {
        let q: &[i8; 32] = self.quants[index * 32..index * 32 + 32]
            .try_into()
            .expect("32 bytes");
        let d = self.scales[index];
        for (o, &v) in out[..32].iter_mut().zip(q) {
            *o = v as f32 * d;
        }
    }
}

/// Reads [`Blocks::Raw`] through the loader's decoder.
pub(super) struct RawDecoder<'a> {
    pub(super) data: &'a [u8],
    pub(super) block_bytes: usize,
    pub(super) decode: BlockDecoder,
}

/// [`RawDecoder`] with its block size `N` known at compile time (32 or 256).
pub(super) struct Raw<'a, const N: usize>(pub(super) RawDecoder<'a>);

impl<const BLOCK: usize> Decode for Raw<'_, BLOCK> {
    const N: usize = BLOCK;
    #[inline(always)]
    fn decode(&self, index: usize, out: &mut [f32]) {
        let r = &self.0;
        let at = index * r.block_bytes;
        (r.decode)(&r.data[at..at + r.block_bytes], &mut out[..BLOCK]);
    }
}

//! Matmuls over weights kept in GGUF's quantised blocks, for serving and judging.
//!
//! A decode step reads every weight once; with the weights dequantised to f32 that is about
//! 540 MB per step for SmolLM2-135M, against 112 MB in its 4-bit blocks as kept here (85 MB in
//! the file: scales and minimums are widened to f32 at load). Here a weight matrix stays in its
//! blocks and each block is widened to f32 in registers, once per pass, for up to eight rows of
//! activations at a time ([`QuantMatrix::matmul`], decode steps); prefill and scoring widen a
//! column panel at a time into a small buffer for the register-blocked f32 kernel
//! ([`QuantMatrix::matmul_many`]).
//!
//! Written by hand because no Rust crate computes with ggml's block formats (candle has them on
//! its own tensor type only). Q4_0, Q4_1 and Q8_0 are repacked at load into nibbles or bytes plus
//! f32 scales, so the kernel never converts an f16; every other type the GGUF loader reads
//! (Q5_0, Q5_1 and the K-quants) keeps the file's bytes and is decoded a block at a time by the
//! loader's own decoders. The kernels are compiled for AVX-512 and for AVX2 + FMA and picked at
//! run time (the binary targets the baseline x86-64; [`simd`]).
//!
//! Each output is summed over its row's blocks in the same order whatever the number of rows in
//! the call, so a sequence's logits do not depend on how many others share its decode step.
//! The order belongs to the kernel and the matrix: sixteen partial sums per output (the portable
//! and AVX-512 kernels, and AVX2 on Q8 and on rows wider than 768 values), or eight (AVX2 on
//! narrower Q4 rows, where sixteen registers cannot hold two sums for each of eight rows). The
//! decode kernels prefetch the next weight rows' blocks (a step streams every weight from
//! memory) and add up the partial-sum vectors of a pass together, sixteen at a time for a full
//! AVX-512 pass of eight rows and eight at a time on AVX2 (`x86::sum16_each`,
//! `x86::sum8_each`: the same additions as one at a time).

use std::fmt;

use anyhow::{bail, Result};
use burn::prelude::*;
use half::f16;
use rayon::prelude::*;

use super::flex::{as_flex, from_vec};
use crate::weights::gguf::dequant::{block_decoder, BlockDecoder, GgmlType};

/// Rows of activations one pass over the weights serves.
const PASS_ROWS: usize = 8;
/// The widest rows (in values) for which the AVX2 kernels take passes of eight rows: Q8 in
/// halves (`x86::halves_avx2`), Q4 with eight-lane sums (`x86::lanes8_avx2`). The eight activation
/// rows (24 KiB) stay in the 32 KiB level-1 cache over a weight row. Wider rows take passes
/// of four with sixteen-lane sums. Measured on SmolLM2's batch-8 step (`decode_kernels 8`,
/// AVX2): its Q8_0 head (576 wide) 3.23-3.40 ms in passes of four, 2.88-3.03 in halves (four
/// alternations); its 1,536-wide Q4_1 projection 3.0 ms in passes of four, 8.5 in halves and
/// 3.3-3.6 in passes of eight with eight-lane sums.
const EIGHT_ROWS_MAX_COLS: usize = 768;
/// Most activation rows the block kernel takes (a decode step's batch).
pub const MAX_KERNEL_ROWS: usize = 64;
/// Output columns (weight rows) one task of the many-row path covers.
const PANEL_TASK_COLUMNS: usize = 64;
/// Activation rows one task of the many-row path covers: each task dequantises its columns
/// once, so the conversion is shared by up to this many rows.
const PANEL_TASK_ROWS: usize = 512;

/// A weight matrix `[rows, cols]` (Hugging Face's `[d_out, d_in]`, GGUF's row order) kept in
/// its quantised blocks.
#[derive(Clone)]
pub struct QuantMatrix {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    blocks: Blocks,
}

#[derive(Clone)]
enum Blocks {
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
        super::linear::transpose(&w, self.rows, self.cols)
    }

    fn decode_row(&self, r: usize, out: &mut [f32]) {
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

    /// `y [m, rows] = x [m, cols] · selfᵀ`, row-major, on the rayon pool.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_on(simd(), x, m)
    }

    /// [`Self::matmul`] with the kernels of `isa` (which the CPU must have).
    fn matmul_on(&self, isa: Simd, x: &[f32], m: usize) -> Vec<f32> {
        let [y] = Self::group_on(isa, [self], x, m);
        y
    }

    /// `y_i [m, rows_i] = x [m, cols] · W_iᵀ` for matrices of one width that read the same
    /// `x` (a layer's q, k and v; gate and up), as one parallel region: each task is a range of
    /// one matrix's rows. A decode step pays for every hand-off to the pool and for the
    /// thread left waiting at each region's end; one region for the three attention
    /// projections and one for the MLP's two halve those. Each output element comes from the
    /// same kernel call as in [`Self::matmul`], so the bits are the same.
    pub fn matmul_group<const N: usize>(mats: [&Self; N], x: &[f32], m: usize) -> [Vec<f32>; N] {
        Self::group_on(simd(), mats, x, m)
    }

    /// [`Self::matmul_group`] with the kernels of `isa` (which the CPU must have).
    fn group_on<const N: usize>(isa: Simd, mats: [&Self; N], x: &[f32], m: usize) -> [Vec<f32>; N] {
        // Every row count takes `isa`'s kernels, so a row's result does not depend on the rows
        // beside it (the AVX2 kernel sums narrow Q4 rows in another order than the AVX-512
        // one). One or two rows used to take the AVX2 kernels, whose eight-lane conversions
        // widened blocks faster while the step waited on memory; with the weights prefetched
        // the AVX-512 ones are ahead there too (SmolLM2 at batch 1 on an AMD EPYC, 162-171
        // against 153-160 tokens/s).
        let k = mats.first().map_or(0, |q| q.cols);
        assert!(
            mats.iter().all(|q| q.cols == k),
            "the matrices share a width"
        );
        assert_eq!(x.len(), m * k, "x is [m, cols]");
        // Output rows per rayon task, per matrix: enough tasks to balance, few enough to stay
        // cheap. `first[i]` is matrix `i`'s first task.
        let threads = rayon::current_num_threads();
        let task: [usize; N] =
            std::array::from_fn(|i| (mats[i].rows / (8 * threads)).clamp(16, 256));
        let mut first = [0usize; N];
        let mut tasks = 0;
        for i in 0..N {
            first[i] = tasks;
            tasks += if m == 0 {
                0
            } else {
                mats[i].rows.div_ceil(task[i])
            };
        }
        let mut ys: [Vec<f32>; N] = std::array::from_fn(|i| Vec::with_capacity(m * mats[i].rows));
        let outs: [SharedOut; N] = std::array::from_fn(|i| SharedOut(ys[i].as_mut_ptr()));
        (0..tasks).into_par_iter().for_each(|t| {
            let i = first.partition_point(|&f| f <= t) - 1;
            let (q, n) = (mats[i], mats[i].rows);
            let j0 = (t - first[i]) * task[i];
            // The kernels write their results straight into the task's columns of `y`.
            let mut part = Part::new(outs[i], [m, n], j0, task[i].min(n - j0));
            q.task_on(isa, x, k, &mut part);
        });
        for (y, q) in ys.iter_mut().zip(mats) {
            // SAFETY: when `m > 0` the tasks above wrote every one of the `m * rows` elements
            // (each kernel writes every (activation row, task row) of its part); else there
            // are none.
            unsafe { y.set_len(m * q.rows) };
        }
        ys
    }

    /// One task of [`Self::group_on`]: the weight rows of `part` (from its `j0` on) into it.
    fn task_on(&self, isa: Simd, x: &[f32], k: usize, part: &mut Part) {
        let (m, j0) = (part.m, part.j0);
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
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `simd` checked the CPU's features.
                    Simd::Avx512 => unsafe { x86::q4_avx512(&dec, x, m, k, j0, part) },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: as above.
                    Simd::Avx2 => unsafe { x86::q4_avx2(&dec, x, m, k, j0, part) },
                    _ => task_generic(&dec, x, m, k, j0, part),
                }
            }
            Blocks::Q8 { quants, scales } => {
                let dec = Q8Decoder { quants, scales };
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `simd` checked the CPU's features.
                    Simd::Avx512 => unsafe { x86::q8_avx512(&dec, x, m, k, j0, part) },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: as above.
                    Simd::Avx2 => unsafe { x86::q8_avx2(&dec, x, m, k, j0, part) },
                    _ => task_generic(&dec, x, m, k, j0, part),
                }
            }
            Blocks::Raw {
                data,
                block,
                block_bytes,
                decode,
            } => {
                let raw = RawDecoder {
                    data,
                    block_bytes: *block_bytes,
                    decode: *decode,
                };
                if *block == 32 {
                    task_generic(&Raw::<32>(raw), x, m, k, j0, part)
                } else {
                    task_generic(&Raw::<256>(raw), x, m, k, j0, part)
                }
            }
        }
    }

    /// `y [m, rows] = x [m, cols] · selfᵀ` for many rows (prefill, scoring): tasks of up to
    /// [`PANEL_TASK_ROWS`] rows and [`PANEL_TASK_COLUMNS`] columns, each dequantising its
    /// columns a panel at a time into a small f32 buffer for the register-blocked kernel of
    /// [`super::simd_kernels`] (the one the f32 prefill uses). A row's result does not depend on
    /// the rows beside it.
    pub fn matmul_many(&self, x: &[f32], m: usize) -> Vec<f32> {
        let (n, k) = (self.rows, self.cols);
        assert_eq!(x.len(), m * k, "x is [m, cols]");
        let row_tasks = m.div_ceil(PANEL_TASK_ROWS);
        let col_tasks = n.div_ceil(PANEL_TASK_COLUMNS);
        let parts: Vec<(usize, usize, Vec<f32>)> = (0..row_tasks * col_tasks)
            .into_par_iter()
            .map(|t| {
                let (rt, ct) = (t / col_tasks, t % col_tasks);
                let rows = rt * PANEL_TASK_ROWS..((rt + 1) * PANEL_TASK_ROWS).min(m);
                let columns = ct * PANEL_TASK_COLUMNS..((ct + 1) * PANEL_TASK_COLUMNS).min(n);
                let mut y = vec![0f32; rows.len() * columns.len()];
                pulp::Arch::new().dispatch(PanelTask {
                    q: self,
                    x: &x[rows.start * k..rows.end * k],
                    columns: columns.clone(),
                    y: &mut y,
                });
                (rows.start, columns.start, y)
            })
            .collect();
        let mut y = vec![0f32; m * n];
        for (r0, c0, part) in parts {
            let width = PANEL_TASK_COLUMNS.min(n - c0);
            for (i, src) in part.chunks_exact(width).enumerate() {
                y[(r0 + i) * n + c0..(r0 + i) * n + c0 + width].copy_from_slice(src);
            }
        }
        y
    }

    /// `x [m, cols]` times the transpose on the CPU backend: inside a decode step
    /// ([`super::small_matmul::decode_scope`]) the block kernel for up to
    /// [`MAX_KERNEL_ROWS`] rows, otherwise (prefill, scoring) [`Self::matmul_many`]; other
    /// backends (autodiff, CUDA) take the general matmul on a dequantised copy.
    pub fn forward<B: Backend>(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [m, k] = x.dims();
        assert_eq!(
            k, self.cols,
            "input width {k} for a [{}, {k}] matrix",
            self.rows
        );
        let decode = m <= MAX_KERNEL_ROWS && super::small_matmul::in_decode();
        let fast = (m > 0)
            .then(|| as_flex::<B, 2>(x.clone()))
            .flatten()
            .and_then(|f| {
                let xs = f.as_slice::<f32>()?;
                let y = if decode {
                    self.matmul(xs, m)
                } else {
                    self.matmul_many(xs, m)
                };
                from_vec::<B, 2>(y, [m, self.rows])
            });
        if let Some(y) = fast {
            return y;
        }
        let w = self.decoded(&x.device());
        x.matmul(w)
    }

    /// [`Self::forward`] of matrices that read the same `x`, in one parallel region
    /// ([`Self::matmul_group`]), inside a decode step on the CPU backend; `None` elsewhere
    /// (the caller takes each matrix's [`Self::forward`]).
    pub fn forward_group<B: Backend, const N: usize>(
        mats: [&Self; N],
        x: &Tensor<B, 2>,
    ) -> Option<[Tensor<B, 2>; N]> {
        let [m, k] = x.dims();
        let decode = m > 0 && m <= MAX_KERNEL_ROWS && super::small_matmul::in_decode();
        if !decode || mats.iter().any(|q| q.cols != k) {
            return None;
        }
        let f = as_flex::<B, 2>(x.clone())?;
        let ys = Self::matmul_group(mats, f.as_slice::<f32>()?, m);
        let out: Vec<Tensor<B, 2>> = ys
            .into_iter()
            .zip(mats)
            .map(|(y, q)| from_vec::<B, 2>(y, [m, q.rows]))
            .collect::<Option<_>>()?;
        out.try_into().ok()
    }

    /// The matrix decoded to f32 on `device`, as the `[cols, rows]` transpose a matmul takes
    /// (the general path of backends without the block kernels). Row-major as decoded, used
    /// through a transposed view: a transposing copy of a whole weight each forward pass
    /// (training over blocks) costs more than the matmul's strided read.
    pub fn decoded<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2> {
        Tensor::<B, 2>::from_data(
            TensorData::new(self.dequantise(), [self.rows, self.cols]),
            device,
        )
        .transpose()
    }
}

/// A result buffer of [`QuantMatrix::group_on`], written by its tasks in disjoint columns.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: the tasks that share it write disjoint elements, and the buffer outlives them.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// Element `i`.
    fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}

/// One task's share of a [`QuantMatrix::group_on`] `[m, n]` result: weight rows (result
/// columns) `j0..j0 + rows`, which no other task writes. The kernels write each element once,
/// straight into the result, rather than into a buffer of their own that is scattered after.
struct Part {
    out: SharedOut,
    m: usize,
    n: usize,
    j0: usize,
    rows: usize,
}

impl Part {
    /// Result columns `j0..j0 + rows` of the `[m, n]` buffer behind `out`, which must hold
    /// `m * n` elements and outlive the part, and whose columns no other part may share.
    fn new(out: SharedOut, [m, n]: [usize; 2], j0: usize, rows: usize) -> Self {
        assert!(j0 + rows <= n, "a part's columns lie within the result");
        Part {
            out,
            m,
            n,
            j0,
            rows,
        }
    }

    /// The task's weight rows.
    fn rows(&self) -> usize {
        self.rows
    }

    /// Sets (activation row `i`, task row `jj`): result element `[i, j0 + jj]`.
    #[inline(always)]
    fn set(&mut self, i: usize, jj: usize, v: f32) {
        assert!(
            i < self.m && jj < self.rows,
            "a kernel writes within its part"
        );
        // SAFETY: within `[m, n]` (checked above, and `j0 + rows <= n` in `new`), in the
        // columns only this part writes; the buffer outlives the tasks.
        unsafe { self.out.at(i * self.n + self.j0 + jj).write(v) }
    }
}

/// One task of [`QuantMatrix::matmul_many`]: `y = x · W[columns]ᵀ`, `y` row-major with the
/// columns' width.
struct PanelTask<'a> {
    q: &'a QuantMatrix,
    x: &'a [f32],
    columns: std::ops::Range<usize>,
    y: &'a mut [f32],
}

impl pulp::WithSimd for PanelTask<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        use super::simd_kernels::{panel, Accumulate, Operand};
        let PanelTask { q, x, columns, y } = self;
        let k = q.cols;
        let m = x.len() / k;
        let width = columns.len();
        let step = 2 * S::F32_LANES;
        // The panel's weights as the kernel reads them: `[k, step]`, row-major.
        let mut wp = vec![0f32; k * step];
        let mut row = vec![0f32; k];
        let mut tail = Vec::new();
        for c0 in columns.clone().step_by(step) {
            let c1 = (c0 + step).min(columns.end);
            if c1 - c0 < step {
                wp.fill(0.0);
            }
            for j in c0..c1 {
                q.decode_row(j, &mut row);
                for (p, &v) in row.iter().enumerate() {
                    wp[p * step + j - c0] = v;
                }
            }
            let x_op = Operand { data: x, stride: k };
            let w_op = Operand {
                data: &wp,
                stride: step,
            };
            if c1 - c0 == step {
                let out = &mut y[c0 - columns.start..];
                panel(simd, m, k, x_op, w_op, out, width, Accumulate::No);
            } else {
                // The last columns, fewer than a panel: through a padded result.
                tail.resize(m * step, 0f32);
                panel(simd, m, k, x_op, w_op, &mut tail, step, Accumulate::No);
                let (rest, at) = (c1 - c0, c0 - columns.start);
                for (dst, src) in y.chunks_exact_mut(width).zip(tail.chunks_exact(step)) {
                    dst[at..at + rest].copy_from_slice(&src[..rest]);
                }
            }
        }
    }
}

/// One block type's decoder: block `index` (row-major over the matrix) into `N` f32 values.
trait Decode: Sync {
    const N: usize;
    fn decode(&self, index: usize, out: &mut [f32]);
}

struct Q4Decoder<'a> {
    quants: &'a [u8],
    scales: &'a [f32],
    mins: &'a [f32],
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

struct Q8Decoder<'a> {
    quants: &'a [i8],
    scales: &'a [f32],
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

struct RawDecoder<'a> {
    data: &'a [u8],
    block_bytes: usize,
    decode: BlockDecoder,
}

struct Raw<'a, const N: usize>(RawDecoder<'a>);

impl<const BLOCK: usize> Decode for Raw<'_, BLOCK> {
    const N: usize = BLOCK;
    #[inline(always)]
    fn decode(&self, index: usize, out: &mut [f32]) {
        let r = &self.0;
        let at = index * r.block_bytes;
        (r.decode)(&r.data[at..at + r.block_bytes], &mut out[..BLOCK]);
    }
}

/// The instruction set the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// AVX-512F (sixteen lanes).
    Avx512,
    /// AVX2 with FMA (eight lanes).
    Avx2,
    /// Portable code (what the compiler vectorises for the baseline target).
    Generic,
}

/// The widest instruction set this CPU has, picked once at run time (the binary targets the
/// baseline x86-64). `OPENCLAW_SIMD=avx2|generic` caps it, so the AVX2 kernels can be measured
/// on an AVX-512 machine; a cap the CPU cannot honour is ignored with a warning.
pub fn simd() -> Simd {
    static CHOICE: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *CHOICE.get_or_init(|| {
        let best = detect();
        let cap = match std::env::var("OPENCLAW_SIMD").ok().as_deref() {
            None | Some("") => return best,
            Some("avx512") => Simd::Avx512,
            Some("avx2") => Simd::Avx2,
            Some("generic") => Simd::Generic,
            Some(other) => {
                tracing::warn!(
                    "OPENCLAW_SIMD={other} is not avx512, avx2 or generic; using {best:?}"
                );
                return best;
            }
        };
        let rank = |s: Simd| match s {
            Simd::Generic => 0,
            Simd::Avx2 => 1,
            Simd::Avx512 => 2,
        };
        if rank(cap) > rank(best) {
            tracing::warn!("OPENCLAW_SIMD asks for {cap:?}, but this CPU offers {best:?}");
            return best;
        }
        cap
    })
}

fn detect() -> Simd {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma") {
            return Simd::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Simd::Avx2;
        }
    }
    Simd::Generic
}

/// The portable kernel (any block type), compiled with FMA where the CPU has it.
fn task_generic<D: Decode>(dec: &D, x: &[f32], m: usize, k: usize, j0: usize, part: &mut Part) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd() != Simd::Generic {
            // SAFETY: AVX2 or AVX-512 implies the CPU has FMA (checked in `detect`).
            return unsafe { task_fma(dec, x, m, k, j0, part) };
        }
    }
    task::<D, false>(dec, x, m, k, j0, part)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn task_fma<D: Decode>(dec: &D, x: &[f32], m: usize, k: usize, j0: usize, part: &mut Part) {
    task::<D, true>(dec, x, m, k, j0, part)
}

/// Every activation row, [`PASS_ROWS`] per pass over the task's weight rows.
#[inline(always)]
fn task<D: Decode, const FMA: bool>(
    dec: &D,
    x: &[f32],
    m: usize,
    k: usize,
    j0: usize,
    part: &mut Part,
) {
    let mut r0 = 0;
    while r0 < m {
        let xs = &x[r0 * k..];
        match m - r0 {
            1 => pass::<D, 1, FMA>(dec, xs, r0, k, j0, part),
            2 => pass::<D, 2, FMA>(dec, xs, r0, k, j0, part),
            3 => pass::<D, 3, FMA>(dec, xs, r0, k, j0, part),
            4 => pass::<D, 4, FMA>(dec, xs, r0, k, j0, part),
            5 => pass::<D, 5, FMA>(dec, xs, r0, k, j0, part),
            6 => pass::<D, 6, FMA>(dec, xs, r0, k, j0, part),
            7 => pass::<D, 7, FMA>(dec, xs, r0, k, j0, part),
            _ => pass::<D, PASS_ROWS, FMA>(dec, xs, r0, k, j0, part),
        }
        r0 += PASS_ROWS;
    }
}

/// Activation rows `r0..r0 + R` against the task's weight rows: each block is decoded once and
/// used for the `R` rows; sixteen partial sums per row, added up in a fixed order at the end.
#[inline(always)]
fn pass<D: Decode, const R: usize, const FMA: bool>(
    dec: &D,
    x: &[f32],
    r0: usize,
    k: usize,
    j0: usize,
    part: &mut Part,
) {
    let nb = k / D::N;
    let mut w = [0f32; 256];
    for jj in 0..part.rows() {
        let j = j0 + jj;
        let mut acc = [[0f32; 16]; R];
        for b in 0..nb {
            dec.decode(j * nb + b, &mut w);
            for (i, a) in acc.iter_mut().enumerate() {
                let xb = &x[i * k + b * D::N..i * k + (b + 1) * D::N];
                for (wc, xc) in w[..D::N].chunks_exact(16).zip(xb.chunks_exact(16)) {
                    for l in 0..16 {
                        a[l] = if FMA {
                            wc[l].mul_add(xc[l], a[l])
                        } else {
                            wc[l] * xc[l] + a[l]
                        };
                    }
                }
            }
        }
        for (i, a) in acc.iter().enumerate() {
            part.set(r0 + i, jj, sum16(a));
        }
    }
}

/// A fixed pairwise sum of eight partial sums.
#[inline(always)]
pub(crate) fn sum8(a: &[f32; 8]) -> f32 {
    let s = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (s[0] + s[2]) + (s[1] + s[3])
}

/// A fixed pairwise sum of sixteen partial sums.
#[inline(always)]
fn sum16(a: &[f32; 16]) -> f32 {
    let mut s = [0f32; 8];
    for l in 0..8 {
        s[l] = a[l] + a[l + 8];
    }
    let t = [s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]];
    (t[0] + t[2]) + (t[1] + t[3])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device::{CpuBackend, CpuDevice};
    use crate::weights::gguf::dequantize;

    fn f16_bytes(v: f32) -> [u8; 2] {
        f16::from_f32(v).to_bits().to_le_bytes()
    }

    /// `values` (a whole number of 32-value blocks) as ggml's reference quantiser writes Q8_0.
    pub(crate) fn quantise_q8_0(values: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in values.chunks_exact(32) {
            let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            out.extend(f16_bytes(d));
            out.extend(b.iter().map(|v| (v * inv).round() as i8 as u8));
        }
        out
    }

    /// `values` as Q4_1 (ggml's reference: min and scale over each 32 values).
    pub(crate) fn quantise_q4_1(values: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in values.chunks_exact(32) {
            let min = b.iter().fold(f32::MAX, |m, v| m.min(*v));
            let max = b.iter().fold(f32::MIN, |m, v| m.max(*v));
            let d = (max - min) / 15.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            out.extend(f16_bytes(d));
            out.extend(f16_bytes(min));
            let q = |v: f32| (((v - min) * inv + 0.5) as u8).min(15);
            out.extend((0..16).map(|j| q(b[j]) | (q(b[j + 16]) << 4)));
        }
        out
    }

    /// `values` as Q4_0 (ggml's reference: the value of largest magnitude maps to -8).
    pub(crate) fn quantise_q4_0(values: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in values.chunks_exact(32) {
            let max = b
                .iter()
                .fold(0f32, |m, v| if v.abs() > m.abs() { *v } else { m });
            let d = max / -8.0;
            let inv = if d != 0.0 { 1.0 / d } else { 0.0 };
            out.extend(f16_bytes(d));
            let q = |v: f32| ((v * inv + 8.5) as u8).min(15);
            out.extend((0..16).map(|j| q(b[j]) | (q(b[j + 16]) << 4)));
        }
        out
    }

    /// `len` values in [-1, 1], spread by a multiplicative hash of the index and `seed`.
    pub(crate) fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 2001) as f32
                    / 1000.0
                    - 1.0
            })
            .collect()
    }

    /// Blocks of `ty` with arbitrary quant bits and small, finite scales.
    fn random_blocks(ty: GgmlType, n_blocks: usize, seed: u32) -> Vec<u8> {
        let (_, bytes) = ty.block_layout().unwrap();
        let mut out: Vec<u8> = (0..n_blocks * bytes)
            .map(|i| ((i as u32).wrapping_mul(2246822519).wrapping_add(seed) >> 13) as u8)
            .collect();
        let scale_at: &[usize] = match ty {
            GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q4_0 => &[0],
            GgmlType::Q5_1 | GgmlType::Q4_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
            GgmlType::Q6_K => &[208],
            _ => unreachable!(),
        };
        for (b, block) in out.chunks_exact_mut(bytes).enumerate() {
            for (s, &at) in scale_at.iter().enumerate() {
                let v = 0.002 + 0.001 * ((b + s) % 7) as f32;
                block[at..at + 2].copy_from_slice(&f16_bytes(v));
            }
        }
        out
    }

    /// `x [m, k] · wᵀ` for `w [n, k]`, in f64.
    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let s: f64 = (0..k)
                    .map(|p| x[i * k + p] as f64 * w[j * k + p] as f64)
                    .sum();
                y[i * n + j] = s as f32;
            }
        }
        y
    }

    fn assert_close(got: &[f32], want: &[f32], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        let scale = want.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * scale * 8.0,
                "{what}: element {i}: {a} vs {b} (scale {scale})"
            );
        }
    }

    const TYPES: [GgmlType; 8] = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];

    #[test]
    fn the_block_kernel_matches_the_dequantised_product_for_every_type_and_row_count() {
        for ty in TYPES {
            let (block, _) = ty.block_layout().unwrap();
            let (n, k) = (37, 2 * block);
            let data = random_blocks(ty, n * k / block, 11);
            let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
            let w = dequantize(ty, &data, n * k).unwrap();
            assert_eq!(
                q.dequantise(),
                w,
                "{ty}: the kept blocks decode as the loader does"
            );
            for m in [1, 2, 3, 5, 8, 9, 17, 64] {
                let x = values(m * k, m as u32);
                let got = q.matmul(&x, m);
                assert_close(&got, &reference(&x, &w, m, k, n), &format!("{ty} m {m}"));
            }
        }
    }

    /// The kernels this CPU runs: the portable one, and AVX2 and AVX-512 where it has them.
    fn kernels_here() -> Vec<Simd> {
        let best = detect();
        let mut isas = vec![Simd::Generic];
        if best != Simd::Generic {
            isas.push(Simd::Avx2);
        }
        if best == Simd::Avx512 {
            isas.push(Simd::Avx512);
        }
        eprintln!("kernels available here: {isas:?}");
        isas
    }

    /// The AVX2 kernel's sums for Q4 rows of at most [`EIGHT_ROWS_MAX_COLS`] values, one
    /// output at a time: lane `l` takes values `l`, `8 + l`, `16 + l` and `24 + l` of each block
    /// (widened by one multiply-add, as the kernel does), block after block; then [`sum8`].
    fn eight_lane_q4(q: &QuantMatrix, x: &[f32], m: usize) -> Vec<f32> {
        let Blocks::Q4 {
            quants,
            scales,
            mins,
        } = &q.blocks
        else {
            panic!("Q4 blocks");
        };
        let (n, k) = (q.rows, q.cols);
        let nb = k / 32;
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = [0f32; 8];
                for b in 0..nb {
                    let at = j * nb + b;
                    let w: [f32; 32] = std::array::from_fn(|v| {
                        let byte = quants[at * 16 + v % 16];
                        let nibble = if v < 16 { byte & 0x0F } else { byte >> 4 };
                        (nibble as f32).mul_add(scales[at], mins[at])
                    });
                    for v in 0..32 {
                        acc[v % 8] = w[v].mul_add(x[i * k + b * 32 + v], acc[v % 8]);
                    }
                }
                y[i * n + j] = sum8(&acc);
            }
        }
        y
    }

    #[test]
    fn each_kernel_keeps_its_sum_order_and_all_agree_within_rounding() {
        let isas = kernels_here();
        // Rows narrow and wide enough for each way the AVX2 kernels split a batch into passes.
        for (ty, k) in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0]
            .into_iter()
            .flat_map(|ty| [(ty, 96), (ty, 800)])
        {
            // Tasks whose weight rows are odd and not a multiple of four, so every kernel's
            // last weight rows go alone, whatever the thread count.
            let n = 71;
            let data = random_blocks(ty, n * k / 32, 21);
            let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
            let w = q.dequantise();
            for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 13] {
                let x = values(m * k, 7 + m as u32);
                let want = reference(&x, &w, m, k, n);
                let ys: Vec<Vec<f32>> = isas.iter().map(|&i| q.matmul_on(i, &x, m)).collect();
                for (isa, y) in isas.iter().zip(&ys) {
                    assert_close(y, &want, &format!("{ty} k {k} m {m} {isa:?}"));
                }
                // Narrow Q4 rows take the AVX2 kernel's eight-lane sums; everything else the
                // AVX-512 kernel's sixteen-lane ones.
                let eight_lanes = ty != GgmlType::Q8_0 && k <= EIGHT_ROWS_MAX_COLS;
                if ys.len() >= 2 && eight_lanes {
                    let lanes8 = eight_lane_q4(&q, &x, m);
                    assert_eq!(
                        ys[1], lanes8,
                        "{ty} k {k} m {m}: AVX2 and its eight-lane order"
                    );
                } else if ys.len() == 3 {
                    assert_eq!(ys[1], ys[2], "{ty} k {k} m {m}: AVX2 and AVX-512 differ");
                }
            }
        }
    }

    /// Values of both signs with magnitudes over forty octaves, so that any other order of
    /// additions than a sum's own would round apart.
    #[cfg(target_arch = "x86_64")]
    fn octave_spread(seed: u32) -> impl FnMut() -> f32 {
        let mut rng = seed;
        move || {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            (rng as f32 / u32::MAX as f32 - 0.5) * 2f32.powi((rng % 40) as i32 - 20)
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sixteen_sums_at_once_give_the_bits_of_sixteen_sums_one_by_one() {
        if detect() != Simd::Avx512 {
            eprintln!("no AVX-512 here: nothing to compare");
            return;
        }
        let mut next = octave_spread(0x2545_f491);
        for _ in 0..200 {
            let lanes: [[f32; 16]; 16] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
            let mut got = [0f32; 16];
            // SAFETY: the CPU has AVX-512 (checked above).
            unsafe {
                use std::arch::x86_64::*;
                let v = std::array::from_fn(|p| _mm512_loadu_ps(lanes[p].as_ptr()));
                _mm512_storeu_ps(got.as_mut_ptr(), x86::sum16_each(v));
            }
            for (p, l) in lanes.iter().enumerate() {
                assert_eq!(got[p].to_bits(), sum16(l).to_bits(), "vector {p}");
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn eight_sums_at_once_give_the_bits_of_eight_sums_one_by_one() {
        if !is_x86_feature_detected!("avx2") {
            eprintln!("no AVX2 here: nothing to compare");
            return;
        }
        let mut next = octave_spread(0x9e37_79b9);
        for _ in 0..500 {
            let lanes: [[f32; 8]; 8] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
            let mut got = [0f32; 8];
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe {
                use std::arch::x86_64::*;
                let v = std::array::from_fn(|p| _mm256_loadu_ps(lanes[p].as_ptr()));
                _mm256_storeu_ps(got.as_mut_ptr(), x86::sum8_each(v));
            }
            for (p, l) in lanes.iter().enumerate() {
                assert_eq!(got[p].to_bits(), sum8(l).to_bits(), "vector {p}");
            }
        }
    }

    #[test]
    fn the_many_row_path_matches_the_product_and_keeps_each_row_alone() {
        for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K] {
            let (block, _) = ty.block_layout().unwrap();
            // Widths that leave a partial panel and a partial task; rows over one task.
            for (n, m) in [(70, 5), (131, PANEL_TASK_ROWS + 9)] {
                let k = 2 * block;
                let data = random_blocks(ty, n * k / block, 17);
                let q = QuantMatrix::from_gguf(ty, n, k, &data).unwrap();
                let w = q.dequantise();
                let x = values(m * k, 23);
                let all = q.matmul_many(&x, m);
                assert_close(
                    &all,
                    &reference(&x, &w, m, k, n),
                    &format!("{ty} n {n} m {m}"),
                );
                let r = m - 1;
                let alone = q.matmul_many(&x[r * k..(r + 1) * k], 1);
                assert_eq!(alone, all[r * n..(r + 1) * n], "{ty}: row {r} alone");
            }
        }
    }

    #[test]
    fn a_row_comes_out_the_same_whatever_shares_its_call() {
        // Every kernel this CPU has, each way it splits a call into passes (and weight rows
        // into groups): two, four and eleven rows (a pass of eight and one of three).
        let isas = kernels_here();
        for ty in [GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q6_K] {
            let (block, _) = ty.block_layout().unwrap();
            let n = 301;
            for k in [2 * block, 800usize.next_multiple_of(block)] {
                let q =
                    QuantMatrix::from_gguf(ty, n, k, &random_blocks(ty, n * k / block, 3)).unwrap();
                for &isa in &isas {
                    for m in [2, 4, 11] {
                        let x = values(m * k, 5 + m as u32);
                        let all = q.matmul_on(isa, &x, m);
                        for i in 0..m {
                            let alone = q.matmul_on(isa, &x[i * k..(i + 1) * k], 1);
                            assert_eq!(
                                alone,
                                all[i * n..(i + 1) * n],
                                "{ty} k {k} {isa:?}: row {i} of {m}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_group_of_matrices_gives_each_the_bits_of_its_own_matmul() {
        let isas = kernels_here();
        // One width, three types and heights (one under a task, two over several).
        let k = 256;
        let mats: Vec<QuantMatrix> = [
            (GgmlType::Q4_1, 70),
            (GgmlType::Q8_0, 9),
            (GgmlType::Q6_K, 300),
        ]
        .into_iter()
        .map(|(ty, n)| {
            let (block, _) = ty.block_layout().unwrap();
            QuantMatrix::from_gguf(ty, n, k, &random_blocks(ty, n * k / block, n as u32)).unwrap()
        })
        .collect();
        for &isa in &isas {
            for m in [1, 5, 8] {
                let x = values(m * k, 31 + m as u32);
                let ys = QuantMatrix::group_on(isa, [&mats[0], &mats[1], &mats[2]], &x, m);
                for (q, y) in mats.iter().zip(&ys) {
                    assert_eq!(*y, q.matmul_on(isa, &x, m), "{isa:?} m {m}: {}", q.ty());
                }
            }
        }
    }

    #[test]
    fn the_reference_quantisers_round_trip_within_their_step() {
        let v = values(64 * 3, 9);
        // Half a step, except Q4_0's far end: its largest magnitude maps to -8, so the other
        // end clips at +7, a whole step short (as in ggml).
        for (ty, bytes, max_err) in [
            (GgmlType::Q8_0, quantise_q8_0(&v), 0.5 / 127.0),
            (GgmlType::Q4_0, quantise_q4_0(&v), 1.0 / 8.0),
            (GgmlType::Q4_1, quantise_q4_1(&v), 0.5 * 2.0 / 15.0),
        ] {
            let back = dequantize(ty, &bytes, v.len()).unwrap();
            for (a, b) in back.iter().zip(&v) {
                assert!((a - b).abs() <= max_err + 1e-3, "{ty}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn permuted_rows_and_embedding_rows_decode_as_the_whole_matrix() {
        let (n, k) = (6, 64);
        let v = values(n * k, 1);
        let q = QuantMatrix::from_gguf(GgmlType::Q4_1, n, k, &quantise_q4_1(&v)).unwrap();
        let w = q.dequantise();
        let order = [3, 0, 5, 1, 4, 2];
        let p = q.permute_rows(&order).dequantise();
        for (i, &r) in order.iter().enumerate() {
            assert_eq!(p[i * k..(i + 1) * k], w[r * k..(r + 1) * k]);
        }
        let rows = q.rows_f32(&[4, 4, 0]);
        assert_eq!(rows[..k], w[4 * k..5 * k]);
        assert_eq!(rows[2 * k..], w[..k]);
        assert!(q.bytes() < n * k * 4 / 5, "{} bytes kept", q.bytes());
    }

    #[test]
    fn tensors_take_the_kernel_for_few_rows_and_the_gemm_for_many() {
        let dev = CpuDevice::default();
        let (n, k) = (40, 96);
        let v = values(n * k, 2);
        let q = QuantMatrix::from_gguf(GgmlType::Q8_0, n, k, &quantise_q8_0(&v)).unwrap();
        let w = q.dequantise();
        for m in [1, 7, MAX_KERNEL_ROWS, MAX_KERNEL_ROWS + 3] {
            let x = values(m * k, 4);
            let xt = Tensor::<CpuBackend, 2>::from_data(TensorData::new(x.clone(), [m, k]), &dev);
            let want = reference(&x, &w, m, k, n);
            let outside = q.forward(xt.clone()).into_data().to_vec::<f32>().unwrap();
            assert_close(&outside, &want, &format!("m {m} outside a decode step"));
            assert_eq!(
                outside,
                q.matmul_many(&x, m),
                "outside a decode step: the panels"
            );
            // SAFETY: a matmul, which leaves nothing on the worker.
            let inside = unsafe { super::super::small_matmul::decode_scope(|| q.forward(xt)) };
            let inside = inside.into_data().to_vec::<f32>().unwrap();
            assert_close(&inside, &want, &format!("m {m} in a decode step"));
            if m <= MAX_KERNEL_ROWS {
                assert_eq!(inside, q.matmul(&x, m), "a decode step: the block kernel");
            }
        }
        // Autodiff tensors (not the plain CPU backend) take the dequantised gemm.
        type Ad = burn::backend::Autodiff<CpuBackend>;
        let x = values(3 * k, 8);
        let xa = Tensor::<Ad, 2>::from_data(TensorData::new(x.clone(), [3, k]), &dev);
        let y = q.forward(xa).into_data().to_vec::<f32>().unwrap();
        assert_close(&y, &reference(&x, &w, 3, k, n), "autodiff");
    }

    #[test]
    fn bad_shapes_and_types_are_refused_with_the_reason() {
        let e = QuantMatrix::from_gguf(GgmlType::F32, 2, 32, &[0; 256])
            .unwrap_err()
            .to_string();
        assert!(e.contains("F32") && e.contains("cannot be kept"), "{e}");
        let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 48, &[0; 102])
            .unwrap_err()
            .to_string();
        assert!(e.contains("whole 32-value blocks"), "{e}");
        let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 0, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no values"), "{e}");
        let e = QuantMatrix::from_gguf(GgmlType::Q8_0, 2, 32, &[0; 60])
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes 68 bytes, got 60"), "{e}");
    }
}

/// The Q4 and Q8 kernels in AVX-512 and AVX2 intrinsics: each block is widened to f32 in
/// registers (`w = q * scale + min`, one FMA per sixteen or eight values), then multiplied into
/// per-row accumulators. The AVX-512 kernels keep sixteen partial sums per (activation row,
/// weight row): sum `l` takes `w[l] x[l]`, then `w[16 + l] x[16 + l]`, block after block; then
/// [`sum16`]. The AVX2 kernels make the same operations in the same order on Q8 and on rows wider
/// than `EIGHT_ROWS_MAX_COLS`, so there the two agree bit for bit; on narrower Q4 rows they keep
/// eight partial sums (`lanes8_avx2`, then [`sum8`]).
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{sum16, sum8, Part, Q4Decoder, Q8Decoder, EIGHT_ROWS_MAX_COLS, PASS_ROWS};

    /// Splits the rows into passes of at most [`PASS_ROWS`] and calls `pass` with each.
    macro_rules! passes {
        ($pass:ident, $dec:expr, $x:expr, $m:expr, $k:expr, $j0:expr, $part:expr) => {{
            let mut r0 = 0;
            while r0 < $m {
                let xs = &$x[r0 * $k..];
                match $m - r0 {
                    1 => $pass::<1>($dec, xs, r0, $k, $j0, $part),
                    2 => $pass::<2>($dec, xs, r0, $k, $j0, $part),
                    3 => $pass::<3>($dec, xs, r0, $k, $j0, $part),
                    4 => $pass::<4>($dec, xs, r0, $k, $j0, $part),
                    5 => $pass::<5>($dec, xs, r0, $k, $j0, $part),
                    6 => $pass::<6>($dec, xs, r0, $k, $j0, $part),
                    7 => $pass::<7>($dec, xs, r0, $k, $j0, $part),
                    _ => $pass::<PASS_ROWS>($dec, xs, r0, $k, $j0, $part),
                }
                r0 += PASS_ROWS;
            }
        }};
    }

    /// Asks for line `line` (64 bytes) of each array holding blocks `first..first + blocks` to
    /// be brought into the cache; `arrays` gives each array's start and bytes per block (Q4:
    /// nibbles 16, scales 4, minimums 4; Q8: bytes 32, scales 4), and an array whose blocks end
    /// before the line is skipped. The kernels call it with the weight rows they will read next,
    /// a line per block they compute: a decode step streams every weight from memory once, and
    /// the hardware prefetcher restarts at each row's separate arrays. Prefetching is a hint, so
    /// blocks past the matrix's end are harmless (the addresses are formed with wrapping
    /// arithmetic and never read).
    #[inline(always)]
    fn ahead<const N: usize>(
        arrays: [(*const i8, usize); N],
        first: usize,
        blocks: usize,
        line: usize,
    ) {
        let off = line * 64;
        for (start, per_block) in arrays {
            if off < blocks * per_block {
                let at = start.wrapping_add(first * per_block + off);
                // SAFETY: prefetch instructions do not fault and SSE is part of x86-64.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(at) };
            }
        }
    }

    /// [`ahead`]'s arrays of a Q4 matrix.
    fn q4_arrays(dec: &Q4Decoder) -> [(*const i8, usize); 3] {
        [
            (dec.quants.as_ptr() as *const i8, 16),
            (dec.scales.as_ptr() as *const i8, 4),
            (dec.mins.as_ptr() as *const i8, 4),
        ]
    }

    /// [`ahead`]'s arrays of a Q8 matrix.
    fn q8_arrays(dec: &Q8Decoder) -> [(*const i8, usize); 2] {
        [
            (dec.quants.as_ptr(), 32),
            (dec.scales.as_ptr() as *const i8, 4),
        ]
    }

    /// How far ahead the AVX2 kernels prefetch, in weight rows or in groups of the weight rows
    /// a kernel takes at once.
    const AVX2_AHEAD: usize = 2;

    /// Rows per pass of the AVX2 kernels: two sums per row and a block's four vectors in
    /// sixteen registers.
    const AVX2_ROWS: usize = 4;

    /// [`passes!`] with at most [`AVX2_ROWS`] rows per pass.
    macro_rules! passes_avx2 {
        ($pass:ident, $dec:expr, $x:expr, $m:expr, $k:expr, $j0:expr, $part:expr) => {{
            let mut r0 = 0;
            while r0 < $m {
                let xs = &$x[r0 * $k..];
                match $m - r0 {
                    1 => $pass::<1>($dec, xs, r0, $k, $j0, $part),
                    2 => $pass::<2>($dec, xs, r0, $k, $j0, $part),
                    3 => $pass::<3>($dec, xs, r0, $k, $j0, $part),
                    _ => $pass::<AVX2_ROWS>($dec, xs, r0, $k, $j0, $part),
                }
                r0 += AVX2_ROWS;
            }
        }};
    }

    /// Checks every index the unchecked loads of a pass will use.
    fn check(
        quant_len: usize,
        per_block: usize,
        k: usize,
        j0: usize,
        rows: usize,
        x: usize,
        r: usize,
    ) {
        assert!(
            k.is_multiple_of(32) && x >= r * k,
            "x holds the pass's rows"
        );
        assert!(
            quant_len >= (j0 + rows) * (k / 32) * per_block,
            "the task's weight rows exist"
        );
    }

    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn q4_avx512(
        dec: &Q4Decoder,
        x: &[f32],
        m: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        passes!(q4_pass_avx512, dec, x, m, k, j0, part)
    }

    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn q4_pass_avx512<const R: usize>(
        dec: &Q4Decoder,
        x: &[f32],
        r0: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        check(dec.quants.len(), 16, k, j0, part.rows(), x.len(), R);
        check(dec.scales.len() * 16, 16, k, j0, part.rows(), x.len(), R);
        check(dec.mins.len() * 16, 16, k, j0, part.rows(), x.len(), R);
        let mask = _mm512_set1_epi32(0x0F);
        // Byte `j` holds value `j` in its low nibble and value `16 + j` in its high one. The
        // sixteen bytes are widened to 32-bit lanes first and split there: one widening rather
        // than two (1% off the projections of a batch-8 SmolLM2 step, `decode_kernels 8`).
        let block = |at: usize| {
            let qb = _mm_loadu_si128(dec.quants.as_ptr().add(at * 16) as *const __m128i);
            let d = _mm512_set1_ps(*dec.scales.get_unchecked(at));
            let mn = _mm512_set1_ps(*dec.mins.get_unchecked(at));
            let b = _mm512_cvtepu8_epi32(qb);
            let (lo, hi) = (_mm512_and_si512(b, mask), _mm512_srli_epi32(b, 4));
            (
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), d, mn),
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), d, mn),
            )
        };
        rows_avx512::<R>(
            block,
            |first, blocks, line| ahead(q4_arrays(dec), first, blocks, line),
            &Rows { x, r0, k, j0 },
            part,
        )
    }

    #[target_feature(enable = "avx512f,fma")]
    pub(super) unsafe fn q8_avx512(
        dec: &Q8Decoder,
        x: &[f32],
        m: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        passes!(q8_pass_avx512, dec, x, m, k, j0, part)
    }

    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn q8_pass_avx512<const R: usize>(
        dec: &Q8Decoder,
        x: &[f32],
        r0: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        check(dec.quants.len(), 32, k, j0, part.rows(), x.len(), R);
        check(dec.scales.len() * 32, 32, k, j0, part.rows(), x.len(), R);
        let block = |at: usize| {
            let qp = dec.quants.as_ptr().add(at * 32) as *const __m128i;
            let d = _mm512_set1_ps(*dec.scales.get_unchecked(at));
            let q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(qp));
            let q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(qp.add(1)));
            (
                _mm512_mul_ps(_mm512_cvtepi32_ps(q0), d),
                _mm512_mul_ps(_mm512_cvtepi32_ps(q1), d),
            )
        };
        rows_avx512::<R>(
            block,
            |first, blocks, line| ahead(q8_arrays(dec), first, blocks, line),
            &Rows { x, r0, k, j0 },
            part,
        )
    }

    /// Activation rows `r0..r0 + R` against the task's weight rows. `block(i)` is block `i`
    /// widened: values 0..16 and 16..32. One sixteen-lane sum per (row, weight row): `w[l] x[l]`,
    /// then `w[16 + l] x[16 + l]`, block after block. Weight rows go two at a time (each
    /// activation load feeds two FMAs); a last odd one alone, with the same operations.
    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn rows_avx512<const R: usize>(
        block: impl Fn(usize) -> (__m512, __m512),
        ahead: impl Fn(usize, usize, usize),
        at: &Rows,
        part: &mut Part,
    ) {
        let jj = group_avx512::<R, 2>(&block, &ahead, at, 0, part);
        group_avx512::<R, 1>(&block, &ahead, at, jj, part);
    }

    /// Where a pass reads and writes.
    struct Rows<'a> {
        x: &'a [f32],
        r0: usize,
        k: usize,
        j0: usize,
    }

    /// The task's weight rows from `jj` on, `W` at a time while `W` remain; returns the first
    /// weight row left.
    #[target_feature(enable = "avx512f,fma")]
    #[inline]
    unsafe fn group_avx512<const R: usize, const W: usize>(
        block: &impl Fn(usize) -> (__m512, __m512),
        ahead: &impl Fn(usize, usize, usize),
        at: &Rows,
        mut jj: usize,
        part: &mut Part,
    ) -> usize {
        let Rows { x, r0, k, j0 } = *at;
        let nb = k / 32;
        let rows = part.rows();
        let xp = x.as_ptr();
        while jj + W <= rows {
            let mut acc = [[_mm512_setzero_ps(); W]; R];
            for b in 0..nb {
                // One line of each array holding the next group's blocks per block computed.
                ahead((j0 + jj + W) * nb, W * nb, b);
                let mut w = [(_mm512_setzero_ps(), _mm512_setzero_ps()); W];
                for (g, w) in w.iter_mut().enumerate() {
                    *w = block((j0 + jj + g) * nb + b);
                }
                for (i, acc) in acc.iter_mut().enumerate() {
                    let p = xp.add(i * k + b * 32);
                    let (x0, x1) = (_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16)));
                    for (a, w) in acc.iter_mut().zip(&w) {
                        *a = _mm512_fmadd_ps(w.0, x0, *a);
                    }
                    for (a, w) in acc.iter_mut().zip(&w) {
                        *a = _mm512_fmadd_ps(w.1, x1, *a);
                    }
                }
            }
            if R == 8 && W == 2 {
                // A full pass (a decode step of eight or more): the sixteen sums at once.
                let sums = sum16_each(std::array::from_fn(|p| acc[p % 8][p / 8]));
                let mut lanes = [0f32; 16];
                _mm512_storeu_ps(lanes.as_mut_ptr(), sums);
                for i in 0..8 {
                    part.set(r0 + i, jj, lanes[i]);
                    part.set(r0 + i, jj + 1, lanes[8 + i]);
                }
            } else {
                for (i, acc) in acc.iter().enumerate() {
                    for (g, a) in acc.iter().enumerate() {
                        let mut lanes = [0f32; 16];
                        _mm512_storeu_ps(lanes.as_mut_ptr(), *a);
                        part.set(r0 + i, jj + g, sum16(&lanes));
                    }
                }
            }
            jj += W;
        }
        jj
    }

    /// [`sum16`] of each of sixteen vectors, lane `p` of the result from `v[p]`, with the very
    /// additions `sum16` makes (each pairs the same two partial sums), so the bits are the
    /// same: `l + (l + 8)`, then `l + (l + 4)`, then `l + (l + 2)`, then `l + (l + 1)`, each
    /// level adding two vectors' halves at once (15 shuffle pairs and additions instead of
    /// sixteen stores and 240 scalar additions).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn sum16_each(v: [__m512; 16]) -> __m512 {
        // Level 1: 256-bit halves. u[k] holds the eight sums of v[2k], then of v[2k + 1].
        let u: [__m512; 8] = std::array::from_fn(|k| {
            let (a, b) = (v[2 * k], v[2 * k + 1]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x44>(a, b),
                _mm512_shuffle_f32x4::<0xEE>(a, b),
            )
        });
        // Level 2: 128-bit quarters. w[k] holds four sums of each of four vectors.
        let w: [__m512; 4] = std::array::from_fn(|k| {
            let (a, b) = (u[2 * k], u[2 * k + 1]);
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0x88>(a, b),
                _mm512_shuffle_f32x4::<0xDD>(a, b),
            )
        });
        // Level 3: 64-bit pairs.
        let y: [__m512; 2] = std::array::from_fn(|k| {
            let (a, b) = (_mm512_castps_pd(w[2 * k]), _mm512_castps_pd(w[2 * k + 1]));
            _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
            )
        });
        // Level 4: neighbouring lanes; then lane order p.
        let z = _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(y[0], y[1]),
            _mm512_shuffle_ps::<0xDD>(y[0], y[1]),
        );
        let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_permutexvar_ps(order, z)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q4_avx2(
        dec: &Q4Decoder,
        x: &[f32],
        m: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        if k <= EIGHT_ROWS_MAX_COLS {
            passes!(q4_pass_avx2, dec, x, m, k, j0, part)
        } else {
            passes_avx2!(q4_pass_avx2, dec, x, m, k, j0, part)
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn q4_pass_avx2<const R: usize>(
        dec: &Q4Decoder,
        x: &[f32],
        r0: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        check(dec.quants.len(), 16, k, j0, part.rows(), x.len(), R);
        check(dec.scales.len() * 16, 16, k, j0, part.rows(), x.len(), R);
        check(dec.mins.len() * 16, 16, k, j0, part.rows(), x.len(), R);
        let mask = _mm256_set1_epi32(0x0F);
        let widen =
            |q: __m256i, d: __m256, mn: __m256| _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, mn);
        // Byte `j` holds value `j` in its low nibble and value `16 + j` in its high one. Eight
        // bytes at a time are widened to 32-bit lanes first and split there: two widenings
        // rather than four and no byte shifts (4% off the projections of a batch-8 SmolLM2 step).
        let block = |at: usize| {
            let qp = dec.quants.as_ptr().add(at * 16);
            let d = _mm256_set1_ps(*dec.scales.get_unchecked(at));
            let mn = _mm256_set1_ps(*dec.mins.get_unchecked(at));
            let b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(qp as *const __m128i));
            let b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(qp.add(8) as *const __m128i));
            [
                widen(_mm256_and_si256(b0, mask), d, mn),
                widen(_mm256_and_si256(b1, mask), d, mn),
                widen(_mm256_srli_epi32(b0, 4), d, mn),
                widen(_mm256_srli_epi32(b1, 4), d, mn),
            ]
        };
        // Values `8v..8v + 8` of block `at` alone.
        let eighth = |at: usize, v: usize| {
            let qp = dec.quants.as_ptr().add(at * 16 + 8 * (v % 2));
            let d = _mm256_set1_ps(*dec.scales.get_unchecked(at));
            let mn = _mm256_set1_ps(*dec.mins.get_unchecked(at));
            let b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(qp as *const __m128i));
            if v < 2 {
                widen(_mm256_and_si256(b, mask), d, mn)
            } else {
                widen(_mm256_srli_epi32(b, 4), d, mn)
            }
        };
        let ahead = |first, blocks, line| ahead(q4_arrays(dec), first, blocks, line);
        let at = Rows { x, r0, k, j0 };
        if k <= EIGHT_ROWS_MAX_COLS {
            lanes8_avx2::<R>(block, eighth, ahead, &at, part)
        } else {
            rows_avx2::<R>(block, ahead, &at, part)
        }
    }

    /// Activation rows `r0..r0 + R` against the task's weight rows with one eight-lane sum per
    /// (row, weight row): values `l`, `8 + l`, `16 + l`, `24 + l` of each block into lane `l`,
    /// block after block, then [`sum8`]. One sum per pair, not two, so eight rows fit in the
    /// sixteen registers and each block is widened once for all of them. Fewer rows take
    /// several weight rows at a time, so that more sums are in flight (a sum's four
    /// multiply-adds per block wait on each other): one or two rows four weight rows, three or
    /// four rows two, taking each block eight values at a time (`eighth(at, v)`) so that each
    /// activation load feeds both. Against the sixteen-lane kernel (`decode_kernels`, SmolLM2's
    /// shapes, AVX2; the thirty layers, whose 1,536-wide `down` is unchanged): eight rows
    /// 12.3-12.4 -> 10.7-10.9 ms, one row 4.0-4.1 -> 3.7-3.9, two the same, three 5.5-5.6 ->
    /// 5.6-5.7 and four 6.4-6.5 -> 6.6-6.7.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn lanes8_avx2<const R: usize>(
        block: impl Fn(usize) -> [__m256; 4],
        eighth: impl Fn(usize, usize) -> __m256,
        ahead: impl Fn(usize, usize, usize),
        at: &Rows,
        part: &mut Part,
    ) {
        let jj = match R {
            1 | 2 => group8_avx2::<R, 4>(&block, &ahead, at, 0, part),
            3 | 4 => eighths8_avx2::<R, 2>(&eighth, &ahead, at, 0, part),
            _ => 0,
        };
        group8_avx2::<R, 1>(&block, &ahead, at, jj, part);
    }

    /// [`group8_avx2`] with each block taken eight values at a time (`eighth(at, v)`: values
    /// `8v..8v + 8` of block `at`) for all `W` weight rows, so each activation load feeds `W`
    /// sums: the same multiply-adds in the same order per sum, with half the activation loads
    /// at `W = 2` (three or four rows, where loads and multiply-adds otherwise fill the ports).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn eighths8_avx2<const R: usize, const W: usize>(
        eighth: &impl Fn(usize, usize) -> __m256,
        ahead: &impl Fn(usize, usize, usize),
        at: &Rows,
        mut jj: usize,
        part: &mut Part,
    ) -> usize {
        let Rows { x, r0, k, j0 } = *at;
        let nb = k / 32;
        let rows = part.rows();
        let xp = x.as_ptr();
        while jj + W <= rows {
            let mut acc = [[_mm256_setzero_ps(); W]; R];
            for b in 0..nb {
                ahead((j0 + jj + AVX2_AHEAD * W) * nb, W * nb, b);
                for v in 0..4 {
                    let w: [__m256; W] = std::array::from_fn(|g| eighth((j0 + jj + g) * nb + b, v));
                    for (i, acc) in acc.iter_mut().enumerate() {
                        let xv = _mm256_loadu_ps(xp.add(i * k + b * 32 + 8 * v));
                        for (a, w) in acc.iter_mut().zip(&w) {
                            *a = _mm256_fmadd_ps(*w, xv, *a);
                        }
                    }
                }
            }
            set_sums8(part, R * W, |n| {
                ((r0 + n / W, jj + n % W), acc[n / W][n % W])
            });
            jj += W;
        }
        jj
    }

    /// [`lanes8_avx2`] over the task's weight rows from `jj` on, `W` at a time while `W`
    /// remain; returns the first weight row left.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn group8_avx2<const R: usize, const W: usize>(
        block: &impl Fn(usize) -> [__m256; 4],
        ahead: &impl Fn(usize, usize, usize),
        at: &Rows,
        mut jj: usize,
        part: &mut Part,
    ) -> usize {
        let Rows { x, r0, k, j0 } = *at;
        let nb = k / 32;
        let rows = part.rows();
        let xp = x.as_ptr();
        while jj + W <= rows {
            let mut acc = [[_mm256_setzero_ps(); R]; W];
            for b in 0..nb {
                ahead((j0 + jj + AVX2_AHEAD * W) * nb, W * nb, b);
                for (g, acc) in acc.iter_mut().enumerate() {
                    let w = block((j0 + jj + g) * nb + b);
                    for (i, a) in acc.iter_mut().enumerate() {
                        let p = xp.add(i * k + b * 32);
                        *a = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(p), *a);
                        *a = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(p.add(8)), *a);
                        *a = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(p.add(16)), *a);
                        *a = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(p.add(24)), *a);
                    }
                }
            }
            set_sums8(part, R * W, |n| {
                ((r0 + n % R, jj + n / R), acc[n / R][n % R])
            });
            jj += W;
        }
        jj
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn q8_avx2(
        dec: &Q8Decoder,
        x: &[f32],
        m: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        if k <= EIGHT_ROWS_MAX_COLS {
            passes!(q8_pass_avx2, dec, x, m, k, j0, part)
        } else {
            passes_avx2!(q8_pass_avx2, dec, x, m, k, j0, part)
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn q8_pass_avx2<const R: usize>(
        dec: &Q8Decoder,
        x: &[f32],
        r0: usize,
        k: usize,
        j0: usize,
        part: &mut Part,
    ) {
        check(dec.quants.len(), 32, k, j0, part.rows(), x.len(), R);
        check(dec.scales.len() * 32, 32, k, j0, part.rows(), x.len(), R);
        // Half `h` of a block: values `8h..8h + 8` and `16 + 8h..24 + 8h`.
        let half = |at: usize, h: usize| {
            let qp = dec.quants.as_ptr().add(at * 32 + 8 * h);
            let d = _mm256_set1_ps(*dec.scales.get_unchecked(at));
            let w: [__m256; 2] = std::array::from_fn(|c| {
                let q = _mm_loadl_epi64(qp.add(16 * c) as *const __m128i);
                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d)
            });
            w
        };
        let ahead = |first, blocks, line| ahead(q8_arrays(dec), first, blocks, line);
        let at = Rows { x, r0, k, j0 };
        if R > AVX2_ROWS {
            halves_avx2::<R>(half, ahead, &at, part)
        } else {
            let block = |i: usize| {
                let ([w0, w2], [w1, w3]) = (half(i, 0), half(i, 1));
                [w0, w1, w2, w3]
            };
            rows_avx2::<R>(block, ahead, &at, part)
        }
    }

    /// Activation rows `r0..r0 + R` (five to eight) against the task's weight rows, each weight
    /// row in two sweeps: the first builds lanes 0..8 of every row's sixteen-lane sum (values
    /// 0..8, then 16..24, of each block), the second lanes 8..16 (8..16, then 24..32). The two
    /// halves' lanes meet only in the final sum, so the bits are [`rows_avx2`]'s, but a sweep
    /// holds one sum per row, not two: eight rows fit in sixteen registers and each block is
    /// widened once for all of them, where passes of four widen it twice.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn halves_avx2<const R: usize>(
        half: impl Fn(usize, usize) -> [__m256; 2],
        ahead: impl Fn(usize, usize, usize),
        at: &Rows,
        part: &mut Part,
    ) {
        let Rows { x, r0, k, j0 } = *at;
        let nb = k / 32;
        let xp = x.as_ptr();
        for jj in 0..part.rows() {
            let row = (j0 + jj) * nb;
            let mut acc = [[_mm256_setzero_ps(); R]; 2];
            for (h, acc) in acc.iter_mut().enumerate() {
                for b in 0..nb {
                    if h == 0 {
                        ahead(row + AVX2_AHEAD * nb, nb, b);
                    }
                    let [w0, w1] = half(row + b, h);
                    for (i, a) in acc.iter_mut().enumerate() {
                        let p = xp.add(i * k + b * 32 + 8 * h);
                        *a = _mm256_fmadd_ps(w0, _mm256_loadu_ps(p), *a);
                        *a = _mm256_fmadd_ps(w1, _mm256_loadu_ps(p.add(16)), *a);
                    }
                }
            }
            // sum16 of the halves' lanes adds lane l to lane l + 8 first: the halves' sum.
            set_sums8(part, R, |i| {
                ((r0 + i, jj), _mm256_add_ps(acc[0][i], acc[1][i]))
            });
        }
    }

    /// Activation rows `r0..r0 + R` against the task's weight rows, one weight row at a time.
    /// `block(i)` is block `i` widened: values 0..8, 8..16, 16..24, 24..32. The AVX-512 kernel's
    /// sixteen-lane sum in two halves: lanes 0..8 take values 0..8 then 16..24 of each block,
    /// lanes 8..16 values 8..16 then 24..32.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn rows_avx2<const R: usize>(
        block: impl Fn(usize) -> [__m256; 4],
        ahead: impl Fn(usize, usize, usize),
        at: &Rows,
        part: &mut Part,
    ) {
        let Rows { x, r0, k, j0 } = *at;
        let nb = k / 32;
        let xp = x.as_ptr();
        for jj in 0..part.rows() {
            let row = (j0 + jj) * nb;
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            for b in 0..nb {
                ahead(row + AVX2_AHEAD * nb, nb, b);
                let w = block(row + b);
                for (i, a) in acc.iter_mut().enumerate() {
                    let p = xp.add(i * k + b * 32);
                    a[0] = _mm256_fmadd_ps(w[0], _mm256_loadu_ps(p), a[0]);
                    a[1] = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(p.add(8)), a[1]);
                    a[0] = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(p.add(16)), a[0]);
                    a[1] = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(p.add(24)), a[1]);
                }
            }
            // sum16 of the halves' lanes adds lane l to lane l + 8 first: the halves' sum.
            set_sums8(part, R, |i| {
                ((r0 + i, jj), _mm256_add_ps(acc[i][0], acc[i][1]))
            });
        }
    }

    /// [`sum8`] of an eight-lane sum.
    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn sum8_of(a: __m256) -> f32 {
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), a);
        sum8(&lanes)
    }

    /// Sets `count` results of `part`, the `n`th at `sum(n).0` (activation row, task row) to
    /// the [`sum8`] of the eight-lane sum `sum(n).1`: eight at a time with [`sum8_each`], the
    /// last few padded with zero vectors whose sums are dropped, a single one alone.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn set_sums8(
        part: &mut Part,
        count: usize,
        sum: impl Fn(usize) -> ((usize, usize), __m256),
    ) {
        let mut n = 0;
        while n < count {
            let now = (count - n).min(8);
            if now == 1 {
                let ((i, jj), a) = sum(n);
                part.set(i, jj, sum8_of(a));
            } else {
                let v = sum8_each(std::array::from_fn(|p| {
                    if p < now {
                        sum(n + p).1
                    } else {
                        _mm256_setzero_ps()
                    }
                }));
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), v);
                for (p, &l) in lanes[..now].iter().enumerate() {
                    let (i, jj) = sum(n + p).0;
                    part.set(i, jj, l);
                }
            }
            n += now;
        }
    }

    /// [`sum8`] of each of eight vectors, lane `p` of the result from `v[p]`, with the very
    /// additions `sum8` makes (each pairs the same two partial sums), so the bits are the
    /// same: `l + (l + 4)`, then `l + (l + 2)`, then `l + (l + 1)`, each level adding two
    /// vectors' halves at once (seven shuffle pairs, seven additions and a permute instead of
    /// eight stores and 56 scalar additions).
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn sum8_each(v: [__m256; 8]) -> __m256 {
        // Level 1: 128-bit halves. u[k] holds the four sums of v[2k], then those of v[2k + 1].
        let u: [__m256; 4] = std::array::from_fn(|k| {
            let (a, b) = (v[2 * k], v[2 * k + 1]);
            _mm256_add_ps(
                _mm256_permute2f128_ps::<0x20>(a, b),
                _mm256_permute2f128_ps::<0x31>(a, b),
            )
        });
        // Level 2: 64-bit pairs. w[k] holds two sums of each of v[4k..4k + 4]: those of 4k and
        // 4k + 2 in its low half, of 4k + 1 and 4k + 3 in its high half.
        let w: [__m256; 2] = std::array::from_fn(|k| {
            let (a, b) = (_mm256_castps_pd(u[2 * k]), _mm256_castps_pd(u[2 * k + 1]));
            _mm256_add_ps(
                _mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)),
            )
        });
        // Level 3: neighbouring lanes, giving the sums of vectors 0, 2, 4, 6, 1, 3, 5, 7; then
        // lane order p.
        let z = _mm256_add_ps(
            _mm256_shuffle_ps::<0x88>(w[0], w[1]),
            _mm256_shuffle_ps::<0xDD>(w[0], w[1]),
        );
        _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }
}

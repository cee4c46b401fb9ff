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

pub mod ggml;
use rayon::prelude::*;

use crate::kernels::flex::{as_flex, from_vec};
use crate::kernels::sum16;
use ggml::{block_decoder, BlockDecoder, GgmlType};

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
        crate::kernels::transpose(&w, self.rows, self.cols)
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
    /// [`crate::kernels::simd_kernels`] (the one the f32 prefill uses). A row's result does not depend on
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
    /// ([`crate::kernels::small_matmul::decode_scope`]) the block kernel for up to
    /// [`MAX_KERNEL_ROWS`] rows, otherwise (prefill, scoring) [`Self::matmul_many`]; other
    /// backends (autodiff, CUDA) take the general matmul on a dequantised copy.
    pub fn forward<B: Backend>(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [m, k] = x.dims();
        assert_eq!(
            k, self.cols,
            "input width {k} for a [{}, {k}] matrix",
            self.rows
        );
        let decode = m <= MAX_KERNEL_ROWS && crate::kernels::small_matmul::in_decode();
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
        let decode = m > 0 && m <= MAX_KERNEL_ROWS && crate::kernels::small_matmul::in_decode();
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
        use crate::kernels::simd_kernels::{panel, Accumulate, Operand};
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

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
pub(crate) mod tests;

//! The products on f32 slices, `y = x · Wᵀ`: a parallel region of tasks, each a range of one
//! matrix's weight rows run by the kernel of the block type and instruction set (few activation
//! rows: a decode step), or panels dequantised for the f32 gemm kernel (many rows).

use rayon::prelude::*;

use super::isa::{simd, Simd};
use super::part::{Part, SharedOut};
use super::portable::task_generic;
use super::storage::{Blocks, Q4Decoder, Q8Decoder, QuantMatrix, Raw, RawDecoder};
#[cfg(target_arch = "x86_64")]
use super::x86;

/// Output columns (weight rows) one task of the many-row path covers.
const PANEL_TASK_COLUMNS: usize = 64;
/// Activation rows one task of the many-row path covers: each task dequantises its columns
/// once, so the conversion is shared by up to this many rows.
pub(super) const PANEL_TASK_ROWS: usize = 512;

impl QuantMatrix {
    /// `y [m, rows] = x [m, cols] · selfᵀ`, row-major, on the rayon pool.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_on(simd(), x, m)
    }

    /// [`Self::matmul`] with the kernels of `isa` (which the CPU must have).
    pub(super) fn matmul_on(&self, isa: Simd, x: &[f32], m: usize) -> Vec<f32> {
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
    pub(super) fn group_on<const N: usize>(
        isa: Simd,
        mats: [&Self; N],
        x: &[f32],
        m: usize,
    ) -> [Vec<f32>; N] {
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

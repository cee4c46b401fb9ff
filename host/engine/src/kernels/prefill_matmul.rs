//! `x · W` for the many rows of a prefill or a scoring pass, on the CPU backend.
//!
//! The general matmul (burn-flex's, through the `gemm` crate) reaches about a third of the
//! core's multiply-add rate on these shapes (thousands of rows, a few hundred columns and a
//! short inner dimension), and an MLP of a 12,000-token prompt spent longer there than in its
//! attention. Here the rows are cut into tasks for the rayon pool and every task runs the
//! register-blocked kernel of [`super::simd_kernels`] over the weights in place, column panel by
//! column panel.
//!
//! Decode steps keep their own path ([`super::small_matmul`]); training (an autodiff backend)
//! and other backends keep burn's matmul.

use burn::prelude::*;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

use super::flex::{as_flex, from_vec};

use super::simd_kernels::{panel, Accumulate, Operand, PAD};

const _: () = assert!(TASK_COLUMNS.is_multiple_of(PAD) && MIN_TASK_COLUMNS.is_multiple_of(PAD));

/// Most rows one rayon task covers.
pub(crate) const TASK_ROWS: usize = 96;

/// Rows per task for a pass over `m` rows: at most [`TASK_ROWS`], in a number of tasks the
/// pool's threads share evenly, each a whole number of the kernel's eight-row register blocks
/// (rows left over go through its one-row block at about a quarter of the rate). Fixed 96-row
/// tasks cut a 256-token prompt into three, and one of two threads did twice the other's work.
/// A row's result does not depend on its task (see [`super::simd_kernels`]).
pub(crate) fn rows_per_task(m: usize) -> usize {
    const _: () = assert!(TASK_ROWS.is_multiple_of(8));
    let tasks = m
        .div_ceil(TASK_ROWS)
        .next_multiple_of(rayon::current_num_threads().max(1));
    m.div_ceil(tasks).next_multiple_of(8).min(TASK_ROWS)
}

/// `x [rows, k] · w [k, n]` when `B` is the CPU backend and both are contiguous f32; `None`
/// otherwise (the caller uses the general matmul). Every row count takes this path, so a row's
/// result never depends on how many rows came with it (a prompt prefilled alone or in a batch).
pub fn try_matmul<B: Backend>(x: &Tensor<B, 2>, w: &Tensor<B, 2>) -> Option<Tensor<B, 2>> {
    let [m, k] = x.dims();
    let [k2, n] = w.dims();
    if m == 0 || k != k2 || k == 0 || n == 0 {
        return None;
    }
    let xp = as_flex::<B, 2>(x.clone())?;
    let wp = as_flex::<B, 2>(w.clone())?;
    let (xs, ws) = (xp.as_slice::<f32>()?, wp.as_slice::<f32>()?);
    let y = matmul(xs, ws, m, k, n);
    from_vec(y, [m, n])
}

/// `y [m, n] = x [m, k] · w [k, n]`, row-major. Many rows split into row tasks; a few rows (the
/// last position's logits over a large vocabulary) into column tasks instead, so both cores
/// share the pass over the weights.
pub fn matmul(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert_eq!(x.len(), m * k);
    assert_eq!(w.len(), k * n);
    let mut y = vec![0f32; m * n];
    if m > TASK_ROWS {
        let rows = rows_per_task(m);
        y.par_chunks_mut(rows * n)
            .zip(x.par_chunks(rows * k))
            .for_each(|(y, x)| {
                Arch::new().dispatch(Block {
                    x,
                    w,
                    k,
                    n,
                    columns: 0..n,
                    y,
                })
            });
    } else if n <= columns_per_task(n) {
        // Narrow: one task, no hand-off to the pool.
        Arch::new().dispatch(Block {
            x,
            w,
            k,
            n,
            columns: 0..n,
            y: &mut y,
        });
    } else {
        let per_task = columns_per_task(n);
        let parts: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(per_task))
            .into_par_iter()
            .map(|t| {
                let columns = t * per_task..((t + 1) * per_task).min(n);
                let mut part = vec![0f32; m * columns.len()];
                let c0 = columns.start;
                Arch::new().dispatch(Block {
                    x,
                    w,
                    k,
                    n,
                    columns,
                    y: &mut part,
                });
                (c0, part)
            })
            .collect();
        for (c0, part) in parts {
            let width = part.len() / m;
            for (dst, src) in y.chunks_exact_mut(n).zip(part.chunks_exact(width)) {
                dst[c0..c0 + width].copy_from_slice(src);
            }
        }
    }
    y
}

/// Most columns one task covers when the rows are few (a multiple of [`PAD`]).
const TASK_COLUMNS: usize = 4096;
/// Fewest columns worth a task of their own.
pub(crate) const MIN_TASK_COLUMNS: usize = 256;

/// Columns per task when the rows are few: the columns shared over the pool's threads, within
/// [`MIN_TASK_COLUMNS`] and [`TASK_COLUMNS`], a multiple of [`PAD`].
fn columns_per_task(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads())
        .next_multiple_of(PAD)
        .clamp(MIN_TASK_COLUMNS, TASK_COLUMNS)
}

/// One task: `y = x · w[:, columns]` for a slice of rows of `x`; `y` is row-major with the
/// columns' width.
struct Block<'a> {
    x: &'a [f32],
    w: &'a [f32],
    k: usize,
    n: usize,
    columns: std::ops::Range<usize>,
    y: &'a mut [f32],
}

impl WithSimd for Block<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Block {
            x,
            w,
            k,
            n,
            columns,
            y,
        } = self;
        let m = x.len() / k;
        let width = columns.len();
        let step = 2 * S::F32_LANES;
        let whole = columns.start + width / step * step;
        for c0 in (columns.start..whole).step_by(step) {
            panel(
                simd,
                m,
                k,
                Operand { data: x, stride: k },
                Operand {
                    data: &w[c0..],
                    stride: n,
                },
                &mut y[c0 - columns.start..],
                width,
                Accumulate::No,
            );
        }
        if whole < columns.end {
            // The last columns, fewer than a panel: through a zero-padded copy of theirs.
            let rest = columns.end - whole;
            let mut wp = vec![0f32; k * step];
            for (dst, src) in wp.chunks_exact_mut(step).zip(w.chunks_exact(n)) {
                dst[..rest].copy_from_slice(&src[whole..columns.end]);
            }
            let mut yp = vec![0f32; m * step];
            panel(
                simd,
                m,
                k,
                Operand { data: x, stride: k },
                Operand {
                    data: &wp,
                    stride: step,
                },
                &mut yp,
                step,
                Accumulate::No,
            );
            for (dst, src) in y.chunks_exact_mut(width).zip(yp.chunks_exact(step)) {
                dst[whole - columns.start..].copy_from_slice(&src[..rest]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32)
            .map(|v| v / (1u32 << 24) as f32 - 0.5)
            .collect()
    }

    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    y[i * n + j] += x[i * k + p] * w[p * n + j];
                }
            }
        }
        y
    }

    /// Row counts that leave partial tasks and register blocks, widths that are and are not
    /// whole vector pairs.
    #[test]
    fn matches_the_plain_product() {
        for (m, k, n) in [
            (64, 16, 32),
            (300, 128, 384),
            (97, 40, 50),
            (200, 7, 64),
            (1, 24, 9000),
            (3, 8, 4099),
        ] {
            let (x, w) = (values(m * k, 1), values(k * n, 2));
            let (ours, theirs) = (matmul(&x, &w, m, k, n), reference(&x, &w, m, k, n));
            let worst = ours
                .iter()
                .zip(&theirs)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-4, "{m}x{k}x{n}: {worst}");
        }
    }

    /// A row's result does not depend on the rows computed beside it.
    #[test]
    fn a_row_is_computed_the_same_alone_or_in_a_batch() {
        let (m, k, n) = (130, 96, 64);
        let (x, w) = (values(m * k, 3), values(k * n, 4));
        let all = matmul(&x, &w, m, k, n);
        let row = 101;
        let alone = matmul(&x[row * k..(row + 1) * k], &w, 1, k, n);
        assert_eq!(alone, &all[row * n..(row + 1) * n]);
    }

    /// Row tasks are whole register blocks at most `TASK_ROWS` tall, and the busiest thread has
    /// its even share of the rows plus at most one block per task it runs (the rounding): a
    /// 256-token prompt on two threads is four tasks of 64 rows, not 96, 96 and 64.
    #[test]
    fn row_tasks_share_the_rows_evenly_over_the_threads() {
        for threads in 1..=4 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                for m in TASK_ROWS + 1..3000 {
                    let rows = rows_per_task(m);
                    assert!(
                        (8..=TASK_ROWS).contains(&rows) && rows.is_multiple_of(8),
                        "{m} rows: tasks of {rows}"
                    );
                    let tasks = m.div_ceil(rows);
                    let busiest = tasks.div_ceil(threads) * rows;
                    assert!(
                        busiest <= m.div_ceil(threads) + 8 * tasks.div_ceil(threads),
                        "{m} rows on {threads} threads: tasks of {rows}, the busiest thread {busiest}"
                    );
                }
                if threads == 2 {
                    assert_eq!(rows_per_task(256), 64);
                }
            });
        }
    }

    /// The rows split into tasks of another height come out with the same bits.
    #[test]
    fn the_task_height_does_not_change_a_row() {
        let (m, k, n) = (256, 64, 96);
        let (x, w) = (values(m * k, 5), values(k * n, 6));
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| matmul(&x, &w, m, k, n))
        };
        let one = on(1);
        // Tasks of 64, 56 and 32 rows.
        for threads in [2, 5, 8] {
            assert_eq!(on(threads), one, "{threads} threads");
        }
    }
}

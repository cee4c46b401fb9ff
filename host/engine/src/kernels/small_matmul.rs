//! `x · W` for the few rows of a decode step, on the CPU backend.
//!
//! Written by hand because the general gemm (burn-flex's, through the `gemm` crate) packs the
//! whole weight matrix into its panel layout on every call: with 1-8 rows there is almost no
//! arithmetic to hide that extra pass over memory, and a decode step at batch 8 streamed
//! weights at about 7 GB/s where a plain pass reaches 13. Here each weight row is read once,
//! straight from the tensor's storage, into accumulators held in registers (8 rows × 32
//! columns), with the columns split over the rayon pool.
//!
//! Decode steps take this path and nothing else does ([`decode_scope`]): each output row is
//! summed over `k` in the same order whatever the number of rows, so a sequence's logits do not
//! depend on which or how many other sequences share its decode step. Prefill, scoring and
//! decode batches of more than [`MAX_DECODE_ROWS`] take [`super::prefill_matmul`].

use burn::prelude::*;
use rayon::prelude::*;

use super::flex::{as_flex, from_vec};

/// Rows one pass over the weights serves; more rows take several passes.
pub const MAX_ROWS: usize = 8;
/// Most rows this path takes (a decode batch); more go to [`super::prefill_matmul`].
pub const MAX_DECODE_ROWS: usize = 64;

thread_local! {
    static IN_DECODE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` (a decode step's forward pass) with this path switched on for its linear layers.
///
/// The step runs on a thread of the rayon pool (the calling thread waits): a decode step makes
/// about seven parallel matmuls per layer, each a few microseconds of work, and a parallel loop
/// started from outside the pool wakes a worker and puts the caller to sleep every time, which
/// cost more than the matmuls themselves. Started from a worker, the loops split with a plain
/// work-stealing join.
///
/// # Safety
///
/// `f` runs on another thread while the caller waits, though neither `f` nor `T` need be `Send`:
/// `f` must leave nothing behind on that thread (no clone of an `Rc` or other thread-bound value
/// stored in a thread-local, no guard dropped there) and must not rely on the caller's
/// thread-locals. A model's forward pass (what the engine passes) meets this.
pub unsafe fn decode_scope<T>(f: impl FnOnce() -> T) -> T {
    if rayon::current_thread_index().is_some() {
        return flagged(f);
    }
    /// Carries the step to the worker and its result back.
    struct OnOneThread<T>(T);
    // SAFETY: the closure and its result are moved to one worker thread and back while the
    // calling thread blocks in `rayon::scope`, so nothing they refer to is used by two threads
    // at once: the same as a call on another stack. (A model is `Send` but not always `Sync`:
    // burn's lazily initialised parameter cells; they are touched by one thread at a time here.)
    unsafe impl<T> Send for OnOneThread<T> {}
    impl<T> OnOneThread<T> {
        fn into_inner(self) -> T {
            self.0
        }
    }
    let f = OnOneThread(f);
    rayon::scope(move |_| {
        let f = f.into_inner();
        OnOneThread(flagged(f))
    })
    .into_inner()
}

fn flagged<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_DECODE.with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(IN_DECODE.with(|d| d.replace(true)));
    f()
}

/// Whether the current thread is inside a [`decode_scope`].
pub(crate) fn in_decode() -> bool {
    IN_DECODE.with(|d| d.get())
}
/// Columns one rayon task covers.
const TASK: usize = 256;

/// `x [rows, k] · w [k, n]` inside a [`decode_scope`] when `B` is the CPU backend, both are
/// contiguous f32 and `rows <= MAX_DECODE_ROWS`; `None` otherwise (the caller uses the general
/// matmul).
pub fn try_matmul<B: Backend>(x: &Tensor<B, 2>, w: &Tensor<B, 2>) -> Option<Tensor<B, 2>> {
    let [m, k] = x.dims();
    let [k2, n] = w.dims();
    if !in_decode() || m == 0 || m > MAX_DECODE_ROWS || k != k2 {
        return None;
    }
    let xp = as_flex::<B, 2>(x.clone())?;
    let wp = as_flex::<B, 2>(w.clone())?;
    let (xs, ws) = (xp.as_slice::<f32>()?, wp.as_slice::<f32>()?);
    let y = matmul_rows(xs, ws, m, k, n);
    from_vec(y, [m, n])
}

/// `y [m, n] = x [m, k] · w [k, n]`, row-major: one pass over `w` per `MAX_ROWS` rows.
pub fn matmul_rows(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    assert_eq!(x.len(), m * k);
    assert_eq!(w.len(), k * n);
    if m > MAX_ROWS {
        let mut y = Vec::with_capacity(m * n);
        for chunk in x.chunks(MAX_ROWS * k) {
            y.extend(matmul_rows(chunk, w, chunk.len() / k, k, n));
        }
        return y;
    }
    let tasks: Vec<(usize, Vec<f32>)> = (0..n.div_ceil(TASK))
        .into_par_iter()
        .map(|t| {
            let (j0, j1) = (t * TASK, ((t + 1) * TASK).min(n));
            let mut part = vec![0f32; m * (j1 - j0)];
            columns(x, w, m, k, n, j0, j1, &mut part);
            (j0, part)
        })
        .collect();
    let mut y = vec![0f32; m * n];
    for (j0, part) in tasks {
        let width = part.len() / m;
        for i in 0..m {
            y[i * n + j0..i * n + j0 + width].copy_from_slice(&part[i * width..(i + 1) * width]);
        }
    }
    y
}

/// Columns `j0..j1` of the product into `out` (`[m, j1 - j0]`), with the widest SIMD the CPU
/// has (picked at run time; the binary is built for the baseline x86-64).
#[allow(clippy::too_many_arguments)]
fn columns(
    x: &[f32],
    w: &[f32],
    m: usize,
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { columns_avx512(x, w, m, k, n, j0, j1, out) };
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA.
            return unsafe { columns_avx2(x, w, m, k, n, j0, j1, out) };
        }
    }
    columns_generic(x, w, m, k, n, j0, j1, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn columns_avx512(
    x: &[f32],
    w: &[f32],
    m: usize,
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [f32],
) {
    columns_generic(x, w, m, k, n, j0, j1, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn columns_avx2(
    x: &[f32],
    w: &[f32],
    m: usize,
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [f32],
) {
    columns_generic(x, w, m, k, n, j0, j1, out)
}

/// Dispatches on the row count so each register block has a fixed shape the compiler can keep
/// in registers and vectorise (inlined into the feature-specific callers above).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn columns_generic(
    x: &[f32],
    w: &[f32],
    m: usize,
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [f32],
) {
    match m {
        1 => rows::<1>(x, w, k, n, j0, j1, out),
        2 => rows::<2>(x, w, k, n, j0, j1, out),
        3 => rows::<3>(x, w, k, n, j0, j1, out),
        4 => rows::<4>(x, w, k, n, j0, j1, out),
        5 => rows::<5>(x, w, k, n, j0, j1, out),
        6 => rows::<6>(x, w, k, n, j0, j1, out),
        7 => rows::<7>(x, w, k, n, j0, j1, out),
        _ => rows::<8>(x, w, k, n, j0, j1, out),
    }
}

#[inline(always)]
fn rows<const R: usize>(
    x: &[f32],
    w: &[f32],
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    out: &mut [f32],
) {
    // Weight rows are read in order, four at a time, each output element updated once per
    // four: `out` (R x width, at most 8 KB) stays in L1 while the weights stream past.
    let width = j1 - j0;
    let (out, _) = out.split_at_mut(R * width);
    let mut p = 0;
    while p + 4 <= k {
        let w0 = &w[p * n + j0..p * n + j1];
        let w1 = &w[(p + 1) * n + j0..(p + 1) * n + j1];
        let w2 = &w[(p + 2) * n + j0..(p + 2) * n + j1];
        let w3 = &w[(p + 3) * n + j0..(p + 3) * n + j1];
        for i in 0..R {
            let xi = &x[i * k + p..i * k + p + 4];
            let (a, b, c, d) = (xi[0], xi[1], xi[2], xi[3]);
            let o = &mut out[i * width..(i + 1) * width];
            for j in 0..width {
                o[j] += (a * w0[j] + b * w1[j]) + (c * w2[j] + d * w3[j]);
            }
        }
        p += 4;
    }
    while p < k {
        let w0 = &w[p * n + j0..p * n + j1];
        for i in 0..R {
            let a = x[i * k + p];
            let o = &mut out[i * width..(i + 1) * width];
            for j in 0..width {
                o[j] += a * w0[j];
            }
        }
        p += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{CpuBackend, CpuDevice};

    fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut y = vec![0f64; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    y[i * n + j] += x[i * k + p] as f64 * w[p * n + j] as f64;
                }
            }
        }
        y.into_iter().map(|v| v as f32).collect()
    }

    fn data(len: usize, seed: u32) -> Vec<f32> {
        (0..len)
            .map(|i| {
                (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 1000) as f32
                    / 500.0
                    - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_the_product_for_every_row_count_and_ragged_widths() {
        for m in [1, 2, 3, 4, 5, 6, 7, 8, 11, 17] {
            for (k, n) in [(3, 5), (17, 33), (64, 300), (40, 513)] {
                let (x, w) = (data(m * k, 1), data(k * n, 2));
                let y = matmul_rows(&x, &w, m, k, n);
                for (a, b) in y.iter().zip(reference(&x, &w, m, k, n)) {
                    assert!((a - b).abs() < 1e-4, "m {m} k {k} n {n}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn a_row_comes_out_the_same_whatever_shares_its_call() {
        let (k, n) = (96, 700);
        let x = data(8 * k, 3);
        let w = data(k * n, 4);
        let all = matmul_rows(&x, &w, 8, k, n);
        for i in 0..8 {
            let alone = matmul_rows(&x[i * k..(i + 1) * k], &w, 1, k, n);
            assert_eq!(alone, all[i * n..(i + 1) * n], "row {i}");
        }
    }

    #[test]
    fn tensors_take_this_path_on_the_cpu_backend_only_for_few_rows() {
        let dev = CpuDevice::default();
        let (k, n) = (24, 40);
        let w = Tensor::<CpuBackend, 2>::from_data(TensorData::new(data(k * n, 5), [k, n]), &dev);
        let x = Tensor::<CpuBackend, 2>::from_data(TensorData::new(data(3 * k, 6), [3, k]), &dev);
        // Outside a decode step the general matmul runs.
        assert!(try_matmul(&x, &w).is_none());
        // SAFETY (all calls here): a matmul, which leaves nothing on the worker.
        let fast =
            unsafe { decode_scope(|| try_matmul(&x, &w)) }.expect("3 rows on the CPU backend");
        assert!(
            try_matmul(&x, &w).is_none(),
            "the scope ends with its closure"
        );
        let slow = x.clone().matmul(w.clone());
        let (a, b) = (
            fast.into_data().to_vec::<f32>().unwrap(),
            slow.into_data().to_vec::<f32>().unwrap(),
        );
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-4);
        }
        unsafe {
            decode_scope(|| {
                let many = Tensor::<CpuBackend, 2>::zeros([MAX_DECODE_ROWS + 1, k], &dev);
                assert!(try_matmul(&many, &w).is_none());
                // A transposed (non-contiguous) weight is left to the general matmul.
                let wt = Tensor::<CpuBackend, 2>::zeros([n, k], &dev).transpose();
                assert!(try_matmul(&x, &wt).is_none());
            });
        }
        // Autodiff tensors (training) never take it.
        type Ad = burn::backend::Autodiff<CpuBackend>;
        let xa = Tensor::<Ad, 2>::from_data(TensorData::new(data(3 * k, 6), [3, k]), &dev);
        let wa = Tensor::<Ad, 2>::from_data(TensorData::new(data(k * n, 5), [k, n]), &dev);
        assert!(unsafe { decode_scope(|| try_matmul(&xa, &wa)) }.is_none());
    }
}

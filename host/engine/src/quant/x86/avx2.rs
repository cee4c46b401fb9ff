//! The Q4 and Q8 kernels in AVX2 intrinsics: the AVX-512 kernels' operations in the same order
//! on Q8 and wide rows, eight partial sums on narrow Q4 rows, then `sum8`.

use std::arch::x86_64::*;

use super::*;

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

#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn q4_avx2(
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
    let widen = |q: __m256i, d: __m256, mn: __m256| _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), d, mn);
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
pub(crate) unsafe fn q8_avx2(
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
pub(crate) unsafe fn sum8_each(v: [__m256; 8]) -> __m256 {
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

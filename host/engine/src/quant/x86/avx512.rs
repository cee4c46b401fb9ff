//! The Q4 and Q8 kernels in AVX-512 intrinsics: sixteen partial sums per (activation row,
//! weight row), then `sum16`.

use std::arch::x86_64::*;

use super::*;

#[target_feature(enable = "avx512f,fma")]
pub(crate) unsafe fn q4_avx512(
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
pub(crate) unsafe fn q8_avx512(
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
pub(crate) unsafe fn sum16_each(v: [__m512; 16]) -> __m512 {
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

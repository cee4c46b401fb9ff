//! The SIMD kernels under the CPU's prefill paths: the register-blocked product (the tiled
//! attention's two block products and [`super::prefill_matmul`]) and `exp2` (its softmax and
//! [`super::swiglu::silu_mul`]).
//!
//! Written by hand because in these products one side is short (a head width of 32-128, or a
//! hidden size of a few hundred) and the other long: the `gemm` crate burn-flex calls packs
//! both operands and spends its time on that and on edge blocks, reaching about a third of the
//! core's multiply-add rate here. This kernel reads both operands in place: every step loads
//! two vectors of a row of `b` and broadcasts one element of `a` per row into multiply-adds on
//! accumulators that stay in registers. The SIMD width is the caller's `pulp` choice.
//!
//! Each output element is summed over the depth in order, the same whatever the number of rows,
//! so a row's result does not depend on which rows it was computed with.

use pulp::Simd;

/// Widths (keys, columns) are padded to this: two vectors of the widest SIMD.
pub const PAD: usize = 32;

/// A row-major matrix operand: row `r` starts at `data[r * stride]`.
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    /// The elements, from row 0.
    pub data: &'a [f32],
    /// Elements from one row to the next.
    pub stride: usize,
}

/// Whether a block product adds to its destination or overwrites it.
#[derive(Clone, Copy, PartialEq)]
pub enum Accumulate {
    /// `c = a b`.
    No,
    /// `c += a b`.
    Yes,
}

/// `c[r, 0..2L] (+)= Σ_p a[r, p] · b[p, 0..2L]` for `r < m` (`L` the vector width), in
/// register blocks as tall as the SIMD's register file allows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn panel<S: Simd>(
    simd: S,
    m: usize,
    depth: usize,
    a: Operand,
    b: Operand,
    c: &mut [f32],
    c_stride: usize,
    accumulate: Accumulate,
) {
    // Accumulators for MR rows of two vectors, the two loaded vectors and a broadcast must fit
    // the register file (more rows spill on AVX-512 in practice).
    if S::REGISTER_COUNT >= 32 {
        rows::<S, 8>(simd, m, depth, a, b, c, c_stride, accumulate)
    } else {
        rows::<S, 6>(simd, m, depth, a, b, c, c_stride, accumulate)
    }
}

/// [`panel`] with blocks of `MR` rows, then single rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rows<S: Simd, const MR: usize>(
    simd: S,
    m: usize,
    depth: usize,
    a: Operand,
    b: Operand,
    c: &mut [f32],
    c_stride: usize,
    accumulate: Accumulate,
) {
    let l2 = 2 * S::F32_LANES;
    // `load` and `store` rely on vectors needing no more alignment than f32.
    assert!(std::mem::align_of::<S::f32s>() <= std::mem::align_of::<f32>());
    // Checked arithmetic: a wrapped bound would let the unchecked reads below through.
    let within = |rows: usize, stride: usize, width: usize, len: usize| {
        rows == 0
            || (rows - 1)
                .checked_mul(stride)
                .and_then(|x| x.checked_add(width))
                .is_some_and(|end| end <= len)
    };
    assert!(within(depth, b.stride, l2, b.data.len()));
    assert!(within(m, a.stride, depth, a.data.len()));
    assert!(within(m, c_stride, l2, c.len()));
    let full = m - m % MR;
    for r0 in (0..full).step_by(MR) {
        // SAFETY: the asserts above bound every row and column read or written.
        unsafe {
            block::<S, MR>(
                simd,
                depth,
                a.data.as_ptr().add(r0 * a.stride),
                a.stride,
                b.data.as_ptr(),
                b.stride,
                c.as_mut_ptr().add(r0 * c_stride),
                c_stride,
                accumulate,
            )
        }
    }
    for r in full..m {
        // SAFETY: as above.
        unsafe {
            block::<S, 1>(
                simd,
                depth,
                a.data.as_ptr().add(r * a.stride),
                a.stride,
                b.data.as_ptr(),
                b.stride,
                c.as_mut_ptr().add(r * c_stride),
                c_stride,
                accumulate,
            )
        }
    }
}

/// The register block: `MR` rows by two vectors of `c`, accumulated over `depth` in
/// registers; every step loads two vectors of `b` and broadcasts one element of `a` per row.
///
/// # Safety
/// `a` must be readable for `MR` rows of `depth` (stride `lda`), `b` for `depth` rows of two
/// vectors (stride `ldb`), and `c` writable for `MR` rows of two vectors (stride `ldc`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block<S: Simd, const MR: usize>(
    simd: S,
    depth: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: Accumulate,
) {
    let l = S::F32_LANES;
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; 2]; MR];
    if accumulate == Accumulate::Yes {
        for (r, row) in acc.iter_mut().enumerate() {
            for (j, x) in row.iter_mut().enumerate() {
                *x = unsafe { load::<S>(c.add(r * ldc + j * l)) };
            }
        }
    }
    for p in 0..depth {
        let b0 = unsafe { load::<S>(b.add(p * ldb)) };
        let b1 = unsafe { load::<S>(b.add(p * ldb + l)) };
        for (r, row) in acc.iter_mut().enumerate() {
            let x = simd.splat_f32s(unsafe { *a.add(r * lda + p) });
            row[0] = simd.mul_add_f32s(x, b0, row[0]);
            row[1] = simd.mul_add_f32s(x, b1, row[1]);
        }
    }
    for (r, row) in acc.iter().enumerate() {
        for (j, x) in row.iter().enumerate() {
            unsafe { store::<S>(c.add(r * ldc + j * l), *x) };
        }
    }
}

/// # Safety
/// `p` must be readable for one vector.
#[inline(always)]
unsafe fn load<S: Simd>(p: *const f32) -> S::f32s {
    // The vector types are arrays of f32 (alignment 4), so any f32 address is aligned for them.
    // A plain dereference, not `read_unaligned`: that one's overlap check (on in debug builds)
    // bounced every accumulator through the stack.
    unsafe { *(p as *const S::f32s) }
}

/// # Safety
/// `p` must be writable for one vector.
#[inline(always)]
unsafe fn store<S: Simd>(p: *mut f32, x: S::f32s) {
    unsafe { *(p as *mut S::f32s) = x }
}

/// `2^x`, vectorized: `x = n + r` with `n` whole and `|r| <= 1/2`, `2^r` by Cephes' exp2f
/// polynomial, `2^n` built in the exponent bits. Relative error below 3e-7 on [-126, 126];
/// inputs are clamped to that range (f32's normal one), so `-inf` gives `2^-126`, not 0 (too
/// small to move a softmax sum of which one term is 1), and `+inf` gives `2^126`.
#[inline(always)]
pub fn exp2<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    // Adding and taking away 1.5 · 2^23 rounds to the nearest integer, which then sits in the
    // low mantissa bits of the sum.
    const ROUND: f32 = 12_582_912.0;
    const P: [f32; 6] = [
        1.535_336_2e-4,
        1.339_887_4e-3,
        9.618_437e-3,
        5.550_332_5e-2,
        2.402_264_8e-1,
        6.931_472e-1,
    ];
    let x = simd.min_f32s(
        simd.max_f32s(x, simd.splat_f32s(-126.0)),
        simd.splat_f32s(126.0),
    );
    let t = simd.add_f32s(x, simd.splat_f32s(ROUND));
    let n = simd.sub_f32s(t, simd.splat_f32s(ROUND));
    let r = simd.sub_f32s(x, n);
    let mut p = simd.splat_f32s(P[0]);
    for c in &P[1..] {
        p = simd.mul_add_f32s(p, r, simd.splat_f32s(*c));
    }
    p = simd.mul_add_f32s(p, r, simd.splat_f32s(1.0));
    // The low bits of t are n (two's complement); n + 127 shifted into the exponent field is
    // 2^n, and the higher bits of t shift out.
    let bits = simd.add_u32s(simd.transmute_u32s_f32s(t), simd.splat_u32s(127));
    let pow2 = simd.wrapping_dyn_shl_u32s(bits, simd.splat_u32s(23));
    simd.mul_f32s(p, simd.transmute_f32s_u32s(pow2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_polynomial_exp2_is_exact_to_float_precision() {
        let scalar = pulp::Scalar::new();
        let mut worst = 0f64;
        for i in 0..=100_000 {
            let x = 252.0 * i as f32 / 100_000.0 - 126.0;
            let (a, e) = (exp2(scalar, x) as f64, (x as f64).exp2());
            worst = worst.max((a - e).abs() / e);
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp2(scalar, 0.0), 1.0);
        assert!(exp2(scalar, -1000.0) <= 2f32.powi(-126));
        assert!(exp2(scalar, f32::NEG_INFINITY) <= 2f32.powi(-126));
        assert_eq!(exp2(scalar, 1000.0), 2f32.powi(126));
        assert_eq!(exp2(scalar, 3.0), 8.0);
    }
}

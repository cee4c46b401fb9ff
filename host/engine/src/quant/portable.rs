//! The portable kernel: any block type, through its decoder, in plain loops the compiler
//! vectorises (with FMA where the CPU has it).

#[cfg(target_arch = "x86_64")]
use super::isa::{simd, Simd};
use super::part::Part;
use super::storage::Decode;
use super::PASS_ROWS;
use crate::kernels::sum16;

/// The portable kernel (any block type), compiled with FMA where the CPU has it.
pub(super) fn task_generic<D: Decode>(
    dec: &D,
    x: &[f32],
    m: usize,
    k: usize,
    j0: usize,
    part: &mut Part,
) {
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

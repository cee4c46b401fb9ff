//! The Q4 and Q8 kernels in AVX-512 and AVX2 intrinsics: each block is widened to f32 in
//! registers (`w = q * scale + min`, one FMA per sixteen or eight values), then multiplied into
//! per-row accumulators. The AVX-512 kernels keep sixteen partial sums per (activation row,
//! weight row): sum `l` takes `w[l] x[l]`, then `w[16 + l] x[16 + l]`, block after block; then
//! [`sum16`]. The AVX2 kernels make the same operations in the same order on Q8 and on rows wider
//! than `EIGHT_ROWS_MAX_COLS`, so there the two agree bit for bit; on narrower Q4 rows they keep
//! eight partial sums (`lanes8_avx2`, then [`sum8`]).

use std::arch::x86_64::*;

use super::part::Part;
use super::storage::{Q4Decoder, Q8Decoder};
use super::{EIGHT_ROWS_MAX_COLS, PASS_ROWS};
use crate::kernels::{sum16, sum8};

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

/// Checks every index the unchecked loads of a pass will use.
fn check(quant_len: usize, per_block: usize, k: usize, j0: usize, rows: usize, x: usize, r: usize) {
    assert!(
        k.is_multiple_of(32) && x >= r * k,
        "x holds the pass's rows"
    );
    assert!(
        quant_len >= (j0 + rows) * (k / 32) * per_block,
        "the task's weight rows exist"
    );
}

/// Where a pass reads and writes.
struct Rows<'a> {
    x: &'a [f32],
    r0: usize,
    k: usize,
    j0: usize,
}

mod avx2;
mod avx512;

pub(crate) use avx2::{q4_avx2, q8_avx2};
pub(crate) use avx512::{q4_avx512, q8_avx512};
#[cfg(test)]
pub(crate) use {avx2::sum8_each, avx512::sum16_each};

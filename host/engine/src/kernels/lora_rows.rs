//! The adapter terms of a decode step whose rows take different LoRA adapters
//! ([`crate::adapters::RowLora`]), on the CPU backend.
//!
//! Written by hand because burn's path costs about six tensor operations per adapter and
//! projection (a row gather, two matmuls, a scale, an indexed add), each a few hundred
//! nanoseconds of dispatch around a few microseconds of arithmetic: eight adapters made a decode
//! step of the built-in model nearly twice as long as one. Here the rows are gathered and put
//! back in place, and the two products go through the decode kernel
//! ([`super::small_matmul::matmul_rows`]) exactly as burn's path sends them, so the bits are the
//! same either way and a row's result does not depend on its neighbours.

use burn::prelude::*;

use super::flex::{as_flex, contiguous_f32, from_vec};
use super::small_matmul::{in_decode, matmul_rows, MAX_DECODE_ROWS};
use crate::adapters::LoraPair;

/// `y + scale · x_s A_s B_s` on each adapter's rows `s` (`x [rows, k]`, `y [rows, n]`), inside
/// a decode step on the CPU backend; `None` elsewhere (the caller takes burn's path).
pub fn try_add_rows<B: Backend>(
    y: &Tensor<B, 2>,
    x: &Tensor<B, 2>,
    groups: &[(&LoraPair<B>, Vec<usize>)],
) -> Option<Tensor<B, 2>> {
    let [m, k] = x.dims();
    let [m2, n] = y.dims();
    if !in_decode() || m != m2 || m == 0 || m > MAX_DECODE_ROWS {
        return None;
    }
    let xf = contiguous_f32(as_flex(x.clone())?)?;
    let xs = xf.as_slice::<f32>()?;
    let yf = contiguous_f32(as_flex(y.clone())?)?;
    let mut out = yf.as_slice::<f32>()?.to_vec();
    for (pair, rows) in groups {
        let [k2, r] = pair.a.dims();
        let [r2, n2] = pair.b.dims();
        if k2 != k || r2 != r || n2 != n || rows.iter().any(|&i| i >= m) {
            return None;
        }
        let af = contiguous_f32(as_flex(pair.a.clone())?)?;
        let bf = contiguous_f32(as_flex(pair.b.clone())?)?;
        let mut gathered = Vec::with_capacity(rows.len() * k);
        for &i in rows {
            gathered.extend_from_slice(&xs[i * k..(i + 1) * k]);
        }
        let mut low = matmul_rows(&gathered, af.as_slice::<f32>()?, rows.len(), k, r);
        // burn's `mul_scalar` multiplies by the scale as an f32, as here.
        let scale = pair.scale as f32;
        low.iter_mut().for_each(|v| *v *= scale);
        let delta = matmul_rows(&low, bf.as_slice::<f32>()?, rows.len(), r, n);
        for (j, &i) in rows.iter().enumerate() {
            let row = &mut out[i * n..(i + 1) * n];
            for (o, d) in row.iter_mut().zip(&delta[j * n..(j + 1) * n]) {
                *o += d;
            }
        }
    }
    from_vec(out, [m, n])
}

//! Causal attention of a prefill (or a scoring pass) on the CPU backend, tiled.
//!
//! Written by hand because burn-flex's attention, for long sequences, runs every query row
//! against every key tile on one thread: the half of the score matrix that causality hides is
//! computed and then masked, and the second core idles. Here queries and keys are cut into
//! tiles, tiles wholly in a query tile's future are skipped, each head runs on its own rayon
//! task, and the two block products of every tile go through the `gemm` crate; the softmax is
//! the online one of flash attention, so no `[queries, keys]` matrix is ever held. Grouped
//! query heads read their key/value head in place (no repeat).
//!
//! Keys may outnumber queries (a prefill that continues a cached prefix): the causal boundary is
//! aligned at the last key, as burn's `is_causal` does.

use burn::backend::flex::FlexTensor;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use rayon::prelude::*;
use std::any::Any;

/// Query rows per tile.
const QUERY_TILE: usize = 256;
/// Keys per tile.
const KEY_TILE: usize = 512;
/// Below this many queries burn's own attention is as fast.
const MIN_QUERIES: usize = 64;

fn as_flex<B: Backend, const D: usize>(t: Tensor<B, D>) -> Option<FlexTensor> {
    let TensorPrimitive::Float(p) = t.into_primitive() else {
        return None;
    };
    let p: Box<dyn Any> = Box::new(p);
    p.downcast::<FlexTensor>().ok().map(|b| *b)
}

/// `softmax(q kᵀ / √d + causal) v` for `q [b, heads, s, d]` and `k`, `v` `[b, kv_heads, t, d]`
/// (`t >= s`, `heads` a multiple of `kv_heads`), as `[b, heads, s, d_v]`; `None` when the
/// backend is not burn-flex (CUDA, autodiff) or the shapes do not suit this path.
pub fn try_causal<B: Backend>(
    q: &Tensor<B, 4>,
    k: &Tensor<B, 4>,
    v: &Tensor<B, 4>,
) -> Option<Tensor<B, 4>> {
    let [b, h, s, d] = q.dims();
    let [kb, kvh, t, kd] = k.dims();
    let [vb, vh, vt, dv] = v.dims();
    if s < MIN_QUERIES
        || kb != b
        || vb != b
        || kd != d
        || vh != kvh
        || vt != t
        || t < s
        || kvh == 0
        || h % kvh != 0
    {
        return None;
    }
    let (qf, kf, vf) = (
        as_flex::<B, 4>(q.clone())?.to_contiguous(),
        as_flex::<B, 4>(k.clone())?.to_contiguous(),
        as_flex::<B, 4>(v.clone())?.to_contiguous(),
    );
    let (qs, ks, vs) = (
        qf.as_slice::<f32>()?,
        kf.as_slice::<f32>()?,
        vf.as_slice::<f32>()?,
    );
    let shape = Shape {
        heads: h,
        kv_heads: kvh,
        queries: s,
        keys: t,
        dim: d,
        value_dim: dv,
    };
    let out = causal_attention(qs, ks, vs, b, shape);
    let out = FlexTensor::from_data(TensorData::new(out, [b, h, s, dv]));
    let prim: Box<dyn Any> = Box::new(out);
    let prim = *prim.downcast::<B::FloatTensorPrimitive>().ok()?;
    Some(Tensor::from_primitive(TensorPrimitive::Float(prim)))
}

/// Sizes of one attention call (per batch row).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Query positions (the last `queries` of the `keys` positions).
    pub queries: usize,
    /// Key positions.
    pub keys: usize,
    /// Width of a query/key head.
    pub dim: usize,
    /// Width of a value head.
    pub value_dim: usize,
}

/// The tiled causal attention on row-major slices (see the module doc); returns
/// `[batch, heads, queries, value_dim]`.
pub fn causal_attention(q: &[f32], k: &[f32], v: &[f32], batch: usize, sh: Shape) -> Vec<f32> {
    let Shape {
        heads,
        kv_heads,
        queries: s,
        keys: t,
        dim: d,
        value_dim: dv,
    } = sh;
    assert_eq!(q.len(), batch * heads * s * d);
    assert_eq!(k.len(), batch * kv_heads * t * d);
    assert_eq!(v.len(), batch * kv_heads * t * dv);
    let group = heads / kv_heads;
    let mut out = vec![0f32; batch * heads * s * dv];
    out.par_chunks_mut(s * dv)
        .enumerate()
        .for_each(|(bh, out)| {
            let (bi, hi) = (bh / heads, bh % heads);
            let kv = bi * kv_heads + hi / group;
            head(
                &q[bh * s * d..(bh + 1) * s * d],
                &k[kv * t * d..(kv + 1) * t * d],
                &v[kv * t * dv..(kv + 1) * t * dv],
                out,
                sh,
            );
        });
    out
}

/// `dst[m, n] (+)= lhs[m, k] · rhs`, every operand row-major, `rhs` given by its strides.
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    n: usize,
    k: usize,
    dst: &mut [f32],
    accumulate: bool,
    lhs: &[f32],
    rhs: &[f32],
    rhs_rs: isize,
    rhs_cs: isize,
) {
    debug_assert!(dst.len() >= m * n && lhs.len() >= m * k);
    // SAFETY: the slices cover the m×n, m×k and k×n (by the given strides) extents read or
    // written; the callers size them so.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            lhs.as_ptr(),
            1,
            k as isize,
            rhs.as_ptr(),
            rhs_cs,
            rhs_rs,
            if accumulate { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// `exp(x)` for `x <= 0` by range reduction and a degree-6 polynomial: branch-free, so the
/// loops around it vectorize (the standard library's calls libm once per element); relative
/// error below 3e-7, and 0 below -87 (where f32's normal range ends).
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and taking away 1.5 * 2^23 rounds to the nearest integer with plain arithmetic.
    const ROUND: f32 = 12_582_912.0;
    let c = x.max(-87.0);
    let n = (c * LOG2E + ROUND) - ROUND;
    let r = c - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // Wrapping arithmetic: n is in [-126, 0] here, and checked arithmetic (debug builds) would
    // keep the loop from vectorizing.
    let pow2 = f32::from_bits(((n as i32).wrapping_add(127) as u32).wrapping_shl(23));
    let y = p * pow2;
    if x < -87.0 {
        0.0
    } else {
        y
    }
}

const LANES: usize = 16;

/// One score row of a tile: `row[j] = exp(row[j] * scale - new_max)` where `new_max` is the
/// larger of `prev_max` and the row's scaled maximum; returns `(new_max, sum of the row)`.
/// Lane-wise accumulators keep both reductions vectorizable.
#[inline(always)]
fn softmax_row_impl(row: &mut [f32], scale: f32, prev_max: f32) -> (f32, f32) {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = l.max(x);
        }
    }
    let mut m = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |a, &x| a.max(x));
    for l in lanes {
        m = m.max(l);
    }
    let new_max = prev_max.max(m * scale);
    let mut sums = [0f32; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, x) in sums.iter_mut().zip(c.iter_mut()) {
            *x = exp_nonpositive(*x * scale - new_max);
            *s += *x;
        }
    }
    let mut sum: f32 = 0.0;
    for x in chunks.into_remainder() {
        *x = exp_nonpositive(*x * scale - new_max);
        sum += *x;
    }
    (new_max, sum + sums.iter().sum::<f32>())
}

type SoftmaxRow = fn(&mut [f32], f32, f32) -> (f32, f32);

fn softmax_row_portable(row: &mut [f32], scale: f32, prev_max: f32) -> (f32, f32) {
    softmax_row_impl(row, scale, prev_max)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn softmax_row_avx2(row: &mut [f32], scale: f32, prev_max: f32) -> (f32, f32) {
    softmax_row_impl(row, scale, prev_max)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn softmax_row_avx512(row: &mut [f32], scale: f32, prev_max: f32) -> (f32, f32) {
    softmax_row_impl(row, scale, prev_max)
}

/// The widest form this CPU runs, chosen at run time (the binary is built for the baseline).
fn softmax_row() -> SoftmaxRow {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the feature the function is compiled for.
            return |r, s, m| unsafe { softmax_row_avx512(r, s, m) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above.
            return |r, s, m| unsafe { softmax_row_avx2(r, s, m) };
        }
    }
    softmax_row_portable
}

/// One head: `q [s, d]`, `k [t, d]`, `v [t, dv]` into `out [s, dv]`.
fn head(q: &[f32], k: &[f32], v: &[f32], out: &mut [f32], sh: Shape) {
    let softmax_row = softmax_row();
    let (s, t, d, dv) = (sh.queries, sh.keys, sh.dim, sh.value_dim);
    let offset = t - s; // query i sees keys 0..=i + offset
    let scale = 1.0 / (d as f32).sqrt();
    let mut scores = vec![0f32; QUERY_TILE * KEY_TILE];
    let mut acc = vec![0f32; QUERY_TILE * dv];
    let mut row_max = vec![0f32; QUERY_TILE];
    let mut row_sum = vec![0f32; QUERY_TILE];
    for q0 in (0..s).step_by(QUERY_TILE) {
        let m = QUERY_TILE.min(s - q0);
        let keys_seen = q0 + m + offset; // the tile's last query sees keys ..keys_seen
        acc[..m * dv].fill(0.0);
        row_max[..m].fill(f32::NEG_INFINITY);
        row_sum[..m].fill(0.0);
        for k0 in (0..keys_seen).step_by(KEY_TILE) {
            let n = KEY_TILE.min(keys_seen - k0);
            let sc = &mut scores[..m * n];
            gemm(
                m,
                n,
                d,
                sc,
                false,
                &q[q0 * d..(q0 + m) * d],
                &k[k0 * d..(k0 + n) * d],
                1,
                d as isize,
            );
            for i in 0..m {
                // Keys k0 + j with j < visible are not in query q0 + i's future.
                let visible = (q0 + i + offset + 1).saturating_sub(k0).min(n);
                let row = &mut sc[i * n..(i + 1) * n];
                if visible == 0 {
                    row.fill(0.0);
                    continue;
                }
                let (new_max, sum) = softmax_row(&mut row[..visible], scale, row_max[i]);
                row[visible..].fill(0.0);
                let correction = (row_max[i] - new_max).exp(); // 0 on the first tile
                if correction != 1.0 {
                    for a in &mut acc[i * dv..(i + 1) * dv] {
                        *a *= correction;
                    }
                }
                row_sum[i] = row_sum[i] * correction + sum;
                row_max[i] = new_max;
            }
            gemm(
                m,
                dv,
                n,
                &mut acc[..m * dv],
                true,
                sc,
                &v[k0 * dv..(k0 + n) * dv],
                dv as isize,
                1,
            );
        }
        for i in 0..m {
            let inv = 1.0 / row_sum[i];
            for (o, a) in out[(q0 + i) * dv..(q0 + i + 1) * dv]
                .iter_mut()
                .zip(&acc[i * dv..(i + 1) * dv])
            {
                *o = a * inv;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use burn::tensor::module::attention;
    use burn::tensor::ops::AttentionModuleOptions;

    type B = CpuBackend;

    fn random(shape: [usize; 4], seed: u64) -> Tensor<B, 4> {
        let n: usize = shape.iter().product();
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let data: Vec<f32> = (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
            })
            .collect();
        Tensor::from_data(TensorData::new(data, shape), &Default::default())
    }

    fn repeat(x: Tensor<B, 4>, g: usize) -> Tensor<B, 4> {
        let [b, kvh, t, d] = x.dims();
        x.unsqueeze_dim::<5>(2)
            .expand([b, kvh, g, t, d])
            .reshape([b, kvh * g, t, d])
    }

    /// Against burn's attention: a prefill (as many keys as queries) and a continuation of a
    /// cached prefix (more keys), grouped heads, lengths that are not multiples of the tiles.
    #[test]
    fn tiled_causal_attention_matches_burns() {
        for (s, t) in [(300, 300), (130, 700), (64, 64)] {
            let (b, h, kvh, d) = (2, 4, 2, 16);
            let q = random([b, h, s, d], 1);
            let k = random([b, kvh, t, d], 2);
            let v = random([b, kvh, t, d], 3);
            let ours = try_causal(&q, &k, &v).expect("the CPU backend takes this path");
            let opts = AttentionModuleOptions {
                scale: None,
                softcap: None,
                is_causal: true,
            };
            let theirs = attention(q, repeat(k, 2), repeat(v, 2), None, None, opts);
            let (a, e) = (
                ours.into_data().to_vec::<f32>().unwrap(),
                theirs.into_data().to_vec::<f32>().unwrap(),
            );
            let worst = a
                .iter()
                .zip(&e)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-4, "s {s} t {t}: max difference {worst}");
        }
    }

    #[test]
    fn the_polynomial_exp_is_exact_to_float_precision() {
        let mut worst = 0f64;
        for i in 0..=100_000 {
            let x = -87.0 * i as f32 / 100_000.0;
            let (a, e) = (exp_nonpositive(x) as f64, (x as f64).exp());
            worst = worst.max((a - e).abs() / e);
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp_nonpositive(-200.0), 0.0);
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        // Every form the dispatch may pick agrees with the portable one.
        let row: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).sin() * 5.0).collect();
        let (mut a, mut b) = (row.clone(), row);
        let ra = softmax_row()(&mut a, 0.3, -1.0);
        let rb = softmax_row_portable(&mut b, 0.3, -1.0);
        assert_eq!(ra.0, rb.0);
        assert!((ra.1 - rb.1).abs() < 1e-5);
    }

    #[test]
    fn short_or_unsuitable_inputs_are_left_to_burn() {
        let q = random([1, 2, 8, 4], 1);
        let k = random([1, 2, 8, 4], 2);
        assert!(try_causal(&q, &k, &k).is_none(), "too few queries");
        let q = random([1, 3, 100, 4], 1);
        let k = random([1, 2, 100, 4], 2);
        assert!(try_causal(&q, &k, &k).is_none(), "heads not a multiple");
    }
}

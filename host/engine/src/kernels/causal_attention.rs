//! Causal attention of a prefill (or a scoring pass) on the CPU backend, tiled.
//!
//! Written by hand because burn-flex's attention, for long sequences, runs every query row
//! against every key tile on one thread: the half of the score matrix that causality hides is
//! computed and then masked, and the second core idles. Here queries and keys are cut into
//! tiles, tiles wholly in a query tile's future are skipped, every (batch row, query tile) pair
//! is its own rayon task (its heads in turn, the query heads of a kv head stacked), and the softmax is the online one of flash attention, so no `[queries,
//! keys]` matrix is ever held. Grouped query heads read their key/value head in place.
//!
//! The two block products (`q kᵀ` and `p v`) have a short side (the head width, 32 to 128),
//! where general gemm libraries spend more time packing and on edge blocks than computing; they
//! run through one register-blocked kernel instead, over keys transposed once per call, so
//! every inner step is a vector load and broadcast multiply-adds. Scores are kept in base 2
//! (the query is scaled by `log2 e / √d` once) so the softmax is a bare `exp2`. The SIMD width
//! (AVX-512, AVX2, NEON or scalar) is chosen at run time through `pulp`.
//!
//! Keys may outnumber queries (a prefill that continues a cached prefix): the causal boundary is
//! aligned at the last key, as burn's `is_causal` does.

use burn::prelude::*;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

use super::flex::{as_flex, from_vec, readable_in_place, Rows};
use super::simd_kernels::{exp2, panel, Accumulate, Operand, PAD};

/// Query rows per tile (a multiple of both register blockings' row counts).
const QUERY_TILE: usize = 96;
/// Keys per tile.
const KEY_TILE: usize = 512;
/// Query heads of one kv head computed together (their rows stacked in one tile).
const STACKED_HEADS: usize = 2;
/// Rows of a stacked tile.
const TILE_ROWS: usize = QUERY_TILE * STACKED_HEADS;

/// `softmax(q kᵀ / √d + causal) v` for `q [b, heads, s, d]` and `k`, `v` `[b, kv_heads, t, d]`
/// (`t >= s`, `heads` a multiple of `kv_heads`; any strides), as `[b, s, heads · d_v]` (the
/// heads side by side, as the output projection takes them); `None` when the backend is not
/// burn-flex (CUDA, autodiff) or the shapes do not suit this path.
pub fn try_causal<B: Backend>(
    q: &Tensor<B, 4>,
    k: &Tensor<B, 4>,
    v: &Tensor<B, 4>,
) -> Option<Tensor<B, 3>> {
    let [b, h, s, d] = q.dims();
    let [kb, kvh, t, kd] = k.dims();
    let [vb, vh, vt, dv] = v.dims();
    if s == 0
        || b == 0
        || h == 0
        || d == 0
        || dv == 0
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
        readable_in_place(as_flex::<B, 4>(q.clone())?),
        readable_in_place(as_flex::<B, 4>(k.clone())?),
        readable_in_place(as_flex::<B, 4>(v.clone())?),
    );
    let shape = Shape {
        heads: h,
        kv_heads: kvh,
        queries: s,
        keys: t,
        dim: d,
        value_dim: dv,
    };
    let (q, k, v) = (Rows::of(&qf, d)?, Rows::of(&kf, d)?, Rows::of(&vf, dv)?);
    let out = causal_attention(q, k, v, b, shape);
    from_vec(out, [b, s, h * dv])
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

/// The tiled causal attention (see the module doc) of `q [batch, heads, queries, dim]` and `k`,
/// `v` `[batch, kv_heads, keys, width]`; returns `[batch, queries, heads · value_dim]`.
pub fn causal_attention(q: Rows, k: Rows, v: Rows, batch: usize, sh: Shape) -> Vec<f32> {
    causal_attention_lse(q, k, v, batch, sh).0
}

/// [`causal_attention`], and each query row's log-sum-exp of its scores in base 2 (scores
/// `q · k · log2 e / √d`), `[batch, queries, heads]`: what a backward pass needs to recompute
/// the softmax.
pub fn causal_attention_lse(
    q: Rows,
    k: Rows,
    v: Rows,
    batch: usize,
    sh: Shape,
) -> (Vec<f32>, Vec<f32>) {
    let Shape {
        heads,
        kv_heads,
        queries: s,
        keys: t,
        dim: d,
        value_dim: dv,
    } = sh;
    assert!(batch > 0 && heads > 0 && kv_heads > 0 && heads % kv_heads == 0 && t >= s);
    // Keys transposed to [dim, keys] (padded with zeros), so a vector holds one dimension of
    // consecutive keys; values padded to whole vector pairs; both contiguous per kv head.
    let (tp, dvp) = (t.next_multiple_of(PAD), dv.next_multiple_of(PAD));
    let mut kt = vec![0f32; batch * kv_heads * d * tp];
    let mut vp = vec![0f32; batch * kv_heads * t * dvp];
    kt.par_chunks_mut(d * tp)
        .zip(vp.par_chunks_mut(t * dvp))
        .enumerate()
        .for_each(|(bk, (kt, vp))| {
            let (bi, kv) = (bk / kv_heads, bk % kv_heads);
            // In blocks of 16 keys, so each write fills a cache line of `kt` instead of
            // scattering single floats a whole row apart.
            for j0 in (0..t).step_by(16) {
                let keys: Vec<&[f32]> = (j0..(j0 + 16).min(t)).map(|j| k.row(bi, kv, j)).collect();
                for c in 0..d {
                    for (dst, key) in kt[c * tp + j0..].iter_mut().zip(&keys) {
                        *dst = key[c];
                    }
                }
            }
            for j in 0..t {
                vp[j * dvp..j * dvp + dv].copy_from_slice(v.row(bi, kv, j));
            }
        });
    let dims = Dims {
        heads,
        group: heads / kv_heads,
        queries: s,
        keys: t,
        dim: d,
        value_dim: dv,
        keys_padded: tp,
        value_dim_padded: dvp,
    };
    let row = heads * dv;
    let mut out = vec![0f32; batch * s * row];
    let mut lse = vec![0f32; batch * s * heads];
    out.par_chunks_mut(s * row)
        .zip(lse.par_chunks_mut(s * heads))
        .enumerate()
        .for_each(|(bi, (out, lse))| {
            let kv = bi * kv_heads;
            let (kt, vp) = (
                &kt[kv * d * tp..(kv + kv_heads) * d * tp],
                &vp[kv * t * dvp..(kv + kv_heads) * t * dvp],
            );
            // Too few tiles to keep every core busy (a short prompt): the stacks of heads of
            // each tile become tasks of their own instead.
            let split_heads = batch * s.div_ceil(QUERY_TILE) < 2 * rayon::current_num_threads();
            out.par_chunks_mut(QUERY_TILE * row)
                .zip(lse.par_chunks_mut(QUERY_TILE * heads))
                .enumerate()
                .for_each_init(
                    || Scratch::new(d, dvp),
                    |scratch, (tile, (out, lse))| {
                        let q0 = tile * QUERY_TILE;
                        let group = dims.group;
                        // Query heads that share a kv head go through together (up to
                        // STACKED_HEADS at once): each key and value panel loaded serves them all.
                        let stacks: Vec<(usize, std::ops::Range<usize>)> = (0..heads / group)
                            .flat_map(|kv| {
                                (kv * group..(kv + 1) * group).step_by(STACKED_HEADS).map(
                                    move |h0| (kv, h0..(h0 + STACKED_HEADS).min((kv + 1) * group)),
                                )
                            })
                            .collect();
                        let run = |scratch: &mut Scratch,
                                   (kv, stack): (usize, std::ops::Range<usize>),
                                   out: &mut [f32],
                                   lse: &mut [f32]| {
                            stack_tile(
                                StackInputs {
                                    q,
                                    kt: &kt[kv * d * tp..(kv + 1) * d * tp],
                                    v: &vp[kv * t * dvp..(kv + 1) * t * dvp],
                                },
                                bi,
                                q0,
                                stack,
                                (out, lse),
                                dims,
                                scratch,
                            )
                        };
                        if !split_heads || stacks.len() == 1 {
                            for stack in stacks {
                                run(scratch, stack, out, lse);
                            }
                            return;
                        }
                        // Each stack fills its own columns of a copy of the tile's rows.
                        let parts: Vec<_> = stacks
                            .into_par_iter()
                            .map(|stack| {
                                let mut part = vec![0f32; out.len()];
                                let mut part_lse = vec![0f32; lse.len()];
                                let heads_range = stack.1.clone();
                                run(&mut Scratch::new(d, dvp), stack, &mut part, &mut part_lse);
                                (heads_range, part, part_lse)
                            })
                            .collect();
                        for (hr, part, part_lse) in parts {
                            let columns = hr.start * dv..hr.end * dv;
                            for (dst, src) in out.chunks_exact_mut(row).zip(part.chunks_exact(row))
                            {
                                dst[columns.clone()].copy_from_slice(&src[columns.clone()]);
                            }
                            for (dst, src) in lse
                                .chunks_exact_mut(heads)
                                .zip(part_lse.chunks_exact(heads))
                            {
                                dst[hr.clone()].copy_from_slice(&src[hr.clone()]);
                            }
                        }
                    },
                );
        });
    (out, lse)
}

/// The keys and values of one kv head and the queries of every head.
#[derive(Clone, Copy)]
struct StackInputs<'a> {
    q: Rows<'a>,
    kt: &'a [f32],
    v: &'a [f32],
}

/// One query tile of a stack of query heads sharing a kv head: their queries scaled into the
/// scratch, then the tile's attention into those heads' columns of `out`.
fn stack_tile(
    inputs: StackInputs,
    bi: usize,
    q0: usize,
    heads: std::ops::Range<usize>,
    (out, lse): (&mut [f32], &mut [f32]),
    dims: Dims,
    scratch: &mut Scratch,
) {
    let (d, m) = (dims.dim, QUERY_TILE.min(dims.queries - q0));
    // The queries in base 2: exp(x/√d) = exp2(x · log2 e/√d); row (head - heads.start) · m + i
    // is query q0 + i of that head.
    let scale = std::f32::consts::LOG2_E / (d as f32).sqrt();
    for (r, dst) in scratch
        .q
        .chunks_exact_mut(d)
        .take(heads.len() * m)
        .enumerate()
    {
        let src = inputs.q.row(bi, heads.start + r / m, q0 + r % m);
        for (dst, &x) in dst.iter_mut().zip(src) {
            *dst = x * scale;
        }
    }
    Arch::new().dispatch(QueryTile {
        q0,
        heads,
        kt: inputs.kt,
        v: inputs.v,
        out,
        lse,
        dims,
        scratch,
    })
}

/// Sizes one query tile needs.
#[derive(Clone, Copy)]
struct Dims {
    heads: usize,
    group: usize,
    queries: usize,
    keys: usize,
    dim: usize,
    value_dim: usize,
    keys_padded: usize,
    value_dim_padded: usize,
}

/// A worker's buffers, reused across its tiles.
struct Scratch {
    q: Vec<f32>,
    scores: Vec<f32>,
    acc: Vec<f32>,
    row_max: Vec<f32>,
    row_sum: Vec<f32>,
}

impl Scratch {
    fn new(dim: usize, value_dim_padded: usize) -> Self {
        Scratch {
            q: vec![0.0; TILE_ROWS * dim],
            scores: vec![0.0; TILE_ROWS * KEY_TILE],
            acc: vec![0.0; TILE_ROWS * value_dim_padded],
            row_max: vec![0.0; TILE_ROWS],
            row_sum: vec![0.0; TILE_ROWS],
        }
    }
}

/// One query tile of query heads sharing a kv head: the scaled queries in the scratch
/// (`[heads · m, dim]`, head-major), `kt [dim, keys_padded]`, `v [keys, value_dim_padded]` into
/// those heads' columns of `out` (the tile's rows of `[queries, heads · value_dim]`), and their
/// log-sum-exps into `lse` (the tile's rows of `[queries, heads]`).
struct QueryTile<'a> {
    q0: usize,
    heads: std::ops::Range<usize>,
    kt: &'a [f32],
    v: &'a [f32],
    out: &'a mut [f32],
    lse: &'a mut [f32],
    dims: Dims,
    scratch: &'a mut Scratch,
}

impl WithSimd for QueryTile<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Dims {
            heads,
            queries: s,
            keys: t,
            dim: d,
            value_dim: dv,
            keys_padded: tp,
            value_dim_padded: dvp,
            ..
        } = self.dims;
        let Scratch {
            q,
            scores,
            acc,
            row_max,
            row_sum,
        } = self.scratch;
        let q0 = self.q0;
        let m = QUERY_TILE.min(s - q0);
        let offset = t - s; // query i sees keys 0..=i + offset
        let keys_seen = q0 + m + offset; // the tile's last query sees keys ..keys_seen
        let rows = self.heads.len() * m; // row r is query q0 + r % m
        let q = &q[..rows * d];
        acc[..rows * dvp].fill(0.0);
        row_max[..rows].fill(f32::NEG_INFINITY);
        row_sum[..rows].fill(0.0);
        for k0 in (0..keys_seen).step_by(KEY_TILE) {
            let n = KEY_TILE.min(keys_seen - k0);
            // scores[m, n] = q kᵀ, in column panels of two vectors (padded keys read zeros).
            for c0 in (0..n).step_by(2 * S::F32_LANES) {
                panel(
                    simd,
                    rows,
                    d,
                    Operand { data: q, stride: d },
                    Operand {
                        data: &self.kt[k0 + c0..],
                        stride: tp,
                    },
                    &mut scores[c0..],
                    KEY_TILE,
                    Accumulate::No,
                );
            }
            for i in 0..rows {
                // Keys k0 + j with j < visible are not in query q0 + i % m's future.
                let visible = (q0 + i % m + offset + 1).saturating_sub(k0).min(n);
                let row = &mut scores[i * KEY_TILE..i * KEY_TILE + n];
                if visible == 0 {
                    row.fill(0.0);
                    continue;
                }
                let (new_max, sum) = softmax_row(simd, &mut row[..visible], row_max[i]);
                row[visible..].fill(0.0);
                let correction = (row_max[i] - new_max).exp2(); // 0 on the first tile
                if correction != 1.0 {
                    for a in &mut acc[i * dvp..(i + 1) * dvp] {
                        *a *= correction;
                    }
                }
                row_sum[i] = row_sum[i] * correction + sum;
                row_max[i] = new_max;
            }
            // acc[m, dvp] += p v, in column panels of two vectors.
            for c0 in (0..dvp).step_by(2 * S::F32_LANES) {
                panel(
                    simd,
                    rows,
                    n,
                    Operand {
                        data: scores,
                        stride: KEY_TILE,
                    },
                    Operand {
                        data: &self.v[k0 * dvp + c0..],
                        stride: dvp,
                    },
                    &mut acc[c0..],
                    dvp,
                    Accumulate::Yes,
                );
            }
        }
        let row = heads * dv;
        for i in 0..rows {
            let inv = 1.0 / row_sum[i];
            self.lse[(i % m) * heads + self.heads.start + i / m] = row_max[i] + row_sum[i].log2();
            let o = (i % m) * row + (self.heads.start + i / m) * dv;
            for (o, a) in self.out[o..o + dv]
                .iter_mut()
                .zip(&acc[i * dvp..i * dvp + dv])
            {
                *o = a * inv;
            }
        }
    }
}

/// One score row of a tile, in base 2: `row[j] = exp2(row[j] - new_max)` where `new_max` is
/// the larger of `prev_max` and the row's maximum; returns `(new_max, sum of the row)`.
#[inline(always)]
pub(super) fn softmax_row<S: Simd>(simd: S, row: &mut [f32], prev_max: f32) -> (f32, f32) {
    let (body, tail) = S::as_mut_simd_f32s(row);
    // Four accumulators each, so the reductions are not one long dependency chain.
    let mut maxes = [simd.splat_f32s(f32::NEG_INFINITY); 4];
    let mut quads = body.chunks_exact(4);
    for quad in &mut quads {
        for (m, &x) in maxes.iter_mut().zip(quad) {
            *m = simd.max_f32s(*m, x);
        }
    }
    for &x in quads.remainder() {
        maxes[0] = simd.max_f32s(maxes[0], x);
    }
    let mut m = tail.iter().fold(prev_max, |a, &x| a.max(x));
    for x in maxes {
        m = m.max(simd.reduce_max_f32s(x));
    }
    let new_max = simd.splat_f32s(m);
    let mut sums = [simd.splat_f32s(0.0); 4];
    let mut quads = body.chunks_exact_mut(4);
    for quad in &mut quads {
        for (s, x) in sums.iter_mut().zip(quad) {
            *x = exp2(simd, simd.sub_f32s(*x, new_max));
            *s = simd.add_f32s(*s, *x);
        }
    }
    for x in quads.into_remainder() {
        *x = exp2(simd, simd.sub_f32s(*x, new_max));
        sums[0] = simd.add_f32s(sums[0], *x);
    }
    let mut sum = 0.0;
    for x in tail {
        *x = (*x - m).exp2();
        sum += *x;
    }
    for s in sums {
        sum += simd.reduce_sum_f32s(s);
    }
    (m, sum)
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
    /// cached prefix (more keys), one, two and four query heads per kv head, lengths that are
    /// not multiples of the tiles, head widths that are and are not whole vector pairs.
    #[test]
    fn tiled_causal_attention_matches_burns() {
        for (s, t, d, h, kvh) in [
            (300, 300, 16, 4, 2),
            (130, 700, 16, 4, 2),
            (64, 64, 16, 4, 2),
            (1100, 1100, 32, 4, 2),
            (77, 600, 40, 4, 2),
            (5, 9, 16, 3, 3),
            (200, 260, 32, 8, 2),
            (150, 150, 64, 9, 3),
        ] {
            let b = 2;
            let q = random([b, h, s, d], 1);
            let k = random([b, kvh, t, d], 2);
            let v = random([b, kvh, t, d], 3);
            let ours = try_causal(&q, &k, &v).expect("the CPU backend takes this path");
            // The same queries as a transposed view of `[b, s, h, d]` storage (what the
            // attention layer passes), read in place: the same result.
            let q_view = Tensor::<B, 4>::from_data(
                q.clone().swap_dims(1, 2).into_data(),
                &Default::default(),
            )
            .swap_dims(1, 2);
            let strided = try_causal(&q_view, &k, &v).unwrap();
            assert_eq!(
                strided.into_data().to_vec::<f32>().unwrap(),
                ours.clone().into_data().to_vec::<f32>().unwrap()
            );
            let opts = AttentionModuleOptions {
                scale: None,
                softcap: None,
                is_causal: true,
            };
            let theirs = attention(q, repeat(k, h / kvh), repeat(v, h / kvh), None, None, opts)
                .swap_dims(1, 2)
                .reshape([b, s, h * d]);
            let (a, e) = (
                ours.into_data().to_vec::<f32>().unwrap(),
                theirs.into_data().to_vec::<f32>().unwrap(),
            );
            let worst = a
                .iter()
                .zip(&e)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-4, "s {s} t {t} d {d}: max difference {worst}");
        }
    }

    #[test]
    fn every_simd_width_computes_the_same_softmax_row() {
        struct Row(Vec<f32>);
        impl WithSimd for Row {
            type Output = (Vec<f32>, f32, f32);
            fn with_simd<S: Simd>(mut self, simd: S) -> Self::Output {
                let (m, s) = softmax_row(simd, &mut self.0, -1.0);
                (self.0, m, s)
            }
        }
        let row: Vec<f32> = (0..77).map(|i| (i as f32 * 0.7).sin() * 5.0).collect();
        let (a, ma, sa) = Arch::new().dispatch(Row(row.clone()));
        let (b, mb, sb) = Row(row).with_simd(pulp::Scalar::new());
        assert_eq!(ma, mb);
        assert!((sa - sb).abs() < 1e-5, "{sa} vs {sb}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-6);
        }
    }

    #[test]
    fn unsuitable_inputs_are_left_to_burn() {
        let q = random([1, 3, 100, 4], 1);
        let k = random([1, 2, 100, 4], 2);
        assert!(try_causal(&q, &k, &k).is_none(), "heads not a multiple");
    }
}

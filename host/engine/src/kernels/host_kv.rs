//! One layer's KV cache in host memory on the CPU backend, and the decode attention that reads
//! it in place.
//!
//! Written by hand because a burn tensor cannot be written in place once shared, so a cache
//! kept as tensors grows by concatenation: every decode step copies the whole cache of every
//! layer, and burn-flex's attention copies it once more to make its inputs contiguous. Here the
//! cache is one buffer per side, `[batch, heads, capacity, width]`, reserved ahead for the
//! positions a batch will reach: a step writes its new row per head and reads the rest where it
//! lies (the decode attention below; a prefill continuing a cached prefix goes through the
//! tiled causal attention with the buffer as its keys and values).

use rayon::prelude::*;

use super::causal_attention::softmax_row;
use super::flex::Rows;

/// Positions reserved at most beyond those cached: capacity is touched memory once the
/// allocator backs it with huge pages, so a large `max_tokens` does not reserve its whole span.
pub const MAX_RESERVE_AHEAD: usize = 512;

/// Keys and values of one layer for a batch of sequences: two `[batch, heads, capacity, width]`
/// buffers, the first `len` positions of each (batch row, head) plane filled.
#[derive(Clone, Debug)]
pub struct HostKv {
    k: Vec<f32>,
    v: Vec<f32>,
    batch: usize,
    heads: usize,
    dim: usize,
    value_dim: usize,
    capacity: usize,
    len: usize,
}

impl HostKv {
    /// An empty cache with room for `capacity` positions.
    pub fn new(batch: usize, heads: usize, dim: usize, value_dim: usize, capacity: usize) -> Self {
        HostKv {
            k: vec![0.0; batch * heads * capacity * dim],
            v: vec![0.0; batch * heads * capacity * value_dim],
            batch,
            heads,
            dim,
            value_dim,
            capacity,
            len: 0,
        }
    }

    /// Positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the buffers hold room for.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// `[batch, heads, width, value width]`.
    pub fn dims(&self) -> [usize; 4] {
        [self.batch, self.heads, self.dim, self.value_dim]
    }

    /// Makes room for `positions` in all, keeping what is cached (one copy, when it grows).
    pub fn reserve(&mut self, positions: usize) {
        if positions <= self.capacity {
            return;
        }
        let planes = self.batch * self.heads;
        let (cap, len) = (self.capacity, self.len);
        let grow = |old: &[f32], w: usize| {
            let mut new = vec![0f32; planes * positions * w];
            for p in 0..planes {
                new[p * positions * w..][..len * w].copy_from_slice(&old[p * cap * w..][..len * w]);
            }
            new
        };
        self.k = grow(&self.k, self.dim);
        self.v = grow(&self.v, self.value_dim);
        self.capacity = positions;
    }

    /// Appends `s` positions, `k` and `v` read as `[batch, heads, s, width]`; grows by half
    /// its capacity when full, so a cache that outlives its reservation is still written in
    /// place on most steps.
    pub fn append(&mut self, k: Rows, v: Rows, s: usize) {
        let need = self.len + s;
        if need > self.capacity {
            self.reserve(need.max(self.capacity + self.capacity / 2));
        }
        let (cap, len) = (self.capacity, self.len);
        for b in 0..self.batch {
            for h in 0..self.heads {
                let plane = b * self.heads + h;
                for i in 0..s {
                    let at = plane * cap + len + i;
                    self.k[at * self.dim..][..self.dim].copy_from_slice(k.row(b, h, i));
                    self.v[at * self.value_dim..][..self.value_dim].copy_from_slice(v.row(b, h, i));
                }
            }
        }
        self.len = need;
    }

    /// The keys, read in place as `[batch, heads, len, dim]` rows.
    pub fn keys(&self) -> Rows<'_> {
        self.rows(&self.k, self.dim)
    }

    /// The values, read in place as `[batch, heads, len, value_dim]` rows.
    pub fn values(&self) -> Rows<'_> {
        self.rows(&self.v, self.value_dim)
    }

    fn rows<'a>(&self, data: &'a [f32], w: usize) -> Rows<'a> {
        let c = self.capacity;
        Rows::new(data, 0, [self.heads * c * w, c * w, w], w)
    }

    /// Keeps only batch rows `rows`, in that order (sequences that finished leave).
    pub fn retain_rows(&mut self, rows: &[usize]) {
        assert!(rows.iter().all(|&r| r < self.batch), "row out of range");
        let plane = |w: usize| self.heads * self.capacity * w;
        let pick = |data: &[f32], w: usize| {
            let p = plane(w);
            let mut out = Vec::with_capacity(rows.len() * p);
            for &r in rows {
                out.extend_from_slice(&data[r * p..(r + 1) * p]);
            }
            out
        };
        self.k = pick(&self.k, self.dim);
        self.v = pick(&self.v, self.value_dim);
        self.batch = rows.len();
    }

    /// Batch rows `rows`, positions `0..len`, as row-major `[rows, heads, len, width]` copies
    /// of the keys and the values.
    pub fn to_vecs(&self, rows: std::ops::Range<usize>, len: usize) -> (Vec<f32>, Vec<f32>) {
        assert!(rows.end <= self.batch && len <= self.len);
        let copy = |data: &[f32], w: usize| {
            let mut out = Vec::with_capacity(rows.len() * self.heads * len * w);
            for b in rows.clone() {
                for h in 0..self.heads {
                    let at = (b * self.heads + h) * self.capacity * w;
                    out.extend_from_slice(&data[at..at + len * w]);
                }
            }
            out
        };
        (copy(&self.k, self.dim), copy(&self.v, self.value_dim))
    }
}

/// `softmax(q kᵀ / √d) v` for one new query per batch row: `q` read as `[batch, heads, 1,
/// dim]` (`heads` a multiple of the cache's), keys `hidden[row · len + j]` left out (padding
/// holes of a batch); returns `[batch, heads · value_dim]`, the heads side by side. Each (row,
/// kv head) is a task reading its keys and values once for the query heads that share them;
/// a row's result does not depend on the other rows or on the holes' count (hidden keys are
/// skipped, not weighted by zero).
pub fn decode_attention(q: Rows, kv: &HostKv, heads: usize, hidden: Option<&[bool]>) -> Vec<f32> {
    let [batch, kv_heads, d, dv] = kv.dims();
    let t = kv.len();
    assert!(kv_heads > 0 && heads.is_multiple_of(kv_heads));
    assert!(hidden.is_none_or(|m| m.len() == batch * t));
    let g = heads / kv_heads;
    // Scores in base 2, so the softmax is a bare exp2 (the tiled causal attention's).
    let scale = std::f32::consts::LOG2_E / (d as f32).sqrt();
    let (keys, values) = (kv.keys(), kv.values());
    let mut out = vec![0f32; batch * heads * dv];
    out.par_chunks_mut(g * dv)
        .enumerate()
        .for_each(|(task, out)| {
            // Compiled for the CPU's widest vectors (the binary targets the baseline x86-64).
            pulp::Arch::new().dispatch(Attend {
                q,
                keys,
                values,
                hidden,
                batch_row: task / kv_heads,
                kv_head: task % kv_heads,
                g,
                t,
                scale,
                out,
            })
        });
    out
}

/// One (batch row, kv head) of [`decode_attention`]: its `g` query heads against the row's
/// visible keys.
struct Attend<'a> {
    q: Rows<'a>,
    keys: Rows<'a>,
    values: Rows<'a>,
    hidden: Option<&'a [bool]>,
    batch_row: usize,
    kv_head: usize,
    g: usize,
    t: usize,
    scale: f32,
    out: &'a mut [f32],
}

impl pulp::WithSimd for Attend<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Attend {
            q,
            keys,
            values,
            hidden,
            batch_row: b,
            kv_head: kvh,
            g,
            t,
            scale,
            out,
        } = self;
        let dv = out.len() / g;
        // The visible keys' positions, listed only when some are hidden.
        let listed: Option<Vec<usize>> =
            hidden.map(|m| (0..t).filter(|&j| !m[b * t + j]).collect());
        let n = listed.as_ref().map_or(t, Vec::len);
        let key = |c: usize| listed.as_ref().map_or(c, |l| l[c]);
        let queries: Vec<&[f32]> = (0..g).map(|gi| q.row(b, kvh * g + gi, 0)).collect();
        let mut scores = vec![0f32; g * n];
        for c in 0..n {
            let k = keys.row(b, kvh, key(c));
            for (gi, q) in queries.iter().enumerate() {
                scores[gi * n + c] = dot(simd, q, k) * scale;
            }
        }
        let mut inv = vec![0f32; g];
        for (gi, inv) in inv.iter_mut().enumerate() {
            let (_, sum) = softmax_row(simd, &mut scores[gi * n..(gi + 1) * n], f32::NEG_INFINITY);
            // Every key hidden (never the case in a batch: a row sees its own tokens) leaves
            // zeros rather than NaN.
            *inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
        }
        // The query heads three at a time (twelve accumulators), each value row read once
        // for all of them.
        let mut g0 = 0;
        while g0 < g {
            let heads = (g - g0).min(3);
            let at = |gi: usize| &scores[(g0 + gi) * n..(g0 + gi + 1) * n];
            let outs = &mut out[g0 * dv..(g0 + heads) * dv];
            let row = |c: usize| values.row(b, kvh, key(c));
            match heads {
                3 => weighted_sums::<S, 3>(simd, [at(0), at(1), at(2)], row, &inv[g0..], outs),
                2 => weighted_sums::<S, 2>(simd, [at(0), at(1)], row, &inv[g0..], outs),
                _ => weighted_sums::<S, 1>(simd, [at(0)], row, &inv[g0..], outs),
            }
            g0 += heads;
        }
    }
}

/// `a · b` with multiply-adds in two vector sums (two chains, so the adds overlap).
#[inline(always)]
fn dot<S: pulp::Simd>(simd: S, a: &[f32], b: &[f32]) -> f32 {
    let (av, a_tail) = S::as_simd_f32s(a);
    let (bv, b_tail) = S::as_simd_f32s(b);
    let mut acc = [simd.splat_f32s(0.0); 2];
    let (ap, bp) = (av.chunks_exact(2), bv.chunks_exact(2));
    let (a_rest, b_rest) = (ap.remainder(), bp.remainder());
    for (x, y) in ap.zip(bp) {
        acc[0] = simd.mul_add_f32s(x[0], y[0], acc[0]);
        acc[1] = simd.mul_add_f32s(x[1], y[1], acc[1]);
    }
    if let (Some(&x), Some(&y)) = (a_rest.first(), b_rest.first()) {
        acc[0] = simd.mul_add_f32s(x, y, acc[0]);
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    simd.reduce_sum_f32s(simd.add_f32s(acc[0], acc[1])) + tail
}

/// `out[h] = inv[h] · Σ_c p[h][c] · row(c)` for `H` heads side by side in `out`, four vectors
/// of each head's output held in registers over every row (the value rows are read once per four
/// vectors for all the heads, instead of each head's output being loaded and stored once per
/// row).
#[inline(always)]
fn weighted_sums<'v, S: pulp::Simd, const H: usize>(
    simd: S,
    p: [&[f32]; H],
    row: impl Fn(usize) -> &'v [f32],
    inv: &[f32],
    out: &mut [f32],
) {
    let n = p[0].len();
    let dv = out.len() / H;
    let lanes = S::F32_LANES;
    let vectors = dv / lanes;
    let mut c0 = 0;
    // Whole groups of four vectors, then single vectors, then a scalar tail: only fixed
    // groups keep the accumulators in registers.
    while c0 < vectors {
        let width = if vectors - c0 >= 4 { 4 } else { 1 };
        let mut acc = [[simd.splat_f32s(0.0); 4]; H];
        for c in 0..n {
            let (v, _) = S::as_simd_f32s(row(c));
            for (acc, p) in acc.iter_mut().zip(&p) {
                let pv = simd.splat_f32s(p[c]);
                if width == 4 {
                    for (a, &x) in acc.iter_mut().zip(&v[c0..c0 + 4]) {
                        *a = simd.mul_add_f32s(pv, x, *a);
                    }
                } else {
                    acc[0] = simd.mul_add_f32s(pv, v[c0], acc[0]);
                }
            }
        }
        for (h, acc) in acc.iter().enumerate() {
            let (o, _) = S::as_mut_simd_f32s(&mut out[h * dv..(h + 1) * dv]);
            let scale = simd.splat_f32s(inv[h]);
            for (o, a) in o[c0..c0 + width].iter_mut().zip(acc) {
                *o = simd.mul_f32s(*a, scale);
            }
        }
        c0 += width;
    }
    for (h, p) in p.iter().enumerate() {
        for at in vectors * lanes..dv {
            out[h * dv + at] = p
                .iter()
                .enumerate()
                .map(|(c, &pc)| pc * row(c)[at])
                .sum::<f32>()
                * inv[h];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// `[b, h, s, w]` row-major data as rows.
    fn rows(data: &[f32], [_, h, s, w]: [usize; 4]) -> Rows<'_> {
        Rows::new(data, 0, [h * s * w, s * w, w], w)
    }

    #[test]
    fn appends_past_the_reservation_keep_every_position_and_rows_can_leave() {
        let (b, h, d) = (3, 2, 4);
        let mut kv = HostKv::new(b, h, d, d, 2);
        let mut want_k = vec![Vec::new(); b * h];
        for (step, s) in [3usize, 1, 1, 4, 1].into_iter().enumerate() {
            let k = seq(b * h * s * d, step as u32);
            let v: Vec<f32> = k.iter().map(|x| x * 2.0).collect();
            kv.append(rows(&k, [b, h, s, d]), rows(&v, [b, h, s, d]), s);
            for p in 0..b * h {
                want_k[p].extend_from_slice(&k[p * s * d..(p + 1) * s * d]);
            }
        }
        assert_eq!(kv.len(), 10);
        assert!(kv.capacity() >= 10);
        let (k, v) = kv.to_vecs(0..b, 10);
        assert_eq!(k, want_k.concat());
        assert_eq!(v, k.iter().map(|x| x * 2.0).collect::<Vec<_>>());
        kv.retain_rows(&[2, 0]);
        let (k, _) = kv.to_vecs(0..2, 10);
        assert_eq!(k, [&want_k[4..6], &want_k[0..2]].concat().concat());
        // A snapshot of one row's prefix.
        let (k, _) = kv.to_vecs(1..2, 3);
        assert_eq!(k, [&want_k[0][..12], &want_k[1][..12]].concat());
    }

    #[test]
    fn decode_attention_matches_the_softmax_written_out_with_hidden_keys() {
        // Widths below a vector, with whole groups of four vectors, with a vector left over
        // after them, and with a scalar tail (8 or 16 lanes); query heads per kv head taken in
        // one group of three or fewer, or in several.
        for d in [4, 64, 80, 84] {
            for g in 1..=5 {
                check_decode_attention(d, g);
            }
        }
    }

    fn check_decode_attention(d: usize, g: usize) {
        let (b, kvh, t) = (2, 2, 7);
        let heads = kvh * g;
        let (k, v) = (seq(b * kvh * t * d, 1), seq(b * kvh * t * d, 2));
        let q = seq(b * heads * d, 3);
        let mut kv = HostKv::new(b, kvh, d, d, 4);
        kv.append(rows(&k, [b, kvh, t, d]), rows(&v, [b, kvh, t, d]), t);
        let mut hidden = vec![false; b * t];
        hidden[3] = true; // row 0, key 3
        hidden[t + 5] = true; // row 1, key 5
        let got = decode_attention(rows(&q, [b, heads, 1, d]), &kv, heads, Some(&hidden));
        for bi in 0..b {
            for head in 0..heads {
                let kv_head = head / g;
                let qr = &q[(bi * heads + head) * d..][..d];
                let key = |j: usize| &k[((bi * kvh + kv_head) * t + j) * d..][..d];
                let val = |j: usize| &v[((bi * kvh + kv_head) * t + j) * d..][..d];
                let s: Vec<f64> = (0..t)
                    .map(|j| {
                        if hidden[bi * t + j] {
                            f64::NEG_INFINITY
                        } else {
                            qr.iter()
                                .zip(key(j))
                                .map(|(a, b)| (a * b) as f64)
                                .sum::<f64>()
                                / (d as f64).sqrt()
                        }
                    })
                    .collect();
                let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..d {
                    let want: f64 = (0..t).map(|j| e[j] / z * val(j)[c] as f64).sum();
                    let got_c = got[(bi * heads + head) * d + c] as f64;
                    assert!(
                        (got_c - want).abs() < 1e-5,
                        "d {d}, g {g}, row {bi} head {head} [{c}]: {got_c} vs {want}"
                    );
                }
            }
        }
        // Row 1 alone, without its hole, gives the same bits as in the batch.
        let without_hole = |x: &[f32]| -> Vec<f32> {
            (0..kvh)
                .flat_map(|h| (0..t).filter(|&j| j != 5).map(move |j| (h, j)))
                .flat_map(|(h, j)| x[((kvh + h) * t + j) * d..][..d].to_vec())
                .collect()
        };
        let (k1, v1) = (without_hole(&k), without_hole(&v));
        let mut alone = HostKv::new(1, kvh, d, d, t - 1);
        alone.append(
            rows(&k1, [1, kvh, t - 1, d]),
            rows(&v1, [1, kvh, t - 1, d]),
            t - 1,
        );
        let got1 = decode_attention(rows(&q[heads * d..], [1, heads, 1, d]), &alone, heads, None);
        assert_eq!(got1, got[heads * d..]);
    }
}

//! Causal self-attention as one operation with a backward of its own, when the backend is
//! burn-flex under autodiff (the trainer's CPU backend).
//!
//! Written by hand because burn-autodiff 0.21 has no attention of its own: it records burn's
//! decomposed form (the kv heads repeated for their query heads, `q kᵀ`, a causal mask built
//! from integer tensors and filled in, a softmax of libm `exp`s, `p v`, and the transposes
//! between them), each step with its own backward over the whole `[heads, queries, keys]`
//! score tensor. That was a quarter of a training step of the 4-layer benchmark model.
//!
//! Forward is the tiled kernel of inference ([`super::causal_attention`]), which also keeps
//! each query row's log-sum-exp. Backward is flash attention's: for every block of queries and
//! keys the probabilities are recomputed from the scores and that log-sum-exp, so no score
//! tensor is stored; `dV += Pᵀ dO`, `dS = P ∘ (dO vᵀ − rowsum(dO ∘ O))`, `dQ += dS k / √d`,
//! `dK += dSᵀ q / √d`, with the block products on the register-blocked kernel of
//! [`super::simd_kernels`]. Each (batch row, kv head) is one rayon task: its query heads are
//! stacked, so the keys and values they share are read once and their gradients summed in
//! place. Any other backend, a KV cache or a key mask gets burn's ops.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::Flex;
use burn::prelude::*;
use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;
use std::f32::consts::LOG2_E;

use super::causal_attention::{causal_attention_lse, Shape};
use super::flex::{as_tracked, contiguous_f32, from_tracked, AdTensor, Rows};
use super::simd_kernels::{exp2, panel, Accumulate, Operand, PAD};

/// Query positions per backward tile (each stacked for every query head of a kv head).
const QUERY_TILE: usize = 64;
/// Keys per backward block (a multiple of [`PAD`]).
const KEY_BLOCK: usize = 256;

/// `softmax(q kᵀ / √d + causal) v` for `q [b, s, heads, d]`, `k [b, s, kv_heads, d]` and
/// `v [b, s, kv_heads, d_v]` (positions-major, as the projections give them; `heads` a
/// multiple of `kv_heads`), as `[b, s, heads · d_v]`, recorded as one operation when `B` is
/// burn-flex under autodiff; `None` for any other backend or shapes that do not fit.
pub fn try_tracked_causal<B: Backend>(
    q: &Tensor<B, 4>,
    k: &Tensor<B, 4>,
    v: &Tensor<B, 4>,
) -> Option<Tensor<B, 3>> {
    let [b, s, h, d] = q.dims();
    let [kb, ks, kvh, kd] = k.dims();
    let [vb, vs, vh, dv] = v.dims();
    if b * s * h * d * dv * kvh == 0
        || super::flex::burn_ops_only()
        || (kb, ks, kd) != (b, s, d)
        || (vb, vs, vh) != (b, s, kvh)
        || h % kvh != 0
    {
        return None;
    }
    let sizes = [b, s, h, kvh, d, dv];
    from_tracked(tracked(
        as_tracked(q)?,
        as_tracked(k)?,
        as_tracked(v)?,
        sizes,
    )?)
}

/// The sizes: batch, positions, query heads, kv heads, head width, value width.
type Sizes = [usize; 6];

/// Positions-major `[b, s, heads, width]` storage read as `[b, heads, s, width]` rows.
fn rows(data: &[f32], [_, s, _, _, _, _]: Sizes, heads: usize, width: usize) -> Rows<'_> {
    Rows::new(data, 0, [s * heads * width, width, heads * width], width)
}

/// The operation recorded in the graph.
#[derive(Debug)]
struct CausalAttention;

/// What the backward needs: the inputs, the output and each query row's log-sum-exp (base 2).
#[derive(Clone, Debug)]
struct State {
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    out: FlexTensor,
    lse: Vec<f32>,
    sizes: Sizes,
}

fn tracked(q: AdTensor, k: AdTensor, v: AdTensor, sizes: Sizes) -> Option<AdTensor> {
    let [b, s, h, kvh, d, dv] = sizes;
    let (qf, kf, vf) = (
        contiguous_f32(q.primitive.clone())?,
        contiguous_f32(k.primitive.clone())?,
        contiguous_f32(v.primitive.clone())?,
    );
    let shape = Shape {
        heads: h,
        kv_heads: kvh,
        queries: s,
        keys: s,
        dim: d,
        value_dim: dv,
    };
    let (out, lse) = causal_attention_lse(
        rows(qf.as_slice()?, sizes, h, d),
        rows(kf.as_slice()?, sizes, kvh, d),
        rows(vf.as_slice()?, sizes, kvh, dv),
        b,
        shape,
    );
    let out = FlexTensor::from_data(TensorData::new(out, [b, s, h * dv]));
    // Compute-bound: the backward keeps its inputs in its state rather than asking a
    // checkpointer to recompute them.
    Some(
        match CausalAttention
            .prepare::<NoCheckpointing>([q.node.clone(), k.node.clone(), v.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                State {
                    q: qf,
                    k: kf,
                    v: vf,
                    out: out.clone(),
                    lse,
                    sizes,
                },
                out,
            ),
            OpsKind::UnTracked(prep) => prep.finish(out),
        },
    )
}

impl Backward<Flex, 3> for CausalAttention {
    type State = State;

    fn backward(self, ops: Ops<State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [nq, nk, nv] = ops.parents;
        let grad = contiguous_f32(grads.consume::<Flex>(&ops.node)).expect("f32 gradients");
        let s = ops.state;
        let (dq, dk, dv) = backward(
            Inputs {
                q: s.q.as_slice().expect("contiguous"),
                k: s.k.as_slice().expect("contiguous"),
                v: s.v.as_slice().expect("contiguous"),
                out: s.out.as_slice().expect("contiguous"),
                lse: &s.lse,
                grad: grad.as_slice().expect("contiguous"),
            },
            s.sizes,
        );
        let [b, n, h, kvh, d, dvw] = s.sizes;
        if let Some(node) = nq {
            grads.register::<Flex>(
                node.id,
                FlexTensor::from_data(TensorData::new(dq, [b, n, h, d])),
            );
        }
        if let Some(node) = nk {
            grads.register::<Flex>(
                node.id,
                FlexTensor::from_data(TensorData::new(dk, [b, n, kvh, d])),
            );
        }
        if let Some(node) = nv {
            grads.register::<Flex>(
                node.id,
                FlexTensor::from_data(TensorData::new(dv, [b, n, kvh, dvw])),
            );
        }
    }
}

/// The backward's inputs, all positions-major and contiguous: `q [b, s, h, d]`, `k [b, s,
/// kvh, d]`, `v [b, s, kvh, dv]`, the output and its gradient `[b, s, h · dv]`, the
/// log-sum-exps `[b, s, h]`.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    out: &'a [f32],
    lse: &'a [f32],
    grad: &'a [f32],
}

/// The gradients of `q`, `k` and `v`, in their layouts.
fn backward(x: Inputs, sizes: Sizes) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let [b, s, h, kvh, d, dv] = sizes;
    let g = h / kvh;
    // One task per (batch row, kv head): its query heads' dq `[g, s, d]`, its dk `[s, d]`
    // and dv `[s, dv]`, scattered into the positions-major layouts afterwards.
    let parts: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = (0..b * kvh)
        .into_par_iter()
        .map(|task| {
            Arch::new().dispatch(Task {
                x,
                sizes,
                bi: task / kvh,
                kv: task % kvh,
            })
        })
        .collect();
    let mut dq = vec![0f32; b * s * h * d];
    let mut dk = vec![0f32; b * s * kvh * d];
    let mut dvv = vec![0f32; b * s * kvh * dv];
    for (task, (pq, pk, pv)) in parts.into_iter().enumerate() {
        let (bi, kv) = (task / kvh, task % kvh);
        for i in 0..s {
            for hg in 0..g {
                let dst = ((bi * s + i) * h + kv * g + hg) * d;
                dq[dst..dst + d].copy_from_slice(&pq[(hg * s + i) * d..(hg * s + i + 1) * d]);
            }
            let dst = ((bi * s + i) * kvh + kv) * d;
            dk[dst..dst + d].copy_from_slice(&pk[i * d..(i + 1) * d]);
            let dst = ((bi * s + i) * kvh + kv) * dv;
            dvv[dst..dst + dv].copy_from_slice(&pv[i * dv..(i + 1) * dv]);
        }
    }
    (dq, dk, dvv)
}

/// One (batch row, kv head) of the backward.
struct Task<'a> {
    x: Inputs<'a>,
    sizes: Sizes,
    bi: usize,
    kv: usize,
}

impl WithSimd for Task<'_> {
    type Output = (Vec<f32>, Vec<f32>, Vec<f32>);

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Self::Output {
        let Task { x, sizes, bi, kv } = self;
        let [_, s, h, kvh, d, dv] = sizes;
        let g = h / kvh;
        let (dp, dvp, tp) = (
            d.next_multiple_of(PAD),
            dv.next_multiple_of(PAD),
            s.next_multiple_of(PAD),
        );
        let l2 = 2 * S::F32_LANES;
        let key = |j: usize| &x.k[((bi * s + j) * kvh + kv) * d..][..d];
        let value = |j: usize| &x.v[((bi * s + j) * kvh + kv) * dv..][..dv];
        // Keys and values transposed (`[width, keys]`, for the score products) and keys as
        // padded rows (for dq).
        let mut kt = vec![0f32; d * tp];
        let mut vt = vec![0f32; dv * tp];
        let mut kp = vec![0f32; s * dp];
        for j in 0..s {
            for (c, &e) in key(j).iter().enumerate() {
                kt[c * tp + j] = e;
            }
            for (c, &e) in value(j).iter().enumerate() {
                vt[c * tp + j] = e;
            }
            kp[j * dp..j * dp + d].copy_from_slice(key(j));
        }
        let mut dk = vec![0f32; s * dp];
        let mut dvacc = vec![0f32; s * dvp];
        let mut dq_all = vec![0f32; g * s * d];
        let rows_max = g * QUERY_TILE;
        let mut qt = vec![0f32; rows_max * dp];
        let mut dot = vec![0f32; rows_max * dvp];
        let mut dq = vec![0f32; rows_max * dp];
        let mut delta = vec![0f32; rows_max];
        let mut lse = vec![0f32; rows_max];
        let mut p = vec![0f32; rows_max * KEY_BLOCK];
        let mut ds = vec![0f32; rows_max * KEY_BLOCK];
        let mut pt = vec![0f32; KEY_BLOCK * rows_max];
        let mut ds_t = vec![0f32; KEY_BLOCK * rows_max];
        let c = LOG2_E / (d as f32).sqrt();
        let scale = 1.0 / (d as f32).sqrt();
        for q0 in (0..s).step_by(QUERY_TILE) {
            let m = QUERY_TILE.min(s - q0);
            let rows = g * m; // row r: query head kv·g + r / m, position q0 + r % m
            for r in 0..rows {
                let (head, i) = (kv * g + r / m, q0 + r % m);
                let at = (bi * s + i) * h + head;
                qt[r * dp..r * dp + d].copy_from_slice(&x.q[at * d..(at + 1) * d]);
                let (gr, o) = (
                    &x.grad[at * dv..(at + 1) * dv],
                    &x.out[at * dv..(at + 1) * dv],
                );
                dot[r * dvp..r * dvp + dv].copy_from_slice(gr);
                delta[r] = gr.iter().zip(o).map(|(a, b)| a * b).sum();
                lse[r] = x.lse[at];
            }
            dq[..rows * dp].fill(0.0);
            let keys_seen = q0 + m;
            for k0 in (0..keys_seen).step_by(KEY_BLOCK) {
                let n = KEY_BLOCK.min(keys_seen - k0);
                // Scores and dO vᵀ, `[rows, n]` (row stride KEY_BLOCK).
                for c0 in (0..n).step_by(l2) {
                    panel(
                        simd,
                        rows,
                        d,
                        Operand {
                            data: &qt,
                            stride: dp,
                        },
                        Operand {
                            data: &kt[k0 + c0..],
                            stride: tp,
                        },
                        &mut p[c0..],
                        KEY_BLOCK,
                        Accumulate::No,
                    );
                    panel(
                        simd,
                        rows,
                        dv,
                        Operand {
                            data: &dot,
                            stride: dvp,
                        },
                        Operand {
                            data: &vt[k0 + c0..],
                            stride: tp,
                        },
                        &mut ds[c0..],
                        KEY_BLOCK,
                        Accumulate::No,
                    );
                }
                for r in 0..rows {
                    // Keys k0 + j with j < visible are not in this query's future.
                    let visible = (q0 + r % m + 1).saturating_sub(k0).min(n);
                    let pr = &mut p[r * KEY_BLOCK..r * KEY_BLOCK + n];
                    let dr = &mut ds[r * KEY_BLOCK..r * KEY_BLOCK + n];
                    probabilities(
                        simd,
                        &mut pr[..visible],
                        &mut dr[..visible],
                        Row {
                            c,
                            lse: lse[r],
                            delta: delta[r],
                            scale,
                        },
                    );
                    pr[visible..].fill(0.0);
                    dr[visible..].fill(0.0);
                    for j in 0..n {
                        pt[j * rows + r] = pr[j];
                        ds_t[j * rows + r] = dr[j];
                    }
                }
                // dq += dS k, dk += dSᵀ q, dv += Pᵀ dO.
                for c0 in (0..d).step_by(l2) {
                    panel(
                        simd,
                        rows,
                        n,
                        Operand {
                            data: &ds,
                            stride: KEY_BLOCK,
                        },
                        Operand {
                            data: &kp[k0 * dp + c0..],
                            stride: dp,
                        },
                        &mut dq[c0..],
                        dp,
                        Accumulate::Yes,
                    );
                    panel(
                        simd,
                        n,
                        rows,
                        Operand {
                            data: &ds_t,
                            stride: rows,
                        },
                        Operand {
                            data: &qt[c0..],
                            stride: dp,
                        },
                        &mut dk[k0 * dp + c0..],
                        dp,
                        Accumulate::Yes,
                    );
                }
                for c0 in (0..dv).step_by(l2) {
                    panel(
                        simd,
                        n,
                        rows,
                        Operand {
                            data: &pt,
                            stride: rows,
                        },
                        Operand {
                            data: &dot[c0..],
                            stride: dvp,
                        },
                        &mut dvacc[k0 * dvp + c0..],
                        dvp,
                        Accumulate::Yes,
                    );
                }
            }
            for r in 0..rows {
                let (hg, i) = (r / m, q0 + r % m);
                dq_all[(hg * s + i) * d..(hg * s + i + 1) * d]
                    .copy_from_slice(&dq[r * dp..r * dp + d]);
            }
        }
        let dk = dk.chunks_exact(dp).flat_map(|r| &r[..d]).copied().collect();
        let dvacc = dvacc
            .chunks_exact(dvp)
            .flat_map(|r| &r[..dv])
            .copied()
            .collect();
        (dq_all, dk, dvacc)
    }
}

/// The per-row constants of [`probabilities`].
#[derive(Clone, Copy)]
struct Row {
    /// `log2 e / √d`: scores to base-2 exponents.
    c: f32,
    /// The row's log-sum-exp, base 2.
    lse: f32,
    /// `rowsum(dO ∘ O)`.
    delta: f32,
    /// `1 / √d`.
    scale: f32,
}

/// Over a row's visible keys, scores to probabilities `p = exp2(score · c − lse)` in place, and
/// `dO vᵀ` to the scaled score gradient `p (dp − delta) / √d` in place.
#[inline(always)]
fn probabilities<S: Simd>(simd: S, p: &mut [f32], dp: &mut [f32], r: Row) {
    let (pb, pt) = S::as_mut_simd_f32s(p);
    let (db, dt) = S::as_mut_simd_f32s(dp);
    let (c, off) = (simd.splat_f32s(r.c), simd.splat_f32s(-r.lse));
    let (delta, scale) = (simd.splat_f32s(r.delta), simd.splat_f32s(r.scale));
    for (p, dp) in pb.iter_mut().zip(db) {
        *p = exp2(simd, simd.mul_add_f32s(*p, c, off));
        *dp = simd.mul_f32s(simd.mul_f32s(*p, simd.sub_f32s(*dp, delta)), scale);
    }
    let scalar = pulp::Scalar::new();
    for (p, dp) in pt.iter_mut().zip(dt) {
        *p = exp2(scalar, p.mul_add(r.c, -r.lse));
        *dp = *p * (*dp - r.delta) * r.scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::module::attention;
    use burn::tensor::ops::AttentionModuleOptions;

    type Ad = burn::backend::Autodiff<Flex>;

    fn random(shape: [usize; 4], seed: u64) -> Vec<f32> {
        let n: usize = shape.iter().product();
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0
            })
            .collect()
    }

    /// burn's decomposed attention, as the layer runs it on other backends.
    fn reference(q: Tensor<Ad, 4>, k: Tensor<Ad, 4>, v: Tensor<Ad, 4>) -> Tensor<Ad, 3> {
        let [b, s, h, _] = q.dims();
        let [_, _, kvh, dv] = v.dims();
        let g = h / kvh;
        let rep = |x: Tensor<Ad, 4>| {
            let [b, kvh, t, w] = x.dims();
            x.unsqueeze_dim::<5>(2)
                .expand([b, kvh, g, t, w])
                .reshape([b, kvh * g, t, w])
        };
        let opts = AttentionModuleOptions {
            scale: None,
            softcap: None,
            is_causal: true,
        };
        attention(
            q.swap_dims(1, 2),
            rep(k.swap_dims(1, 2)),
            rep(v.swap_dims(1, 2)),
            None,
            None,
            opts,
        )
        .swap_dims(1, 2)
        .reshape([b, s, h * dv])
    }

    /// Output and the three gradients of `Σ out ∘ w` through `f`.
    fn run(
        f: impl Fn(Tensor<Ad, 4>, Tensor<Ad, 4>, Tensor<Ad, 4>) -> Tensor<Ad, 3>,
        [b, s, h, kvh, d, dv]: Sizes,
    ) -> [Vec<f32>; 4] {
        let dev = Default::default();
        let leaf = |shape: [usize; 4], seed| {
            Tensor::<Ad, 4>::from_data(TensorData::new(random(shape, seed), shape), &dev)
                .require_grad()
        };
        let (q, k, v) = (
            leaf([b, s, h, d], 1),
            leaf([b, s, kvh, d], 2),
            leaf([b, s, kvh, dv], 3),
        );
        let w = Tensor::<Ad, 3>::from_data(
            TensorData::new(random([b, s, h, dv], 4), [b, s, h * dv]),
            &dev,
        );
        let out = f(q.clone(), k.clone(), v.clone());
        let grads = (out.clone() * w).sum().backward();
        let vals = |t: Tensor<Flex, 4>| t.into_data().to_vec::<f32>().unwrap();
        [
            out.inner().into_data().to_vec::<f32>().unwrap(),
            vals(q.grad(&grads).unwrap()),
            vals(k.grad(&grads).unwrap()),
            vals(v.grad(&grads).unwrap()),
        ]
    }

    /// Values and gradients equal burn's decomposed attention: one, two and three query heads
    /// per kv head, lengths inside one tile and across several query tiles and key blocks,
    /// head widths that are and are not whole vector pairs.
    #[test]
    fn values_and_gradients_match_burns_attention() {
        for sizes in [
            [2, 7, 2, 2, 16, 16],
            [2, 70, 4, 2, 32, 32],
            [1, 300, 3, 1, 40, 24],
            [2, 130, 6, 2, 64, 64],
        ] {
            let ours = run(
                |q, k, v| try_tracked_causal(&q, &k, &v).expect("autodiff over burn-flex"),
                sizes,
            );
            let theirs = run(reference, sizes);
            for (name, (a, e)) in ["out", "dq", "dk", "dv"]
                .iter()
                .zip(ours.iter().zip(&theirs))
            {
                let worst = a
                    .iter()
                    .zip(e)
                    .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
                    .fold(0f32, f32::max);
                assert!(worst < 2e-4, "{sizes:?} {name}: difference {worst}");
            }
        }
    }

    /// The backward of one task gives the same gradients at every SIMD width the CPU offers
    /// (the widest through run-time dispatch, AVX2 where there is AVX-512, and scalar).
    #[test]
    fn every_simd_width_gives_the_same_gradients() {
        let sizes @ [b, s, h, kvh, d, dv] = [1, 90, 4, 2, 24, 40];
        let q = random([b, s, h, d], 1);
        let k = random([b, s, kvh, d], 2);
        let v = random([b, s, kvh, dv], 3);
        let grad = random([b, s, h, dv], 4);
        let (out, lse) = causal_attention_lse(
            rows(&q, sizes, h, d),
            rows(&k, sizes, kvh, d),
            rows(&v, sizes, kvh, dv),
            b,
            Shape {
                heads: h,
                kv_heads: kvh,
                queries: s,
                keys: s,
                dim: d,
                value_dim: dv,
            },
        );
        let x = Inputs {
            q: &q,
            k: &k,
            v: &v,
            out: &out,
            lse: &lse,
            grad: &grad,
        };
        let task = || Task {
            x,
            sizes,
            bi: 0,
            kv: 1,
        };
        let widest = Arch::new().dispatch(task());
        let mut others = vec![task().with_simd(pulp::Scalar::new())];
        #[cfg(target_arch = "x86_64")]
        if let Some(v3) = pulp::x86::V3::try_new() {
            others.push(v3.vectorize(|| task().with_simd(v3)));
        }
        for other in others {
            for (a, e) in [
                (&other.0, &widest.0),
                (&other.1, &widest.1),
                (&other.2, &widest.2),
            ] {
                for (x, y) in a.iter().zip(e.iter()) {
                    assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{x} vs {y}");
                }
            }
        }
    }

    #[test]
    fn other_backends_and_shapes_are_left_to_burn() {
        let dev = Default::default();
        let t = |shape: [usize; 4]| Tensor::<Flex, 4>::zeros(shape, &dev);
        let x = t([1, 4, 2, 8]);
        assert!(try_tracked_causal(&x, &x, &x).is_none(), "no autodiff");
        let a = |shape: [usize; 4]| Tensor::<Ad, 4>::zeros(shape, &dev);
        assert!(
            try_tracked_causal(&a([1, 4, 3, 8]), &a([1, 4, 2, 8]), &a([1, 4, 2, 8])).is_none(),
            "heads not a multiple of kv heads"
        );
    }
}

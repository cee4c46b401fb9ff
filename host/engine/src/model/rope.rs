//! Rotary position embeddings in the Hugging Face `rotate_half` layout.
//!
//! HF rotates the first half of each head against the second half; burn's built-in
//! `RotaryEncoding` rotates interleaved pairs, so it cannot read HF weights unchanged.

use burn::prelude::*;
use rayon::prelude::*;
use std::sync::OnceLock;

use crate::kernels::flex::{as_flex, from_vec};

/// Below this many elements the CPU rotation stays on the calling thread.
const TASK_ELEMENTS: usize = 1 << 14;

/// RoPE frequencies for one head width, computed like transformers does (f32 throughout).
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
}

/// RoPE inputs of one forward pass, built once and shared by every layer: the cos/sin rows of
/// its positions, which the CPU backend rotates with directly in one pass, and for burn's
/// arithmetic (other backends) the tables expanded to the query and key head counts
/// (`[batch, seq, heads, head_dim]`, contiguous, so rotation is plain same-shape arithmetic)
/// plus the signed permutation that implements `rotate_half` as one matmul, built on first use.
#[derive(Clone, Debug)]
pub struct RopeTables<B: Backend> {
    /// `cos` of every position and frequency, `[batch · seq, head_dim / 2]`.
    cos: Vec<f32>,
    /// `sin`, laid out as `cos`.
    sin: Vec<f32>,
    shape: [usize; 4],
    device: B::Device,
    q: OnceLock<(Tensor<B, 4>, Tensor<B, 4>)>,
    k: OnceLock<(Tensor<B, 4>, Tensor<B, 4>)>,
    rotate_half: OnceLock<Tensor<B, 2>>,
}

impl Rope {
    /// Frequencies `1 / theta^(2i/head_dim)` for `i < head_dim/2`.
    pub fn new(theta: f64, head_dim: usize) -> Self {
        let inv_freq = (0..head_dim / 2)
            .map(|i| {
                // Same operation order and precision as transformers' default RoPE init.
                let exponent = (2 * i) as f32 / head_dim as f32;
                let denom = (theta.powf(exponent as f64)) as f32;
                1.0f32 / denom
            })
            .collect();
        Rope { inv_freq }
    }

    /// Width of the heads this table rotates.
    pub fn head_dim(&self) -> usize {
        self.inv_freq.len() * 2
    }

    /// Tables for `positions`, given row-major as `[batch][seq]`.
    pub fn tables<B: Backend>(
        &self,
        positions: &[usize],
        batch: usize,
        seq: usize,
        device: &B::Device,
    ) -> RopeTables<B> {
        assert_eq!(positions.len(), batch * seq, "one position per token");
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &p in positions {
            for f in &self.inv_freq {
                let angle = (p as f32 * f) as f64;
                cos.push(angle.cos() as f32);
                sin.push(angle.sin() as f32);
            }
        }
        RopeTables {
            cos,
            sin,
            shape: [batch, seq, 1, 2 * half],
            device: device.clone(),
            q: OnceLock::new(),
            k: OnceLock::new(),
            rotate_half: OnceLock::new(),
        }
    }

    /// Tables for positions `0..seq` in every row.
    pub fn tables_from_zero<B: Backend>(
        &self,
        batch: usize,
        seq: usize,
        device: &B::Device,
    ) -> RopeTables<B> {
        let positions: Vec<usize> = (0..batch).flat_map(|_| 0..seq).collect();
        self.tables(&positions, batch, seq, device)
    }
}

impl<B: Backend> RopeTables<B> {
    /// The table `[batch, seq, heads, head_dim]` of `rows` (cos or sin), HF's `[f, f]` halves.
    fn expanded(&self, rows: &[f32], heads: usize) -> Tensor<B, 4> {
        let half = self.shape[3] / 2;
        let mut full = Vec::with_capacity(rows.len() * 2);
        for r in rows.chunks_exact(half) {
            full.extend_from_slice(r);
            full.extend_from_slice(r);
        }
        let t = Tensor::<B, 4>::from_data(TensorData::new(full, self.shape), &self.device);
        // Materialised per head: a broadcast over the head axis would take burn-flex's slow
        // strided path, while same-shape contiguous operands take its SIMD path.
        if heads == 1 {
            t
        } else {
            t.repeat_dim(2, heads)
        }
    }

    fn rotate(
        &self,
        x: Tensor<B, 4>,
        table: &OnceLock<(Tensor<B, 4>, Tensor<B, 4>)>,
    ) -> Tensor<B, 4> {
        let dims = x.dims();
        let [b, s, h, hd] = dims;
        assert_eq!([b, s, 1, hd], self.shape, "RoPE table shape");
        if let Some(y) = self.try_rotate_cpu(&x) {
            return y;
        }
        let (cos, sin) =
            table.get_or_init(|| (self.expanded(&self.cos, h), self.expanded(&self.sin, h)));
        let rotate_half = self.rotate_half.get_or_init(|| {
            // rotate_half(x) = x P with P[j + half][j] = -1 and P[j][j + half] = 1.
            let half = hd / 2;
            let mut p = vec![0f32; hd * hd];
            for j in 0..half {
                p[(j + half) * hd + j] = -1.0;
                p[j * hd + j + half] = 1.0;
            }
            Tensor::from_data(TensorData::new(p, [hd, hd]), &self.device)
        });
        let rotated = x
            .clone()
            .reshape([b * s * h, hd])
            .matmul(rotate_half.clone())
            .reshape(dims);
        x * cos.clone() + rotated * sin.clone()
    }

    /// The rotation in one pass on the rayon pool when `B` is the CPU backend and `x` is
    /// contiguous: `x1 cos - x2 sin`, `x2 cos + x1 sin` for the halves `x1`, `x2` of each head,
    /// the same products and sums burn's form computes. The result is stored heads-major (a
    /// `[batch, seq, heads, head_dim]` view of `[batch, heads, seq, head_dim]` storage), so the
    /// attention's `swap_dims(1, 2)` makes it contiguous.
    fn try_rotate_cpu(&self, x: &Tensor<B, 4>) -> Option<Tensor<B, 4>> {
        let [b, s, h, hd] = x.dims();
        if b * s * h * hd == 0 {
            return None;
        }
        let xf = as_flex(x.clone())?;
        let xs = xf.as_slice::<f32>()?;
        let out = rotate_rows(xs, &self.cos, &self.sin, [b, s, h, hd]);
        Some(from_vec(out, [b, h, s, hd])?.swap_dims(1, 2))
    }

    /// Rotates queries `[batch, seq, heads, head_dim]`.
    pub fn apply_q(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.rotate(x, &self.q)
    }

    /// Rotates keys `[batch, seq, kv_heads, head_dim]`.
    pub fn apply_k(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.rotate(x, &self.k)
    }
}

/// `x [batch, seq, heads, head_dim]` rotated by the cos/sin rows of its positions (see
/// [`RopeTables::try_rotate_cpu`]), written heads-major as `[batch, heads, seq, head_dim]`: the
/// layout attention and the KV cache keep, so neither copies it again. Not generic, so it is
/// compiled (and optimised) here whatever crate picks the backend.
fn rotate_rows(xs: &[f32], cos: &[f32], sin: &[f32], [_, s, h, hd]: [usize; 4]) -> Vec<f32> {
    let half = hd / 2;
    let plane = |index: usize, out: &mut [f32]| {
        let (bi, head) = (index / h, index % h);
        for (i, o) in out.chunks_exact_mut(hd).enumerate() {
            let p = bi * s + i;
            let x = &xs[(p * h + head) * hd..(p * h + head + 1) * hd];
            let (cos, sin) = (
                &cos[p * half..(p + 1) * half],
                &sin[p * half..(p + 1) * half],
            );
            let (x1, x2) = x.split_at(half);
            let (o1, o2) = o.split_at_mut(half);
            for j in 0..half {
                o1[j] = x1[j] * cos[j] + -x2[j] * sin[j];
                o2[j] = x2[j] * cos[j] + x1[j] * sin[j];
            }
        }
    };
    let mut out = vec![0f32; xs.len()];
    if xs.len() <= TASK_ELEMENTS {
        // Small (a decode step, a short prompt): no hand-off to the pool.
        out.chunks_exact_mut(s * hd)
            .enumerate()
            .for_each(|(index, o)| plane(index, o));
    } else {
        out.par_chunks_mut(s * hd)
            .enumerate()
            .for_each(|(index, o)| plane(index, o));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn position_zero_is_identity_and_norm_is_kept() {
        let dev = Default::default();
        let rope = Rope::new(10_000.0, 8);
        let x = Tensor::<Flex, 4>::from_data(
            TensorData::new(
                (0..16).map(|v| v as f32 * 0.1 - 0.5).collect::<Vec<_>>(),
                [1, 2, 1, 8],
            ),
            &dev,
        );
        let t = rope.tables::<Flex>(&[0, 5], 1, 2, &dev);
        let y = t.apply_q(x.clone());
        let xv = x.into_data().to_vec::<f32>().unwrap();
        let yv = y.into_data().to_vec::<f32>().unwrap();
        assert_eq!(&xv[..8], &yv[..8]);
        let n = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        assert!((n(&xv[8..]) - n(&yv[8..])).abs() < 1e-5);
    }

    /// The CPU backend's one-pass rotation (contiguous input) gives exactly what burn's
    /// arithmetic gives (a transposed view, which takes that path).
    #[test]
    fn the_cpu_rotation_equals_burns_arithmetic() {
        let dev = Default::default();
        let rope = Rope::new(10_000.0, 16);
        let (b, s, h, hd) = (2, 300, 3, 16);
        let positions: Vec<usize> = (0..b * s).map(|i| i * 7 % 5000).collect();
        let t = rope.tables::<Flex>(&positions, b, s, &dev);
        let data: Vec<f32> = (0..b * s * h * hd)
            .map(|i| ((i * 13) % 29) as f32 * 0.1 - 1.4)
            .collect();
        let x = Tensor::<Flex, 4>::from_data(TensorData::new(data, [b, s, h, hd]), &dev);
        let strided = Tensor::<Flex, 4>::from_data(x.clone().swap_dims(1, 2).into_data(), &dev)
            .swap_dims(1, 2);
        assert!(
            t.try_rotate_cpu(&strided).is_none(),
            "a view takes burn's path"
        );
        let fast = t.apply_q(x).into_data().to_vec::<f32>().unwrap();
        let slow = t.apply_q(strided).into_data().to_vec::<f32>().unwrap();
        assert_eq!(fast, slow);
    }
}

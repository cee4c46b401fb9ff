//! Rotary position embeddings in the Hugging Face `rotate_half` layout.
//!
//! HF rotates the first half of each head against the second half; burn's built-in
//! `RotaryEncoding` rotates interleaved pairs, so it cannot read HF weights unchanged.

use burn::prelude::*;

/// RoPE frequencies for one head width, computed like transformers does (f32 throughout).
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
}

/// RoPE inputs of one forward pass: cos/sin tables already expanded to the query and key head
/// counts (`[batch, seq, heads, head_dim]`, contiguous) so rotation is plain same-shape
/// arithmetic, plus the signed permutation that implements `rotate_half` as one matmul. Built
/// once per forward and shared by every layer.
#[derive(Clone, Debug)]
pub struct RopeTables<B: Backend> {
    q: (Tensor<B, 4>, Tensor<B, 4>),
    k: (Tensor<B, 4>, Tensor<B, 4>),
    rotate_half: Tensor<B, 2>,
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

    /// Tables for `positions`, given row-major as `[batch][seq]`, for `heads` query heads and
    /// `kv_heads` key heads.
    pub fn tables<B: Backend>(
        &self,
        positions: &[usize],
        batch: usize,
        seq: usize,
        (heads, kv_heads): (usize, usize),
        device: &B::Device,
    ) -> RopeTables<B> {
        assert_eq!(positions.len(), batch * seq, "one position per token");
        let half = self.inv_freq.len();
        let hd = 2 * half;
        let mut cos = Vec::with_capacity(positions.len() * hd);
        let mut sin = Vec::with_capacity(positions.len() * hd);
        let mut row_cos = vec![0f32; half];
        let mut row_sin = vec![0f32; half];
        for &p in positions {
            for (i, f) in self.inv_freq.iter().enumerate() {
                let angle = p as f32 * f;
                row_cos[i] = (angle as f64).cos() as f32;
                row_sin[i] = (angle as f64).sin() as f32;
            }
            // HF concatenates the frequencies twice: [f, f].
            cos.extend_from_slice(&row_cos);
            cos.extend_from_slice(&row_cos);
            sin.extend_from_slice(&row_sin);
            sin.extend_from_slice(&row_sin);
        }
        let shape = [batch, seq, 1, hd];
        let cos = Tensor::<B, 4>::from_data(TensorData::new(cos, shape), device);
        let sin = Tensor::<B, 4>::from_data(TensorData::new(sin, shape), device);
        // Materialised per head: a broadcast over the head axis would take burn-flex's slow
        // strided path, while same-shape contiguous operands take its SIMD path.
        let expand = |t: &Tensor<B, 4>, n: usize| {
            if n == 1 {
                t.clone()
            } else {
                t.clone().repeat_dim(2, n)
            }
        };
        // rotate_half(x) = x P with P[j + half][j] = -1 and P[j][j + half] = 1.
        let mut p = vec![0f32; hd * hd];
        for j in 0..half {
            p[(j + half) * hd + j] = -1.0;
            p[j * hd + j + half] = 1.0;
        }
        RopeTables {
            q: (expand(&cos, heads), expand(&sin, heads)),
            k: (expand(&cos, kv_heads), expand(&sin, kv_heads)),
            rotate_half: Tensor::from_data(TensorData::new(p, [hd, hd]), device),
        }
    }

    /// Tables for positions `0..seq` in every row.
    pub fn tables_from_zero<B: Backend>(
        &self,
        batch: usize,
        seq: usize,
        heads: (usize, usize),
        device: &B::Device,
    ) -> RopeTables<B> {
        let positions: Vec<usize> = (0..batch).flat_map(|_| 0..seq).collect();
        self.tables(&positions, batch, seq, heads, device)
    }
}

impl<B: Backend> RopeTables<B> {
    fn rotate(&self, x: Tensor<B, 4>, (cos, sin): &(Tensor<B, 4>, Tensor<B, 4>)) -> Tensor<B, 4> {
        let dims = x.dims();
        let [b, s, h, hd] = dims;
        assert_eq!(cos.dims(), dims, "RoPE table shape");
        let rotated = x
            .clone()
            .reshape([b * s * h, hd])
            .matmul(self.rotate_half.clone())
            .reshape(dims);
        x * cos.clone() + rotated * sin.clone()
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
        let t = rope.tables::<Flex>(&[0, 5], 1, 2, (1, 1), &dev);
        let y = t.apply_q(x.clone());
        let xv = x.into_data().to_vec::<f32>().unwrap();
        let yv = y.into_data().to_vec::<f32>().unwrap();
        assert_eq!(&xv[..8], &yv[..8]);
        let n = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        assert!((n(&xv[8..]) - n(&yv[8..])).abs() < 1e-5);
    }
}

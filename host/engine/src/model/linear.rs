//! Linear layers read from and written to the Hugging Face `[out, in]` layout.

use anyhow::Result;
use burn::module::Param;
use burn::nn::Linear;
use burn::prelude::*;

use crate::kernels::transpose;
use crate::quant::QuantMatrix;
use crate::weights::{TensorExport, WeightSource};

/// A projection's weight kept in quantised blocks (a GGUF file loaded for serving). When set,
/// the projection's `Linear` holds a `[0, d_out]` placeholder weight (and its bias, if any):
/// every matmul goes through the blocks, and anything that reads the f32 weight fails on its
/// shape instead of computing with it.
pub type Blocks = Option<std::sync::Arc<QuantMatrix>>;

/// Builds a linear layer from `{prefix}.weight` (`[d_out, d_in]`) and, when `bias`, `{prefix}.bias`.
pub fn load_linear<B: Backend>(
    src: &mut dyn WeightSource,
    prefix: &str,
    d_in: usize,
    d_out: usize,
    bias: bool,
    device: &B::Device,
) -> Result<Linear<B>> {
    let w = src.tensor(&format!("{prefix}.weight"), &[d_out, d_in])?;
    // burn stores `[d_in, d_out]`.
    let weight = Param::from_data(
        TensorData::new(transpose(&w, d_out, d_in), [d_in, d_out]),
        device,
    );
    let bias = load_bias(src, prefix, d_out, bias, device)?;
    Ok(Linear { weight, bias })
}

/// `{prefix}.bias` (`[d_out]`) when `bias`.
fn load_bias<B: Backend>(
    src: &mut dyn WeightSource,
    prefix: &str,
    d_out: usize,
    bias: bool,
    device: &B::Device,
) -> Result<Option<Param<Tensor<B, 1>>>> {
    if !bias {
        return Ok(None);
    }
    let b = src.tensor(&format!("{prefix}.bias"), &[d_out])?;
    Ok(Some(Param::from_data(TensorData::new(b, [d_out]), device)))
}

/// [`load_linear`], keeping the weight in its quantised blocks when `src` hands them out.
pub fn load_projection<B: Backend>(
    src: &mut dyn WeightSource,
    prefix: &str,
    d_in: usize,
    d_out: usize,
    bias: bool,
    device: &B::Device,
) -> Result<(Linear<B>, Blocks)> {
    let Some(q) = src.blocks(&format!("{prefix}.weight"), &[d_out, d_in])? else {
        return Ok((load_linear(src, prefix, d_in, d_out, bias, device)?, None));
    };
    let bias = load_bias(src, prefix, d_out, bias, device)?;
    let weight = Param::from_tensor(Tensor::<B, 2>::empty([0, d_out], device));
    Ok((Linear { weight, bias }, Some(std::sync::Arc::new(q))))
}

/// `x W + b` through the quantised blocks when there are any, else [`linear_forward`].
pub fn project<B: Backend, const D: usize>(
    layer: &Linear<B>,
    blocks: &Blocks,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let Some(q) = blocks else {
        return linear_forward(layer, x);
    };
    let dims = x.dims();
    let rows: usize = dims[..D - 1].iter().product();
    let [d_out, d_in] = q.dims();
    let y = with_bias(layer, q.forward(x.reshape([rows, d_in])));
    let mut out = dims;
    out[D - 1] = d_out;
    y.reshape(out)
}

/// `y + b` when `layer` has a bias.
fn with_bias<B: Backend>(layer: &Linear<B>, y: Tensor<B, 2>) -> Tensor<B, 2> {
    match &layer.bias {
        Some(b) => y + b.val().unsqueeze::<2>(),
        None => y,
    }
}

/// Writes a projection under HF names, dequantising its blocks when it has them.
pub fn export_projection<B: Backend>(
    layer: &Linear<B>,
    blocks: &Blocks,
    prefix: &str,
    out: &mut Vec<TensorExport>,
) {
    let Some(q) = blocks else {
        return export_linear(layer, prefix, out);
    };
    let [d_out, d_in] = q.dims();
    out.push(TensorExport::new(
        format!("{prefix}.weight"),
        vec![d_out, d_in],
        q.dequantise(),
    ));
    if let Some(b) = &layer.bias {
        out.push(TensorExport::new(
            format!("{prefix}.bias"),
            vec![d_out],
            crate::weights::to_f32_vec(b.val()),
        ));
    }
}

/// The f32 `Linear` of a projection, its blocks dequantised when it has them.
pub fn dequantised<B: Backend>(layer: &Linear<B>, blocks: &Blocks) -> Linear<B> {
    let Some(q) = blocks else {
        return layer.clone();
    };
    let [d_out, d_in] = q.dims();
    let device = layer.weight.val().device();
    Linear {
        weight: Param::from_data(
            TensorData::new(q.dequantise_transposed(), [d_in, d_out]),
            &device,
        ),
        bias: layer.bias.clone(),
    }
}

/// Applies `x W + b` with the leading dimensions flattened, so the matmul is one large 2D gemm.
pub fn linear_forward<B: Backend, const D: usize>(
    layer: &Linear<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let dims = x.dims();
    let d_in = dims[D - 1];
    let rows: usize = dims[..D - 1].iter().product();
    let w = layer.weight.val();
    let d_out = w.dims()[1];
    let mut y = matmul(x.reshape([rows, d_in]), w);
    if let Some(b) = &layer.bias {
        y = y + b.val().unsqueeze::<2>();
    }
    let mut out = dims;
    out[D - 1] = d_out;
    y.reshape(out)
}

/// `x w` through the CPU kernels for few rows (decode) or many (prefill) when they apply, as
/// one recorded operation in a training step on the CPU, else burn's matmul (CUDA).
fn matmul<B: Backend>(x: Tensor<B, 2>, w: Tensor<B, 2>) -> Tensor<B, 2> {
    crate::kernels::small_matmul::try_matmul(&x, &w)
        .or_else(|| crate::kernels::prefill_matmul::try_matmul(&x, &w))
        .or_else(|| crate::kernels::trained_matmul::try_tracked_matmul(&x, &w))
        .unwrap_or_else(|| x.matmul(w))
}

/// Writes a linear layer under HF names (`[d_out, d_in]` weight, optional bias).
pub fn export_linear<B: Backend>(layer: &Linear<B>, prefix: &str, out: &mut Vec<TensorExport>) {
    let w = layer.weight.val();
    let [d_in, d_out] = w.dims();
    let data = crate::weights::to_f32_vec(w);
    out.push(TensorExport::new(
        format!("{prefix}.weight"),
        vec![d_out, d_in],
        transpose(&data, d_in, d_out),
    ));
    if let Some(b) = &layer.bias {
        out.push(TensorExport::new(
            format!("{prefix}.bias"),
            vec![d_out],
            crate::weights::to_f32_vec(b.val()),
        ));
    }
}

/// A LoRA adapter on a linear projection: the projection computes
/// `x W + scale · dropout(x) A B`. Training attaches adapters; serving gets them merged into
/// f32 weights, or, over a base kept in quantised blocks, as they are (two rank-wide products
/// per projection beside the block kernel).
#[derive(Module, Debug)]
pub struct LoraAdapter<B: Backend> {
    /// Down projection `[d_in, rank]` (PEFT's `lora_A.weight`, transposed).
    pub a: Param<Tensor<B, 2>>,
    /// Up projection `[rank, d_out]` (PEFT's `lora_B.weight`, transposed).
    pub b: Param<Tensor<B, 2>>,
    /// `lora_alpha / rank`.
    pub scale: f64,
    /// Dropout probability on the adapter's input; only applied on autodiff backends.
    pub dropout: f64,
}

/// [`project`] plus the adapter's low-rank term when `lora` is given.
pub fn adapted_forward<B: Backend, const D: usize>(
    layer: &Linear<B>,
    blocks: &Blocks,
    lora: Option<&LoraAdapter<B>>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let Some(lora) = lora else {
        return project(layer, blocks, x);
    };
    let dims = x.dims();
    let d_in = dims[D - 1];
    let rows: usize = dims[..D - 1].iter().product();
    let x = x.reshape([rows, d_in]);
    let base = project(layer, blocks, x.clone());
    let d_out = base.dims()[1];
    let mut out = dims;
    out[D - 1] = d_out;
    (base + low_rank(lora, x)).reshape(out)
}

/// The adapter's term `scale · dropout(x) A B` of `x [rows, d_in]`.
fn low_rank<B: Backend>(lora: &LoraAdapter<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let x = burn::nn::Dropout { prob: lora.dropout }.forward(x);
    // Scaling the rank-wide activation is cheaper than scaling the output.
    let low = matmul(x, lora.a.val()).mul_scalar(lora.scale);
    matmul(low, lora.b.val())
}

/// One projection of [`adapted_forward_group`]: the layer, its blocks, its adapter.
pub type Projection<'a, B> = (&'a Linear<B>, &'a Blocks, Option<&'a LoraAdapter<B>>);

/// [`adapted_forward`] of projections that read the same `x` (q, k and v; gate and up). In a
/// decode step with every weight in blocks, their matmuls share one parallel region
/// ([`QuantMatrix::forward_group`]); the results are those of one call each.
pub fn adapted_forward_group<B: Backend, const D: usize, const N: usize>(
    projections: [Projection<'_, B>; N],
    x: Tensor<B, D>,
) -> [Tensor<B, D>; N] {
    let dims = x.dims();
    let d_in = dims[D - 1];
    let rows: usize = dims[..D - 1].iter().product();
    let x2 = x.clone().reshape([rows, d_in]);
    let mats: Option<Vec<&QuantMatrix>> = projections.iter().map(|p| p.1.as_deref()).collect();
    let grouped = mats
        .and_then(|m| <[&QuantMatrix; N]>::try_from(m).ok())
        .and_then(|mats| QuantMatrix::forward_group(mats, &x2));
    let Some(bases) = grouped else {
        return projections
            .map(|(layer, blocks, lora)| adapted_forward(layer, blocks, lora, x.clone()));
    };
    let mut bases = bases.into_iter();
    projections.map(|(layer, _, lora)| {
        let mut y = with_bias(layer, bases.next().expect("one result per projection"));
        if let Some(lora) = lora {
            y = y + low_rank(lora, x2.clone());
        }
        let mut out = dims;
        out[D - 1] = y.dims()[1];
        y.reshape(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::small_matmul::decode_scope;
    use crate::quant::ggml::GgmlType;
    use crate::quant::tests::{quantise_q8_0, values};
    use crate::CpuBackend;

    /// A `[d_out, d_in]` projection kept in Q8_0 blocks, with a bias.
    fn projection(d_out: usize, d_in: usize, seed: u32) -> (Linear<CpuBackend>, Blocks) {
        let dev = Default::default();
        let blocks = quantise_q8_0(&values(d_out * d_in, seed));
        let q = QuantMatrix::from_gguf(GgmlType::Q8_0, d_out, d_in, &blocks).unwrap();
        let layer = Linear {
            weight: Param::from_tensor(Tensor::empty([0, d_out], &dev)),
            bias: Some(Param::from_data(
                TensorData::new(values(d_out, seed + 50), [d_out]),
                &dev,
            )),
        };
        (layer, Some(std::sync::Arc::new(q)))
    }

    fn adapter(d_in: usize, d_out: usize, seed: u32) -> LoraAdapter<CpuBackend> {
        let dev = Default::default();
        let rank = 4;
        LoraAdapter {
            a: Param::from_data(
                TensorData::new(values(d_in * rank, seed), [d_in, rank]),
                &dev,
            ),
            b: Param::from_data(
                TensorData::new(values(rank * d_out, seed + 1), [rank, d_out]),
                &dev,
            ),
            scale: 0.5,
            dropout: 0.0,
        }
    }

    #[test]
    fn grouped_projections_give_the_bits_of_one_call_each_with_bias_and_adapter() {
        let dev = Default::default();
        let d_in = 64;
        let ps = [
            projection(48, d_in, 1),
            projection(16, d_in, 2),
            projection(16, d_in, 3),
        ];
        let loras = [Some(adapter(d_in, 48, 4)), None, Some(adapter(d_in, 16, 6))];
        let x = Tensor::<CpuBackend, 3>::from_data(
            TensorData::new(values(3 * d_in, 9), [3, 1, d_in]),
            &dev,
        );
        let x2 = x.clone().reshape([3, d_in]);
        let group = |i: usize| (&ps[i].0, &ps[i].1, loras[i].as_ref());
        // SAFETY: the closure leaves nothing on the pool's thread.
        let (taken, grouped, alone) = unsafe {
            decode_scope(|| {
                let mats = [0, 1, 2].map(|i| ps[i].1.as_deref().unwrap());
                (
                    QuantMatrix::forward_group(mats, &x2).is_some(),
                    adapted_forward_group([group(0), group(1), group(2)], x.clone()),
                    [0, 1, 2]
                        .map(|i| adapted_forward(&ps[i].0, &ps[i].1, loras[i].as_ref(), x.clone())),
                )
            })
        };
        assert!(taken, "a decode step groups the projections");
        for (i, (g, a)) in grouped.into_iter().zip(alone).enumerate() {
            assert_eq!(g.dims(), a.dims(), "projection {i}");
            let (g, a) = (
                g.into_data().to_vec::<f32>().unwrap(),
                a.into_data().to_vec::<f32>().unwrap(),
            );
            assert_eq!(g, a, "projection {i}");
        }
    }
}

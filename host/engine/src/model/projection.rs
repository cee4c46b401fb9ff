//! The model's linear projections (attention's q, k, v and o, the MLP's gate, up and down, the
//! heads): a weight, f32 or kept in quantised blocks, an optional bias and an optional LoRA
//! adapter, read from and written to the Hugging Face `[out, in]` layout.

use std::sync::Arc;

use anyhow::Result;
use burn::module::{
    AutodiffModule, Content, Devices, Module, ModuleDisplay, ModuleDisplayDefault, ModuleMapper,
    ModuleVisitor, Param,
};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

use super::io::{to_f32_vec, TensorExport, WeightSource};
use crate::adapters::RowLora;
use crate::kernels::transpose;
use crate::quant::QuantMatrix;

/// A projection's weight matrix.
#[derive(Clone, Debug)]
pub enum Weight<B: Backend> {
    /// f32 in burn's `[d_in, d_out]` layout.
    Dense(Param<Tensor<B, 2>>),
    /// Quantised blocks in Hugging Face's `[d_out, d_in]` layout (a GGUF file loaded for
    /// serving), shared by the model's copies.
    Quantised(Arc<QuantMatrix>),
}

/// `x W + b`, plus the adapter's term when there is one.
#[derive(Module, Debug)]
pub struct Projection<B: Backend> {
    /// The weight matrix.
    pub weight: Weight<B>,
    /// Bias `[d_out]`.
    pub bias: Option<Param<Tensor<B, 1>>>,
    /// LoRA adapter beside the weight (training, or serving over quantised blocks).
    pub lora: Option<LoraAdapter<B>>,
    /// Adapters by row, in a view serving several adapters at once
    /// ([`crate::adapters::rows_view`]).
    pub rows: RowAdapters<B>,
}

/// The adapters of a view's rows ([`RowLora`]), or none. A module with nothing to train or
/// save: the derive's `skip` does not take a field generic over the backend, hence this one.
#[derive(Clone, Debug)]
pub struct RowAdapters<B: Backend>(pub Option<Arc<RowLora<B>>>);

impl<B: Backend> Default for RowAdapters<B> {
    fn default() -> Self {
        RowAdapters(None)
    }
}

impl<B: Backend> Module<B> for RowAdapters<B> {
    type Record = burn::module::EmptyRecord;

    fn collect_devices(&self, devices: Devices<B>) -> Devices<B> {
        devices
    }

    fn fork(self, _: &B::Device) -> Self {
        self
    }

    fn to_device(self, _: &B::Device) -> Self {
        self
    }

    fn visit<V: ModuleVisitor<B>>(&self, _: &mut V) {}

    fn map<M: ModuleMapper<B>>(self, _: &mut M) -> Self {
        self
    }

    fn load_record(self, _: Self::Record) -> Self {
        self
    }

    fn into_record(self) -> Self::Record {
        burn::module::EmptyRecord::new()
    }
}

impl<B: AutodiffBackend> AutodiffModule<B> for RowAdapters<B> {
    type InnerModule = RowAdapters<B::InnerBackend>;

    // Views serve; training never holds one.
    fn valid(&self) -> Self::InnerModule {
        RowAdapters(None)
    }

    fn from_inner(_: Self::InnerModule) -> Self {
        RowAdapters(None)
    }
}

impl<B: Backend> ModuleDisplayDefault for RowAdapters<B> {
    fn content(&self, content: Content) -> Option<Content> {
        let what = match &self.0 {
            Some(_) => "adapters by row",
            None => "none",
        };
        content.add_formatted(&what).optional()
    }

    fn num_params(&self) -> usize {
        0
    }
}

impl<B: Backend> ModuleDisplay for RowAdapters<B> {}

/// A LoRA adapter on a projection, which then computes `x W + scale · dropout(x) A B`.
/// Training attaches adapters; serving gets them merged into f32 weights, or, over a base kept
/// in quantised blocks, as they are (two rank-wide products per projection beside the block
/// kernel).
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

impl<B: Backend> Projection<B> {
    /// Reads `{prefix}.weight` (`[d_out, d_in]`) and, when `bias`, `{prefix}.bias` (`[d_out]`),
    /// keeping the weight in its quantised blocks when `src` hands them out.
    pub fn load(
        src: &mut dyn WeightSource,
        prefix: &str,
        d_in: usize,
        d_out: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Self> {
        let Some(q) = src.blocks(&format!("{prefix}.weight"), &[d_out, d_in])? else {
            return Self::load_dense(src, prefix, d_in, d_out, bias, device);
        };
        Ok(Projection {
            weight: Weight::Quantised(Arc::new(q)),
            bias: load_bias(src, prefix, d_out, bias, device)?,
            lora: None,
            rows: RowAdapters::default(),
        })
    }

    /// [`Projection::load`] with the weight read as f32 whatever `src` keeps.
    pub fn load_dense(
        src: &mut dyn WeightSource,
        prefix: &str,
        d_in: usize,
        d_out: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Self> {
        let w = src.tensor(&format!("{prefix}.weight"), &[d_out, d_in])?;
        // burn multiplies by `[d_in, d_out]`.
        let weight = Param::from_data(
            TensorData::new(transpose(&w, d_out, d_in), [d_in, d_out]),
            device,
        );
        Ok(Projection {
            weight: Weight::Dense(weight),
            bias: load_bias(src, prefix, d_out, bias, device)?,
            lora: None,
            rows: RowAdapters::default(),
        })
    }

    /// `[d_in, d_out]`.
    pub fn dims(&self) -> [usize; 2] {
        match &self.weight {
            Weight::Dense(w) => w.val().dims(),
            Weight::Quantised(q) => {
                let [d_out, d_in] = q.dims();
                [d_in, d_out]
            }
        }
    }

    /// The f32 weight `[d_in, d_out]`, unless it is kept in quantised blocks.
    pub fn dense_weight(&self) -> Option<&Param<Tensor<B, 2>>> {
        match &self.weight {
            Weight::Dense(w) => Some(w),
            Weight::Quantised(_) => None,
        }
    }

    /// The weight's quantised blocks, when it is kept in them.
    pub fn quantised(&self) -> Option<&QuantMatrix> {
        match &self.weight {
            Weight::Dense(_) => None,
            Weight::Quantised(q) => Some(q.as_ref()),
        }
    }

    /// The f32 weight `[d_in, d_out]` when it is all the projection computes with (no bias, no
    /// adapter): what fused kernels that take the bare weight may use.
    pub fn plain_weight(&self) -> Option<Tensor<B, 2>> {
        match (&self.weight, &self.bias, &self.lora, &self.rows.0) {
            (Weight::Dense(w), None, None, None) => Some(w.val()),
            _ => None,
        }
    }

    /// Decodes a weight kept in quantised blocks to f32 on `device` (what training, new
    /// adapters and merges need); an f32 weight stays as it is.
    pub fn dequantise(&mut self, device: &B::Device) {
        let Weight::Quantised(q) = &self.weight else {
            return;
        };
        let [d_out, d_in] = q.dims();
        let data = TensorData::new(q.dequantise_transposed(), [d_in, d_out]);
        self.weight = Weight::Dense(Param::from_data(data, device));
    }

    /// Applies the projection to `[..., d_in]`, with the leading dimensions flattened so each
    /// matmul is one large 2D product.
    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let dims = x.dims();
        let rows: usize = dims[..D - 1].iter().product();
        let x = x.reshape([rows, dims[D - 1]]);
        let mut y = self.base(x.clone());
        if let Some(lora) = &self.lora {
            y = y + lora.delta(x.clone());
        }
        if let Some(rows) = &self.rows.0 {
            y = rows.add_to(y, x);
        }
        let mut out = dims;
        out[D - 1] = y.dims()[1];
        y.reshape(out)
    }

    /// [`Projection::forward`] of projections that read the same `x` (q, k and v; gate and
    /// up). In a decode step with every weight in blocks, their matmuls share one parallel
    /// region ([`QuantMatrix::forward_group`]); the results are those of one call each.
    pub fn forward_group<const D: usize, const N: usize>(
        projections: [&Self; N],
        x: Tensor<B, D>,
    ) -> [Tensor<B, D>; N] {
        let dims = x.dims();
        let rows: usize = dims[..D - 1].iter().product();
        let x2 = x.clone().reshape([rows, dims[D - 1]]);
        let mats: Option<Vec<&QuantMatrix>> = projections.iter().map(|p| p.quantised()).collect();
        let grouped = mats
            .and_then(|m| <[&QuantMatrix; N]>::try_from(m).ok())
            .and_then(|mats| QuantMatrix::forward_group(mats, &x2));
        let Some(bases) = grouped else {
            return projections.map(|p| p.forward(x.clone()));
        };
        let mut bases = bases.into_iter();
        projections.map(|p| {
            let mut y = p.with_bias(bases.next().expect("one result per projection"));
            if let Some(lora) = &p.lora {
                y = y + lora.delta(x2.clone());
            }
            if let Some(rows) = &p.rows.0 {
                y = rows.add_to(y, x2.clone());
            }
            let mut out = dims;
            out[D - 1] = y.dims()[1];
            y.reshape(out)
        })
    }

    /// `x W + b` of `x [rows, d_in]`, without the adapter.
    fn base(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let y = match &self.weight {
            Weight::Dense(w) => matmul(x, w.val()),
            Weight::Quantised(q) => q.forward(x),
        };
        self.with_bias(y)
    }

    /// `y + b` when the projection has a bias.
    fn with_bias(&self, y: Tensor<B, 2>) -> Tensor<B, 2> {
        match &self.bias {
            Some(b) => y + b.val().unsqueeze::<2>(),
            None => y,
        }
    }

    /// Writes the weight (`[d_out, d_in]`, decoded when it is in blocks) and the bias as
    /// `{prefix}.weight` and `{prefix}.bias`; an adapter is written apart, in PEFT's form
    /// ([`crate::lora::adapter_tensors`]).
    pub fn export(&self, prefix: &str, out: &mut Vec<TensorExport>) {
        let [d_in, d_out] = self.dims();
        let data = match &self.weight {
            Weight::Dense(w) => transpose(&to_f32_vec(w.val()), d_in, d_out),
            Weight::Quantised(q) => q.dequantise(),
        };
        out.push(TensorExport::new(
            format!("{prefix}.weight"),
            vec![d_out, d_in],
            data,
        ));
        if let Some(b) = &self.bias {
            out.push(TensorExport::new(
                format!("{prefix}.bias"),
                vec![d_out],
                to_f32_vec(b.val()),
            ));
        }
    }
}

impl<B: Backend> LoraAdapter<B> {
    /// The adapter's term `scale · dropout(x) A B` of `x [rows, d_in]`.
    fn delta(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let x = burn::nn::Dropout { prob: self.dropout }.forward(x);
        // Scaling the rank-wide activation is cheaper than scaling the output.
        let low = matmul(x, self.a.val()).mul_scalar(self.scale);
        matmul(low, self.b.val())
    }
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

/// `x w` through the CPU kernels for few rows (decode) or many (prefill) when they apply, as
/// one recorded operation in a training step on the CPU, else burn's matmul (CUDA).
pub(crate) fn matmul<B: Backend>(x: Tensor<B, 2>, w: Tensor<B, 2>) -> Tensor<B, 2> {
    crate::kernels::small_matmul::try_matmul(&x, &w)
        .or_else(|| crate::kernels::prefill_matmul::try_matmul(&x, &w))
        .or_else(|| crate::kernels::trained_matmul::try_tracked_matmul(&x, &w))
        .unwrap_or_else(|| x.matmul(w))
}

// `Weight` implements burn's module traits by hand: the derive would name each variant in the
// parameter paths (`q_proj.weight.Dense`), while an f32 weight keeps the path of a `Linear`'s
// (`q_proj.weight`), which saved optimizer states and messages name. Blocks hold no
// parameters: visitors and mappers pass them by, and they stay on the host.
impl<B: Backend> Module<B> for Weight<B> {
    type Record = Option<Param<Tensor<B, 2>>>;

    fn collect_devices(&self, devices: Devices<B>) -> Devices<B> {
        match self {
            Weight::Dense(w) => Module::<B>::collect_devices(w, devices),
            Weight::Quantised(_) => devices,
        }
    }

    fn fork(self, device: &B::Device) -> Self {
        match self {
            Weight::Dense(w) => Weight::Dense(Module::<B>::fork(w, device)),
            q @ Weight::Quantised(_) => q,
        }
    }

    fn to_device(self, device: &B::Device) -> Self {
        match self {
            Weight::Dense(w) => Weight::Dense(Module::<B>::to_device(w, device)),
            q @ Weight::Quantised(_) => q,
        }
    }

    fn visit<V: ModuleVisitor<B>>(&self, visitor: &mut V) {
        if let Weight::Dense(w) = self {
            Module::<B>::visit(w, visitor);
        }
    }

    fn map<M: ModuleMapper<B>>(self, mapper: &mut M) -> Self {
        match self {
            Weight::Dense(w) => Weight::Dense(Module::<B>::map(w, mapper)),
            q @ Weight::Quantised(_) => q,
        }
    }

    fn load_record(self, record: Self::Record) -> Self {
        match (self, record) {
            (Weight::Dense(w), Some(r)) => Weight::Dense(Module::<B>::load_record(w, r)),
            (weight, _) => weight,
        }
    }

    fn into_record(self) -> Self::Record {
        match self {
            Weight::Dense(w) => Some(Module::<B>::into_record(w)),
            Weight::Quantised(_) => None,
        }
    }
}

impl<B: AutodiffBackend> AutodiffModule<B> for Weight<B> {
    type InnerModule = Weight<B::InnerBackend>;

    fn valid(&self) -> Self::InnerModule {
        match self {
            Weight::Dense(w) => Weight::Dense(AutodiffModule::<B>::valid(w)),
            Weight::Quantised(q) => Weight::Quantised(Arc::clone(q)),
        }
    }

    fn from_inner(module: Self::InnerModule) -> Self {
        match module {
            Weight::Dense(w) => {
                Weight::Dense(<Param<Tensor<B, 2>> as AutodiffModule<B>>::from_inner(w))
            }
            Weight::Quantised(q) => Weight::Quantised(q),
        }
    }
}

impl<B: Backend> ModuleDisplayDefault for Weight<B> {
    fn content(&self, content: Content) -> Option<Content> {
        match self {
            Weight::Dense(w) => content.add_single(w).optional(),
            Weight::Quantised(q) => content.add_formatted(&format!("{q:?}")).optional(),
        }
    }

    fn num_params(&self) -> usize {
        Module::<B>::num_params(self)
    }
}

impl<B: Backend> ModuleDisplay for Weight<B> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::small_matmul::decode_scope;
    use crate::quant::ggml::GgmlType;
    use crate::quant::tests::{quantise_q8_0, values};
    use crate::CpuBackend;

    /// A `[d_out, d_in]` projection kept in Q8_0 blocks, with a bias and, when `lora`, an
    /// adapter.
    fn projection(d_out: usize, d_in: usize, seed: u32, lora: bool) -> Projection<CpuBackend> {
        let dev = Default::default();
        let blocks = quantise_q8_0(&values(d_out * d_in, seed));
        let q = QuantMatrix::from_gguf(GgmlType::Q8_0, d_out, d_in, &blocks).unwrap();
        Projection {
            weight: Weight::Quantised(Arc::new(q)),
            bias: Some(Param::from_data(
                TensorData::new(values(d_out, seed + 50), [d_out]),
                &dev,
            )),
            lora: lora.then(|| adapter(d_in, d_out, seed + 100)),
            rows: RowAdapters::default(),
        }
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
            projection(48, d_in, 1, true),
            projection(16, d_in, 2, false),
            projection(16, d_in, 3, true),
        ];
        let x = Tensor::<CpuBackend, 3>::from_data(
            TensorData::new(values(3 * d_in, 9), [3, 1, d_in]),
            &dev,
        );
        let x2 = x.clone().reshape([3, d_in]);
        // SAFETY: the closure leaves nothing on the pool's thread.
        let (taken, grouped, alone) = unsafe {
            decode_scope(|| {
                let mats = [0, 1, 2].map(|i| ps[i].quantised().unwrap());
                (
                    QuantMatrix::forward_group(mats, &x2).is_some(),
                    Projection::forward_group([&ps[0], &ps[1], &ps[2]], x.clone()),
                    [0, 1, 2].map(|i| ps[i].forward(x.clone())),
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

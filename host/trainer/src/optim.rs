//! AdamW with PyTorch's semantics and defaults, its state keyed by parameter path so that it
//! survives a checkpoint round trip (burn's optimizer keys state by `ParamId`, which a model
//! rebuilt from safetensors does not keep).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use crate::tensors::{read_f32, write_f32, NamedTensor};

/// AdamW hyper-parameters. The defaults are PyTorch's (`torch.optim.AdamW`), not burn's
/// (burn defaults to eps 1e-5 and weight decay 1e-4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdamWConfig {
    /// Decoupled weight decay, applied as `p ← p · (1 − lr · weight_decay)` to every trained
    /// parameter (norms and biases included, as `torch.optim.AdamW(model.parameters())` does).
    pub weight_decay: f64,
    /// First-moment decay.
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Added to the bias-corrected second-moment root.
    pub eps: f64,
    /// Keep the moments in host memory and bring each parameter's moments to the device only
    /// for its own update. On the CPU backend device memory is host memory, so this only adds a
    /// copy per tensor and saves nothing; on CUDA it trades two host↔device transfers of the
    /// moments per step for device memory of twice the trained parameters.
    pub offload_state: bool,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            weight_decay: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            offload_state: false,
        }
    }
}

impl AdamWConfig {
    /// Checks the values are usable.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [("adam_beta1", self.beta1), ("adam_beta2", self.beta2)] {
            if !(0.0..1.0).contains(&v) {
                bail!("{name} must be in [0, 1), got {v}");
            }
        }
        if !(self.eps > 0.0 && self.eps.is_finite()) {
            bail!("adam_eps must be > 0, got {}", self.eps);
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            bail!("weight_decay must be >= 0, got {}", self.weight_decay);
        }
        Ok(())
    }
}

/// A moment tensor, flat, on the device or in host memory.
#[derive(Clone, Debug)]
enum Moment<B: Backend> {
    Device(Tensor<B, 1>),
    Host(Vec<f32>),
}

impl<B: Backend> Moment<B> {
    fn into_tensor(self, device: &B::Device) -> Tensor<B, 1> {
        match self {
            Moment::Device(t) => t,
            Moment::Host(v) => {
                let n = v.len();
                Tensor::from_data(TensorData::new(v, [n]), device)
            }
        }
    }

    fn store(t: Tensor<B, 1>, offload: bool) -> Self {
        if offload {
            Moment::Host(openclaw_engine::weights::to_f32_vec(t))
        } else {
            Moment::Device(t)
        }
    }

    fn to_vec(&self) -> Vec<f32> {
        match self {
            Moment::Device(t) => openclaw_engine::weights::to_f32_vec(t.clone()),
            Moment::Host(v) => v.clone(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Moment::Device(t) => t.dims()[0],
            Moment::Host(v) => v.len(),
        }
    }
}

/// The state of one parameter.
#[derive(Clone, Debug)]
struct ParamState<B: Backend> {
    /// Updates applied so far (PyTorch keeps one count per parameter).
    steps: u64,
    exp_avg: Moment<B>,
    exp_avg_sq: Moment<B>,
}

/// AdamW over the trainable parameters of an autodiff module. `B` is the inner (non-autodiff)
/// backend the updates run on.
#[derive(Clone, Debug)]
pub struct AdamW<B: Backend> {
    config: AdamWConfig,
    state: BTreeMap<String, ParamState<B>>,
}

impl<B: Backend> AdamW<B> {
    /// A fresh optimizer.
    pub fn new(config: AdamWConfig) -> Self {
        AdamW {
            config,
            state: BTreeMap::new(),
        }
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// The parameters (by path) that have state.
    pub fn param_paths(&self) -> impl Iterator<Item = &str> {
        self.state.keys().map(String::as_str)
    }

    /// Checks that the state (restored from a checkpoint, say) fits `module`'s parameters.
    pub fn check<AB, M>(&self, module: &M) -> Result<()>
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        let mut sizes = ParamSizes::default();
        module.visit(&mut sizes);
        for (path, n) in &sizes.sizes {
            if let Some(s) = self.state.get(path) {
                if s.exp_avg.len() != *n {
                    bail!(
                        "optimizer state of {path} has {} values, the parameter {n}",
                        s.exp_avg.len()
                    );
                }
            }
        }
        Ok(())
    }

    /// Applies one update with learning rate `lr` to every parameter of `module` that has a
    /// gradient in `grads` (frozen parameters have none and stay bit-identical), consuming the
    /// gradients it uses.
    ///
    /// # Panics
    /// When the state does not fit the module; [`AdamW::check`] tells beforehand.
    pub fn step<AB, M>(&mut self, module: M, grads: &mut GradientsParams, lr: f64) -> M
    where
        AB: AutodiffBackend<InnerBackend = B>,
        M: AutodiffModule<AB>,
    {
        let mut mapper = StepMapper::<AB> {
            opt: self,
            grads,
            lr,
            path: Vec::new(),
        };
        module.map(&mut mapper)
    }

    /// Writes the state as safetensors (`{name}.exp_avg`, `{name}.exp_avg_sq`, flat f32, each
    /// parameter under its `saved_name`) with the per-parameter step counts in the header
    /// metadata.
    pub fn save(&self, file: &Path) -> Result<()> {
        let mut tensors = Vec::new();
        let mut steps = BTreeMap::new();
        for (path, s) in &self.state {
            let name = saved_name(path);
            for (suffix, m) in [("exp_avg", &s.exp_avg), ("exp_avg_sq", &s.exp_avg_sq)] {
                let data = m.to_vec();
                tensors.push(NamedTensor {
                    name: format!("{name}.{suffix}"),
                    shape: vec![data.len()],
                    data,
                });
            }
            steps.insert(name, s.steps);
        }
        write_f32(
            file,
            &tensors,
            &[
                ("steps", serde_json::to_string(&steps)?),
                ("config", serde_json::to_string(&self.config)?),
            ],
        )
    }

    /// Reads state written by [`AdamW::save`]; the hyper-parameters are `config`'s (a resumed
    /// run may change them), the moments and step counts the file's.
    pub fn load(file: &Path, config: AdamWConfig, device: &B::Device) -> Result<Self> {
        let (mut tensors, meta) = read_f32(file)?;
        let steps: BTreeMap<String, u64> = meta
            .get("steps")
            .map(|s| serde_json::from_str(s))
            .transpose()?
            .with_context(|| format!("{}: no step counts in the metadata", file.display()))?;
        let mut take = |name: String| -> Result<Moment<B>> {
            let t = tensors
                .remove(&name)
                .with_context(|| format!("{}: {name} is missing", file.display()))?;
            Ok(if config.offload_state {
                Moment::Host(t.data)
            } else {
                let n = t.data.len();
                Moment::Device(Tensor::from_data(TensorData::new(t.data, [n]), device))
            })
        };
        let mut state = BTreeMap::new();
        for (name, n) in steps {
            let exp_avg = take(format!("{name}.exp_avg"))?;
            let exp_avg_sq = take(format!("{name}.exp_avg_sq"))?;
            if exp_avg.len() != exp_avg_sq.len() {
                bail!("{}: the moments of {name} differ in size", file.display());
            }
            state.insert(
                module_path(&name),
                ParamState {
                    steps: n,
                    exp_avg,
                    exp_avg_sq,
                },
            );
        }
        Ok(AdamW { config, state })
    }
}

/// The name a parameter's moments are saved under: its module path, except that an adapter's
/// parameters (`….q_proj.lora.a` in the model) keep the names optimizer files have always
/// given them (`….q_lora.a`, from when adapters sat beside their projection), so that states
/// saved by earlier versions resume.
fn saved_name(path: &str) -> String {
    match path.split_once("_proj.lora.") {
        Some((head, tail)) => format!("{head}_lora.{tail}"),
        None => path.to_string(),
    }
}

/// The module path of the parameter saved as `name` (the inverse of [`saved_name`]).
fn module_path(name: &str) -> String {
    match name.split_once("_lora.") {
        Some((head, tail)) => format!("{head}_proj.lora.{tail}"),
        None => name.to_string(),
    }
}

/// Every float parameter's path (`model.layers.0.self_attn.q_proj.weight`) and size.
#[derive(Default)]
struct ParamSizes {
    path: Vec<String>,
    sizes: Vec<(String, usize)>,
}

impl<B: Backend> ModuleVisitor<B> for ParamSizes {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let n = param.val().dims().iter().product();
        self.sizes.push((self.path.join("."), n));
    }
}

struct StepMapper<'a, AB: AutodiffBackend> {
    opt: &'a mut AdamW<AB::InnerBackend>,
    grads: &'a mut GradientsParams,
    lr: f64,
    path: Vec<String>,
}

impl<AB: AutodiffBackend> ModuleMapper<AB> for StepMapper<'_, AB> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<AB, D>>) -> Param<Tensor<AB, D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<AB::InnerBackend, D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let require_grad = tensor.is_require_grad();
        let path = self.path.join(".");
        let mut t = Tensor::from_inner(update(self.opt, &path, tensor.inner(), grad, self.lr));
        if require_grad {
            t = t.require_grad();
        }
        Param::from_mapped_value(id, t, mapper)
    }
}

/// One PyTorch AdamW update of one tensor (the single-tensor, non-amsgrad path).
fn update<B: Backend, const D: usize>(
    opt: &mut AdamW<B>,
    path: &str,
    param: Tensor<B, D>,
    grad: Tensor<B, D>,
    lr: f64,
) -> Tensor<B, D> {
    let c = &opt.config;
    let dims = param.dims();
    let n: usize = dims.iter().product();
    let device = param.device();
    let grad = grad.reshape([n]);
    let (steps, m, v) = match opt.state.remove(path) {
        Some(s) => (
            s.steps,
            s.exp_avg.into_tensor(&device),
            s.exp_avg_sq.into_tensor(&device),
        ),
        None => (0, Tensor::zeros([n], &device), Tensor::zeros([n], &device)),
    };
    let t = steps + 1;
    let bc1 = 1.0 - c.beta1.powi(t as i32);
    let bc2_sqrt = (1.0 - c.beta2.powi(t as i32)).sqrt();
    // Written so that every op but two (g², √v) runs in place on a uniquely owned operand:
    // fresh multi-megabyte buffers cost page faults on the CPU backend.
    let v = v.mul_scalar(c.beta2) + grad.clone().square().mul_scalar(1.0 - c.beta2);
    // β1·m + (1 − β1)·g computed as g + β1·(m − g).
    let m = (m - grad.clone()).mul_scalar(c.beta1) + grad;
    // lr/bc1 · m / (√v/√bc2 + eps) = (lr·√bc2/bc1) · m / (√v + eps·√bc2).
    let update = v
        .clone()
        .sqrt()
        .add_scalar(c.eps * bc2_sqrt)
        .recip()
        .mul(m.clone())
        .mul_scalar(lr * bc2_sqrt / bc1);
    let p = param.reshape([n]);
    let p = if c.weight_decay != 0.0 {
        p.mul_scalar(1.0 - lr * c.weight_decay)
    } else {
        p
    };
    let p = p - update;
    let offload = c.offload_state;
    opt.state.insert(
        path.to_string(),
        ParamState {
            steps: t,
            exp_avg: Moment::store(m, offload),
            exp_avg_sq: Moment::store(v, offload),
        },
    );
    p.reshape(dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapter_moments_keep_the_names_saved_states_have() {
        for (path, name) in [
            ("self_attn.q_proj.lora.a", "self_attn.q_lora.a"),
            ("mlp.down_proj.lora.b", "mlp.down_lora.b"),
            ("mlp.down_proj.weight", "mlp.down_proj.weight"),
            ("lm_head.weight", "lm_head.weight"),
        ] {
            assert_eq!(saved_name(path), name);
            assert_eq!(module_path(name), path);
        }
    }
}

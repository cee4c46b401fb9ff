//! LoRA: adapters on the attention and MLP projections, with the base weights frozen; merging
//! for serving and export; PEFT-compatible adapter files.
//!
//! The adapters live in the engine's projections ([`LoraAdapter`]): a projection computes
//! `x W + (alpha / r) · dropout(x) A B`, with burn's `[in, out]` layout, so `A` is `[in, r]` and
//! `B` is `[r, out]` (PEFT's `lora_A.weight` `[r, in]` and `lora_B.weight` `[out, r]`,
//! transposed). As in PEFT, `A` starts uniform in `±1/sqrt(in)` and `B` at zero, so a fresh
//! adapter leaves the model's outputs unchanged.

use std::path::Path;

use crate::kernels::transpose;
use crate::model::block::DecoderLayer;
use crate::model::projection::{LoraAdapter, Projection, Weight};
use crate::Model;
use anyhow::{bail, Context, Result};
use burn::module::Param;
use burn::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::rng::Rng;
use crate::weights::tensors::{read_f32, write_f32, NamedTensor};

/// The projections adapters can be put on, with the submodule that holds each.
pub const TARGET_MODULES: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// The adapter weights file PEFT reads.
pub const ADAPTER_FILE: &str = "adapter_model.safetensors";
/// The adapter configuration file PEFT reads.
pub const ADAPTER_CONFIG: &str = "adapter_config.json";

/// LoRA settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoraConfig {
    /// Rank `r` of each adapter.
    pub rank: usize,
    /// `lora_alpha`; the adapter output is scaled by `alpha / rank`.
    pub alpha: f64,
    /// Dropout on the adapter input during training, in `[0, 1)`.
    pub dropout: f64,
    /// Projection names that get adapters (see [`TARGET_MODULES`]).
    pub target_modules: Vec<String>,
}

impl Default for LoraConfig {
    fn default() -> Self {
        LoraConfig {
            rank: 16,
            alpha: 32.0,
            dropout: 0.0,
            target_modules: TARGET_MODULES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl LoraConfig {
    /// `alpha / rank`.
    pub fn scale(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    /// Parses a comma-separated target list (`q_proj,v_proj`); `all-linear` means every one.
    pub fn parse_targets(list: &str) -> Result<Vec<String>> {
        if list.trim() == "all-linear" {
            return Ok(TARGET_MODULES.iter().map(|s| s.to_string()).collect());
        }
        let out: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let c = LoraConfig {
            target_modules: out.clone(),
            ..Default::default()
        };
        c.validate()?;
        Ok(out)
    }

    /// Checks rank, alpha, dropout and target names.
    pub fn validate(&self) -> Result<()> {
        if self.rank == 0 {
            bail!("lora_rank must be at least 1");
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            bail!("lora_alpha must be > 0, got {}", self.alpha);
        }
        if !(0.0..1.0).contains(&self.dropout) {
            bail!("lora_dropout must be in [0, 1), got {}", self.dropout);
        }
        if self.target_modules.is_empty() {
            bail!("lora_target_modules is empty");
        }
        for t in &self.target_modules {
            if !TARGET_MODULES.contains(&t.as_str()) {
                bail!(
                    "unknown LoRA target module `{t}` (expected some of {})",
                    TARGET_MODULES.join(",")
                );
            }
        }
        Ok(())
    }

    fn targets(&self, name: &str) -> bool {
        self.target_modules.iter().any(|t| t == name)
    }
}

/// One adaptable projection of a layer.
struct Slot<'a, B: Backend> {
    /// `q_proj`, ...
    name: &'static str,
    /// `self_attn` or `mlp`.
    parent: &'static str,
    projection: &'a mut Projection<B>,
}

fn slots<B: Backend>(layer: &mut DecoderLayer<B>) -> [Slot<'_, B>; 7] {
    let a = &mut layer.self_attn;
    let m = &mut layer.mlp;
    [
        ("q_proj", "self_attn", &mut a.q_proj),
        ("k_proj", "self_attn", &mut a.k_proj),
        ("v_proj", "self_attn", &mut a.v_proj),
        ("o_proj", "self_attn", &mut a.o_proj),
        ("gate_proj", "mlp", &mut m.gate_proj),
        ("up_proj", "mlp", &mut m.up_proj),
        ("down_proj", "mlp", &mut m.down_proj),
    ]
    .map(|(name, parent, projection)| Slot {
        name,
        parent,
        projection,
    })
}

/// [`DecoderLayer::projections`], to change.
pub(crate) fn projections_mut<B: Backend>(layer: &mut DecoderLayer<B>) -> [&mut Projection<B>; 7] {
    slots(layer).map(|s| s.projection)
}

/// PEFT's name prefix of a projection: `base_model.model.model.layers.{i}.self_attn.q_proj`.
fn peft_prefix(layer: usize, parent: &str, name: &str) -> String {
    format!("base_model.model.model.layers.{layer}.{parent}.{name}")
}

fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x1000_0000_01b3)
    })
}

/// Each projection's name, holder and adapter, read-only.
fn adapters<B: Backend>(
    layer: &DecoderLayer<B>,
) -> [(&'static str, &'static str, Option<&LoraAdapter<B>>); 7] {
    let p = layer.projections();
    let names = [
        ("q_proj", "self_attn"),
        ("k_proj", "self_attn"),
        ("v_proj", "self_attn"),
        ("o_proj", "self_attn"),
        ("gate_proj", "mlp"),
        ("up_proj", "mlp"),
        ("down_proj", "mlp"),
    ];
    std::array::from_fn(|i| (names[i].0, names[i].1, p[i].lora.as_ref()))
}

/// Whether any projection of `model` carries an adapter.
pub fn has_adapters<B: Backend>(model: &Model<B>) -> bool {
    model
        .model
        .layers
        .iter()
        .any(|l| adapters(l).iter().any(|s| s.2.is_some()))
}

/// Freezes every weight of `model` and puts a fresh adapter on each targeted projection. The
/// adapters' initial values depend only on `seed` and the projection's name. Weights held in
/// quantised blocks stay in them (QLoRA): the adapters train over the frozen blocks, which
/// backends without the block kernels (autodiff, CUDA) dequantise in each forward pass, so the
/// trainer, serving and a reference share one copy of the base.
pub fn attach<B: Backend>(model: Model<B>, cfg: &LoraConfig, seed: u64) -> Result<Model<B>> {
    cfg.validate()?;
    let r = cfg.rank;
    with_adapters(model, cfg, |prefix, [d_in, d_out]| {
        let bound = 1.0 / (d_in as f64).sqrt();
        let mut rng = Rng::new(seed ^ name_hash(prefix));
        let a = (0..d_in * r)
            .map(|_| ((rng.uniform() * 2.0 - 1.0) * bound) as f32)
            .collect();
        Ok((a, vec![0f32; r * d_out]))
    })
}

/// Freezes `model` and puts an adapter on each projection `cfg` targets, with `A` (`[d_in,
/// rank]`) and `B` (`[rank, d_out]`) from `values(peft_prefix, [d_in, d_out])`.
fn with_adapters<B: Backend>(
    model: Model<B>,
    cfg: &LoraConfig,
    mut values: impl FnMut(&str, [usize; 2]) -> Result<(Vec<f32>, Vec<f32>)>,
) -> Result<Model<B>> {
    if has_adapters(&model) {
        bail!("the model already carries LoRA adapters");
    }
    let device = model.device();
    let mut model = model.no_grad();
    let r = cfg.rank;
    for (i, layer) in model.model.layers.iter_mut().enumerate() {
        for slot in slots(layer) {
            if !cfg.targets(slot.name) {
                continue;
            }
            let [d_in, d_out] = slot.projection.dims();
            let (a, b) = values(&peft_prefix(i, slot.parent, slot.name), [d_in, d_out])?;
            slot.projection.lora = Some(LoraAdapter {
                a: Param::from_data(TensorData::new(a, [d_in, r]), &device),
                b: Param::from_data(TensorData::new(b, [r, d_out]), &device),
                scale: cfg.scale(),
                dropout: cfg.dropout,
            });
        }
    }
    Ok(model)
}

/// A copy of `model` with every adapter folded into its projection (`W + scale · A B`) and
/// removed: what serving and export use.
pub fn merged<B: Backend>(model: &Model<B>) -> Model<B> {
    let mut out = model.dequantised();
    for layer in out.model.layers.iter_mut() {
        for slot in slots(layer) {
            let p = slot.projection;
            let Some(l) = p.lora.take() else {
                continue;
            };
            let Weight::Dense(w) = &mut p.weight else {
                unreachable!("a dequantised model's weights are f32");
            };
            let delta = l.a.val().matmul(l.b.val()).mul_scalar(l.scale);
            *w = Param::from_tensor(w.val().detach() + delta.detach());
        }
    }
    out
}

/// A copy of `model` without its adapters: the frozen base weights (the reference policy of a
/// LoRA run).
pub fn stripped<B: Backend>(model: &Model<B>) -> Model<B> {
    let mut out = model.clone();
    for layer in out.model.layers.iter_mut() {
        for slot in slots(layer) {
            slot.projection.lora = None;
        }
    }
    out
}

/// The adapters of `model` as PEFT tensors (`…q_proj.lora_A.weight` `[r, in]`,
/// `…q_proj.lora_B.weight` `[out, r]`).
pub fn adapter_tensors<B: Backend>(model: &Model<B>) -> Vec<NamedTensor> {
    let mut out = Vec::new();
    for (i, layer) in model.model.layers.iter().enumerate() {
        for (name, parent, lora) in adapters(layer) {
            let Some(l) = lora else {
                continue;
            };
            let prefix = peft_prefix(i, parent, name);
            let [d_in, r] = l.a.val().dims();
            let [_, d_out] = l.b.val().dims();
            let a = crate::weights::to_f32_vec(l.a.val());
            let b = crate::weights::to_f32_vec(l.b.val());
            out.push(NamedTensor {
                name: format!("{prefix}.lora_A.weight"),
                shape: vec![r, d_in],
                data: transpose(&a, d_in, r),
            });
            out.push(NamedTensor {
                name: format!("{prefix}.lora_B.weight"),
                shape: vec![d_out, r],
                data: transpose(&b, r, d_out),
            });
        }
    }
    out
}

/// Writes `adapter_model.safetensors` and `adapter_config.json` into `dir`, loadable by
/// `peft.PeftModel.from_pretrained(base, dir)`.
pub fn save_adapters<B: Backend>(
    model: &Model<B>,
    cfg: &LoraConfig,
    base_model_name_or_path: &str,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_f32(&dir.join(ADAPTER_FILE), &adapter_tensors(model), &[])?;
    let config = json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": cfg.rank,
        "lora_alpha": cfg.alpha,
        "lora_dropout": cfg.dropout,
        "target_modules": cfg.target_modules,
        "base_model_name_or_path": base_model_name_or_path,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "use_rslora": false,
        "use_dora": false,
        "modules_to_save": null,
        "layers_to_transform": null,
        "layers_pattern": null,
        "rank_pattern": {},
        "alpha_pattern": {},
        "revision": null,
    });
    let path = dir.join(ADAPTER_CONFIG);
    std::fs::write(&path, serde_json::to_string_pretty(&config)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads the LoRA settings of a PEFT `adapter_config.json`.
pub fn read_adapter_config(dir: &Path) -> Result<LoraConfig> {
    let path = dir.join(ADAPTER_CONFIG);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    if v["peft_type"].as_str() != Some("LORA") {
        bail!("{}: peft_type is not LORA", path.display());
    }
    if v["use_rslora"].as_bool() == Some(true) || v["use_dora"].as_bool() == Some(true) {
        bail!(
            "{}: rsLoRA and DoRA adapters are not supported",
            path.display()
        );
    }
    let rank = v["r"]
        .as_u64()
        .with_context(|| format!("{}: `r` is missing", path.display()))? as usize;
    let targets = match &v["target_modules"] {
        serde_json::Value::Array(a) => a
            .iter()
            .map(|t| t.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()
            .with_context(|| format!("{}: target_modules must be names", path.display()))?,
        serde_json::Value::String(s) => LoraConfig::parse_targets(s)?,
        _ => bail!("{}: target_modules is missing", path.display()),
    };
    let cfg = LoraConfig {
        rank,
        alpha: v["lora_alpha"].as_f64().unwrap_or(8.0),
        dropout: v["lora_dropout"].as_f64().unwrap_or(0.0),
        target_modules: targets,
    };
    cfg.validate()
        .with_context(|| format!("{} holds an unusable LoRA config", path.display()))?;
    Ok(cfg)
}

/// Freezes `model` and attaches the adapters saved in `dir` (trainable, as after
/// [`attach`]; weights in quantised blocks stay in them). Returns the model and the adapter
/// settings.
pub fn load_adapters<B: Backend>(model: Model<B>, dir: &Path) -> Result<(Model<B>, LoraConfig)> {
    let cfg = read_adapter_config(dir)?;
    if has_adapters(&model) {
        bail!("the model already carries LoRA adapters");
    }
    let file = dir.join(ADAPTER_FILE);
    let (mut tensors, _) = read_f32(&file)?;
    let r = cfg.rank;
    let model = with_adapters(model, &cfg, |prefix, [d_in, d_out]| {
        let mut take = |suffix: &str, shape: [usize; 2]| -> Result<Vec<f32>> {
            let name = format!("{prefix}.{suffix}");
            let t = tensors
                .remove(&name)
                .with_context(|| format!("{}: {name} is missing", file.display()))?;
            if t.shape != shape {
                bail!(
                    "{}: {name} has shape {:?}, expected {shape:?}",
                    file.display(),
                    t.shape
                );
            }
            Ok(t.data)
        };
        let a = transpose(&take("lora_A.weight", [r, d_in])?, r, d_in);
        let b = transpose(&take("lora_B.weight", [d_out, r])?, d_out, r);
        Ok((a, b))
    })?;
    if let Some(name) = tensors.keys().next() {
        bail!(
            "{}: tensor {name} matches no targeted projection of the model",
            file.display()
        );
    }
    Ok((model, cfg))
}

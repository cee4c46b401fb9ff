//! Shared helpers of the integration tests: a tiny Qwen3, samples, simple losses, snapshots.
#![allow(dead_code)]

use burn::backend::Autodiff;
use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use openclaw_engine::{
    random_model, score, CpuBackend, Model, ModelConfig, ScoreOptions, ScoreRequest,
};
use openclaw_plugin_api::abi_stable::std_types::{ROption, RString, RVec};
use openclaw_plugin_api::{LossBatch, LossOutput, Metric, TrainingSample};
use openclaw_trainer::{LrSchedule, TrainConfig};

pub type Inner = CpuBackend;
pub type AD = Autodiff<CpuBackend>;

pub fn device() -> openclaw_engine::CpuDevice {
    Default::default()
}

/// vocab 64, hidden 32, inter 64, 2 layers, 4 q heads / 2 kv heads, head_dim 8.
pub fn tiny_config(tied: bool) -> ModelConfig {
    ModelConfig::qwen3(64, 32, 64, 2, 4, 2, 8, tied)
}

pub fn tiny_model(seed: u64) -> Model<AD> {
    random_model::<AD>(tiny_config(false), seed, &device()).unwrap()
}

pub fn config(lr: f64) -> TrainConfig {
    TrainConfig {
        schedule: LrSchedule::constant(lr),
        max_grad_norm: 0.0,
        ..Default::default()
    }
}

pub fn sample(prompt: &[u32], response: &[u32], reward: f32, group: u64) -> TrainingSample {
    TrainingSample {
        session_id: RString::from("s"),
        turn_index: 0,
        group_id: group,
        prompt_ids: prompt.to_vec().into(),
        response_ids: response.to_vec().into(),
        rollout_logprobs: vec![-1.0f32; response.len()].into(),
        loss_mask: vec![1.0f32; response.len()].into(),
        weight_version: 0,
        reward,
        advantages: ROption::RNone,
        teacher_logprobs: ROption::RNone,
        teacher_topk: ROption::RNone,
        metadata_json: RString::new(),
    }
}

/// Four samples of different lengths in two groups.
pub fn batch() -> Vec<TrainingSample> {
    vec![
        sample(&[1, 2, 3], &[4, 5, 6, 7], 1.0, 0),
        sample(&[8, 9], &[10, 11], -1.0, 0),
        sample(&[12, 13, 14, 15, 16], &[17, 18, 19], 0.5, 1),
        sample(&[20], &[21, 22, 23, 24, 25], -0.5, 1),
    ]
}

/// REINFORCE with the reward as advantage, slime's reduction: per-sample masked mean, summed,
/// divided by the step's samples. `L = −Σ_i mean_t(r_i · logp_t) / step_samples`.
pub fn reinforce(b: &LossBatch) -> anyhow::Result<LossOutput> {
    let mut grad = vec![0f32; b.num_tokens()];
    let mut loss = 0.0;
    let step = b.step_samples as f64;
    for i in 0..b.num_samples() {
        let r = b.sample_range(i);
        let n: f64 = b.loss_mask[r.clone()].iter().map(|&m| m as f64).sum();
        if n == 0.0 {
            continue;
        }
        for t in r {
            let w = b.loss_mask[t] as f64 / (n * step);
            let adv = if b.advantages.is_empty() {
                b.rewards[i] as f64
            } else {
                b.advantages[t] as f64
            };
            loss -= w * adv * b.logp[t] as f64;
            grad[t] = (-w * adv) as f32;
        }
    }
    Ok(LossOutput {
        loss,
        grad_logp: grad.into(),
        grad_topk: RVec::new(),
        metrics: vec![Metric::new("tokens", b.num_tokens() as f64)].into(),
    })
}

/// Sum of the logprobs of `response` after `prompt` under the inference copy of a model.
pub fn response_logprob(model: &Model<Inner>, prompt: &[u32], response: &[u32]) -> f32 {
    let r = score(
        model,
        &[ScoreRequest::new(prompt.to_vec(), response.to_vec())],
        &ScoreOptions::default(),
    )
    .unwrap();
    r[0].logprobs.iter().sum()
}

/// Every base weight of a model under its HF name.
pub fn weights<B: Backend>(model: &Model<B>) -> Vec<(String, Vec<f32>)> {
    model
        .export()
        .into_iter()
        .map(|t| (t.name, t.data))
        .collect()
}

pub fn max_diff(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]) -> f32 {
    assert_eq!(a.len(), b.len());
    let mut m = 0f32;
    for ((na, va), (nb, vb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        for (x, y) in va.iter().zip(vb) {
            m = m.max((x - y).abs());
        }
    }
    m
}

/// Every gradient of `model`'s parameters, in visit order (None for parameters without one).
pub fn grads_of(model: &Model<AD>, grads: &GradientsParams) -> Vec<Option<Vec<f32>>> {
    struct V<'a> {
        grads: &'a GradientsParams,
        out: Vec<Option<Vec<f32>>>,
    }
    impl ModuleVisitor<AD> for V<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<AD, D>>) {
            self.out.push(
                self.grads
                    .get::<Inner, D>(param.id)
                    .map(|g| g.into_data().to_vec::<f32>().unwrap()),
            );
        }
    }
    let mut v = V {
        grads,
        out: Vec::new(),
    };
    model.visit(&mut v);
    v.out
}

/// Max |a − b| over gradients present in both; panics when presence differs.
pub fn grads_max_diff(a: &[Option<Vec<f32>>], b: &[Option<Vec<f32>>]) -> (f32, f32) {
    assert_eq!(a.len(), b.len());
    let (mut d, mut scale) = (0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Some(x), Some(y)) => {
                for (p, q) in x.iter().zip(y) {
                    d = d.max((p - q).abs());
                    scale = scale.max(p.abs());
                }
            }
            (None, None) => {}
            _ => panic!("a gradient is present in one set only"),
        }
    }
    (d, scale)
}

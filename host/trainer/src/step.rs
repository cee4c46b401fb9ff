//! The trainer and its RL step: samples → micro-batches → per-token logprobs → the loss plugin's
//! gradient with respect to them → the surrogate `Σ stopgrad(g) · logp` backpropagated and
//! accumulated → global-norm clipping → AdamW.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use openclaw_engine::weights::to_f32_vec;
use openclaw_engine::{Model, Published};
use openclaw_plugin_api::abi_stable::std_types::{ROption, RVec};
use openclaw_plugin_api::{LossBatch, LossOutput, TopKBatch, TrainingSample};
use serde::{Deserialize, Serialize};

use crate::clip::clip_global_norm;
use crate::config::TrainConfig;
use crate::logprob::{layout_logprobs, TokenLogprobs};
use crate::lora;
use crate::optim::AdamW;
use crate::pack::{pack, Layout, SeqRef};
use crate::parallel::parallel_map;
use crate::rng::SplitMix;

/// The loss a step calls once per micro-batch: the host passes its loaded loss plugin here.
pub type LossFn<'a> = dyn Fn(&LossBatch) -> Result<LossOutput> + 'a;

/// Where training stands; saved in checkpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    /// Optimizer steps taken (the next step has 0-based index `step` in the lr schedule).
    pub step: u64,
    /// Version of the weights being trained (what serving publishes them as); samples are
    /// `weight_version − sample.weight_version` versions stale.
    pub weight_version: u64,
    /// The caller's position in its data (e.g. the sequence number of the last consumed sample).
    pub data_position: u64,
}

/// What one optimizer step did; one line of `training.log`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// Steps taken after this one (1 for the first step).
    pub step: u64,
    /// Samples (or SFT sequences) in the step.
    pub samples: usize,
    /// The loss, summed over micro-batches (losses normalised by `step_samples` add up to the
    /// loss of the whole step).
    pub loss: f64,
    /// The loss plugin's metrics, averaged over micro-batches weighted by their trained tokens.
    pub metrics: BTreeMap<String, f64>,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate the step used.
    pub lr: f64,
    /// Tokens run through the model (prompt + response, padding excluded).
    pub tokens: usize,
    /// Tokens with a non-zero loss mask.
    pub trained_tokens: usize,
    /// Micro-batches the step was split into.
    pub micro_batches: usize,
    /// Sample groups split across micro-batches.
    pub split_groups: usize,
    /// Mean |train logprob − rollout logprob| over trained tokens (RL steps).
    pub logprob_diff: Option<f64>,
    /// Mean weight-version staleness of the samples (RL steps).
    pub staleness: Option<f64>,
    /// Wall time of the step in seconds.
    pub step_time_s: f64,
}

/// Gradients of one step, accumulated over its micro-batches, not yet applied.
pub struct StepGradients {
    /// Per-parameter gradients (trainable parameters only).
    pub grads: GradientsParams,
    /// The report so far (the optimizer fields are filled by [`Trainer::apply_gradients`]).
    pub report: StepReport,
    started: Instant,
}

impl StepGradients {
    /// Bundles gradients with the report so far; `started` is when the step began.
    pub(crate) fn new(grads: GradientsParams, report: StepReport, started: Instant) -> Self {
        StepGradients {
            grads,
            report,
            started,
        }
    }
}

/// A policy being trained: the model (with adapters when LoRA is on), AdamW, the optional
/// reference model, and the step counters.
pub struct Trainer<B: AutodiffBackend> {
    /// `None` only while the optimizer holds it.
    pub(crate) model: Option<Model<B>>,
    pub(crate) optimizer: AdamW<B::InnerBackend>,
    pub(crate) reference: Option<Model<B::InnerBackend>>,
    pub(crate) config: TrainConfig,
    pub(crate) state: TrainerState,
    pub(crate) rng: SplitMix,
}

impl<B: AutodiffBackend> Trainer<B> {
    /// A trainer for `model`. With LoRA configured, the model's weights are frozen and fresh
    /// adapters attached (weights in quantised blocks stay in them, QLoRA); without it, weights
    /// in blocks are dequantised to be trained; with `use_reference` (and no LoRA), a frozen
    /// copy of `model` becomes the reference.
    pub fn new(model: Model<B>, config: TrainConfig) -> Result<Self> {
        config.validate()?;
        if model.score.is_some() {
            bail!("cannot train a sequence classifier with a language-model loss");
        }
        let model = match &config.lora {
            Some(l) => lora::attach(model, l, config.seed)?,
            None => model.dequantised(),
        };
        let reference = (config.use_reference && config.lora.is_none()).then(|| model.valid());
        Ok(Trainer {
            model: Some(model),
            optimizer: AdamW::new(config.optimizer.clone()),
            reference,
            rng: SplitMix::new(config.seed),
            config,
            state: TrainerState::default(),
        })
    }

    /// A trainer for the HF model directory `dir` (`config.json` + safetensors).
    pub fn from_pretrained(dir: &Path, config: TrainConfig, device: &B::Device) -> Result<Self> {
        let model = openclaw_engine::load_model::<B>(dir, device)
            .with_context(|| format!("cannot load the model to train from {}", dir.display()))?;
        Self::new(model, config)
    }

    /// The model being trained (adapters attached when LoRA is on).
    pub fn model(&self) -> &Model<B> {
        self.model
            .as_ref()
            .expect("the trainer holds its model between steps")
    }

    /// The settings.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Step counters and positions.
    pub fn state(&self) -> &TrainerState {
        &self.state
    }

    /// Records the caller's data position (saved in checkpoints).
    pub fn set_data_position(&mut self, position: u64) {
        self.state.data_position = position;
    }

    /// Records the version under which the current weights are served.
    pub fn set_weight_version(&mut self, version: u64) {
        self.state.weight_version = version;
    }

    /// The trainer's random numbers (e.g. for data shuffling); their state is checkpointed.
    pub fn rng(&mut self) -> &mut SplitMix {
        &mut self.rng
    }

    /// Sets the frozen reference model used for `ref_logp` when `use_reference` is on (needed
    /// after a resume without LoRA: the reference is the initial model, not the checkpoint).
    pub fn set_reference(&mut self, model: Model<B::InnerBackend>) {
        self.reference = Some(model);
    }

    /// The learning rate the next step will use.
    pub fn next_lr(&self) -> f64 {
        self.config.schedule.lr(self.state.step)
    }

    /// The weights to serve on the inference backend: adapters merged into f32 weights, or,
    /// over a base in quantised blocks, kept beside it, so what a publication adds to the
    /// shared base is the adapters alone.
    pub fn inference_model(&self) -> Model<B::InnerBackend> {
        let m = self.model().valid();
        if lora::has_adapters(&m) && !m.is_quantised() {
            lora::merged(&m)
        } else {
            m
        }
    }

    /// Publishes [`Trainer::inference_model`] and records the new version as the trained
    /// weights' version.
    pub fn publish(&mut self, published: &Published<Model<B::InnerBackend>>) -> u64 {
        let v = published.publish(self.inference_model());
        self.state.weight_version = v;
        v
    }

    /// [`Trainer::publish`] onto `device`: serving may run on another device than training.
    pub fn publish_on(
        &mut self,
        published: &Published<Model<B::InnerBackend>>,
        device: &burn::tensor::Device<B::InnerBackend>,
    ) -> Result<u64> {
        let model = self.inference_model();
        if let Some(name) = model.non_finite_weight() {
            bail!("the trained weights have non-finite values (NaN or infinity) in `{name}`; not published");
        }
        let v = published.publish(model.to_device(device));
        self.state.weight_version = v;
        Ok(v)
    }

    /// One RL optimizer step: [`Trainer::compute_gradients`] then [`Trainer::apply_gradients`].
    pub fn train_step(
        &mut self,
        samples: &[TrainingSample],
        loss: &LossFn<'_>,
    ) -> Result<StepReport> {
        let g = self.compute_gradients(samples, loss)?;
        self.apply_gradients(g)
    }

    /// Runs every micro-batch of `samples` forward, calls `loss` on each and accumulates the
    /// gradients of the surrogate; the weights do not change.
    pub fn compute_gradients(
        &self,
        samples: &[TrainingSample],
        loss: &LossFn<'_>,
    ) -> Result<StepGradients> {
        let started = Instant::now();
        if samples.is_empty() {
            bail!("a training step needs at least one sample");
        }
        let model = self.model();
        let shape = validate_samples(samples, &model.config)?;
        if self.config.use_reference && self.config.lora.is_none() && self.reference.is_none() {
            bail!("use_reference is on but no reference model is set (Trainer::set_reference)");
        }
        self.seed_dropout();
        let lengths: Vec<usize> = samples
            .iter()
            .map(|s| s.prompt_ids.len() + s.response_ids.len())
            .collect();
        let groups: Vec<u64> = samples.iter().map(|s| s.group_id).collect();
        let packing = pack(&lengths, &groups, self.config.max_tokens_per_batch);
        let mut acc = GradientsAccumulator::<Model<B>>::new();
        let mut report = StepReport {
            samples: samples.len(),
            micro_batches: packing.micro_batches.len(),
            split_groups: packing.split_groups,
            ..Default::default()
        };
        let mut metric_sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let (mut diff_sum, mut diff_n) = (0.0f64, 0usize);
        let threads = self.config.data_parallel.max(1);
        for round in packing.micro_batches.chunks(threads) {
            let members: Vec<Vec<&TrainingSample>> = round
                .iter()
                .map(|mb| mb.samples.iter().map(|&i| &samples[i]).collect())
                .collect();
            // Forward passes on the threads, loss calls here, then backward passes on the
            // threads, each on its own copy of the weights (see `thread_models`).
            let items: Vec<(Model<B>, &Vec<&TrainingSample>)> = thread_models(model, members.len())
                .into_iter()
                .zip(&members)
                .collect();
            let fwds = parallel_map(items, &|(m, samples): (Model<B>, &Vec<&TrainingSample>)| {
                self.forward(m, samples, &shape)
            });
            let mut jobs = Vec::with_capacity(fwds.len());
            for (fwd, m) in fwds.into_iter().zip(&members) {
                let batch = self.loss_batch(&fwd, m, samples.len(), &shape);
                batch
                    .validate()
                    .map_err(|e| anyhow::anyhow!("internal error: malformed loss batch: {e}"))?;
                let result = loss(&batch).context("the loss function failed")?;
                check_loss_output(&result, batch.num_tokens(), shape.topk_k)?;
                let mut trained = 0;
                for t in 0..batch.num_tokens() {
                    if batch.loss_mask[t] != 0.0 {
                        diff_sum += (batch.logp[t] as f64 - batch.rollout_logp[t] as f64).abs();
                        trained += 1;
                    }
                }
                report.loss += result.loss;
                report.tokens += fwd.layout.real_tokens;
                report.trained_tokens += trained;
                diff_n += trained;
                // Weight by trained tokens; a micro-batch with none still counts once so that
                // metrics of all-masked steps are not lost.
                let w = trained.max(1) as f64;
                for m in result.metrics.iter() {
                    let e = metric_sums.entry(m.name.to_string()).or_default();
                    e.0 += m.value * w;
                    e.1 += w;
                }
                jobs.push((fwd, result));
            }
            let topk_k = shape.topk_k;
            let grads = parallel_map(jobs, &|(fwd, result): (Forward<B>, LossOutput)| {
                backward(fwd, &result, topk_k)
            });
            for g in grads.into_iter().flatten() {
                acc.accumulate(model, g);
            }
        }
        report.metrics = metric_sums
            .into_iter()
            .map(|(k, (s, w))| (k, s / w))
            .collect();
        report.logprob_diff = Some(if diff_n > 0 {
            diff_sum / diff_n as f64
        } else {
            0.0
        });
        let v = self.state.weight_version;
        report.staleness = Some(
            samples
                .iter()
                .map(|s| v.saturating_sub(s.weight_version) as f64)
                .sum::<f64>()
                / samples.len() as f64,
        );
        Ok(StepGradients {
            grads: acc.grads(),
            report,
            started,
        })
    }

    /// Clips the accumulated gradients by global norm, steps AdamW with the scheduled learning
    /// rate and advances the step counter. A non-finite gradient norm skips the update (the
    /// weights stay as they were) and returns an error.
    pub fn apply_gradients(&mut self, mut g: StepGradients) -> Result<StepReport> {
        let model = self.model.take().expect("the trainer holds its model");
        let norm = clip_global_norm::<B, _>(&model, &mut g.grads, self.config.max_grad_norm);
        if !norm.is_finite() {
            self.model = Some(model);
            bail!(
                "step {}: the gradient norm is {norm}; the update was skipped",
                self.state.step + 1
            );
        }
        if let Err(e) = self.optimizer.check::<B, _>(&model) {
            self.model = Some(model);
            return Err(e);
        }
        let lr = self.next_lr();
        self.model = Some(self.optimizer.step::<B, _>(model, &mut g.grads, lr));
        self.state.step += 1;
        let mut report = g.report;
        report.step = self.state.step;
        report.grad_norm = norm;
        report.lr = lr;
        report.step_time_s = g.started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Seeds the backend's RNG from (seed, step) so LoRA dropout masks are reproducible and a
    /// resumed run draws the same masks as an uninterrupted one.
    pub(crate) fn seed_dropout(&self) {
        if self.config.lora.as_ref().is_some_and(|l| l.dropout > 0.0) {
            let s = SplitMix::new(self.config.seed ^ self.state.step.wrapping_mul(0x9e37_79b9))
                .next_u64();
            B::seed(&self.model().device(), s);
        }
    }

    fn has_dropout(&self) -> bool {
        self.config.lora.as_ref().is_some_and(|l| l.dropout > 0.0)
    }

    /// Runs one micro-batch forward: differentiable logprobs plus the plain values the loss
    /// needs (old and reference logprobs).
    fn forward(
        &self,
        model: Model<B>,
        samples: &[&TrainingSample],
        shape: &StepShape,
    ) -> Forward<B> {
        let seqs: Vec<SeqRef<'_>> = samples
            .iter()
            .map(|s| {
                let p = s.prompt_ids.len();
                SeqRef {
                    tokens: vec![&s.prompt_ids[..], &s.response_ids[..]],
                    targets: (p..p + s.response_ids.len()).collect(),
                }
            })
            .collect();
        let layout = Layout::new(&seqs);
        let topk_ids: Option<Vec<u32>> = shape.topk_k.map(|_| {
            samples
                .iter()
                .flat_map(|s| match &s.teacher_topk {
                    ROption::RSome(t) => t.token_ids.to_vec(),
                    ROption::RNone => Vec::new(),
                })
                .collect()
        });
        let topk_arg = topk_ids.as_deref().zip(shape.topk_k);
        let (temp, chunk) = (self.config.temperature, self.config.logprob_chunk);
        let out = layout_logprobs(&model, &layout, topk_arg, temp, chunk);
        let logp = to_f32_vec(out.logp.clone());
        // One optimizer step per batch: the policy at the start of the step is the one just
        // run, so its values are the old logprobs, unless dropout made that pass noisy.
        let old_logp = if self.has_dropout() {
            to_f32_vec(layout_logprobs(&model.valid(), &layout, None, temp, chunk).logp)
        } else {
            logp.clone()
        };
        let ref_logp = self.config.use_reference.then(|| {
            let r = match &self.reference {
                Some(r) => layout_logprobs(r, &layout, None, temp, chunk),
                None => {
                    layout_logprobs(&lora::stripped(&model.valid()), &layout, None, temp, chunk)
                }
            };
            to_f32_vec(r.logp)
        });
        let student_topk = out.topk.as_ref().map(|t| to_f32_vec(t.clone()));
        Forward {
            model,
            layout,
            out,
            logp,
            old_logp,
            ref_logp,
            topk_ids,
            student_topk,
        }
    }

    /// The loss plugin's input for one micro-batch.
    fn loss_batch(
        &self,
        fwd: &Forward<B>,
        samples: &[&TrainingSample],
        step_samples: usize,
        shape: &StepShape,
    ) -> LossBatch {
        let n = fwd.logp.len();
        let mut rollout = Vec::with_capacity(n);
        let mut mask = Vec::with_capacity(n);
        let mut advantages = Vec::new();
        let mut teacher = Vec::new();
        let mut teacher_present = Vec::new();
        let mut teacher_topk = Vec::new();
        for s in samples {
            let len = s.response_ids.len();
            rollout.extend_from_slice(&s.rollout_logprobs);
            if s.loss_mask.is_empty() {
                mask.extend(std::iter::repeat_n(1.0f32, len));
            } else {
                mask.extend_from_slice(&s.loss_mask);
            }
            if let ROption::RSome(a) = &s.advantages {
                advantages.extend_from_slice(a);
            }
            if shape.any_teacher {
                match &s.teacher_logprobs {
                    ROption::RSome(t) => {
                        teacher.extend_from_slice(t);
                        teacher_present.push(true);
                    }
                    ROption::RNone => {
                        teacher.extend(std::iter::repeat_n(0.0f32, len));
                        teacher_present.push(false);
                    }
                }
            }
            if let ROption::RSome(t) = &s.teacher_topk {
                teacher_topk.extend_from_slice(&t.logprobs);
            }
        }
        LossBatch {
            sample_offsets: fwd.layout.offsets.clone().into(),
            logp: fwd.logp.clone().into(),
            old_logp: fwd.old_logp.clone().into(),
            rollout_logp: rollout.into(),
            ref_logp: fwd.ref_logp.clone().map(RVec::from).into(),
            teacher_logp: if shape.any_teacher {
                ROption::RSome(teacher.into())
            } else {
                ROption::RNone
            },
            teacher_present: teacher_present.into(),
            advantages: advantages.into(),
            rewards: samples.iter().map(|s| s.reward).collect(),
            group_ids: samples.iter().map(|s| s.group_id).collect(),
            loss_mask: mask.into(),
            topk: match (shape.topk_k, &fwd.student_topk) {
                (Some(k), Some(st)) => ROption::RSome(TopKBatch {
                    k: k as u32,
                    token_ids: fwd.topk_ids.clone().unwrap_or_default().into(),
                    student_logp: st.clone().into(),
                    teacher_logp: teacher_topk.into(),
                }),
                _ => ROption::RNone,
            },
            step_samples: step_samples as u32,
        }
    }
}

/// Backpropagates `Σ g · logp (+ Σ g_k · topk_logp)` of one micro-batch, `g` being the loss's
/// gradients taken as constants; `None` when the micro-batch has no token.
fn backward<B: AutodiffBackend>(
    fwd: Forward<B>,
    result: &LossOutput,
    topk_k: Option<usize>,
) -> Option<GradientsParams> {
    let n = fwd.logp.len();
    if n == 0 {
        return None;
    }
    let model = fwd.model;
    let device = model.device();
    let g = Tensor::<B, 1>::from_data(TensorData::new(result.grad_logp.to_vec(), [n]), &device);
    let mut surrogate = (fwd.out.logp * g).sum();
    if let (Some(k), Some(t)) = (topk_k, fwd.out.topk) {
        if !result.grad_topk.is_empty() {
            let gk = Tensor::<B, 2>::from_data(
                TensorData::new(result.grad_topk.to_vec(), [n, k]),
                &device,
            );
            surrogate = surrogate + (t * gk).sum();
        }
    }
    Some(GradientsParams::from_grads(surrogate.backward(), &model))
}

/// One copy of the weights per thread: the first is `model` itself, the others share its
/// tensors but are fresh autodiff leaves (same `ParamId`s, so their gradients add up). burn-autodiff
/// 0.21 joins every graph that touches one leaf into one locked graph, which serialises
/// backward passes across threads and can deadlock a thread recording a graph against one
/// running a backward pass; distinct leaves keep each thread's graph to itself.
pub(crate) fn thread_models<B: AutodiffBackend>(model: &Model<B>, n: usize) -> Vec<Model<B>> {
    (0..n)
        .map(|i| {
            if i == 0 {
                model.clone()
            } else {
                Model::from_inner(model.valid())
            }
        })
        .collect()
}

/// One micro-batch after its forward pass.
struct Forward<B: Backend> {
    /// The copy of the weights the graph was recorded on (see [`thread_models`]).
    model: Model<B>,
    layout: Layout,
    out: TokenLogprobs<B>,
    logp: Vec<f32>,
    old_logp: Vec<f32>,
    ref_logp: Option<Vec<f32>>,
    topk_ids: Option<Vec<u32>>,
    student_topk: Option<Vec<f32>>,
}

/// What every sample of a step agrees on.
struct StepShape {
    /// Some sample carries teacher logprobs.
    any_teacher: bool,
    /// Entries per position when the samples carry teacher top-k lists.
    topk_k: Option<usize>,
}

/// Checks every sample against the model and the others; errors name the sample and field.
fn validate_samples(
    samples: &[TrainingSample],
    cfg: &openclaw_engine::ModelConfig,
) -> Result<StepShape> {
    let with_adv = samples.iter().filter(|s| s.advantages.is_some()).count();
    if with_adv != 0 && with_adv != samples.len() {
        bail!(
            "{with_adv} of {} samples carry advantages: a step needs them on all samples or none",
            samples.len()
        );
    }
    let with_topk: Vec<usize> = samples
        .iter()
        .filter_map(|s| match &s.teacher_topk {
            ROption::RSome(t) => Some(t.k as usize),
            ROption::RNone => None,
        })
        .collect();
    if !with_topk.is_empty() && with_topk.len() != samples.len() {
        bail!(
            "{} of {} samples carry teacher top-k lists: a step needs them on all samples or none",
            with_topk.len(),
            samples.len()
        );
    }
    let topk_k = with_topk.first().copied();
    if topk_k.is_some_and(|k| k == 0 || with_topk.iter().any(|&x| x != k)) {
        bail!("the samples' teacher top-k lists must all have the same k >= 1");
    }
    for (i, s) in samples.iter().enumerate() {
        let len = s.response_ids.len();
        let name = format!(
            "sample {i} (session {}, turn {})",
            s.session_id, s.turn_index
        );
        if s.prompt_ids.is_empty() {
            bail!("{name}: the prompt is empty");
        }
        let total = s.prompt_ids.len() + len;
        if total > cfg.max_position_embeddings {
            bail!(
                "{name}: {total} tokens exceed the model's context of {}",
                cfg.max_position_embeddings
            );
        }
        if let Some(t) = s
            .prompt_ids
            .iter()
            .chain(s.response_ids.iter())
            .find(|&&t| t as usize >= cfg.vocab_size)
        {
            bail!(
                "{name}: token id {t} is outside the vocabulary ({})",
                cfg.vocab_size
            );
        }
        let per_token = [
            ("rollout_logprobs", Some(s.rollout_logprobs.len())),
            (
                "loss_mask",
                (!s.loss_mask.is_empty()).then_some(s.loss_mask.len()),
            ),
            (
                "advantages",
                s.advantages.as_ref().map(|a| a.len()).into_option(),
            ),
            (
                "teacher_logprobs",
                s.teacher_logprobs.as_ref().map(|a| a.len()).into_option(),
            ),
        ];
        for (field, got) in per_token {
            if let Some(got) = got {
                if got != len {
                    bail!("{name}: {field} has {got} values for {len} response tokens");
                }
            }
        }
        if let ROption::RSome(t) = &s.teacher_topk {
            let want = len * t.k as usize;
            if t.token_ids.len() != want || t.logprobs.len() != want {
                bail!(
                    "{name}: teacher_topk has {} ids and {} logprobs, expected {len} × {} = {want}",
                    t.token_ids.len(),
                    t.logprobs.len(),
                    t.k
                );
            }
            if let Some(id) = t
                .token_ids
                .iter()
                .find(|&&id| id as usize >= cfg.vocab_size)
            {
                bail!("{name}: teacher_topk token id {id} is outside the vocabulary");
            }
        }
    }
    Ok(StepShape {
        any_teacher: samples.iter().any(|s| s.teacher_logprobs.is_some()),
        topk_k,
    })
}

fn check_loss_output(out: &LossOutput, tokens: usize, topk: Option<usize>) -> Result<()> {
    if out.grad_logp.len() != tokens {
        bail!(
            "the loss returned {} gradients for {tokens} tokens",
            out.grad_logp.len()
        );
    }
    if !out.grad_topk.is_empty() {
        let want = tokens * topk.unwrap_or(0);
        if out.grad_topk.len() != want {
            bail!(
                "the loss returned {} top-k gradients, expected {want}",
                out.grad_topk.len()
            );
        }
    }
    if !out.loss.is_finite() {
        bail!("the loss is {}", out.loss);
    }
    if let Some(t) = out
        .grad_logp
        .iter()
        .chain(out.grad_topk.iter())
        .position(|g| !g.is_finite())
    {
        bail!("the loss returned a non-finite gradient (entry {t})");
    }
    Ok(())
}

//! The RL step: direction of updates, surrogate gradients, accumulation, clipping, LoRA,
//! reference and teacher inputs, reports and validation.

mod common;

use std::cell::RefCell;

use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use common::*;
use openclaw_plugin_api::abi_stable::std_types::{ROption, RVec};
use openclaw_plugin_api::{LossBatch, LossOutput, TopKEntries};
use openclaw_trainer::clip::{clip_global_norm, global_grad_norm};
use openclaw_trainer::lora::{adapter_tensors, has_adapters};
use openclaw_trainer::{LoraConfig, Trainer};

fn lora_config() -> LoraConfig {
    LoraConfig {
        rank: 4,
        alpha: 8.0,
        ..Default::default()
    }
}

#[test]
fn reward_sign_sets_the_direction_of_the_update() {
    let (prompt, response) = ([3u32, 9, 27], [5u32, 17, 40, 2]);
    for (reward, lora) in [(1.0f32, false), (-1.0, false), (1.0, true), (-1.0, true)] {
        let mut cfg = config(if lora { 1e-2 } else { 1e-3 });
        cfg.lora = lora.then(lora_config);
        let mut t = Trainer::new(tiny_model(7), cfg).unwrap();
        let base = weights(t.model());
        let before = response_logprob(&t.inference_model(), &prompt, &response);
        let r = t
            .train_step(&[sample(&prompt, &response, reward, 0)], &reinforce)
            .unwrap();
        let after = response_logprob(&t.inference_model(), &prompt, &response);
        assert_eq!(r.step, 1);
        assert!(
            (after - before) * reward > 1e-3,
            "reward {reward} lora {lora}: logprob {before} -> {after}"
        );
        if lora {
            // The base is frozen bit for bit; only the adapters moved.
            assert_eq!(weights(t.model()), base);
            assert!(has_adapters(t.model()));
            let b_moved = adapter_tensors(t.model())
                .iter()
                .filter(|a| a.name.ends_with("lora_B.weight"))
                .all(|a| a.data.iter().any(|&x| x != 0.0));
            assert!(b_moved, "every lora_B moved off zero");
        } else {
            assert!(max_diff(&weights(t.model()), &base) > 0.0);
        }
    }
}

/// Teacher top-k entries for a response: the response token itself first, then two others.
fn topk_for(response: &[u32]) -> TopKEntries {
    let k = 3;
    let mut ids = Vec::new();
    let mut lps = Vec::new();
    for &t in response {
        ids.extend([t, (t + 1) % 64, (t + 7) % 64]);
        lps.extend([-0.5f32, -1.5, -2.5]);
    }
    TopKEntries {
        k,
        token_ids: ids.into(),
        logprobs: lps.into(),
    }
}

fn topk_coef(t: usize, j: usize) -> f32 {
    0.01 * ((t % 5) as f32 + 1.0) * (j as f32 + 1.0)
}

/// REINFORCE plus a top-k term with constant per-entry gradients `topk_coef`.
fn reinforce_topk(b: &LossBatch) -> anyhow::Result<LossOutput> {
    let mut out = reinforce(b)?;
    let tk = b.topk.as_ref().into_option().expect("top-k inputs");
    let k = tk.k as usize;
    let mut g = vec![0f32; b.num_tokens() * k];
    for t in 0..b.num_tokens() {
        for j in 0..k {
            g[t * k + j] = topk_coef(t, j);
            out.loss += (topk_coef(t, j) * tk.student_logp[t * k + j]) as f64;
        }
    }
    out.grad_topk = g.into();
    Ok(out)
}

#[test]
fn surrogate_gradients_equal_a_direct_differentiable_loss() {
    let mut samples = batch();
    for s in &mut samples {
        s.teacher_topk = ROption::RSome(topk_for(&s.response_ids));
    }
    let t = Trainer::new(tiny_model(11), config(1e-3)).unwrap();
    let g = t.compute_gradients(&samples, &reinforce_topk).unwrap();
    assert_eq!(g.report.micro_batches, 1);
    let ours = grads_of(t.model(), &g.grads);

    // The same loss written directly on the model's logits.
    let model = t.model().clone();
    let dev = device();
    let width = samples
        .iter()
        .map(|s| s.prompt_ids.len() + s.response_ids.len())
        .max()
        .unwrap();
    let b = samples.len();
    let (mut ids, mut tgt) = (vec![0i64; b * width], vec![0i64; b * width]);
    let mut w = vec![0f32; b * width];
    let k = 3;
    let (mut kid, mut kw) = (vec![0i64; b * width * k], vec![0f32; b * width * k]);
    let mut tok = 0;
    for (i, s) in samples.iter().enumerate() {
        let p = s.prompt_ids.len();
        let all: Vec<u32> = s
            .prompt_ids
            .iter()
            .chain(&s.response_ids)
            .copied()
            .collect();
        for (j, &x) in all.iter().enumerate() {
            ids[i * width + j] = x as i64;
        }
        let n = s.response_ids.len() as f32;
        let topk = s.teacher_topk.as_ref().unwrap();
        for r in 0..s.response_ids.len() {
            let pos = i * width + p + r - 1;
            tgt[pos] = s.response_ids[r] as i64;
            w[pos] = -s.reward / (n * b as f32);
            for j in 0..k {
                kid[pos * k + j] = topk.token_ids[r * k + j] as i64;
                kw[pos * k + j] = topk_coef(tok, j);
            }
            tok += 1;
        }
    }
    let x = Tensor::<AD, 2, Int>::from_data(TensorData::new(ids, [b, width]), &dev);
    let lsm = log_softmax(model.forward(x).unwrap(), 2);
    let logp = lsm.clone().gather(
        2,
        Tensor::from_data(TensorData::new(tgt, [b, width, 1]), &dev),
    );
    let topk = lsm.gather(
        2,
        Tensor::from_data(TensorData::new(kid, [b, width, k]), &dev),
    );
    let loss = (logp * Tensor::from_data(TensorData::new(w, [b, width, 1]), &dev)).sum()
        + (topk * Tensor::from_data(TensorData::new(kw, [b, width, k]), &dev)).sum();
    let direct = burn::optim::GradientsParams::from_grads(loss.backward(), &model);
    let theirs = grads_of(&model, &direct);
    let (d, scale) = grads_max_diff(&ours, &theirs);
    assert!(scale > 1e-4, "gradients are not trivially zero ({scale})");
    assert!(d < 1e-6, "max |Δgrad| = {d} (max |grad| {scale})");
}

#[test]
fn micro_batches_accumulate_to_the_full_batch_gradient() {
    let samples = batch();
    let mut whole_cfg = config(1e-3);
    whole_cfg.max_tokens_per_batch = 10_000;
    let mut split_cfg = whole_cfg.clone();
    split_cfg.max_tokens_per_batch = 8; // every sample alone
    let whole = Trainer::new(tiny_model(3), whole_cfg).unwrap();
    let split = Trainer::new(tiny_model(3), split_cfg).unwrap();
    let gw = whole.compute_gradients(&samples, &reinforce).unwrap();
    let gs = split.compute_gradients(&samples, &reinforce).unwrap();
    assert_eq!(gw.report.micro_batches, 1);
    assert_eq!(gs.report.micro_batches, 4);
    assert_eq!(gs.report.split_groups, 2);
    assert!((gw.report.loss - gs.report.loss).abs() < 1e-6);
    let (d, scale) = grads_max_diff(
        &grads_of(whole.model(), &gw.grads),
        &grads_of(split.model(), &gs.grads),
    );
    assert!(d < 1e-5 * scale.max(1.0), "max |Δgrad| = {d}");

    // Micro-batches on two threads: the same gradients.
    let mut par_cfg = split.config().clone();
    par_cfg.data_parallel = 2;
    let par = Trainer::new(tiny_model(3), par_cfg).unwrap();
    let gp = par.compute_gradients(&samples, &reinforce).unwrap();
    assert_eq!(gp.report.micro_batches, 4);
    assert_eq!(gp.report.loss, gs.report.loss);
    let (d, _) = grads_max_diff(
        &grads_of(split.model(), &gs.grads),
        &grads_of(par.model(), &gp.grads),
    );
    assert!(d < 1e-7, "threads change the gradients by {d}");

    // And the updated weights agree.
    let (mut whole, mut split) = (whole, split);
    whole.apply_gradients(gw).unwrap();
    split.apply_gradients(gs).unwrap();
    let d = max_diff(&weights(whole.model()), &weights(split.model()));
    assert!(d < 1e-5, "max |Δw| = {d}");
}

#[test]
fn clipping_uses_the_global_norm() {
    let t = Trainer::new(tiny_model(5), config(1e-3)).unwrap();
    let mut g = t.compute_gradients(&batch(), &reinforce).unwrap();
    let before = global_grad_norm::<AD, _>(t.model(), &g.grads);
    assert!(before > 0.0);
    let max = before / 4.0;
    let reported = clip_global_norm::<AD, _>(t.model(), &mut g.grads, max);
    assert_eq!(reported, before);
    let after = global_grad_norm::<AD, _>(t.model(), &g.grads);
    assert!((after - max).abs() < 1e-5 * max, "{after} vs {max}");
    // Below the limit nothing changes; 0 turns clipping off.
    let again = clip_global_norm::<AD, _>(t.model(), &mut g.grads, max * 2.0);
    assert!((again - after).abs() < 1e-9);
    clip_global_norm::<AD, _>(t.model(), &mut g.grads, 0.0);
    assert!((global_grad_norm::<AD, _>(t.model(), &g.grads) - after).abs() < 1e-9);

    // The step reports the norm before clipping.
    let mut cfg = config(1e-3);
    cfg.max_grad_norm = 1e-3;
    let mut t = Trainer::new(tiny_model(5), cfg).unwrap();
    let r = t.train_step(&batch(), &reinforce).unwrap();
    assert!(
        (r.grad_norm - before).abs() < 1e-6 * before,
        "{} vs {before}",
        r.grad_norm
    );
}

#[test]
fn the_loss_sees_consistent_inputs_and_the_report_sums_them_up() {
    let seen: RefCell<Vec<LossBatch>> = RefCell::new(Vec::new());
    let recording = |b: &LossBatch| {
        seen.borrow_mut().push(b.clone());
        reinforce(b)
    };
    let mut samples = batch();
    samples[1].loss_mask = vec![1.0, 0.0].into();
    samples[2].weight_version = 3;
    samples[3].weight_version = 5;
    let mut t = Trainer::new(tiny_model(9), config(1e-3)).unwrap();
    t.set_weight_version(5);
    // Rollout logprobs equal to the policy's: the train/rollout mismatch is zero.
    let probe = t.compute_gradients(&samples, &recording).unwrap();
    let lp = seen.borrow()[0].logp.to_vec();
    let mut off = 0;
    for s in &mut samples {
        let n = s.response_ids.len();
        s.rollout_logprobs = lp[off..off + n].to_vec().into();
        off += n;
    }
    drop(probe);
    seen.borrow_mut().clear();
    let r = t.train_step(&samples, &recording).unwrap();
    let b = seen.borrow()[0].clone();
    b.validate().unwrap();
    assert_eq!(b.step_samples, 4);
    assert_eq!(b.sample_offsets.to_vec(), vec![0, 4, 6, 9, 14]);
    assert_eq!(
        b.old_logp, b.logp,
        "one step per batch: old = current policy"
    );
    assert!(b.ref_logp.is_none(), "no reference unless asked for");
    assert!(b.teacher_logp.is_none() && b.topk.is_none());
    assert_eq!(b.rewards.to_vec(), vec![1.0, -1.0, 0.5, -0.5]);
    assert_eq!(b.group_ids.to_vec(), vec![0, 0, 1, 1]);
    assert_eq!(b.loss_mask[4..6].to_vec(), vec![1.0, 0.0]);
    assert!(b.logp.iter().all(|&x| x < 0.0));
    assert_eq!(r.samples, 4);
    assert_eq!(r.tokens, 7 + 4 + 8 + 6);
    assert_eq!(r.trained_tokens, 13);
    assert!(r.logprob_diff.unwrap() < 1e-6);
    assert!((r.staleness.unwrap() - (5.0 + 5.0 + 2.0 + 0.0) / 4.0).abs() < 1e-12);
    assert_eq!(r.metrics["tokens"], 14.0);
    assert_eq!(r.lr, 1e-3);
    assert!(r.step_time_s > 0.0);
}

#[test]
fn reference_logprobs_come_from_the_frozen_start() {
    let seen: RefCell<Vec<LossBatch>> = RefCell::new(Vec::new());
    let recording = |b: &LossBatch| {
        seen.borrow_mut().push(b.clone());
        reinforce(b)
    };
    for lora in [false, true] {
        let mut cfg = config(1e-2);
        cfg.use_reference = true;
        cfg.lora = lora.then(lora_config);
        let mut t = Trainer::new(tiny_model(2), cfg).unwrap();
        t.train_step(&batch(), &recording).unwrap();
        t.train_step(&batch(), &recording).unwrap();
        let v = seen.borrow();
        let (first, second) = (&v[v.len() - 2], &v[v.len() - 1]);
        let r0 = first.ref_logp.as_ref().unwrap();
        let r1 = second.ref_logp.as_ref().unwrap();
        // At the start the policy is the reference; later the reference stays put.
        for (a, b) in r0.iter().zip(first.logp.iter()) {
            assert!((a - b).abs() < 1e-5, "lora {lora}: {a} vs {b}");
        }
        assert_eq!(r0, r1);
        assert!(r1
            .iter()
            .zip(second.logp.iter())
            .any(|(a, b)| (a - b).abs() > 1e-4));
    }
}

#[test]
fn lora_trains_on_a_teacher_carrying_batch() {
    let seen: RefCell<Vec<LossBatch>> = RefCell::new(Vec::new());
    let distill = |b: &LossBatch| {
        seen.borrow_mut().push(b.clone());
        // Token-level distillation toward the teacher plus a top-k cross-entropy.
        let tl = b.teacher_logp.as_ref().unwrap();
        let tk = b.topk.as_ref().unwrap();
        let k = tk.k as usize;
        let n = b.num_tokens() as f32;
        let mut grad = vec![0f32; b.num_tokens()];
        let mut gk = vec![0f32; b.num_tokens() * k];
        let mut loss = 0.0;
        for (t, g) in grad.iter_mut().enumerate() {
            let s = b.token_samples()[t];
            if b.has_teacher(s) {
                *g = -(tl[t] - b.logp[t]) / n;
                loss += ((tl[t] - b.logp[t]).powi(2) / (2.0 * n)) as f64;
            }
            for j in 0..k {
                let p = tk.teacher_logp[t * k + j].exp();
                gk[t * k + j] = -p / n;
                loss -= (p * tk.student_logp[t * k + j] / n) as f64;
            }
        }
        Ok(LossOutput {
            loss,
            grad_logp: grad.into(),
            grad_topk: gk.into(),
            metrics: RVec::new(),
        })
    };
    let mut samples = batch();
    for (i, s) in samples.iter_mut().enumerate() {
        if i != 1 {
            s.teacher_logprobs = ROption::RSome(vec![-0.3f32; s.response_ids.len()].into());
        }
        s.teacher_topk = ROption::RSome(topk_for(&s.response_ids));
    }
    let mut cfg = config(1e-2);
    cfg.lora = Some(lora_config());
    let mut t = Trainer::new(tiny_model(4), cfg).unwrap();
    let base = weights(t.model());
    let adapters = adapter_tensors(t.model());
    t.train_step(&samples, &distill).unwrap();
    let r2 = t.train_step(&samples, &distill).unwrap();
    assert!(r2.loss.is_finite());
    let b = seen.borrow()[0].clone();
    assert_eq!(b.teacher_present.to_vec(), vec![true, false, true, true]);
    let tk = b.topk.as_ref().unwrap();
    assert_eq!(tk.k, 3);
    // The first top-k entry is the response token: its student logprob is the token's logprob.
    for t in 0..b.num_tokens() {
        assert!((tk.student_logp[t * 3] - b.logp[t]).abs() < 1e-6);
    }
    assert_eq!(weights(t.model()), base, "the base stays frozen");
    let moved = adapter_tensors(t.model())
        .iter()
        .zip(&adapters)
        .filter(|(a, b)| a.data != b.data)
        .count();
    assert_eq!(moved, adapters.len(), "every adapter tensor trained");
}

#[test]
fn bad_samples_are_rejected_with_their_field() {
    let t = Trainer::new(tiny_model(1), config(1e-3)).unwrap();
    let check = |samples: Vec<openclaw_plugin_api::TrainingSample>, needle: &str| {
        let e = t.compute_gradients(&samples, &reinforce).err().unwrap();
        let msg = format!("{e:#}");
        assert!(msg.contains(needle), "{msg}");
    };
    let mut s = sample(&[1], &[2, 3], 1.0, 0);
    s.rollout_logprobs = vec![-1.0].into();
    check(
        vec![s],
        "rollout_logprobs has 1 values for 2 response tokens",
    );
    check(
        vec![sample(&[1], &[99], 1.0, 0)],
        "token id 99 is outside the vocabulary",
    );
    check(vec![sample(&[], &[2], 1.0, 0)], "the prompt is empty");
    let mut a = sample(&[1], &[2], 1.0, 0);
    a.advantages = ROption::RSome(vec![1.0].into());
    check(
        vec![a, sample(&[1], &[2], 1.0, 0)],
        "carry advantages: a step needs them on all samples or none",
    );
    let bad_loss = |b: &LossBatch| {
        let mut o = reinforce(b)?;
        o.grad_logp.pop();
        Ok(o)
    };
    let e = t
        .compute_gradients(&[sample(&[1], &[2, 3], 1.0, 0)], &bad_loss)
        .err()
        .unwrap();
    assert!(e.to_string().contains("1 gradients for 2 tokens"), "{e}");
    let failing = |_: &LossBatch| -> anyhow::Result<LossOutput> { anyhow::bail!("plugin says no") };
    let e = t
        .compute_gradients(&[sample(&[1], &[2], 1.0, 0)], &failing)
        .err()
        .unwrap();
    assert!(format!("{e:#}").contains("plugin says no"));
}

#[test]
fn lora_dropout_trains_reproducibly() {
    let mut cfg = config(1e-2);
    cfg.lora = Some(LoraConfig {
        dropout: 0.3,
        ..lora_config()
    });
    let run = |cfg: &openclaw_trainer::TrainConfig| {
        let mut t = Trainer::new(tiny_model(6), cfg.clone()).unwrap();
        for _ in 0..2 {
            t.train_step(&batch(), &reinforce).unwrap();
        }
        adapter_tensors(t.model())
    };
    assert_eq!(run(&cfg), run(&cfg));
    let mut plain = cfg.clone();
    plain.lora.as_mut().unwrap().dropout = 0.0;
    assert_ne!(run(&cfg), run(&plain), "dropout changes the updates");
}

#[test]
fn lora_micro_batches_on_two_threads_match_one_thread() {
    let run = |threads: usize| {
        let mut cfg = config(1e-2);
        cfg.lora = Some(lora_config());
        cfg.max_tokens_per_batch = 12;
        cfg.data_parallel = threads;
        let mut t = Trainer::new(tiny_model(12), cfg).unwrap();
        for _ in 0..2 {
            let r = t.train_step(&batch(), &reinforce).unwrap();
            assert!(r.micro_batches >= 2);
        }
        (weights(t.model()), adapter_tensors(t.model()))
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.0, two.0, "the base stays frozen on every thread");
    for (a, b) in one.1.iter().zip(&two.1) {
        let d = a
            .data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-6, "{} differs by {d}", a.name);
    }
}

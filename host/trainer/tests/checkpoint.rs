//! Checkpoints: resumed runs match uninterrupted ones, crashes leave the last whole checkpoint,
//! retention; export round trips.

mod common;

use std::path::Path;

use burn::prelude::*;
use common::*;
use openclaw_engine::{load_model, SaveOptions};
use openclaw_trainer::checkpoint::{is_complete, read_saved_state, COMPLETE_MARKER};
use openclaw_trainer::lora::{adapter_tensors, LoraConfig};
use openclaw_trainer::{
    export, list_checkpoints, resolve_checkpoint, LrSchedule, ScheduleKind, TrainConfig, Trainer,
    CHECKPOINT_LATEST,
};

fn run_config(lora: bool) -> TrainConfig {
    let mut c = config(2e-2);
    // A schedule whose position matters, clipping, and decay: all must resume exactly.
    c.schedule = LrSchedule {
        kind: ScheduleKind::Cosine,
        base_lr: 2e-2,
        warmup_steps: 2,
        total_steps: 6,
        min_lr: 1e-3,
    };
    c.max_grad_norm = 0.5;
    c.optimizer.weight_decay = 0.1;
    c.max_tokens_per_batch = 16;
    c.lora = lora.then(|| LoraConfig {
        rank: 4,
        alpha: 8.0,
        ..Default::default()
    });
    c
}

/// The batch of step `i`: rewards vary so each step differs.
fn step_batch(i: u64) -> Vec<openclaw_plugin_api::TrainingSample> {
    let mut b = batch();
    for (j, s) in b.iter_mut().enumerate() {
        s.reward = ((i as f32 + 1.0) * (j as f32 - 1.5)).sin();
    }
    b
}

fn state_of(
    t: &Trainer<AD>,
) -> (
    Vec<(String, Vec<f32>)>,
    Vec<openclaw_trainer::tensors::NamedTensor>,
) {
    (weights(t.model()), adapter_tensors(t.model()))
}

#[test]
fn a_resumed_run_matches_an_uninterrupted_one() {
    let (n, k) = (5u64, 2u64);
    for lora in [false, true] {
        let mut straight = Trainer::new(tiny_model(13), run_config(lora)).unwrap();
        for i in 0..n {
            straight.train_step(&step_batch(i), &reinforce).unwrap();
        }

        let dir = tempfile::tempdir().unwrap();
        let mut first = Trainer::new(tiny_model(13), run_config(lora)).unwrap();
        for i in 0..k {
            first.train_step(&step_batch(i), &reinforce).unwrap();
        }
        first.set_data_position(k * 4);
        first.set_weight_version(7);
        first.rng().next_u64();
        let rng_state = first.rng().state();
        let saved = first.save_checkpoint(dir.path(), 3).unwrap();
        assert_eq!(saved, dir.path().join(format!("checkpoint-{k}")));
        drop(first);

        let at = resolve_checkpoint(dir.path(), "latest").unwrap();
        let mut resumed = Trainer::<AD>::resume(&at, run_config(lora), &device()).unwrap();
        assert_eq!(resumed.state().step, k);
        assert_eq!(resumed.state().data_position, k * 4);
        assert_eq!(resumed.state().weight_version, 7);
        assert_eq!(resumed.rng().state(), rng_state);
        for i in k..n {
            resumed.train_step(&step_batch(i), &reinforce).unwrap();
        }
        let (a, b) = (state_of(&straight), state_of(&resumed));
        assert!(
            max_diff(&a.0, &b.0) < 1e-6,
            "lora {lora}: weights differ by {}",
            max_diff(&a.0, &b.0)
        );
        assert_eq!(a.1.len(), b.1.len());
        for (x, y) in a.1.iter().zip(&b.1) {
            let d = x
                .data
                .iter()
                .zip(&y.data)
                .map(|(p, q)| (p - q).abs())
                .fold(0f32, f32::max);
            assert!(d < 1e-6, "lora: {} differs by {d}", x.name);
        }
        if lora {
            assert_eq!(
                a.0,
                weights(&tiny_model(13)),
                "base frozen through save and resume"
            );
        }
    }
}

#[test]
fn a_crash_mid_write_leaves_the_last_whole_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path();
    let mut t = Trainer::new(tiny_model(8), run_config(false)).unwrap();
    t.train_step(&step_batch(0), &reinforce).unwrap();
    t.save_checkpoint(save, 0).unwrap();
    t.train_step(&step_batch(1), &reinforce).unwrap();
    let good = t.save_checkpoint(save, 0).unwrap();
    let good_weights = weights(t.model());

    // A crash before the rename: a half-written temporary directory.
    let tmp = save.join(".checkpoint-3.tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("model.safetensors"), b"half").unwrap();
    // A checkpoint directory without its completion marker (copied in part, say).
    let partial = save.join("checkpoint-4");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("config.json"), b"{").unwrap();

    // The pointer is a symlink naming the newest whole checkpoint, and a path to it.
    assert_eq!(
        std::fs::read_link(save.join(CHECKPOINT_LATEST)).unwrap(),
        std::path::Path::new("checkpoint-2")
    );
    assert!(save.join(CHECKPOINT_LATEST).join(COMPLETE_MARKER).is_file());
    assert_eq!(resolve_checkpoint(save, "latest").unwrap(), good);
    assert_eq!(
        resolve_checkpoint(save, save.to_str().unwrap()).unwrap(),
        good
    );
    let steps: Vec<u64> = list_checkpoints(save)
        .unwrap()
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(steps, vec![1, 2]);
    let e = resolve_checkpoint(save, partial.to_str().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("incomplete"), "{e}");
    assert!(Trainer::<AD>::resume(&partial, run_config(false), &device()).is_err());

    // A pointer naming a partial checkpoint, or no pointer: the newest whole one is used.
    // (as the text file older runs wrote)
    std::fs::remove_file(save.join(CHECKPOINT_LATEST)).unwrap();
    std::fs::write(save.join(CHECKPOINT_LATEST), "checkpoint-4\n").unwrap();
    assert_eq!(resolve_checkpoint(save, "latest").unwrap(), good);
    std::fs::remove_file(save.join(CHECKPOINT_LATEST)).unwrap();
    assert_eq!(resolve_checkpoint(save, "latest").unwrap(), good);

    let resumed = Trainer::<AD>::resume(&good, run_config(false), &device()).unwrap();
    assert_eq!(weights(resumed.model()), good_weights);
    assert_eq!(read_saved_state(&good).unwrap().state.step, 2);
    assert!(is_complete(&good) && good.join(COMPLETE_MARKER).is_file());

    // The next save clears the crash leftovers it can prove stale.
    let mut resumed = resumed;
    resumed.train_step(&step_batch(2), &reinforce).unwrap();
    resumed.save_checkpoint(save, 0).unwrap();
    assert!(!tmp.exists());
    assert!(
        partial.exists(),
        "a partial checkpoint newer than the save is left alone"
    );
    assert_eq!(
        resolve_checkpoint(save, "latest").unwrap(),
        save.join("checkpoint-3")
    );
}

#[test]
fn old_checkpoints_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Trainer::new(tiny_model(8), run_config(false)).unwrap();
    for i in 0..4 {
        t.train_step(&step_batch(i), &reinforce).unwrap();
        t.save_checkpoint(dir.path(), 2).unwrap();
    }
    let steps: Vec<u64> = list_checkpoints(dir.path())
        .unwrap()
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(steps, vec![3, 4]);
    // The checkpoint holds what the docs promise.
    let c = dir.path().join("checkpoint-4");
    for f in [
        "config.json",
        "model.safetensors",
        "optimizer.safetensors",
        "trainer_state.json",
        COMPLETE_MARKER,
    ] {
        assert!(c.join(f).is_file(), "{f}");
    }
    let s = read_saved_state(&c).unwrap();
    assert_eq!(s.state.step, 4);
    assert!((s.next_lr - run_config(false).schedule.lr(4)).abs() < 1e-15);
}

fn logits<B: Backend>(m: &openclaw_engine::Model<B>) -> Vec<f32> {
    let ids = vec![3i64, 1, 4, 1, 5, 9, 2, 6];
    let x = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [1, 8]), &m.device());
    m.forward(x)
        .unwrap()
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn export_writes_a_loadable_hf_directory() {
    for lora in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Trainer::new(tiny_model(30), run_config(lora)).unwrap();
        for i in 0..2 {
            t.train_step(&step_batch(i), &reinforce).unwrap();
        }
        let ckpt = t.save_checkpoint(&dir.path().join("ckpt"), 1).unwrap();
        let tok = dir.path().join("tok");
        std::fs::create_dir_all(&tok).unwrap();
        std::fs::write(tok.join("tokenizer.json"), "{}").unwrap();
        std::fs::write(tok.join("tokenizer_config.json"), "{}").unwrap();
        let out = dir.path().join("export");
        export::<Inner>(&ckpt, &out, Some(&tok), &SaveOptions::default(), &device()).unwrap();
        for f in [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ] {
            assert!(out.join(f).is_file(), "{f}");
        }
        assert!(!out.join("adapter_config.json").exists());
        assert!(!out.join("optimizer.safetensors").exists());
        let loaded = load_model::<Inner>(&out, &device()).unwrap();
        let (a, b) = (logits(&t.inference_model()), logits(&loaded));
        let d = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-5, "lora {lora}: logits differ by {d}");
        if !lora {
            assert_eq!(a, b, "full weights export exactly");
        }
        let e = export::<Inner>(
            &ckpt,
            &out,
            Some(Path::new("/nonexistent")),
            &SaveOptions::default(),
            &device(),
        );
        assert!(e.unwrap_err().to_string().contains("no tokenizer.json"));
    }
}

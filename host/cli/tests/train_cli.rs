//! `sft`, `train` and `export` run as a user runs them: the real binary on a tiny model, a
//! real loss plugin built from the workspace, real files; the results are checked by loading
//! the written models with the engine.

mod common;

use common::{ok, run_host as host, workspace};
use openclaw_engine::weights::safetensors::SafetensorsFile;
use openclaw_engine::{score, CpuBackend, ScoreOptions, ScoreRequest};
use openclaw_policy::ModelFiles;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const ANIMALS: [&str; 5] = ["cat", "dog", "shark", "owl", "horse"];

/// A tiny model with a tokenizer trained on the data's words.
fn tiny_model(dir: &Path) -> PathBuf {
    let corpus: String = ANIMALS
        .iter()
        .map(|a| format!("Tell me about the {a}. The {a} is an animal. It is well known. Thanks, great! Please write plain text.\n"))
        .collect::<String>()
        .repeat(20);
    common::tiny_model(dir, &corpus, 400)
}

fn write_jsonl(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    std::fs::write(path, text).unwrap();
}

fn sft_data(dir: &Path) -> PathBuf {
    let lines: Vec<Value> = (0..64)
        .map(|i| {
            let a = ANIMALS[i % ANIMALS.len()];
            json!({"messages": [
                {"role": "user", "content": format!("Tell me about the {a}.")},
                {"role": "assistant", "content": format!("The {a} is an animal. It is well known.")}
            ]})
        })
        .collect();
    let p = dir.join("sft.jsonl");
    write_jsonl(&p, &lines);
    p
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The logprob of `response` after the chat prompt for `question`, under the model in `dir`
/// (served the way `serve` loads it: LoRA checkpoints merged).
fn response_logprob(dir: &Path, question: &str, response: &str) -> f32 {
    let files = ModelFiles::<CpuBackend>::load_path(dir, &Default::default()).unwrap();
    let prompt = files
        .template
        .render(
            &[serde_json::from_value(json!({"role": "user", "content": question})).unwrap()],
            None,
            &openclaw_chat::RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )
        .unwrap();
    let p = files.tokenizer.encode(&prompt, false).unwrap();
    let r = files.tokenizer.encode(response, false).unwrap();
    let s = score(
        &files.model,
        &[ScoreRequest::new(p, r)],
        &ScoreOptions::default(),
    )
    .unwrap();
    s[0].logprobs.iter().sum()
}

/// Every base weight of the model in `dir`, in name order.
fn weights(dir: &Path) -> Vec<f32> {
    let mut f = SafetensorsFile::open(&dir.join("model.safetensors")).unwrap();
    let mut names: Vec<String> = f.names().map(str::to_string).collect();
    names.sort();
    names.iter().flat_map(|n| f.read_f32(n).unwrap()).collect()
}

#[test]
fn sft_learns_the_conversations_and_checkpoints_carry_the_tokenizer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = tiny_model(dir);
    let before = response_logprob(&model, "Tell me about the owl.", "The owl is an animal.");
    sft_data(dir);
    let err = ok(host(
        dir,
        &[
            "sft",
            "--model-path",
            "model",
            "--data-path",
            "sft.jsonl",
            "--batch-size",
            "16",
            "--num-epochs",
            "3",
            "--lr",
            "3e-3",
            "--save-dir",
            "ckpt",
            "--save-interval",
            "4",
            "--log-dir",
            "logs",
        ],
    ));
    assert!(err.contains("64 sequences, 12 steps"), "{err}");
    let log = log_lines(&dir.join("logs/training.log"));
    assert_eq!(log.len(), 12);
    let first = log[0]["loss"].as_f64().unwrap();
    let last = log[11]["loss"].as_f64().unwrap();
    assert!(last < first * 0.5, "SFT loss {first} -> {last}");
    let latest = std::fs::read_link(dir.join("ckpt/checkpoint-latest")).unwrap();
    assert_eq!(latest, Path::new("checkpoint-12"));
    for n in [4, 8, 12] {
        let c = dir.join(format!("ckpt/checkpoint-{n}"));
        assert!(c.join("tokenizer.json").is_file(), "{}", c.display());
    }
    let after = response_logprob(
        &dir.join("ckpt/checkpoint-12"),
        "Tell me about the owl.",
        "The owl is an animal.",
    );
    assert!(after > before + 5.0, "logprob {before} -> {after}");
}

/// Trajectories whose responses are rewarded +1 or -1, plus records that are malformed.
fn rl_data(dir: &Path, good: &str, bad: &str) -> PathBuf {
    let mut lines = Vec::new();
    for i in 0..8 {
        let a = ANIMALS[i % ANIMALS.len()];
        let (response, reward) = if i % 2 == 0 {
            (good.replace("{a}", a), 1.0)
        } else {
            (bad.replace("{a}", a), -1.0)
        };
        lines.push(json!({"session_id": format!("s{i}"), "turns": [
            {"type": "main", "prompt": [{"role": "user", "content": format!("Tell me about the {a}.")}],
             "response": {"role": "assistant", "content": response}, "reward": reward, "trainable": true},
            {"type": "side", "prompt": "summarise the chat", "response": "ok", "next_state": null, "trainable": false}
        ]}));
    }
    let p = dir.join("rl.jsonl");
    write_jsonl(&p, &lines);
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("{\"session_id\":\"broken\",\"turns\":[{\"type\":\"main\",\"prompt\":\"x\"}]}\n");
    text.push_str("{\"session_id\":\"typo\",\"turns\":[{\"type\":\"mian\",\"prompt\":\"x\",\"response\":\"y\"}]}\n");
    std::fs::write(&p, text).unwrap();
    p
}

fn train_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train",
        "--model-path",
        "model",
        "--data-path",
        "rl.jsonl",
        "--rollout-batch-size",
        "4",
        "--lr",
        "1e-3",
        "--adam-beta2",
        "0.95",
        "--log-dir",
        "logs",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn rewarded_responses_gain_logprob_penalised_ones_lose_it_and_bad_records_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = tiny_model(dir);
    let good = "The {a} is an animal.";
    let bad = "Please write plain text.";
    rl_data(dir, good, bad);
    let binary_rl = workspace().join("methods/binary-rl");
    let plugin = binary_rl.to_str().unwrap();
    let q = "Tell me about the owl.";
    let (good0, bad0) = (
        response_logprob(&model, q, &good.replace("{a}", "owl")),
        response_logprob(&model, q, &bad.replace("{a}", "owl")),
    );
    for lora in [false, true] {
        let save = if lora { "ckpt-lora" } else { "ckpt-full" };
        let mut extra = vec!["--plugin", plugin, "--num-epochs", "5", "--save-dir", save];
        if lora {
            extra.extend(["--use-lora", "--lora-rank", "4", "--lora-alpha", "8"]);
        }
        let err = ok(host(dir, &train_args(&extra)));
        assert!(
            err.contains("rl.jsonl:9: missing field `response`"),
            "{err}"
        );
        assert!(
            err.contains("rl.jsonl:10: turns[0]: field `type` is \"mian\""),
            "{err}"
        );
        assert!(
            err.contains("8 training samples; 2 records skipped"),
            "{err}"
        );
        let ckpt = dir.join(save).join("checkpoint-10");
        let good1 = response_logprob(&ckpt, q, &good.replace("{a}", "owl"));
        let bad1 = response_logprob(&ckpt, q, &bad.replace("{a}", "owl"));
        assert!(
            good1 > good0 + 0.5,
            "lora {lora}: +1 response {good0} -> {good1}"
        );
        assert!(
            bad1 < bad0 - 0.5,
            "lora {lora}: -1 response {bad0} -> {bad1}"
        );
        if lora {
            // Only the adapters trained: the base weights in the checkpoint are the model's.
            assert_eq!(weights(&ckpt), weights(&model));
            assert!(ckpt.join("adapter_model.safetensors").is_file());
            // The exported model gives the same logprobs as the served (merged) checkpoint.
            ok(host(
                dir,
                &[
                    "export",
                    "--checkpoint",
                    "latest",
                    "--save-dir",
                    save,
                    "--out",
                    "exported",
                ],
            ));
            let e = response_logprob(&dir.join("exported"), q, &good.replace("{a}", "owl"));
            assert!(
                (e - good1).abs() < 1e-4,
                "exported {e} vs checkpoint {good1}"
            );
            assert!(!dir.join("exported/adapter_config.json").exists());
        }
    }
}

#[test]
fn a_resumed_run_ends_with_the_weights_of_a_straight_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    rl_data(dir, "The {a} is an animal.", "Please write plain text.");
    let binary_rl = workspace().join("methods/binary-rl");
    let plugin = binary_rl.to_str().unwrap();
    let common = [
        "--plugin",
        plugin,
        "--num-epochs",
        "2",
        "--lr-schedule",
        "cosine",
        "--lr-warmup-steps",
        "1",
        "--min-lr",
        "1e-4",
    ];
    let mut straight = common.to_vec();
    straight.extend(["--save-dir", "straight"]);
    ok(host(dir, &train_args(&straight)));
    let mut first = common.to_vec();
    first.extend(["--save-dir", "split", "--max-steps", "2"]);
    ok(host(dir, &train_args(&first)));
    assert!(dir.join("split/checkpoint-2").is_dir());
    let mut rest = common.to_vec();
    rest.extend(["--save-dir", "split", "--resume-from-checkpoint", "latest"]);
    let err = ok(host(dir, &train_args(&rest)));
    assert!(
        err.contains("resumed from") && err.contains("at step 2"),
        "{err}"
    );
    let a = weights(&dir.join("straight/checkpoint-4"));
    let b = weights(&dir.join("split/checkpoint-4"));
    assert_eq!(a.len(), b.len());
    let worst = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-6, "max |straight - resumed| = {worst}");
}

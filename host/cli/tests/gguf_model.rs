//! A GGUF file as `--model-path`: weights, tokenizer and chat template all come from it. Uses
//! SmolLM2-135M-Instruct, which the test command fetches (`scripts/test.sh`); without it the
//! tests print that they were skipped and why.

mod common;

use common::smollm2;
use std::path::Path;

/// `generate --temperature 0` on the capital of France, from `model`.
fn capital_of_france(model: &Path) -> String {
    let o = common::host_command(model.parent().unwrap())
        .args(["generate", "--prompt", "What is the capital of France?"])
        .args(["--temperature", "0", "--max-tokens", "20", "--model-path"])
        .arg(model)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn generate_answers_from_a_gguf_file() {
    let Some(gguf) = smollm2() else { return };
    let out = capital_of_france(&gguf);
    assert!(out.contains("Paris"), "{out}");
}

/// A run that starts from a GGUF file writes checkpoints that serve on their own: the
/// tokenizer and chat template are written into them from the GGUF metadata. Its LoRA trains
/// over the file's quantised blocks, also after a resume.
#[test]
fn checkpoints_of_a_gguf_run_carry_its_tokenizer() {
    let Some(gguf) = smollm2() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let record = serde_json::json!({"session_id": "s0", "turns": [
        {"type": "main", "prompt": [{"role": "user", "content": "What is the capital of France?"}],
         "response": {"role": "assistant", "content": "The capital of France is Paris."},
         "reward": 1.0, "trainable": true}]});
    std::fs::write(dir.join("rl.jsonl"), format!("{record}\n")).unwrap();
    let plugin = common::workspace().join("methods/binary-rl");
    // LoRA trains over the file's quantised blocks, fresh and resumed (the checkpoint holds the
    // base decoded to f32; the resumed trainer takes the blocks again).
    let train = |extra: &[&str]| {
        let o = common::host_command(dir)
            .env("RUST_LOG", "info")
            .arg("train")
            .arg("--model-path")
            .arg(&gguf)
            .arg("--plugin")
            .arg(&plugin)
            .args(["--data-path", "rl.jsonl", "--rollout-batch-size", "1"])
            .args(["--use-lora", "--lora-rank", "4", "--lr", "1e-5"])
            .args(["--save-dir", "ckpt", "--log-dir", "logs"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains("LoRA trains over the quantised blocks"),
            "{err}"
        );
        err
    };
    train(&[]);
    let err = train(&["--resume-from-checkpoint", "latest", "--num-epochs", "2"]);
    assert!(err.contains("resumed from"), "{err}");
    let ckpt = dir.join("ckpt/checkpoint-2");
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        assert!(
            ckpt.join(f).is_file(),
            "{f} missing from {}",
            ckpt.display()
        );
    }
    let out = capital_of_france(&ckpt);
    assert!(out.contains("Paris"), "{out}");
}

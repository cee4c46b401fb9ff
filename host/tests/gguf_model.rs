//! A GGUF file as `--model-path`: weights, tokenizer and chat template all come from it. Uses
//! SmolLM2-135M-Instruct when `scripts/fetch-smollm2.sh` has fetched it (CI does not); skipped
//! otherwise.

use std::path::Path;
use std::process::Command;

#[test]
fn generate_answers_from_a_gguf_file() {
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join(".assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !gguf.is_file() {
        eprintln!(
            "skipping: {} is absent (scripts/fetch-smollm2.sh)",
            gguf.display()
        );
        return;
    }
    let o = Command::new(env!("CARGO_BIN_EXE_openclaw-host"))
        .args(["generate", "--prompt", "What is the capital of France?"])
        .args(["--temperature", "0", "--max-tokens", "20", "--model-path"])
        .arg(&gguf)
        .env_remove("MODEL_PATH")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("Paris"), "{out}");
}

//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// SmolLM2-135M-Instruct (Q4_1 GGUF) as `scripts/fetch-smollm2.sh` fetches it (the test
/// command does): `None`, with a line saying the test is skipped, when it is absent, except
/// where `OPENCLAW_REQUIRE_ASSETS=1` (CI sets it), where a missing file fails the test.
pub fn smollm2() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
        "{} is absent and OPENCLAW_REQUIRE_ASSETS=1: run scripts/fetch-smollm2.sh",
        path.display()
    );
    eprintln!(
        "SKIPPED: {} is absent (run scripts/fetch-smollm2.sh)",
        path.display()
    );
    None
}

/// The real Qwen3 tokenizer fetched by `scripts/fetch-test-assets.sh`.
pub fn qwen3_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.assets/qwen3-tokenizer");
    assert!(
        dir.join("tokenizer.json").is_file() && dir.join("tokenizer_config.json").is_file(),
        "{} is missing the Qwen3 tokenizer: run `bash scripts/fetch-test-assets.sh` from the \
         workspace root first",
        dir.display()
    );
    dir
}

/// The reference outputs of Python tokenizers / transformers (see fixtures/make_reference.py).
pub fn reference() -> serde_json::Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen3_reference.json");
    let text = std::fs::read_to_string(&path).expect("read qwen3_reference.json");
    serde_json::from_str(&text).expect("parse qwen3_reference.json")
}

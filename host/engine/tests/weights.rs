//! Checkpoint errors, save/load round trips, deterministic random init.

mod common;

use std::path::Path;

use common::*;
use openclaw_engine::weights::{SaveDtype, SaveOptions};
use openclaw_engine::{load_model, random_model, save_model, Model};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn load_err(dir: &Path) -> String {
    let e = load_model::<B>(dir, &device()).unwrap_err();
    let msg = format!("{e:#}");
    eprintln!("error: {msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");
    msg
}

#[test]
fn bad_config_json_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("causal"), tmp.path());
    let cfg = tmp.path().join("config.json");
    std::fs::write(&cfg, "{ \"architectures\": [\"Qwen3ForCausalLM\"], ").unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("config.json") && msg.contains("not valid JSON"),
        "{msg}"
    );

    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("causal/config.json")).unwrap())
            .unwrap();
    v["architectures"] = serde_json::json!(["GPT2LMHeadModel"]);
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("unsupported architecture `GPT2LMHeadModel`"),
        "{msg}"
    );

    v["architectures"] = serde_json::json!(["Qwen3ForCausalLM"]);
    v.as_object_mut().unwrap().remove("hidden_size");
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load_err(tmp.path());
    assert!(msg.contains("missing required key `hidden_size`"), "{msg}");
}

#[test]
fn missing_files_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let msg = load_err(tmp.path());
    assert!(msg.contains("missing config.json"), "{msg}");
    std::fs::copy(
        fixture("causal/config.json"),
        tmp.path().join("config.json"),
    )
    .unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("missing weights file") && msg.contains("model.safetensors"),
        "{msg}"
    );
    // A shard listed in the index but absent.
    copy_dir(&fixture("causal-sharded"), tmp.path());
    std::fs::remove_file(tmp.path().join("model-00003-of-00007.safetensors")).unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("missing weights file") && msg.contains("model-00003-of-00007"),
        "{msg}"
    );
}

#[test]
fn truncated_safetensors_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("causal"), tmp.path());
    let file = tmp.path().join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("model.safetensors: truncated or corrupt safetensors file"),
        "{msg}"
    );
    assert!(msg.contains("tensor "), "names a tensor: {msg}");
    // Cut inside the header too.
    std::fs::write(&file, &bytes[..100]).unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("truncated or corrupt safetensors file"),
        "{msg}"
    );
    std::fs::write(&file, b"\x05\x00").unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("truncated or corrupt safetensors file"),
        "{msg}"
    );
}

#[test]
fn shape_mismatch_names_tensor_and_shapes() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture("causal"), tmp.path());
    let cfg = tmp.path().join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["intermediate_size"] = serde_json::json!(96);
    std::fs::write(&cfg, v.to_string()).unwrap();
    let msg = load_err(tmp.path());
    assert!(
        msg.contains("tensor model.layers.0.mlp.gate_proj.weight")
            && msg.contains("shape [128, 64] does not match the config (expected [96, 64])"),
        "{msg}"
    );
}

#[test]
fn save_then_load_gives_identical_logits() {
    let model: Model<B> = load_model(&fixture("causal"), &device()).unwrap();
    let ids = [1u32, 5, 9, 200, 3];
    let before = logits_of(&model, &ids);
    let tmp = tempfile::tempdir().unwrap();
    save_model(&model, tmp.path(), &SaveOptions::default()).unwrap();
    let again: Model<B> = load_model(tmp.path(), &device()).unwrap();
    assert_eq!(again.config.rope_theta, model.config.rope_theta);
    assert_eq!(logits_of(&again, &ids), before);
    // Sharded output (and switching layouts in the same directory) loads the same.
    let opts = SaveOptions {
        dtype: SaveDtype::F32,
        max_shard_bytes: Some(100_000),
    };
    save_model(&model, tmp.path(), &opts).unwrap();
    assert!(!tmp.path().join("model.safetensors").exists());
    assert!(tmp.path().join("model.safetensors.index.json").exists());
    let sharded: Model<B> = load_model(tmp.path(), &device()).unwrap();
    assert_eq!(logits_of(&sharded, &ids), before);
}

#[test]
fn bf16_save_matches_the_bf16_fixture() {
    // Rounding our f32 weights to bf16 gives the same file contents transformers wrote.
    let model: Model<B> = load_model(&fixture("causal"), &device()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    save_model(
        &model,
        tmp.path(),
        &SaveOptions {
            dtype: SaveDtype::BF16,
            max_shard_bytes: None,
        },
    )
    .unwrap();
    let ours: Model<B> = load_model(tmp.path(), &device()).unwrap();
    let theirs: Model<B> = load_model(&fixture("causal-bf16"), &device()).unwrap();
    assert_eq!(ours.export(), theirs.export());
}

#[test]
fn classifier_round_trips() {
    let model: Model<B> = load_model(&fixture("classifier"), &device()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    save_model(&model, tmp.path(), &SaveOptions::default()).unwrap();
    let again: Model<B> = load_model(tmp.path(), &device()).unwrap();
    assert_eq!(again.config.pad_token_id, Some(0));
    assert_eq!(again.config.num_labels, 2);
    let seqs = vec![vec![5u32, 77, 31], vec![12, 250, 44, 0]];
    assert_eq!(
        openclaw_engine::classify(&model, &seqs).unwrap(),
        openclaw_engine::classify(&again, &seqs).unwrap()
    );
}

#[test]
fn random_init_is_seeded_and_deterministic() {
    let a: Model<B> = random_model(tiny_config(), 5, &device()).unwrap();
    let b: Model<B> = random_model(tiny_config(), 5, &device()).unwrap();
    let c: Model<B> = random_model(tiny_config(), 6, &device()).unwrap();
    assert_eq!(a.export(), b.export());
    assert_ne!(a.export(), c.export());
    // transformers' init: unit norms, N(0, 0.02) matrices.
    let ex = a.export();
    let norm = ex.iter().find(|t| t.name == "model.norm.weight").unwrap();
    assert!(norm.data.iter().all(|&x| x == 1.0));
    let q = ex
        .iter()
        .find(|t| t.name == "model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    let std = (q.data.iter().map(|x| x * x).sum::<f32>() / q.data.len() as f32).sqrt();
    assert!((std - 0.02).abs() < 0.003, "std {std}");
    // It saves as a checkpoint transformers can read (config + HF names) and loads back.
    let tmp = tempfile::tempdir().unwrap();
    save_model(&a, tmp.path(), &SaveOptions::default()).unwrap();
    let back: Model<B> = load_model(tmp.path(), &device()).unwrap();
    assert_eq!(back.export(), a.export());
}

#[test]
fn tied_model_round_trips_without_lm_head() {
    let model: Model<B> = load_model(&fixture("qwen2-tied"), &device()).unwrap();
    let names: Vec<String> = model.export().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"model.embed_tokens.weight".to_string()));
    assert!(!names.contains(&"lm_head.weight".to_string()));
    let tmp = tempfile::tempdir().unwrap();
    save_model(&model, tmp.path(), &SaveOptions::default()).unwrap();
    let again: Model<B> = load_model(tmp.path(), &device()).unwrap();
    let ids = [4u32, 8, 15, 16, 23, 42];
    assert_eq!(logits_of(&again, &ids), logits_of(&model, &ids));
}

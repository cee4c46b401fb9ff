//! LoRA adapters: merged weights serve the same logits, PEFT files round trip.

mod common;

use burn::module::AutodiffModule;
use burn::prelude::*;
use common::*;
use openclaw_trainer::lora::{self, LoraConfig};
use openclaw_trainer::Trainer;

fn logits<B: Backend>(m: &openclaw_engine::Model<B>, ids: &[i64]) -> Vec<f32> {
    let x =
        Tensor::<B, 2, Int>::from_data(TensorData::new(ids.to_vec(), [1, ids.len()]), &m.device());
    m.forward(x)
        .unwrap()
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap()
}

fn trained_lora(targets: &str) -> Trainer<AD> {
    let mut cfg = config(5e-2);
    cfg.lora = Some(LoraConfig {
        rank: 4,
        alpha: 16.0,
        dropout: 0.0,
        target_modules: LoraConfig::parse_targets(targets).unwrap(),
    });
    let mut t = Trainer::new(tiny_model(21), cfg).unwrap();
    for _ in 0..3 {
        t.train_step(&batch(), &reinforce).unwrap();
    }
    t
}

#[test]
fn merged_weights_give_the_adapter_forward_logits() {
    let ids = [1i64, 5, 9, 33, 2, 60, 7];
    for targets in [
        "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
        "v_proj,down_proj",
    ] {
        let t = trained_lora(targets);
        let with_adapters = logits(&t.model().valid(), &ids);
        let base = logits(&lora::stripped(&t.model().valid()), &ids);
        let merged = t.inference_model();
        assert!(!lora::has_adapters(&merged));
        let served = logits(&merged, &ids);
        let d = with_adapters
            .iter()
            .zip(&served)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let moved = with_adapters
            .iter()
            .zip(&base)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(
            moved > 1e-3,
            "{targets}: adapters changed the logits ({moved})"
        );
        assert!(
            d < 1e-5,
            "{targets}: merged vs adapter forward differ by {d}"
        );
    }
}

#[test]
fn adapters_are_saved_peft_style_and_load_back() {
    let t = trained_lora("q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj");
    let dir = tempfile::tempdir().unwrap();
    let cfg = t.config().lora.clone().unwrap();
    lora::save_adapters(t.model(), &cfg, "tiny-base", dir.path()).unwrap();

    let conf: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(conf["peft_type"], "LORA");
    assert_eq!(conf["task_type"], "CAUSAL_LM");
    assert_eq!(conf["r"], 4);
    assert_eq!(conf["lora_alpha"], 16.0);
    assert_eq!(conf["base_model_name_or_path"], "tiny-base");
    assert_eq!(conf["target_modules"].as_array().unwrap().len(), 7);

    let (tensors, _) =
        openclaw_trainer::tensors::read_f32(&dir.path().join("adapter_model.safetensors")).unwrap();
    assert_eq!(tensors.len(), 2 * 7 * 2);
    let a = &tensors["base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"];
    let b = &tensors["base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight"];
    assert_eq!(a.shape, vec![4, 32]); // [r, in]
    assert_eq!(b.shape, vec![32, 4]); // [out, r]
    assert_eq!(
        tensors["base_model.model.model.layers.0.mlp.down_proj.lora_A.weight"].shape,
        vec![4, 64]
    );
    assert_eq!(
        tensors["base_model.model.model.layers.0.mlp.up_proj.lora_B.weight"].shape,
        vec![64, 4]
    );

    let (loaded, got) = lora::load_adapters(lora::stripped(t.model()), dir.path()).unwrap();
    assert_eq!(got, cfg);
    assert_eq!(
        lora::adapter_tensors(&loaded),
        lora::adapter_tensors(t.model())
    );
}

#[test]
fn bad_lora_settings_are_named() {
    let e = LoraConfig::parse_targets("q_proj,qkv")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown LoRA target module `qkv`"), "{e}");
    let bad = LoraConfig {
        rank: 0,
        ..Default::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("lora_rank"));
    let bad = LoraConfig {
        dropout: 1.0,
        ..Default::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .to_string()
        .contains("lora_dropout"));
    assert_eq!(LoraConfig::default().target_modules.len(), 7);
}

#[test]
fn publication_serves_the_merged_weights_under_a_new_version() {
    let mut t = trained_lora("q_proj,v_proj");
    let published = openclaw_engine::Published::new(t.inference_model(), 4);
    let held = published.current();
    t.train_step(&batch(), &reinforce).unwrap();
    let v = t.publish(&published);
    assert_eq!(v, 5);
    assert_eq!(t.state().weight_version, 5);
    let now = published.current();
    assert!(!lora::has_adapters(&now.model));
    let ids = [4i64, 8, 15, 16, 23, 42];
    assert_eq!(logits(&now.model, &ids), logits(&t.inference_model(), &ids));
    assert_ne!(logits(&held.model, &ids), logits(&now.model, &ids));
}

#[test]
fn a_published_full_model_is_not_changed_by_later_steps() {
    let mut t = Trainer::new(tiny_model(22), config(1e-2)).unwrap();
    let published = openclaw_engine::Published::new(t.inference_model(), 0);
    let held = published.current();
    let ids = [4i64, 8, 15, 16, 23, 42];
    let before = logits(&held.model, &ids);
    t.train_step(&batch(), &reinforce).unwrap();
    assert_eq!(logits(&held.model, &ids), before);
    assert_ne!(logits(&t.inference_model(), &ids), before);
    fn send<T: Send>() {}
    send::<Trainer<AD>>();
}

//! A checkpoint trained from the built-in recipe's tiny model is loaded and evaluated merged.

use super::{ensure_model, tests::tiny_recipe};
use burn::backend::Autodiff;
use openclaw_chat::{ChatTemplate, Tokenizer};
use openclaw_engine::CpuBackend;
use openclaw_eval::{evaluate, load, EvalOptions};
use openclaw_trainer::sft::tokenize_conversation;
use openclaw_trainer::{LoraConfig, LrSchedule, TrainConfig, Trainer};

#[test]
fn a_lora_checkpoint_without_tokenizer_files_is_evaluated_merged() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("base");
    ensure_model(&tiny_recipe(), &base, false, false).unwrap();
    let config = TrainConfig {
        schedule: LrSchedule::constant(0.05),
        lora: Some(LoraConfig::default()),
        base_model: base.display().to_string(),
        ..Default::default()
    };
    let mut trainer =
        Trainer::<Autodiff<CpuBackend>>::from_pretrained(&base, config, &Default::default())
            .unwrap();
    let tok = Tokenizer::from_dir(&base).unwrap();
    let template = ChatTemplate::from_dir(&base).unwrap();
    let conv = [
        openclaw_chat::ChatMessage::new("user", "Describe the shark."),
        openclaw_chat::ChatMessage::new("assistant", "A shark lives in the sea."),
    ];
    let examples = tokenize_conversation(&conv, None, &template, &tok, 256).unwrap();
    for _ in 0..3 {
        trainer.sft_step(&examples).unwrap();
    }
    let save_dir = root.path().join("ckpt");
    let ckpt = trainer.save_checkpoint(&save_dir, 0).unwrap();
    assert!(ckpt.join(openclaw_trainer::lora::ADAPTER_CONFIG).is_file());
    assert!(!ckpt.join("tokenizer.json").exists());

    // The save directory means its latest checkpoint; the tokenizer comes from the base
    // model that trainer_state.json names.
    let m = load(&save_dir, None).unwrap();
    assert_eq!(m.path(), ckpt);
    assert!(!openclaw_trainer::lora::has_adapters(&m.model), "merged");
    let trained = trainer.inference_model().export();
    let loaded = m.model.export();
    let max_diff = trained
        .iter()
        .zip(&loaded)
        .flat_map(|(a, b)| a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs()))
        .fold(0f32, f32::max);
    assert!(
        max_diff < 1e-5,
        "the loaded weights are the trained ones: {max_diff}"
    );
    let base_weights = load(&base, None).unwrap().model.export();
    assert_ne!(base_weights, loaded, "the adapters changed something");

    let opts = EvalOptions {
        eval_tasks: 3,
        samples_per_prompt: 1,
        max_new_tokens: 4,
        ..Default::default()
    };
    let report = evaluate(&ckpt, &opts).unwrap();
    assert_eq!(report.model_path, ckpt.display().to_string());

    // Without a base model to fall back on, the error says what to give.
    std::fs::rename(&base, root.path().join("moved")).unwrap();
    let err = load(&ckpt, None).err().unwrap().to_string();
    assert!(err.contains("--tokenizer"), "{err}");
    let given = EvalOptions {
        tokenizer: Some(root.path().join("moved")),
        ..opts
    };
    evaluate(&ckpt, &given).unwrap();
}

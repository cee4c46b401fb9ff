//! Loading what an evaluation runs: a model directory, or a checkpoint the trainer wrote
//! (LoRA adapters merged, tokenizer files from the checkpoint, `--tokenizer`, or the base
//! model the checkpoint names).

use crate::policy::files::tokenizer_dir;
use anyhow::{bail, Context, Result};
use openclaw_chat::{ChatTemplate, Tokenizer};
use openclaw_engine::{CpuBackend, Model};
use std::path::{Path, PathBuf};

/// A model ready to sample from, with the text side it was trained with.
pub struct EvalModel {
    /// The directory the weights came from (a checkpoint when `--model-path` was a save dir).
    pub dir: PathBuf,
    /// The weights, adapters merged.
    pub model: Model<CpuBackend>,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The chat template.
    pub template: ChatTemplate,
}

/// The directory holding the weights: `path` itself, or, for a save directory of checkpoints
/// (no `config.json` of its own), its latest complete checkpoint.
fn weights_dir(path: &Path) -> Result<PathBuf> {
    if path.join("config.json").is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        bail!("model path {} does not exist", path.display());
    }
    openclaw_train::resolve_checkpoint(path, "latest").with_context(|| {
        format!(
            "{} is neither a model directory (no config.json) nor a save directory with checkpoints",
            path.display()
        )
    })
}

/// Loads `model_path` (model directory, checkpoint, or save directory) for evaluation.
pub fn load(model_path: &Path, tokenizer: Option<&Path>) -> Result<EvalModel> {
    let dir = weights_dir(model_path)?;
    let device = Default::default();
    let mut model = openclaw_engine::load_model::<CpuBackend>(&dir, &device)
        .with_context(|| format!("cannot load the model in {}", dir.display()))?;
    if dir.join(openclaw_train::lora::ADAPTER_CONFIG).is_file() {
        // Merged adapters compute what base + adapters compute, with one matmul per projection.
        let (with_adapters, _) = openclaw_train::lora::load_adapters(model, &dir)?;
        model = openclaw_train::lora::merged(&with_adapters);
    }
    let tok_dir = tokenizer_dir(&dir, tokenizer)?;
    let tokenizer = Tokenizer::from_dir(&tok_dir)?;
    let template = ChatTemplate::from_dir(&tok_dir)
        .with_context(|| format!("{} has no usable chat template", tok_dir.display()))?;
    if tokenizer.vocab_size() > model.config.vocab_size {
        bail!(
            "the tokenizer in {} has {} tokens but the model only {}: they do not belong together",
            tok_dir.display(),
            tokenizer.vocab_size(),
            model.config.vocab_size
        );
    }
    Ok(EvalModel {
        dir,
        model,
        tokenizer,
        template,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_model::{ensure_model, tests::tiny_recipe};
    use crate::eval::{evaluate, EvalOptions};
    use burn::backend::Autodiff;
    use openclaw_train::sft::tokenize_conversation;
    use openclaw_train::{LoraConfig, LrSchedule, TrainConfig, Trainer};

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
        let examples = tokenize_conversation(&conv, &template, &tok, 256).unwrap();
        for _ in 0..3 {
            trainer.sft_step(&examples).unwrap();
        }
        let save_dir = root.path().join("ckpt");
        let ckpt = trainer.save_checkpoint(&save_dir, 0).unwrap();
        assert!(ckpt.join(openclaw_train::lora::ADAPTER_CONFIG).is_file());
        assert!(!ckpt.join("tokenizer.json").exists());

        // The save directory means its latest checkpoint; the tokenizer comes from the base
        // model that trainer_state.json names.
        let m = load(&save_dir, None).unwrap();
        assert_eq!(m.dir, ckpt);
        assert!(!openclaw_train::lora::has_adapters(&m.model), "merged");
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
        let base_weights = crate::eval::load(&base, None).unwrap().model.export();
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
}

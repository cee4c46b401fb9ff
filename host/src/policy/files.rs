//! The tokenizer and chat template of a model path: `tokenizer.json` (and the template files)
//! in a model directory, or the metadata of a GGUF file.

use anyhow::{bail, Context, Result};
use openclaw_chat::{
    chat_template_from_gguf, tokenizer_files_from_gguf, tokenizer_from_gguf, ChatTemplate,
    GgufTokenizerSpec, Tokenizer, CHATML_TEMPLATE,
};
use openclaw_engine::weights::gguf::{gguf_path, GgufFile};
use openclaw_train::checkpoint::{read_saved_state, ExtraFile};
use openclaw_train::export::TOKENIZER_FILES;
use std::path::{Path, PathBuf};

/// The tokenizer spec stored in a GGUF file.
pub fn gguf_tokenizer_spec(g: &GgufFile) -> Result<GgufTokenizerSpec> {
    let strings = |key: &str| -> Result<Vec<String>> {
        Ok(g.get_str_array(key)?
            .into_iter()
            .map(str::to_owned)
            .collect())
    };
    Ok(GgufTokenizerSpec {
        model: g.get_str("tokenizer.ggml.model")?.to_owned(),
        pre: g.get_str("tokenizer.ggml.pre").ok().map(str::to_owned),
        tokens: strings("tokenizer.ggml.tokens")?,
        merges: strings("tokenizer.ggml.merges").unwrap_or_default(),
        token_types: g
            .get_i64_array("tokenizer.ggml.token_type")
            .map(|v| v.into_iter().map(|t| t as i32).collect())
            .unwrap_or_default(),
        bos: g.get_u32("tokenizer.ggml.bos_token_id").ok(),
        eos: g.get_u32("tokenizer.ggml.eos_token_id").ok(),
        pad: g.get_u32("tokenizer.ggml.padding_token_id").ok(),
        unk: g.get_u32("tokenizer.ggml.unknown_token_id").ok(),
        add_bos: g.get_bool("tokenizer.ggml.add_bos_token").unwrap_or(false),
        chat_template: g.get_str("tokenizer.chat_template").ok().map(str::to_owned),
    })
}

/// The tokenizer and chat template for `path` (a model directory or a GGUF file). A GGUF
/// without a chat template gets ChatML.
pub fn tokenizer_and_template(path: &Path) -> Result<(Tokenizer, ChatTemplate)> {
    if path.is_dir() && path.join("tokenizer.json").is_file() {
        let tokenizer = Tokenizer::from_dir(path)?;
        let template = ChatTemplate::from_dir(path)
            .with_context(|| format!("{} has no usable chat template", path.display()))?;
        return Ok((tokenizer, template));
    }
    if let Some(file) = gguf_path(path)? {
        let g = GgufFile::open(&file)?;
        let spec = gguf_tokenizer_spec(&g)
            .with_context(|| format!("{}: tokenizer metadata", file.display()))?;
        let tokenizer = tokenizer_from_gguf(&spec)?;
        let template = match chat_template_from_gguf(&spec)? {
            Some(t) => t,
            None => ChatTemplate::from_source("chatml", CHATML_TEMPLATE)?,
        };
        return Ok((tokenizer, template));
    }
    // The directory's own error names what is missing.
    let tokenizer = Tokenizer::from_dir(path)?;
    let template = ChatTemplate::from_dir(path)?;
    Ok((tokenizer, template))
}

/// The tokenizer files a checkpoint of a run started from `model_path` carries: those of a
/// model directory as they are, or, for a GGUF file, `tokenizer.json` and
/// `tokenizer_config.json` (with its chat template) built from the metadata.
pub fn tokenizer_files(model_path: &Path) -> Result<Vec<ExtraFile>> {
    if let Some(file) = gguf_path(model_path)? {
        let g = GgufFile::open(&file)?;
        let spec = gguf_tokenizer_spec(&g)
            .with_context(|| format!("{}: tokenizer metadata", file.display()))?;
        return Ok(tokenizer_files_from_gguf(&spec)?
            .into_iter()
            .map(|(name, contents)| ExtraFile { name, contents })
            .collect());
    }
    TOKENIZER_FILES
        .iter()
        .map(|f| model_path.join(f))
        .filter(|p| p.is_file())
        .map(|p| ExtraFile::copy_of(&p))
        .collect()
}

/// Where the tokenizer files come from: `given`, the weights' directory, or the base model
/// its `trainer_state.json` names (checkpoints of older runs may lack tokenizer files).
pub fn tokenizer_dir(weights: &Path, given: Option<&Path>) -> Result<PathBuf> {
    if let Some(t) = given {
        let dir = if t.is_file() {
            t.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            t.to_path_buf()
        };
        if !dir.join("tokenizer.json").is_file() {
            bail!("--tokenizer {}: no tokenizer.json there", t.display());
        }
        return Ok(dir);
    }
    if weights.join("tokenizer.json").is_file() {
        return Ok(weights.to_path_buf());
    }
    if let Ok(saved) = read_saved_state(weights) {
        let base = PathBuf::from(&saved.config.base_model);
        if !saved.config.base_model.is_empty() && base.join("tokenizer.json").is_file() {
            return Ok(base);
        }
    }
    bail!(
        "{} has no tokenizer.json and names no base model that has one; give --tokenizer DIR",
        weights.display()
    )
}

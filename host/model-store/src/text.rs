//! The tokenizer and chat template of a model: `tokenizer.json` (and the template files) in a
//! model directory, the metadata of a GGUF file, or those of the base model a checkpoint names.

use crate::checkpoints::base_model_of;
use crate::resolve::ModelSource;
use anyhow::{bail, Context, Result};
use openclaw_chat::{
    chat_template_from_gguf, tokenizer_files_from_gguf, tokenizer_from_gguf, ChatTemplate,
    GgufTokenizerSpec, Tokenizer, CHATML_TEMPLATE,
};
use openclaw_engine::weights::gguf::{gguf_path, GgufFile};
use std::path::{Path, PathBuf};

/// Tokenizer and generation files a model directory may carry; checkpoints and exports copy
/// those present.
pub const TOKENIZER_FILES: [&str; 8] = [
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
];

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

fn spec_of(file: &Path) -> Result<GgufTokenizerSpec> {
    let g = GgufFile::open(file)?;
    gguf_tokenizer_spec(&g).with_context(|| format!("{}: tokenizer metadata", file.display()))
}

/// Where a model's text side is.
enum TextSource {
    Directory(PathBuf),
    Gguf(PathBuf),
}

/// The text side of `path` when it carries one itself.
fn own_text(path: &Path) -> Result<Option<TextSource>> {
    if path.is_dir() && path.join("tokenizer.json").is_file() {
        return Ok(Some(TextSource::Directory(path.to_path_buf())));
    }
    Ok(gguf_path(path)?.map(TextSource::Gguf))
}

/// Finds the text side: `given` (`--tokenizer`), the weights' own files, or those of the base
/// model a checkpoint's `trainer_state.json` names (checkpoints of older runs may lack them).
fn text_source(weights: &ModelSource, given: Option<&Path>) -> Result<TextSource> {
    if let Some(t) = given {
        let dir = if t.is_file() && gguf_path(t)?.is_none() {
            t.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            t.to_path_buf()
        };
        return own_text(&dir)?.with_context(|| {
            format!(
                "--tokenizer {}: no tokenizer.json or .gguf file there",
                t.display()
            )
        });
    }
    if let ModelSource::Gguf(f) = weights {
        return Ok(TextSource::Gguf(f.clone()));
    }
    let dir = weights.path();
    if let Some(t) = own_text(dir)? {
        return Ok(t);
    }
    if let Some(base) = base_model_of(dir) {
        if let Some(t) = own_text(&base)? {
            return Ok(t);
        }
    }
    bail!(
        "{} has no tokenizer.json and names no base model that has one; give --tokenizer DIR",
        dir.display()
    )
}

/// The tokenizer and chat template for `weights`, or from `given` (`--tokenizer`). A GGUF file
/// without a chat template gets ChatML.
pub fn tokenizer_and_template(
    weights: &ModelSource,
    given: Option<&Path>,
) -> Result<(Tokenizer, ChatTemplate)> {
    match text_source(weights, given)? {
        TextSource::Directory(dir) => {
            let tokenizer = Tokenizer::from_dir(&dir)?;
            let template = ChatTemplate::from_dir(&dir)
                .with_context(|| format!("{} has no usable chat template", dir.display()))?;
            Ok((tokenizer, template))
        }
        TextSource::Gguf(file) => {
            let spec = spec_of(&file)?;
            let tokenizer = tokenizer_from_gguf(&spec)?;
            let template = match chat_template_from_gguf(&spec)? {
                Some(t) => t,
                None => ChatTemplate::from_source("chatml", CHATML_TEMPLATE)?,
            };
            Ok((tokenizer, template))
        }
    }
}

/// The tokenizer files (name, bytes) that a checkpoint or export of `weights` carries so it
/// serves on its own: those of the model directory as they are, or, for a GGUF file,
/// `tokenizer.json` and `tokenizer_config.json` (with its chat template) built from the
/// metadata. `given` (`--tokenizer`) and a checkpoint's base model are looked at as in
/// [`tokenizer_and_template`].
pub fn tokenizer_files(
    weights: &ModelSource,
    given: Option<&Path>,
) -> Result<Vec<(String, Vec<u8>)>> {
    match text_source(weights, given)? {
        TextSource::Gguf(file) => Ok(tokenizer_files_from_gguf(&spec_of(&file)?)?),
        TextSource::Directory(dir) => TOKENIZER_FILES
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.is_file())
            .map(|p| {
                let bytes =
                    std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string();
                Ok((name, bytes))
            })
            .collect(),
    }
}

//! Training a byte-level BPE tokenizer for the project's own small models.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::tokenizer::Tokenizer;

/// The chat template written next to trained tokenizers: ChatML with Qwen-style reasoning,
/// tools and tool results (it renders what the Qwen3 template renders).
pub const CHATML_TEMPLATE: &str = include_str!("chatml.jinja");

/// Qwen2/Qwen3's pre-tokenizer split: contractions, letter runs, single digits, punctuation
/// runs, newlines, spaces.
const SPLIT_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Control tokens: special (dropped by `decode(.., skip_special_tokens = true)`).
const SPECIAL: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
/// Markup tokens: added as single tokens but not special, so decoded text keeps them and the
/// output parser can see them (as in Qwen3's tokenizer).
const MARKUP: [&str; 6] = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
];

/// Trains a byte-level BPE tokenizer on text files and writes `tokenizer.json` and
/// `tokenizer_config.json` (with [`CHATML_TEMPLATE`]) into `out_dir`.
///
/// `vocab_size` counts every token, added ones included: ids `0..3` are `<|endoftext|>`,
/// `<|im_start|>`, `<|im_end|>`, then the 256 byte symbols and the merges, then the six
/// markup tokens (`<think>` ... `</tool_response>`). It is a maximum: a corpus with too few
/// distinct pairs stops merging earlier, so size models by the returned tokenizer's
/// [`Tokenizer::vocab_size`]. The same files give the same files out.
pub fn train_bpe(
    files: &[impl AsRef<Path>],
    vocab_size: usize,
    out_dir: impl AsRef<Path>,
) -> Result<Tokenizer> {
    let out_dir = out_dir.as_ref();
    let min = SPECIAL.len() + ByteLevel::alphabet().len() + MARKUP.len();
    if vocab_size < min {
        return Err(anyhow!(
            "vocab_size {vocab_size} is below the minimum of {min}"
        ));
    }
    if files.is_empty() {
        return Err(anyhow!("no training files given"));
    }
    let mut paths = Vec::with_capacity(files.len());
    for f in files {
        let p = f.as_ref();
        if !p.is_file() {
            return Err(anyhow!("training file {} not found", p.display()));
        }
        paths.push(p.to_string_lossy().into_owned());
    }

    let byte_level = ByteLevel::new(false, false, false);
    let split = Split::new(
        SplitPattern::Regex(SPLIT_REGEX.to_owned()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| anyhow!("pre-tokenizer regex: {e}"))?;

    let mut tokenizer = tokenizers::Tokenizer::new(BPE::default());
    tokenizer
        .with_normalizer(Some(NFC))
        .map_err(|e| anyhow!("normalizer: {e}"))?;
    tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![split.into(), byte_level.into()])));
    tokenizer.with_post_processor(Some(byte_level));
    tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));

    let special: Vec<AddedToken> = SPECIAL
        .iter()
        .map(|t| AddedToken::from(*t, true).normalized(false))
        .collect();
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(vocab_size - MARKUP.len())
        .min_frequency(0)
        .show_progress(false)
        .special_tokens(special)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build()
        .into();
    tokenizer
        .train_from_files(&mut trainer, paths)
        .map_err(|e| anyhow!("training BPE: {e}"))?;
    let markup: Vec<AddedToken> = MARKUP
        .iter()
        .map(|t| AddedToken::from(*t, false).normalized(false))
        .collect();
    tokenizer
        .add_tokens(markup)
        .map_err(|e| anyhow!("adding markup tokens: {e}"))?;

    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let tokenizer_path = out_dir.join("tokenizer.json");
    tokenizer
        .save(&tokenizer_path, false)
        .map_err(|e| anyhow!("writing {}: {e}", tokenizer_path.display()))?;
    let config_path = out_dir.join("tokenizer_config.json");
    let config = serde_json::to_string_pretty(&tokenizer_config())? + "\n";
    std::fs::write(&config_path, config)
        .with_context(|| format!("writing {}", config_path.display()))?;
    Tokenizer::from_dir(out_dir)
}

fn tokenizer_config() -> serde_json::Value {
    serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": false,
        "add_prefix_space": false,
        "bos_token": null,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": null,
        "clean_up_tokenization_spaces": false,
        "split_special_tokens": false,
        "errors": "replace",
        "chat_template": CHATML_TEMPLATE,
    })
}

//! Tokenizers and chat templates from the tokenizer metadata of a GGUF file (llama.cpp).
//!
//! This crate does not read GGUF files itself (the reader lives in openclaw-engine, which
//! this crate must not depend on); a caller copies the `tokenizer.*` keys into a
//! [`GgufTokenizerSpec`] and calls [`tokenizer_from_gguf`] / [`chat_template_from_gguf`].

use anyhow::{anyhow, Result};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::config::TokenizerConfig;
use crate::template::ChatTemplate;
use crate::tokenizer::{SpecialToken, SpecialTokens, Tokenizer};

/// `tokenizer.ggml.token_type` of a control token (`<|im_start|>`): special, dropped by
/// `decode(.., skip_special_tokens = true)`.
pub const TOKEN_TYPE_CONTROL: i32 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token: matched whole in text, kept on decode.
pub const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// The GPT-2 split (llama.cpp's `gpt2` pre-tokenizer, and the regex inside HF's ByteLevel).
const GPT2_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// Digits one by one; llama.cpp runs it before [`GPT2_REGEX`] for `smollm`, `starcoder` and
/// a few more (the HF tokenizers of those models use `Digits(individual_digits=true)`).
const DIGITS_REGEX: &str = r"\p{N}";
/// llama.cpp's `qwen2` / `stablelm2` split (the regex of Qwen2's `tokenizer.json`).
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The tokenizer metadata of a GGUF file (the `tokenizer.ggml.*` and
/// `tokenizer.chat_template` keys), as plain values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GgufTokenizerSpec {
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) is supported; `llama`
    /// (SentencePiece) and others are not yet.
    pub model: String,
    /// `tokenizer.ggml.pre`, llama.cpp's name for the pre-tokenizer (`smollm`, `gpt2`,
    /// `qwen2`, ...); `None` when the key is absent.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`: token strings by id (byte-level encoded for `gpt2`).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.merges`: `"left right"` pairs, highest priority first.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.token_type` by id (1 normal, 2 unknown, 3 control, 4 user-defined,
    /// 5 unused, 6 byte); empty when the key is absent.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`: encoding with special tokens prepends BOS.
    pub add_bos: bool,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

impl GgufTokenizerSpec {
    /// The token string of `id`, if in range.
    fn token(&self, id: Option<u32>) -> Option<&str> {
        id.and_then(|i| self.tokens.get(i as usize))
            .map(String::as_str)
    }

    /// bos/eos/pad/unk as strings, the way a `tokenizer_config.json` names them.
    fn config(&self) -> TokenizerConfig {
        TokenizerConfig {
            bos_token: self.token(self.bos).map(str::to_owned),
            eos_token: self.token(self.eos).map(str::to_owned),
            pad_token: self.token(self.pad).map(str::to_owned),
            unk_token: self.token(self.unk).map(str::to_owned),
            ..TokenizerConfig::default()
        }
    }
}

/// Builds a tokenizer from GGUF tokenizer metadata.
///
/// For `gpt2` (byte-level BPE): the vocabulary and merges as given, llama.cpp's split for
/// `pre` followed by the byte-level mapping, a byte-level decoder, control tokens as special
/// added tokens and user-defined tokens as (non-special) added tokens, so both encode to one
/// id. BOS is prepended with special tokens when `add_bos` is set. Other models and unknown
/// pre-tokenizers are errors.
pub fn tokenizer_from_gguf(spec: &GgufTokenizerSpec) -> Result<Tokenizer> {
    match spec.model.as_str() {
        "gpt2" => {}
        "llama" => {
            return Err(anyhow!(
                "GGUF tokenizer model \"llama\" (SentencePiece) is not supported yet; only \
                 \"gpt2\" (byte-level BPE) is"
            ))
        }
        other => {
            return Err(anyhow!(
                "GGUF tokenizer model {other:?} is not supported; only \"gpt2\" (byte-level \
                 BPE) is"
            ))
        }
    }
    if !spec.token_types.is_empty() && spec.token_types.len() != spec.tokens.len() {
        return Err(anyhow!(
            "GGUF tokenizer has {} tokens but {} token types",
            spec.tokens.len(),
            spec.token_types.len()
        ));
    }
    let pre_tokenizer = pre_tokenizer(spec.pre.as_deref())?;

    let mut vocab = Vocab::default();
    for (id, token) in spec.tokens.iter().enumerate() {
        let id = u32::try_from(id).map_err(|_| anyhow!("GGUF vocabulary too large"))?;
        // llama.cpp keeps the first id of a duplicated token string; so do we.
        vocab.entry(token.clone()).or_insert(id);
    }
    let merges = spec
        .merges
        .iter()
        .map(|m| split_merge(m))
        .collect::<Result<Vec<_>>>()?;
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| anyhow!("GGUF BPE vocabulary: {e}"))?;

    let mut inner = tokenizers::Tokenizer::new(bpe);
    inner.with_pre_tokenizer(Some(pre_tokenizer));
    inner.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));

    let mut special = Vec::new();
    let mut user_defined = Vec::new();
    for (token, &ty) in spec.tokens.iter().zip(&spec.token_types) {
        // normalized(false): matched on the raw text, before the byte-level mapping.
        match ty {
            TOKEN_TYPE_CONTROL => special.push(AddedToken::from(token.clone(), true)),
            TOKEN_TYPE_USER_DEFINED => {
                user_defined.push(AddedToken::from(token.clone(), false).normalized(false))
            }
            _ => {}
        }
    }
    inner
        .add_special_tokens(special)
        .map_err(|e| anyhow!("GGUF control tokens: {e}"))?;
    inner
        .add_tokens(user_defined)
        .map_err(|e| anyhow!("GGUF user-defined tokens: {e}"))?;

    if spec.add_bos {
        let bos = spec
            .token(spec.bos)
            .ok_or_else(|| anyhow!("GGUF tokenizer has add_bos_token but no valid bos id"))?;
        let bos_id = spec.bos.expect("token() found it");
        let post = TemplateProcessing::builder()
            .try_single(format!("{bos} $A"))
            .and_then(|b| b.try_pair(format!("{bos} $A {bos} $B")))
            .map_err(|e| anyhow!("BOS template: {e}"))?
            .special_tokens(vec![(bos.to_owned(), bos_id)])
            .build()
            .map_err(|e| anyhow!("BOS template: {e}"))?;
        inner.with_post_processor(Some(post));
    }

    let tokenizer = Tokenizer::from(inner);
    let special = |id: Option<u32>| {
        spec.token(id).map(|text| SpecialToken {
            text: text.to_owned(),
            id,
        })
    };
    Ok(tokenizer.with_special_tokens(SpecialTokens {
        bos: special(spec.bos),
        eos: special(spec.eos),
        pad: special(spec.pad),
        unk: special(spec.unk),
    }))
}

/// The GGUF's chat template (`None` when it has none), with `bos_token`, `eos_token`,
/// `pad_token` and `unk_token` set from the special ids as transformers sets them.
pub fn chat_template_from_gguf(spec: &GgufTokenizerSpec) -> Result<Option<ChatTemplate>> {
    let Some(source) = &spec.chat_template else {
        return Ok(None);
    };
    let template = ChatTemplate::from_source("tokenizer.chat_template of the GGUF", source)?;
    Ok(Some(template.with_config(&spec.config())))
}

/// The GGUF's tokenizer as Hugging Face files: `tokenizer.json` and a `tokenizer_config.json`
/// with the special tokens and the chat template, as `(file name, bytes)`. A directory holding
/// them loads with [`Tokenizer::from_dir`] and [`ChatTemplate::from_dir`] to the same tokenizer
/// and template as [`tokenizer_from_gguf`] and [`chat_template_from_gguf`]; checkpoints of a
/// run that started from a GGUF file carry them, so they can be served on their own.
pub fn tokenizer_files_from_gguf(spec: &GgufTokenizerSpec) -> Result<Vec<(String, Vec<u8>)>> {
    let tokenizer = tokenizer_from_gguf(spec)?;
    let json = tokenizer
        .inner()
        .to_string(true)
        .map_err(|e| anyhow!("cannot serialise the GGUF tokenizer: {e}"))?;
    let config = spec.config();
    let mut cfg = serde_json::Map::new();
    for (key, value) in [
        ("bos_token", &config.bos_token),
        ("eos_token", &config.eos_token),
        ("pad_token", &config.pad_token),
        ("unk_token", &config.unk_token),
    ] {
        if let Some(v) = value {
            cfg.insert(key.into(), serde_json::Value::String(v.clone()));
        }
    }
    cfg.insert(
        "add_bos_token".into(),
        serde_json::Value::Bool(spec.add_bos),
    );
    if let Some(t) = &spec.chat_template {
        cfg.insert("chat_template".into(), serde_json::Value::String(t.clone()));
    }
    let cfg = serde_json::to_vec_pretty(&serde_json::Value::Object(cfg))?;
    Ok(vec![
        ("tokenizer.json".into(), json.into_bytes()),
        ("tokenizer_config.json".into(), cfg),
    ])
}

/// llama.cpp's regex list for a `tokenizer.ggml.pre` name, then the byte-level mapping.
fn pre_tokenizer(pre: Option<&str>) -> Result<PreTokenizerWrapper> {
    let regexes: &[&str] = match pre {
        // A missing name is treated as GPT-2, the split these vocabularies were made for
        // (llama.cpp's own fallback, "default", uses a different list and warns).
        None | Some("gpt2") | Some("default") => &[GPT2_REGEX],
        Some("smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone") => {
            &[DIGITS_REGEX, GPT2_REGEX]
        }
        Some("qwen2" | "stablelm2") => &[QWEN2_REGEX],
        Some(other) => {
            return Err(anyhow!(
                "GGUF pre-tokenizer {other:?} is not supported (supported: gpt2, smollm, \
                 starcoder, refact, command-r, codeshell, exaone, qwen2, stablelm2)"
            ))
        }
    };
    let mut steps: Vec<PreTokenizerWrapper> = Vec::with_capacity(regexes.len() + 1);
    for regex in regexes {
        let split = Split::new(
            SplitPattern::Regex((*regex).to_owned()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| anyhow!("pre-tokenizer regex {regex:?}: {e}"))?;
        steps.push(split.into());
    }
    // The splits are done above, so ByteLevel only maps bytes to its alphabet.
    steps.push(ByteLevel::new(false, true, false).into());
    Ok(Sequence::new(steps).into())
}

/// `"left right"` into its two halves. The search starts after the first character, as in
/// llama.cpp, so a left half that is itself a space stays intact.
fn split_merge(merge: &str) -> Result<(String, String)> {
    let first = merge.chars().next().map_or(0, char::len_utf8);
    merge[first..]
        .find(' ')
        .map(|i| {
            let (l, r) = merge.split_at(first + i);
            (l.to_owned(), r[1..].to_owned())
        })
        .ok_or_else(|| anyhow!("GGUF merge {merge:?} is not two tokens separated by a space"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny byte-level vocabulary: the bytes of "ab", one merge, two control tokens.
    fn spec() -> GgufTokenizerSpec {
        let tokens = [
            "<|im_start|>",
            "<|im_end|>",
            "a",
            "b",
            "ab",
            "Ġ",
            "1",
            "2",
            "<x>",
        ];
        GgufTokenizerSpec {
            model: "gpt2".into(),
            pre: Some("smollm".into()),
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            merges: vec!["a b".into()],
            token_types: vec![3, 3, 1, 1, 1, 1, 1, 1, 4],
            bos: Some(0),
            eos: Some(1),
            pad: Some(1),
            unk: None,
            add_bos: false,
            chat_template: Some(
                "{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}".into(),
            ),
        }
    }

    #[test]
    fn builds_byte_level_bpe_with_special_tokens() {
        let tok = tokenizer_from_gguf(&spec()).unwrap();
        assert_eq!(tok.encode("ab", false).unwrap(), vec![4]);
        assert_eq!(
            tok.encode("<|im_start|>ab 12<x>", false).unwrap(),
            vec![0, 4, 5, 6, 7, 8]
        );
        let ids = [0, 4, 5, 6, 8, 1];
        assert_eq!(
            tok.decode(&ids, false).unwrap(),
            "<|im_start|>ab 1<x><|im_end|>"
        );
        // Control tokens are special, user-defined ones are text.
        assert_eq!(tok.decode(&ids, true).unwrap(), "ab 1<x>");
        assert_eq!(
            tok.special_tokens().eos.as_ref().unwrap().text,
            "<|im_end|>"
        );
        assert_eq!(tok.special_tokens().bos.as_ref().unwrap().id, Some(0));
    }

    #[test]
    fn add_bos_prepends_bos_with_special_tokens() {
        let spec = GgufTokenizerSpec {
            add_bos: true,
            ..spec()
        };
        let tok = tokenizer_from_gguf(&spec).unwrap();
        assert_eq!(tok.encode("ab", true).unwrap(), vec![0, 4]);
        assert_eq!(tok.encode("ab", false).unwrap(), vec![4]);
    }

    #[test]
    fn chat_template_sees_special_token_strings() {
        let template = chat_template_from_gguf(&spec()).unwrap().unwrap();
        let out = template
            .render(
                &[crate::ChatMessage::new("user", "hi")],
                None,
                &Default::default(),
            )
            .unwrap();
        assert_eq!(out, "<|im_start|>hi<|im_end|>");
        let none = GgufTokenizerSpec {
            chat_template: None,
            ..spec()
        };
        assert!(chat_template_from_gguf(&none).unwrap().is_none());
    }

    #[test]
    fn written_files_load_to_the_same_tokenizer_and_template() {
        let spec = GgufTokenizerSpec {
            add_bos: true,
            ..spec()
        };
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in tokenizer_files_from_gguf(&spec).unwrap() {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let direct = tokenizer_from_gguf(&spec).unwrap();
        let loaded = Tokenizer::from_dir(dir.path()).unwrap();
        for text in ["ab", "<|im_start|>ab 12<x>", "b a"] {
            for special in [false, true] {
                assert_eq!(
                    loaded.encode(text, special).unwrap(),
                    direct.encode(text, special).unwrap(),
                    "{text:?} special={special}"
                );
            }
        }
        assert_eq!(loaded.decode(&[0, 4, 8, 1], true).unwrap(), "ab<x>");
        assert_eq!(loaded.special_tokens(), direct.special_tokens());
        let msgs = [crate::ChatMessage::new("user", "hi")];
        let render = |t: &ChatTemplate| t.render(&msgs, None, &Default::default()).unwrap();
        assert_eq!(
            render(&ChatTemplate::from_dir(dir.path()).unwrap()),
            render(&chat_template_from_gguf(&spec).unwrap().unwrap())
        );
    }

    #[test]
    fn unsupported_models_and_pre_tokenizers_are_named() {
        let llama = GgufTokenizerSpec {
            model: "llama".into(),
            ..spec()
        };
        let err = tokenizer_from_gguf(&llama).unwrap_err().to_string();
        assert!(
            err.contains("\"llama\"") && err.contains("not supported yet"),
            "{err}"
        );
        let pre = GgufTokenizerSpec {
            pre: Some("deepseek-llm".into()),
            ..spec()
        };
        let err = tokenizer_from_gguf(&pre).unwrap_err().to_string();
        assert!(err.contains("\"deepseek-llm\""), "{err}");
    }

    #[test]
    fn merges_split_at_the_first_inner_space() {
        assert_eq!(split_merge("a b").unwrap(), ("a".into(), "b".into()));
        assert_eq!(split_merge("  x").unwrap(), (" ".into(), "x".into()));
        assert!(split_merge("ab").is_err());
    }
}

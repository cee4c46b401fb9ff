//! A HF `tokenizer.json` tokenizer with the special tokens of its `tokenizer_config.json`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Result};

use crate::config::TokenizerConfig;

/// A special token: its text and, when the vocabulary has it, its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    /// The token's text, e.g. `<|im_end|>`.
    pub text: String,
    /// Its id in the vocabulary (`None` if the vocabulary lacks it).
    pub id: Option<u32>,
}

/// The special tokens named by `tokenizer_config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    /// Beginning of sequence (Qwen has none).
    pub bos: Option<SpecialToken>,
    /// End of sequence / end of turn.
    pub eos: Option<SpecialToken>,
    /// Padding.
    pub pad: Option<SpecialToken>,
    /// Unknown token.
    pub unk: Option<SpecialToken>,
}

/// A tokenizer loaded from a HF `tokenizer.json`; cheap to clone (shared inside).
#[derive(Clone)]
pub struct Tokenizer {
    inner: Arc<tokenizers::Tokenizer>,
    special: SpecialTokens,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("special", &self.special)
            .finish()
    }
}

impl Tokenizer {
    /// Loads a `tokenizer.json`; no special tokens are known without a config.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(anyhow!("tokenizer file {} not found", path.display()));
        }
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| anyhow!("cannot load tokenizer {}: {e}", path.display()))?;
        Ok(Self {
            inner: Arc::new(inner),
            special: SpecialTokens::default(),
        })
    }

    /// Loads `dir/tokenizer.json` and, when present, the special tokens of
    /// `dir/tokenizer_config.json`.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let tokenizer = Self::from_file(dir.join("tokenizer.json"))?;
        let config = TokenizerConfig::from_dir_or_default(dir)?;
        Ok(tokenizer.with_config(&config))
    }

    /// Takes the special tokens from a parsed `tokenizer_config.json`.
    pub fn with_config(mut self, config: &TokenizerConfig) -> Self {
        let special = |text: &Option<String>| {
            text.as_ref().map(|t| SpecialToken {
                text: t.clone(),
                id: self.inner.token_to_id(t),
            })
        };
        self.special = SpecialTokens {
            bos: special(&config.bos_token),
            eos: special(&config.eos_token),
            pad: special(&config.pad_token),
            unk: special(&config.unk_token),
        };
        self
    }

    /// Sets the special tokens directly (GGUF metadata names them by id, not by config).
    pub(crate) fn with_special_tokens(mut self, special: SpecialTokens) -> Self {
        self.special = special;
        self
    }

    /// Token ids of `text`; `add_special_tokens` applies the post-processor (BOS etc.).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| anyhow!("cannot encode text: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`; `skip_special_tokens` drops tokens marked special (e.g. `<|im_end|>`).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special_tokens)
            .map_err(|e| anyhow!("cannot decode ids: {e}"))
    }

    /// The id of a token (added tokens included).
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token string of an id (added tokens included).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The special tokens from `tokenizer_config.json`.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

impl From<tokenizers::Tokenizer> for Tokenizer {
    fn from(inner: tokenizers::Tokenizer) -> Self {
        Self {
            inner: Arc::new(inner),
            special: SpecialTokens::default(),
        }
    }
}

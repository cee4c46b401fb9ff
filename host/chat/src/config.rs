//! Reading `tokenizer_config.json`: special tokens and chat templates.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

/// The parts of a HF `tokenizer_config.json` that this crate uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenizerConfig {
    /// `bos_token`, when set.
    pub bos_token: Option<String>,
    /// `eos_token`, when set.
    pub eos_token: Option<String>,
    /// `pad_token`, when set.
    pub pad_token: Option<String>,
    /// `unk_token`, when set.
    pub unk_token: Option<String>,
    /// `model_max_length`, when an integer (the tokenizer's idea of the context length).
    pub model_max_length: Option<u64>,
    /// Chat templates by name; a single `chat_template` string is stored as `"default"`.
    pub chat_templates: Vec<(String, String)>,
}

impl TokenizerConfig {
    /// Reads a `tokenizer_config.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow!("cannot read tokenizer config {}: {e}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| anyhow!("invalid tokenizer config {}: {e}", path.display()))?;
        Self::from_json(&json).with_context(|| format!("tokenizer config {}", path.display()))
    }

    /// Reads `dir/tokenizer_config.json` when it exists, otherwise returns an empty config.
    pub fn from_dir_or_default(dir: impl AsRef<Path>) -> Result<Self> {
        let path = dir.as_ref().join("tokenizer_config.json");
        if path.exists() {
            Self::from_file(&path)
        } else {
            Ok(Self::default())
        }
    }

    /// Extracts the config from parsed JSON.
    pub fn from_json(json: &Value) -> Result<Self> {
        let obj = json
            .as_object()
            .ok_or_else(|| anyhow!("expected a JSON object"))?;
        let chat_templates = match obj.get("chat_template") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![("default".to_owned(), s.clone())],
            // transformers saves several templates as [{"name": ..., "template": ...}].
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    let name = item.get("name").and_then(Value::as_str);
                    let template = item.get("template").and_then(Value::as_str);
                    match (name, template) {
                        (Some(n), Some(t)) => Ok((n.to_owned(), t.to_owned())),
                        _ => Err(anyhow!(
                            "chat_template list entries need string `name` and `template`"
                        )),
                    }
                })
                .collect::<Result<_>>()?,
            Some(other) => {
                return Err(anyhow!(
                    "chat_template must be a string or a list, not {other}"
                ))
            }
        };
        Ok(Self {
            bos_token: token_field(obj.get("bos_token"))?,
            eos_token: token_field(obj.get("eos_token"))?,
            pad_token: token_field(obj.get("pad_token"))?,
            unk_token: token_field(obj.get("unk_token"))?,
            // Some configs write a huge float for "no limit"; only integers count.
            model_max_length: obj.get("model_max_length").and_then(Value::as_u64),
            chat_templates,
        })
    }

    /// The template named `name`, if any.
    pub fn chat_template(&self, name: &str) -> Option<&str> {
        self.chat_templates
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }
}

/// A special token is a string or an `{"content": ...}` object (an AddedToken).
fn token_field(value: Option<&Value>) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Object(o)) => match o.get("content") {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            _ => Err(anyhow!("special token object without a string `content`")),
        },
        Some(other) => Err(anyhow!(
            "special token must be a string or object, not {other}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_as_strings_or_objects() {
        let c = TokenizerConfig::from_json(&json!({
            "eos_token": "<|im_end|>",
            "pad_token": {"content": "<pad>", "lstrip": false},
            "bos_token": null,
        }))
        .unwrap();
        assert_eq!(c.eos_token.as_deref(), Some("<|im_end|>"));
        assert_eq!(c.pad_token.as_deref(), Some("<pad>"));
        assert_eq!(c.bos_token, None);
        assert_eq!(c.unk_token, None);
        assert_eq!(c.model_max_length, None);
        let c = TokenizerConfig::from_json(&json!({"model_max_length": 131072})).unwrap();
        assert_eq!(c.model_max_length, Some(131072));
    }

    #[test]
    fn named_templates() {
        let c = TokenizerConfig::from_json(&json!({
            "chat_template": [
                {"name": "default", "template": "A"},
                {"name": "tool_use", "template": "B"},
            ]
        }))
        .unwrap();
        assert_eq!(c.chat_template("default"), Some("A"));
        assert_eq!(c.chat_template("tool_use"), Some("B"));
        let single = TokenizerConfig::from_json(&json!({"chat_template": "X"})).unwrap();
        assert_eq!(single.chat_template("default"), Some("X"));
    }

    #[test]
    fn bad_token_is_an_error() {
        assert!(TokenizerConfig::from_json(&json!({"eos_token": 3})).is_err());
        assert!(TokenizerConfig::from_json(&json!([1])).is_err());
    }
}

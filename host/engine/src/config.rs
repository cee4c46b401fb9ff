//! The model configuration, read from (and written as) a Hugging Face `config.json`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

/// The architectures the engine can build, named as in `config.json`'s `architectures`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Architecture {
    /// Qwen3 decoder with a language-model head.
    Qwen3ForCausalLM,
    /// Qwen3 decoder with a `score` head read at the last non-padding token.
    Qwen3ForSequenceClassification,
    /// Qwen2 decoder (q/k/v bias, no q/k norm) with a language-model head.
    Qwen2ForCausalLM,
    /// Llama decoder (no q/k norm, optional attention bias) with a language-model head.
    LlamaForCausalLM,
}

impl Architecture {
    /// Every supported architecture, for error messages.
    pub const ALL: [Architecture; 4] = [
        Architecture::Qwen3ForCausalLM,
        Architecture::Qwen3ForSequenceClassification,
        Architecture::Qwen2ForCausalLM,
        Architecture::LlamaForCausalLM,
    ];

    /// The name used in `config.json`.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Qwen3ForCausalLM => "Qwen3ForCausalLM",
            Architecture::Qwen3ForSequenceClassification => "Qwen3ForSequenceClassification",
            Architecture::Qwen2ForCausalLM => "Qwen2ForCausalLM",
            Architecture::LlamaForCausalLM => "LlamaForCausalLM",
        }
    }

    /// Parses a `config.json` architecture name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The `model_type` transformers expects for this architecture.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Qwen2ForCausalLM => "qwen2",
            Architecture::LlamaForCausalLM => "llama",
            _ => "qwen3",
        }
    }

    /// Whether the model ends in a classification head instead of a language-model head.
    pub fn is_classifier(self) -> bool {
        matches!(self, Architecture::Qwen3ForSequenceClassification)
    }
}

/// Which optional pieces an attention layer has; the switch that separates Qwen3, Qwen2 and
/// Llama.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionFlags {
    /// Per-head RMSNorm on queries and keys before RoPE (Qwen3).
    pub qk_norm: bool,
    /// Bias on the q/k/v projections.
    pub qkv_bias: bool,
    /// Bias on the output projection.
    pub o_bias: bool,
}

/// A validated model configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The architecture to build.
    pub architecture: Architecture,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Number of query heads.
    pub num_attention_heads: usize,
    /// Number of key/value heads (grouped-query attention when fewer than query heads).
    pub num_key_value_heads: usize,
    /// Width of one attention head.
    pub head_dim: usize,
    /// Epsilon of every RMSNorm.
    pub rms_norm_eps: f64,
    /// RoPE base frequency.
    pub rope_theta: f64,
    /// Longest sequence (prompt + generated tokens) the model accepts.
    pub max_position_embeddings: usize,
    /// Whether the language-model head reuses the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Optional attention pieces.
    pub attention: AttentionFlags,
    /// Standard deviation of the random initialisation.
    pub initializer_range: f64,
    /// Number of classes of a sequence-classification head.
    pub num_labels: usize,
    /// Padding token id; the classifier reads the last token that is not this one.
    pub pad_token_id: Option<u32>,
    /// The original `config.json` object, so saving keeps keys this struct does not model.
    pub raw: Map<String, Value>,
}

fn get_usize(obj: &Map<String, Value>, key: &str) -> Result<Option<usize>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(n as usize))
            .with_context(|| format!("`{key}` must be a non-negative integer, found {v}")),
    }
}

fn get_f64(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .with_context(|| format!("`{key}` must be a number, found {v}")),
    }
}

fn get_bool(obj: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_bool()
            .map(Some)
            .with_context(|| format!("`{key}` must be true or false, found {v}")),
    }
}

fn require_usize(obj: &Map<String, Value>, key: &str) -> Result<usize> {
    get_usize(obj, key)?.with_context(|| format!("missing required key `{key}`"))
}

/// Reads a RoPE type and theta from either the transformers 4 (`rope_theta`, `rope_scaling`) or
/// the transformers 5 (`rope_parameters`) spelling.
fn rope_settings(obj: &Map<String, Value>) -> Result<f64> {
    let mut theta = get_f64(obj, "rope_theta")?;
    let mut kinds = Vec::new();
    for key in ["rope_scaling", "rope_parameters"] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Object(p)) => {
                if let Some(t) = get_f64(p, "rope_theta")? {
                    theta = Some(t);
                }
                let kind = p.get("rope_type").or_else(|| p.get("type"));
                if let Some(kind) = kind {
                    kinds.push(kind.as_str().unwrap_or_default().to_string());
                }
            }
            Some(v) => bail!("`{key}` must be an object or null, found {v}"),
        }
    }
    if let Some(kind) = kinds.iter().find(|k| k.as_str() != "default") {
        bail!("unsupported RoPE scaling type `{kind}` (only the default RoPE is implemented)");
    }
    // transformers' Qwen2/Qwen3 configs default to 10000 when the file says nothing.
    Ok(theta.unwrap_or(10_000.0))
}

impl ModelConfig {
    /// Reads and validates `config.json` from a model directory or a file path.
    pub fn from_path(path: &Path) -> Result<Self> {
        let file = if path.is_dir() {
            path.join("config.json")
        } else {
            path.to_path_buf()
        };
        if !file.is_file() {
            bail!("missing config.json: {} does not exist", file.display());
        }
        let text = std::fs::read_to_string(&file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        Self::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
    }

    /// Parses and validates the text of a `config.json`.
    pub fn from_json_str(text: &str) -> Result<Self> {
        Self::parse(text).map_err(|e| anyhow::anyhow!("config.json: {e}"))
    }

    fn parse(text: &str) -> Result<Self> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| anyhow::anyhow!("not valid JSON: {e}"))?;
        let Value::Object(obj) = value else {
            bail!("must hold a JSON object");
        };
        Self::from_json(obj)
    }

    /// Validates a parsed `config.json` object.
    pub fn from_json(obj: Map<String, Value>) -> Result<Self> {
        let names: Vec<String> = match obj.get("architectures") {
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        };
        // Some Llama exports carry only `model_type`; it names the architecture unambiguously.
        let by_type = match obj.get("model_type").and_then(|v| v.as_str()) {
            Some("llama") => Some(Architecture::LlamaForCausalLM.name().to_string()),
            _ => None,
        };
        let Some(first) = names.first().or(by_type.as_ref()) else {
            bail!(
                "missing `architectures` (expected one of {})",
                supported_names()
            );
        };
        let architecture = Architecture::from_name(first).with_context(|| {
            format!(
                "unsupported architecture `{first}` (supported: {})",
                supported_names()
            )
        })?;

        if let Some(act) = obj.get("hidden_act").and_then(|v| v.as_str()) {
            if act != "silu" {
                bail!("unsupported hidden_act `{act}` (only silu)");
            }
        }
        if get_bool(&obj, "use_sliding_window")?.unwrap_or(false) {
            bail!("use_sliding_window=true is not supported");
        }
        if get_bool(&obj, "mlp_bias")?.unwrap_or(false) {
            bail!("mlp_bias=true is not supported");
        }

        let hidden_size = require_usize(&obj, "hidden_size")?;
        let num_attention_heads = require_usize(&obj, "num_attention_heads")?;
        let num_key_value_heads =
            get_usize(&obj, "num_key_value_heads")?.unwrap_or(num_attention_heads);
        if num_attention_heads == 0 {
            bail!("num_attention_heads must be positive");
        }
        // transformers' Qwen3Config defaults head_dim to 128; Qwen2 and Llama derive it from the
        // width.
        let default_head_dim = match architecture {
            Architecture::Qwen2ForCausalLM | Architecture::LlamaForCausalLM => {
                hidden_size / num_attention_heads
            }
            _ => 128,
        };
        let head_dim = get_usize(&obj, "head_dim")?.unwrap_or(default_head_dim);
        let attention_bias = get_bool(&obj, "attention_bias")?.unwrap_or(false);
        let attention = match architecture {
            // Qwen2 always has q/k/v bias and never an output bias.
            Architecture::Qwen2ForCausalLM => AttentionFlags {
                qk_norm: false,
                qkv_bias: true,
                o_bias: false,
            },
            // Llama's `attention_bias` covers all four projections, as in Qwen3, but there is no
            // q/k norm.
            Architecture::LlamaForCausalLM => AttentionFlags {
                qk_norm: false,
                qkv_bias: attention_bias,
                o_bias: attention_bias,
            },
            _ => AttentionFlags {
                qk_norm: true,
                qkv_bias: attention_bias,
                o_bias: attention_bias,
            },
        };
        let num_labels = match get_usize(&obj, "num_labels")? {
            Some(n) => n,
            None => match obj.get("id2label") {
                Some(Value::Object(m)) => m.len(),
                _ => 2,
            },
        };
        let pad_token_id = get_usize(&obj, "pad_token_id")?.map(|v| v as u32);

        let cfg = ModelConfig {
            architecture,
            vocab_size: require_usize(&obj, "vocab_size")?,
            hidden_size,
            intermediate_size: require_usize(&obj, "intermediate_size")?,
            num_hidden_layers: require_usize(&obj, "num_hidden_layers")?,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps: get_f64(&obj, "rms_norm_eps")?.unwrap_or(1e-6),
            rope_theta: rope_settings(&obj)?,
            max_position_embeddings: get_usize(&obj, "max_position_embeddings")?.unwrap_or(32_768),
            tie_word_embeddings: get_bool(&obj, "tie_word_embeddings")?.unwrap_or(false),
            attention,
            initializer_range: get_f64(&obj, "initializer_range")?.unwrap_or(0.02),
            num_labels,
            pad_token_id,
            raw: obj,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// A Qwen3 causal LM configuration with the given sizes and transformers' defaults elsewhere.
    #[allow(clippy::too_many_arguments)]
    pub fn qwen3(
        vocab_size: usize,
        hidden_size: usize,
        intermediate_size: usize,
        num_hidden_layers: usize,
        num_attention_heads: usize,
        num_key_value_heads: usize,
        head_dim: usize,
        tie_word_embeddings: bool,
    ) -> Self {
        ModelConfig {
            architecture: Architecture::Qwen3ForCausalLM,
            vocab_size,
            hidden_size,
            intermediate_size,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            head_dim,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            max_position_embeddings: 4096,
            tie_word_embeddings,
            attention: AttentionFlags {
                qk_norm: true,
                qkv_bias: false,
                o_bias: false,
            },
            initializer_range: 0.02,
            num_labels: 2,
            pad_token_id: None,
            raw: Map::new(),
        }
    }

    /// Checks the sizes are consistent.
    pub fn validate(&self) -> Result<()> {
        for (key, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("max_position_embeddings", self.max_position_embeddings),
        ] {
            if v == 0 {
                bail!("`{key}` must be positive");
            }
        }
        if !self
            .num_attention_heads
            .is_multiple_of(self.num_key_value_heads)
        {
            bail!(
                "num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                self.num_attention_heads,
                self.num_key_value_heads
            );
        }
        if !self.head_dim.is_multiple_of(2) {
            bail!("head_dim ({}) must be even for RoPE", self.head_dim);
        }
        if self.architecture.is_classifier() && self.num_labels == 0 {
            bail!("a sequence classifier needs num_labels > 0");
        }
        Ok(())
    }

    /// Query heads per key/value head.
    pub fn group_size(&self) -> usize {
        self.num_attention_heads / self.num_key_value_heads
    }

    /// The `config.json` object describing this configuration (original extra keys kept).
    pub fn to_json(&self) -> Value {
        let mut obj = self.raw.clone();
        // Drop the spellings this struct replaces so the file has exactly one RoPE setting.
        for key in ["rope_scaling", "rope_parameters", "num_labels"] {
            obj.remove(key);
        }
        let set = |obj: &mut Map<String, Value>, k: &str, v: Value| {
            obj.insert(k.to_string(), v);
        };
        set(&mut obj, "architectures", json!([self.architecture.name()]));
        set(
            &mut obj,
            "model_type",
            json!(self.architecture.model_type()),
        );
        set(&mut obj, "vocab_size", json!(self.vocab_size));
        set(&mut obj, "hidden_size", json!(self.hidden_size));
        set(&mut obj, "intermediate_size", json!(self.intermediate_size));
        set(&mut obj, "num_hidden_layers", json!(self.num_hidden_layers));
        set(
            &mut obj,
            "num_attention_heads",
            json!(self.num_attention_heads),
        );
        set(
            &mut obj,
            "num_key_value_heads",
            json!(self.num_key_value_heads),
        );
        set(&mut obj, "head_dim", json!(self.head_dim));
        set(&mut obj, "rms_norm_eps", json!(self.rms_norm_eps));
        set(&mut obj, "rope_theta", json!(self.rope_theta));
        set(
            &mut obj,
            "max_position_embeddings",
            json!(self.max_position_embeddings),
        );
        set(
            &mut obj,
            "tie_word_embeddings",
            json!(self.tie_word_embeddings),
        );
        set(&mut obj, "initializer_range", json!(self.initializer_range));
        set(&mut obj, "hidden_act", json!("silu"));
        if self.architecture != Architecture::Qwen2ForCausalLM {
            set(&mut obj, "attention_bias", json!(self.attention.qkv_bias));
        }
        let labels_match =
            matches!(obj.get("id2label"), Some(Value::Object(m)) if m.len() == self.num_labels);
        if self.architecture.is_classifier() && !labels_match {
            let labels: Map<String, Value> = (0..self.num_labels)
                .map(|i| (i.to_string(), json!(format!("LABEL_{i}"))))
                .collect();
            let ids: Map<String, Value> = (0..self.num_labels)
                .map(|i| (format!("LABEL_{i}"), json!(i)))
                .collect();
            set(&mut obj, "id2label", Value::Object(labels));
            set(&mut obj, "label2id", Value::Object(ids));
        }
        match self.pad_token_id {
            Some(id) => set(&mut obj, "pad_token_id", json!(id)),
            None => {
                obj.remove("pad_token_id");
            }
        }
        Value::Object(obj)
    }
}

fn supported_names() -> String {
    Architecture::ALL
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": 32, "hidden_size": 16, "intermediate_size": 24,
            "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 8
        })
    }

    #[test]
    fn defaults_follow_transformers() {
        let cfg = ModelConfig::from_json_str(&base().to_string()).unwrap();
        assert_eq!(cfg.rope_theta, 10_000.0);
        assert!(!cfg.tie_word_embeddings);
        assert_eq!(cfg.rms_norm_eps, 1e-6);
        assert!(cfg.attention.qk_norm && !cfg.attention.qkv_bias);
        assert_eq!(cfg.group_size(), 2);
    }

    #[test]
    fn rope_parameters_spelling_is_read() {
        let mut v = base();
        v["rope_parameters"] = json!({"rope_theta": 1000000.0, "rope_type": "default"});
        let cfg = ModelConfig::from_json_str(&v.to_string()).unwrap();
        assert_eq!(cfg.rope_theta, 1e6);
        let mut v = base();
        v["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
        let err = ModelConfig::from_json_str(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("yarn"), "{err}");
    }

    #[test]
    fn unsupported_architecture_is_named() {
        let mut v = base();
        v["architectures"] = json!(["MistralForCausalLM"]);
        let err = ModelConfig::from_json_str(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unsupported architecture `MistralForCausalLM`"),
            "{err}"
        );
    }

    #[test]
    fn llama_is_parsed_without_qk_norm() {
        let v = json!({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": 32, "hidden_size": 16, "intermediate_size": 24,
            "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "tie_word_embeddings": true
        });
        let cfg = ModelConfig::from_json_str(&v.to_string()).unwrap();
        assert_eq!(cfg.architecture, Architecture::LlamaForCausalLM);
        assert_eq!(cfg.head_dim, 4, "head_dim defaults to hidden / heads");
        assert_eq!((cfg.rms_norm_eps, cfg.rope_theta), (1e-5, 1e5));
        assert!(cfg.tie_word_embeddings);
        assert!(!cfg.attention.qk_norm && !cfg.attention.qkv_bias && !cfg.attention.o_bias);
        let again = ModelConfig::from_json_str(&cfg.to_json().to_string()).unwrap();
        assert_eq!(again.to_json()["model_type"], json!("llama"));
        assert_eq!(again.attention, cfg.attention);

        // `model_type` alone is enough; attention_bias switches on every projection's bias.
        let mut v = v;
        v.as_object_mut().unwrap().remove("architectures");
        v["attention_bias"] = json!(true);
        let cfg = ModelConfig::from_json_str(&v.to_string()).unwrap();
        assert_eq!(cfg.architecture, Architecture::LlamaForCausalLM);
        assert!(cfg.attention.qkv_bias && cfg.attention.o_bias);
    }

    #[test]
    fn bad_head_split_is_rejected() {
        let mut v = base();
        v["num_key_value_heads"] = json!(3);
        let err = ModelConfig::from_json_str(&v.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("multiple of num_key_value_heads"), "{err}");
    }

    #[test]
    fn json_round_trips() {
        let mut v = base();
        v["custom_key"] = json!("kept");
        v["architectures"] = json!(["Qwen3ForSequenceClassification"]);
        v["pad_token_id"] = json!(0);
        v["id2label"] = json!({"0": "bad", "1": "good", "2": "meh"});
        let cfg = ModelConfig::from_json_str(&v.to_string()).unwrap();
        assert_eq!(cfg.num_labels, 3);
        let again = ModelConfig::from_json_str(&cfg.to_json().to_string()).unwrap();
        assert_eq!(again.raw["custom_key"], json!("kept"));
        assert_eq!(again.raw["id2label"]["1"], json!("good"));
        assert_eq!(again.num_labels, 3);
        assert_eq!(again.pad_token_id, Some(0));
        assert_eq!(again.architecture, cfg.architecture);
    }
}

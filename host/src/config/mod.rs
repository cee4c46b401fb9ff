//! The run configuration: defaults, the plugin's suggestions, a TOML file, environment
//! variables and flags, in rising priority, validated once with errors that name the key, the
//! bad value and where it came from.

pub mod keys;
mod render;
mod resolve;

pub use render::render;
pub use resolve::{resolve, ConfigInputs, PluginConfigs, Resolved, Source};

use serde::Deserialize;

/// Every run setting, typed. Field names are the keys of [`keys::KEYS`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // each field is documented by its help line in keys::KEYS
pub struct RunConfig {
    pub plugin: String,
    pub custom_loss_function_path: String,
    pub custom_rm_path: String,
    pub rollout_function_path: String,
    pub custom_generate_function_path: String,
    pub model_path: String,
    pub judge_model_path: String,
    pub prm_model_path: String,
    pub judge_endpoint: String,
    pub judge_api_key: String,
    pub judge_model: String,
    pub data_path: String,
    pub backend: String,
    pub train_gpus: String,
    pub rollout_gpus: String,
    pub seed: u64,
    pub host: String,
    pub port: u16,
    pub api_key: String,
    pub served_model_name: String,
    pub enable_rl_intercept: bool,
    pub max_body_bytes: u64,
    pub max_batch_size: u32,
    pub max_inflight: u32,
    pub default_max_tokens: u32,
    pub max_sessions: u32,
    pub default_turn_type: String,
    pub session_idle_timeout: u64,
    pub rl_buffer_dir: String,
    pub fsync_interval_ms: u64,
    pub majority_vote_n: u32,
    pub majority_vote_threshold: f64,
    pub num_judge_workers: u32,
    pub judge_temperature: f32,
    pub judge_max_tokens: u32,
    pub judge_timeout: u64,
    pub teacher: String,
    pub distill_topk: u32,
    pub batch_timeout: u64,
    pub rollout_batch_size: u32,
    pub num_rollouts_per_prompt: u32,
    pub max_staleness: u64,
    pub stale_policy: String,
    pub update_weights_interval: u32,
    pub max_steps: u64,
    pub simulate_users: u32,
    pub max_tokens_per_batch: u32,
    pub lr: f64,
    pub lr_schedule: String,
    pub lr_warmup_steps: u32,
    pub min_lr: f64,
    pub weight_decay: f64,
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_eps: f64,
    pub max_grad_norm: f64,
    pub offload_optimizer_state: bool,
    pub use_lora: bool,
    pub lora_rank: u32,
    pub lora_alpha: f64,
    pub lora_dropout: f64,
    pub lora_target_modules: String,
    pub save_dir: String,
    pub save_interval: u32,
    pub keep_checkpoints: u32,
    pub resume_from_checkpoint: String,
    pub log_dir: String,
}

/// A rule a valid configuration keeps: the key it is about, and a check that returns what is
/// wrong.
type Rule = (&'static str, fn(&RunConfig) -> Option<String>);

/// `must be > 0` unless `x` is a positive finite number (NaN included).
fn positive(x: f64) -> Option<String> {
    (x.is_nan() || x <= 0.0 || x.is_infinite()).then(|| "must be > 0".into())
}

/// `must be >= 0` unless `x` is a finite number at least 0 (NaN included).
fn non_negative(x: f64) -> Option<String> {
    (x.is_nan() || x < 0.0 || x.is_infinite()).then(|| "must be >= 0".into())
}

fn one_of(v: &str, allowed: &[&str]) -> Option<String> {
    (!allowed.contains(&v)).then(|| format!("must be one of {}", allowed.join(", ")))
}

const RULES: &[Rule] = &[
    ("backend", |c| {
        one_of(&c.backend, &["embedded", "sglang", "vllm"])
    }),
    ("default_turn_type", |c| {
        one_of(&c.default_turn_type, &["main", "side"])
    }),
    ("teacher", |c| one_of(&c.teacher, &["frozen", "current"])),
    ("stale_policy", |c| {
        one_of(&c.stale_policy, &["drop", "correct"])
    }),
    ("lr_schedule", |c| {
        one_of(&c.lr_schedule, &["constant", "warmup", "cosine"])
    }),
    ("port", |c| {
        (c.port == 0).then(|| "must be 1 to 65535".into())
    }),
    ("majority_vote_n", |c| {
        (c.majority_vote_n == 0).then(|| "must be at least 1".into())
    }),
    ("majority_vote_threshold", |c| {
        (!(c.majority_vote_threshold > 0.0 && c.majority_vote_threshold <= 1.0))
            .then(|| "must be in (0, 1]".into())
    }),
    ("num_judge_workers", |c| {
        (c.num_judge_workers == 0).then(|| "must be at least 1".into())
    }),
    ("judge_temperature", |c| {
        (!(c.judge_temperature >= 0.0 && c.judge_temperature.is_finite()))
            .then(|| "must be >= 0".into())
    }),
    ("judge_timeout", |c| {
        (c.judge_timeout == 0).then(|| "must be at least 1 second".into())
    }),
    ("rollout_batch_size", |c| {
        (c.rollout_batch_size == 0).then(|| "must be at least 1".into())
    }),
    ("num_rollouts_per_prompt", |c| {
        (c.num_rollouts_per_prompt == 0).then(|| "must be at least 1".into())
    }),
    ("update_weights_interval", |c| {
        (c.update_weights_interval == 0).then(|| "must be at least 1".into())
    }),
    ("max_tokens_per_batch", |c| {
        (c.max_tokens_per_batch == 0).then(|| "must be at least 1".into())
    }),
    ("lr", |c| positive(c.lr)),
    ("min_lr", |c| {
        (!(c.min_lr >= 0.0 && c.min_lr <= c.lr)).then(|| "must be in [0, lr]".into())
    }),
    ("weight_decay", |c| non_negative(c.weight_decay)),
    ("adam_beta1", |c| {
        (!(0.0..1.0).contains(&c.adam_beta1)).then(|| "must be in [0, 1)".into())
    }),
    ("adam_beta2", |c| {
        (!(0.0..1.0).contains(&c.adam_beta2)).then(|| "must be in [0, 1)".into())
    }),
    ("adam_eps", |c| positive(c.adam_eps)),
    ("max_grad_norm", |c| non_negative(c.max_grad_norm)),
    ("lora_rank", |c| {
        (c.use_lora && c.lora_rank == 0).then(|| "must be at least 1 with use_lora".into())
    }),
    ("lora_alpha", |c| positive(c.lora_alpha)),
    ("lora_dropout", |c| {
        (!(0.0..1.0).contains(&c.lora_dropout)).then(|| "must be in [0, 1)".into())
    }),
    ("lora_target_modules", |c| {
        const KNOWN: [&str; 7] = [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ];
        c.lora_target_modules
            .split(',')
            .map(str::trim)
            .find(|m| !KNOWN.contains(m))
            .map(|m| format!("names unknown module `{m}` (known: {})", KNOWN.join(", ")))
    }),
    ("keep_checkpoints", |c| {
        (c.keep_checkpoints == 0).then(|| "must be at least 1".into())
    }),
    ("max_batch_size", |c| {
        (c.max_batch_size == 0).then(|| "must be at least 1".into())
    }),
    ("max_inflight", |c| {
        (c.max_inflight == 0).then(|| "must be at least 1".into())
    }),
    ("default_max_tokens", |c| {
        (c.default_max_tokens == 0).then(|| "must be at least 1".into())
    }),
    ("max_sessions", |c| {
        (c.max_sessions == 0).then(|| "must be at least 1".into())
    }),
    ("max_body_bytes", |c| {
        (c.max_body_bytes < 1024).then(|| "must be at least 1024".into())
    }),
];

impl RunConfig {
    /// Checks every rule; the first broken one is returned with its key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (key, rule) in RULES {
            if let Some(problem) = rule(self) {
                return Err((key, problem));
            }
        }
        Ok(())
    }
}

//! The run configuration: defaults, the plugin's suggestions, a TOML file, environment
//! variables and flags, in rising priority, validated once with errors that name the key, the
//! bad value and where it came from.
//!
//! Also where a run's parts go ([`backend`]) and who may call its servers ([`access`]).

pub mod access;
pub mod backend;
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
    /// `self` or `rule`: the judge when no judge model or endpoint is named.
    pub judge: String,
    pub data_path: String,
    pub backend: String,
    pub train_gpus: String,
    pub rollout_gpus: String,
    /// Devices of the judge and reward models (`PRM_GPUS`).
    pub prm_gpus: String,
    pub seed: u64,
    pub host: String,
    pub port: u16,
    pub api_key: String,
    pub served_model_name: String,
    /// `--lora-modules`: `name=dir` pairs of adapters served over the model.
    pub lora_modules: String,
    /// `shared` or `per-user`.
    pub adapters: String,
    /// Per-user adapters' directory.
    pub adapters_dir: String,
    /// Per-user adapters held in memory at most.
    pub max_adapters_in_memory: u32,
    /// Keys that name a user.
    pub user_keys_file: String,
    pub enable_rl_intercept: bool,
    pub max_body_bytes: u64,
    pub max_batch_size: u32,
    pub max_inflight: u32,
    pub max_inflight_per_client: u32,
    pub request_body_timeout: u64,
    /// MiB of prompt-prefix keys and values kept for reuse (0: none).
    pub prefix_cache_mb: u32,
    pub default_max_tokens: u32,
    pub max_sessions: u32,
    pub default_turn_type: String,
    /// A pattern whose first group in a prompt is the session id (empty: none).
    pub session_id_pattern: String,
    pub session_idle_timeout: u64,
    pub rl_buffer_dir: String,
    pub fsync_interval_ms: u64,
    pub majority_vote_n: u32,
    pub majority_vote_threshold: f64,
    pub num_judge_workers: u32,
    pub judge_temperature: f32,
    pub judge_max_tokens: u32,
    pub judge_timeout: u64,
    /// Seconds of failed buffer writes after which `run` and `serve` stop (0: never).
    pub buffer_unwritable_timeout: u64,
    /// Seconds a loss, rollout or generate plugin call may take before training stops.
    pub plugin_timeout: u64,
    /// Seconds a stop waits for training and requests to finish.
    pub shutdown_grace: u64,
    pub max_failed_steps: u64,
    pub teacher: String,
    /// What explicit feedback does: `instead` of the judge's votes or `beside` them.
    pub feedback: String,
    pub distill_topk: u32,
    pub batch_timeout: u64,
    pub rollout_batch_size: u32,
    pub num_rollouts_per_prompt: u32,
    pub max_staleness: u64,
    pub stale_policy: String,
    pub update_weights_interval: u32,
    pub max_steps: u64,
    pub simulate_users: u32,
    /// Share of simulated requests with an explicit style instruction.
    pub simulate_requests: f64,
    /// What the simulated users prefer, one group per style.
    pub simulate_preferences: String,
    pub env: String,
    pub env_config: String,
    pub tools_config: String,
    /// The SWE environment's instances (`SWE_BENCH_PATH`).
    pub swe_bench_path: String,
    /// The GUI environment's driver (`SCREENSHOT_BACKEND`).
    pub screenshot_backend: String,
    pub env_pool_url: String,
    /// How to talk to the environment pools (`ENV_POOL_DIALECT`).
    pub env_pool_dialect: String,
    pub env_pool_api_key: String,
    pub env_split: String,
    pub parallel_envs: u32,
    pub max_episode_steps: u32,
    pub env_call_timeout: u64,
    pub prm_step_coef: f64,
    pub env_eval_interval: u64,
    pub env_eval_tasks: u32,
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
    pub allow_changed_data: bool,
    pub log_dir: String,
    pub tensorboard_dir: String,
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

/// Why a GPU list cannot be honoured: not a device list, or CUDA not compiled in (the engine's
/// parser says which, naming the variable). Placement itself is [`crate::backend`]'s.
fn gpus(var: &str, spec: &str) -> Option<String> {
    openclaw_engine::DeviceChoice::parse(var, spec)
        .err()
        .map(|e| e.to_string())
}

/// Keys that parse but that nothing honours yet: refused when set, never silently ignored.
/// Each is `(key, what a non-default value is refused with)`.
pub const NOT_YET: &[(&str, &str)] = &[
    (
        "offload_optimizer_state",
        "moving optimizer moments out of the training device's memory is not built yet (they stay beside the weights)",
    ),
];

/// The original's environment variables that nothing here reads, each with why and what to do
/// instead: refused when set, so a user of the original is not left believing they took effect.
pub const UNREAD_ENV: &[(&str, &str)] = &[
    (
        "TINKER_API_KEY",
        "Tinker (the original's hosted training service) is not used: this host trains on this machine and its GPUs (TRAIN_GPUS); unset it",
    ),
    (
        "TINKER_ENDPOINT",
        "Tinker (the original's hosted training service) is not used: this host trains on this machine and its GPUs (TRAIN_GPUS); unset it",
    ),
];

/// The original's flag-group variables. Its launch scripts pass them as flags, as ours do; set
/// in the shell of a bare `openclaw-host` command they are read as the same flags, just below
/// the command line's.
pub const FLAG_GROUPS: [&str; 4] = ["CKPT_ARGS", "ROLLOUT_ARGS", "OPTIMIZER_ARGS", "LORA_ARGS"];

/// Settings that only an environment run (`--env`) reads.
pub const ENV_ONLY: [&str; 13] = [
    "parallel_envs",
    "env_config",
    "tools_config",
    "swe_bench_path",
    "screenshot_backend",
    "env_pool_url",
    "env_pool_dialect",
    "env_pool_api_key",
    "env_split",
    "max_episode_steps",
    "env_call_timeout",
    "env_eval_interval",
    "env_eval_tasks",
];

/// The refusal of `key` when it is in [`NOT_YET`].
pub fn not_yet(key: &str) -> Option<String> {
    NOT_YET
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, why)| format!("not supported yet: {why}"))
}

/// The refusal of a Python file given where the original took one: plugins here are Rust
/// crates, and the scaffold of one (`name`, of `kind`) is one command away.
fn python_path(path: &str, name: &str, kind: &str) -> Option<String> {
    path.trim().ends_with(".py").then(|| {
        format!(
            "is a Python file; plugins here are Rust crates: `openclaw-host plugins new {name} --kind {kind}` scaffolds one to port it into, then give its directory"
        )
    })
}

const RULES: &[Rule] = &[
    ("plugin", |c| {
        python_path(&c.plugin, "my-method", "loss,reward")
    }),
    ("custom_loss_function_path", |c| {
        python_path(&c.custom_loss_function_path, "my-loss", "loss")
    }),
    ("custom_rm_path", |c| {
        python_path(&c.custom_rm_path, "my-reward", "reward")
    }),
    ("rollout_function_path", |c| {
        python_path(&c.rollout_function_path, "my-rollout", "rollout")
    }),
    ("custom_generate_function_path", |c| {
        python_path(&c.custom_generate_function_path, "my-generate", "generate")
    }),
    ("backend", |c| {
        one_of(&c.backend, &["embedded", "sglang", "vllm"]).or_else(|| {
            (c.backend != "embedded").then(|| {
                format!("`{}` is not available in this build (delegating serving to an external engine is not built yet); use embedded", c.backend)
            })
        })
    }),
    ("train_gpus", |c| gpus("TRAIN_GPUS", &c.train_gpus)),
    ("rollout_gpus", |c| gpus("ROLLOUT_GPUS", &c.rollout_gpus)),
    ("prm_gpus", |c| gpus("PRM_GPUS", &c.prm_gpus)),
    ("offload_optimizer_state", |c| {
        c.offload_optimizer_state
            .then(|| not_yet("offload_optimizer_state"))
            .flatten()
    }),
    ("default_turn_type", |c| {
        one_of(&c.default_turn_type, &["main", "side"])
    }),
    ("session_id_pattern", |c| {
        regex::Regex::new(&c.session_id_pattern)
            .err()
            .map(|e| format!("is not a regular expression: {e}"))
    }),
    ("teacher", |c| one_of(&c.teacher, &["frozen", "current"])),
    ("feedback", |c| one_of(&c.feedback, &["instead", "beside"])),
    ("adapters", |c| {
        one_of(&c.adapters, &["shared", "per-user"]).or_else(|| {
            let per_user = c.adapters == "per-user";
            if per_user && c.adapters_dir.is_empty() {
                Some("per-user needs --adapters-dir, the directory of the users' adapters".into())
            } else if per_user && !c.lora_modules.is_empty() {
                Some("per-user and --lora-modules both name adapters: give one".into())
            } else {
                None
            }
        })
    }),
    ("user_keys_file", |c| {
        (!c.user_keys_file.is_empty() && c.api_key.is_empty()).then(|| {
            "needs --api-key (OPENCLAW_API_KEY): without a server key anyone could issue user keys".into()
        })
    }),
    ("max_adapters_in_memory", |c| {
        (c.max_adapters_in_memory == 0).then(|| "must be at least 1".into())
    }),
    ("simulate_preferences", |c| {
        let styles: Vec<&str> = c.simulate_preferences.split(',').map(str::trim).collect();
        let known = styles.iter().all(|s| ["plain", "markdown"].contains(s));
        let distinct = styles
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len()
            == styles.len();
        (!known || !distinct)
            .then(|| "must be plain, markdown, or both, comma-separated, each once".into())
    }),
    ("simulate_requests", |c| {
        (!(0.0..=1.0).contains(&c.simulate_requests)).then(|| "must be in [0, 1]".into())
    }),
    ("judge", |c| {
        one_of(&c.judge, &["", "self", "rule"]).or_else(|| {
            let named = if !c.judge_model_path.is_empty() {
                "--judge-model-path (JUDGE_MODEL_PATH)"
            } else if !c.judge_endpoint.is_empty() {
                "--judge-endpoint (JUDGE_ENDPOINT)"
            } else {
                return None;
            };
            (!c.judge.is_empty())
                .then(|| format!("`{}` and {named} both name the judge: give one", c.judge))
        })
    }),
    ("judge_endpoint", |c| {
        (!c.judge_endpoint.is_empty() && !c.judge_model_path.is_empty()).then(|| {
            "and --judge-model-path (JUDGE_MODEL_PATH) both name the judge: give one (PRM_MODEL_PATH may name the outcome judge beside either)".into()
        })
    }),
    ("stale_policy", |c| {
        one_of(&c.stale_policy, &["drop", "correct"])
    }),
    ("lr_schedule", |c| {
        one_of(&c.lr_schedule, &["constant", "warmup", "cosine"])
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
    ("plugin_timeout", |c| {
        (c.plugin_timeout == 0).then(|| "must be at least 1 second".into())
    }),
    ("max_failed_steps", |c| {
        (c.max_failed_steps == 0).then(|| "must be at least 1".into())
    }),
    ("shutdown_grace", |c| {
        (c.shutdown_grace == 0).then(|| "must be at least 1 second".into())
    }),
    ("rollout_batch_size", |c| {
        (c.rollout_batch_size == 0).then(|| "must be at least 1".into())
    }),
    ("num_rollouts_per_prompt", |c| {
        let groups = !c.env.is_empty()
            || !c.custom_generate_function_path.is_empty()
            || !c.rollout_function_path.is_empty();
        match (c.num_rollouts_per_prompt, groups) {
            (0 | 1, false) | (0, true) => None,
            (_, false) => Some(
                "groups of rollouts per prompt are for environment episodes (--env / ENV_TYPE) \
                 and rollout or generate plugins; a live session gives one answer per turn (set \
                 it to 1)"
                    .into(),
            ),
            (1, true) if c.rollout_function_path.is_empty() => Some(
                "must be at least 2 with --env or a generate plugin: GRPO's advantage is an episode's reward against \
                 its group's mean, which a group of one does not have (8 is common)"
                    .into(),
            ),
            _ => None,
        }
    }),
    ("rollout_function_path", |c| {
        let other = if !c.env.is_empty() {
            "--env"
        } else if !c.custom_generate_function_path.is_empty() {
            "--custom-generate-function-path"
        } else {
            return None;
        };
        (!c.rollout_function_path.is_empty()).then(|| {
            format!(
                "a rollout plugin makes the run's batches itself, and {other} makes them too: choose one"
            )
        })
    }),
    ("custom_generate_function_path", |c| {
        if c.custom_generate_function_path.is_empty() {
            return None;
        }
        if !c.env.is_empty() {
            return Some(
                "a generate plugin makes trajectories for the prompts of --data-path; with --env the \
                 environment's episode loop does: choose one"
                    .into(),
            );
        }
        c.data_path
            .is_empty()
            .then(|| "needs --data-path: the prompts (a task file, JSONL) it generates for".into())
    }),
    ("env", |c| {
        // The environment's settings mean nothing without one (`resolve` names the one set and
        // where it came from; the keys are [`ENV_ONLY`]).
        let set: Vec<&str> = [
            ("env_config", !c.env_config.is_empty()),
            ("tools_config", !c.tools_config.is_empty()),
            ("swe_bench_path", !c.swe_bench_path.is_empty()),
            ("screenshot_backend", !c.screenshot_backend.is_empty()),
            ("env_pool_url", !c.env_pool_url.is_empty()),
            ("env_pool_dialect", c.env_pool_dialect != "auto"),
            ("env_pool_api_key", !c.env_pool_api_key.is_empty()),
            ("env_split", c.env_split != "train"),
            ("max_episode_steps", c.max_episode_steps != 16),
            ("env_call_timeout", c.env_call_timeout != 60),
            ("env_eval_interval", c.env_eval_interval != 0),
            ("env_eval_tasks", c.env_eval_tasks != 50),
        ]
        .into_iter()
        .filter_map(|(k, on)| on.then_some(k))
        .collect();
        (c.env.is_empty() && !set.is_empty()).then(|| {
            format!(
                "is empty, but {} only apply to an environment run: give --env (ENV_TYPE)",
                set.join(", ")
            )
        })
    }),
    ("env_pool_dialect", |c| {
        one_of(&c.env_pool_dialect, &["auto", "terminal", "swe", "gui"]).or_else(|| {
            (c.env_pool_dialect != "auto" && c.env_pool_url.is_empty()).then(|| {
                "says how to talk to environment pools, and env_pool_url names none".into()
            })
        })
    }),
    ("parallel_envs", |c| {
        (c.parallel_envs == 0).then(|| "must be at least 1".into())
    }),
    ("max_episode_steps", |c| {
        (c.max_episode_steps == 0).then(|| "must be at least 1".into())
    }),
    ("env_call_timeout", |c| {
        (c.env_call_timeout == 0).then(|| "must be at least 1 second".into())
    }),
    ("prm_step_coef", |c| {
        non_negative(c.prm_step_coef).or_else(|| {
            (c.prm_step_coef > 0.0 && c.env.is_empty()).then(|| {
                "step scores are for environment episodes (--env); a live turn is judged once"
                    .into()
            })
        })
    }),
    ("env_eval_tasks", |c| {
        (c.env_eval_tasks == 0).then(|| "must be at least 1".into())
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
        // The engine's list of the projections adapters can go on.
        const KNOWN: [&str; 7] = openclaw_engine::lora::TARGET_MODULES;
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
    ("max_inflight_per_client", |c| {
        (c.max_inflight_per_client == 0).then(|| "must be at least 1".into())
    }),
    ("request_body_timeout", |c| {
        (c.request_body_timeout == 0).then(|| "must be at least 1 second".into())
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

/// Episodes per task of `run --env` when `num_rollouts_per_prompt` is left at 0.
pub const DEFAULT_GROUP_SIZE: u32 = 8;

impl RunConfig {
    /// Episodes per task in a group: `num_rollouts_per_prompt`, or [`DEFAULT_GROUP_SIZE`] when
    /// it is 0.
    pub fn group_size(&self) -> u32 {
        match self.num_rollouts_per_prompt {
            0 => DEFAULT_GROUP_SIZE,
            n => n,
        }
    }

    /// Every setting at its default: no file, environment or flags.
    pub fn defaults() -> RunConfig {
        let none = ConfigInputs {
            file: None,
            flags: Vec::new(),
            sets: Vec::new(),
            env: Box::new(|_| None),
        };
        resolve(&none, &PluginConfigs::default())
            .expect("the defaults are valid")
            .config
    }

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

#[cfg(test)]
mod tests {
    use super::keys::KEYS;
    use super::*;
    use std::path::{Path, PathBuf};

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Whether `text` reads the field `key` of a run configuration: `cfg.key`, `config.key` or
    /// `c.key` (the names the host gives a `RunConfig`), not followed by more of an identifier.
    fn reads(text: &str, key: &str) -> bool {
        ["cfg", "config", "c"].iter().any(|recv| {
            let pat = format!("{recv}.{key}");
            text.match_indices(&pat).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                let after = text[i + pat.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            })
        })
    }

    fn resolve_with(key: &str, value: &str) -> anyhow::Result<Resolved> {
        let k = key.to_string();
        let v = value.to_string();
        resolve(
            &ConfigInputs {
                file: None,
                flags: vec![(k.clone(), v, format!("--{}", k.replace('_', "-")))],
                sets: Vec::new(),
                env: Box::new(|_| None),
            },
            &PluginConfigs::default(),
        )
    }

    /// GPU lists: refused by a rule in a build without CUDA.
    const GPU_LISTS: [(&str, &str); 3] = [
        ("train_gpus", "0"),
        ("rollout_gpus", "0"),
        ("prm_gpus", "1"),
    ];

    #[test]
    fn every_setting_has_a_reader_or_is_refused() {
        // Every crate of the host: the configuration's siblings read what it resolves.
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
            .canonicalize()
            .unwrap();
        let own = manifest.join("src");
        let host = manifest.parent().unwrap();
        let mut files = Vec::new();
        for krate in std::fs::read_dir(host).unwrap() {
            let src = krate.unwrap().path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        // Readers outside the configuration itself (which only parses and validates); where
        // the run's parts go is read here too.
        let texts: Vec<String> = files
            .iter()
            .filter(|p| !p.starts_with(&own) || p.ends_with("backend.rs"))
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        let mut unread = Vec::new();
        for k in KEYS {
            let refused = NOT_YET.iter().any(|(n, _)| *n == k.key);
            if !refused && !texts.iter().any(|t| reads(t, k.key)) {
                unread.push(k.key);
            }
        }
        assert!(
            unread.is_empty(),
            "settings nothing reads (wire them, or refuse them in NOT_YET): {unread:?}"
        );
    }

    #[test]
    fn settings_that_do_nothing_yet_are_refused_by_name() {
        for (key, value) in GPU_LISTS {
            let var = key.to_uppercase();
            if !cfg!(feature = "cuda") {
                let e = resolve_with(key, value).err().unwrap().to_string();
                assert!(e.contains(&format!("`{key}`")) && e.contains(&var), "{e}");
                assert!(e.contains("without the `cuda` feature"), "{e}");
            }
            let e = resolve_with(key, "gpu0").err().unwrap().to_string();
            assert!(e.contains(&var) && e.contains("not a GPU ordinal"), "{e}");
            resolve_with(key, "cpu").unwrap();
        }
        let e = resolve_with("offload_optimizer_state", "true")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("`offload_optimizer_state`") && e.contains("not supported yet"),
            "{e}"
        );
        resolve_with("num_rollouts_per_prompt", "1").unwrap();
        // An environment's settings without an environment.
        for (key, value) in [("max_episode_steps", "4"), ("env_split", "eval")] {
            let e = resolve_with(key, value).err().unwrap().to_string();
            assert!(
                e.starts_with(&format!("`{key}` = "))
                    && e.contains("applies only to an environment run: give --env"),
                "{e}"
            );
        }
        assert_eq!(RunConfig::defaults().group_size(), DEFAULT_GROUP_SIZE);
        // Groups are for environment episodes, and there they need two members at least.
        let e = resolve_with("num_rollouts_per_prompt", "4")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--env") && e.contains("set it to 1"), "{e}");
        let e = resolve_with("backend", "vllm").err().unwrap().to_string();
        assert!(e.contains("not available in this build"), "{e}");
        // Every NOT_YET key is a real key.
        for (key, _) in NOT_YET {
            assert!(KEYS.iter().any(|k| k.key == *key), "{key}");
        }
    }
}

//! Every run setting in one table: its key, type, default, environment variables and flag.
//! The resolver, the command line and the `config` printout are all driven by this table, so
//! a setting is added in one place (plus its field in [`RunConfig`](super::RunConfig)).

/// The type of a setting's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text.
    Str,
    /// A whole number.
    Int,
    /// A number.
    Float,
    /// true / false; as a flag, `--name` alone means true.
    Bool,
}

/// One setting.
#[derive(Clone, Copy, Debug)]
pub struct KeySpec {
    /// The key in run.toml and in the printout.
    pub key: &'static str,
    /// Its type.
    pub kind: Kind,
    /// The default, as a TOML literal.
    pub default: &'static str,
    /// Environment variables that set it, first wins.
    pub env: &'static [&'static str],
    /// The long flag, without dashes.
    pub flag: &'static str,
    /// Other spellings of the flag users of similar tools type.
    pub aliases: &'static [&'static str],
    /// Printed as `***` (API keys).
    pub secret: bool,
    /// One line of help.
    pub help: &'static str,
}

const fn key(
    key: &'static str,
    kind: Kind,
    default: &'static str,
    env: &'static [&'static str],
    flag: &'static str,
    help: &'static str,
) -> KeySpec {
    KeySpec {
        key,
        kind,
        default,
        env,
        flag,
        aliases: &[],
        secret: false,
        help,
    }
}

const fn aliased(mut k: KeySpec, aliases: &'static [&'static str]) -> KeySpec {
    k.aliases = aliases;
    k
}

const fn secret(mut k: KeySpec) -> KeySpec {
    k.secret = true;
    k
}

use Kind::*;

/// The headings settings are listed under (`--help`, `config`); each command offers the
/// groups it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The method's plugins.
    Method,
    /// The policy model, the data and where checkpoints are.
    Model,
    /// The OpenAI-compatible server, sessions and the buffer.
    Serving,
    /// Judges and teachers.
    Judging,
    /// Batches, staleness, the optimizer and LoRA.
    Training,
    /// Environment tracks.
    Environments,
    /// Devices.
    Scale,
    /// When checkpoints are written and resumed.
    Checkpoints,
    /// Logs and metrics files.
    Logs,
}

impl Group {
    /// Every group, in table order.
    pub const ALL: [Group; 9] = [
        Group::Method,
        Group::Model,
        Group::Serving,
        Group::Judging,
        Group::Training,
        Group::Environments,
        Group::Scale,
        Group::Checkpoints,
        Group::Logs,
    ];

    /// The heading.
    pub fn heading(self) -> &'static str {
        match self {
            Group::Method => "Method and plugins",
            Group::Model => "Model and data",
            Group::Serving => "Serving",
            Group::Judging => "Judging",
            Group::Training => "Training",
            Group::Environments => "Environments",
            Group::Scale => "Scale (devices)",
            Group::Checkpoints => "Checkpoints",
            Group::Logs => "Logs and metrics",
        }
    }

    /// The first key of the group in [`KEYS`] (a group runs to the next group's first key).
    fn first_key(self) -> &'static str {
        match self {
            Group::Method => "plugin",
            Group::Model => "model_path",
            Group::Serving => "host",
            Group::Judging => "judge",
            Group::Training => "rollout_batch_size",
            Group::Environments => "env",
            Group::Scale => "backend",
            Group::Checkpoints => "save_interval",
            Group::Logs => "log_dir",
        }
    }

    /// The group of `key` (none for an unknown key).
    pub fn of(key: &str) -> Option<Group> {
        let at = KEYS.iter().position(|k| k.key == key)?;
        Group::ALL.into_iter().rev().find(|g| {
            KEYS.iter()
                .position(|k| k.key == g.first_key())
                .is_some_and(|start| start <= at)
        })
    }
}

/// Every run setting, in printout order, group by group ([`Group`]).
pub const KEYS: &[KeySpec] = &[
    // Method
    key(
        "plugin",
        Str,
        "\"\"",
        &["OPENCLAW_PLUGIN"],
        "plugin",
        "the method: a plugin crate directory, library file or plugin name",
    ),
    key(
        "custom_loss_function_path",
        Str,
        "\"\"",
        &[],
        "custom-loss-function-path",
        "replace the method's loss with this plugin's",
    ),
    key(
        "custom_rm_path",
        Str,
        "\"\"",
        &[],
        "custom-rm-path",
        "replace the method's reward with this plugin's",
    ),
    key(
        "rollout_function_path",
        Str,
        "\"\"",
        &[],
        "rollout-function-path",
        "replace the method's rollout with this plugin's",
    ),
    key(
        "custom_generate_function_path",
        Str,
        "\"\"",
        &[],
        "custom-generate-function-path",
        "replace the method's generate function with this plugin's",
    ),
    key(
        "plugin_timeout",
        Int,
        "900",
        &[],
        "plugin-timeout",
        "seconds a loss, rollout or generate plugin call may take before training stops",
    ),
    // Model
    key(
        "model_path",
        Str,
        "\"\"",
        // BASE_MODEL_PATH: what the original's server how-to names the served model.
        &["MODEL_PATH", "BASE_MODEL_PATH"],
        "model-path",
        "the policy model: an HF directory, a checkpoint, `latest` or a GGUF file (`run` with none: the built-in tiny model)",
    ),
    key(
        "data_path",
        Str,
        "\"\"",
        &["DATA_PATH"],
        "data-path",
        "trajectory or chat data for offline training",
    ),
    key(
        "save_dir",
        Str,
        "\"checkpoints\"",
        &["CKPT_SAVE_DIR"],
        "save-dir",
        "where checkpoints go",
    ),
    key(
        "seed",
        Int,
        "42",
        &["OPENCLAW_SEED"],
        "seed",
        "seed for sampling, shuffling and initialisation",
    ),
    // Serving
    key(
        "host",
        Str,
        "\"127.0.0.1\"",
        &["OPENCLAW_HOST"],
        "host",
        "address the server binds",
    ),
    key(
        "port",
        Int,
        "8000",
        &["OPENCLAW_PORT"],
        "port",
        "port the server binds (0: a free one, printed at start)",
    ),
    secret(key(
        "api_key",
        Str,
        "\"\"",
        &["OPENCLAW_API_KEY"],
        "api-key",
        "require this bearer key from clients",
    )),
    key(
        "served_model_name",
        Str,
        "\"\"",
        &["SERVED_MODEL_NAME"],
        "served-model-name",
        "the model id clients use; empty: the model path's last component, a GGUF file's without `.gguf` (its file name is accepted too; `default` for the built-in model); `default` is always accepted too",
    ),
    key(
        "lora_modules",
        Str,
        "\"\"",
        &[],
        "lora-modules",
        "LoRA adapters to serve over the model, as vLLM's flag: name=dir[,name=dir...] (PEFT directories); a request's `model` names one",
    ),
    key(
        "adapters",
        Str,
        "\"shared\"",
        &[],
        "adapters",
        "shared (one model for everyone) or per-user (each request answered by its user's LoRA adapter from --adapters-dir)",
    ),
    key(
        "adapters_dir",
        Str,
        "\"\"",
        &[],
        "adapters-dir",
        "with --adapters per-user: one PEFT directory per user (DIR/<user>/), loaded when the user first asks and again when it changes; `run` trains them there (DIR/.trained/<user>/checkpoint-N, DIR/<user> a link to the latest)",
    ),
    key(
        "user_keys_file",
        Str,
        "\"\"",
        &[],
        "user-keys-file",
        "keys that name a user: `<user> <sha256>` lines, appended by POST /admin/users (server key); a request with one is that user's",
    ),
    key(
        "max_adapters_in_memory",
        Int,
        "32",
        &[],
        "max-adapters-in-memory",
        "with --adapters per-user: adapters held in memory at most, for serving and, under `run`, for training each (the least recently used go first; the rest are on disk)",
    ),
    key(
        "enable_rl_intercept",
        Bool,
        "true",
        &[],
        "enable-rl-intercept",
        "record main turns for training (false: serve only)",
    ),
    key(
        "max_body_bytes",
        Int,
        "33554432",
        &[],
        "max-body-bytes",
        "largest request body accepted (413 above)",
    ),
    key(
        "max_batch_size",
        Int,
        "8",
        &[],
        "max-batch-size",
        "sequences started together in one decode batch",
    ),
    key(
        "max_inflight",
        Int,
        "64",
        &[],
        "max-inflight",
        "requests queued or generating (429 above)",
    ),
    key(
        "max_inflight_per_client",
        Int,
        "32",
        &[],
        "max-inflight-per-client",
        "requests one client address may have queued or generating (429 above), so one client cannot take every slot",
    ),
    key(
        "request_body_timeout",
        Int,
        "10",
        &[],
        "request-body-timeout",
        "seconds a client may take to send a request's body (408 past it); a slot is held meanwhile",
    ),
    key(
        "prefix_cache_mb",
        Int,
        "1024",
        &[],
        "prefix-cache-mb",
        "MiB of prompt-prefix keys and values kept for reuse by later requests (0: none)",
    ),
    key(
        "default_max_tokens",
        Int,
        "512",
        &[],
        "default-max-tokens",
        "completion budget when a request gives none",
    ),
    key(
        "max_sessions",
        Int,
        "10000",
        &[],
        "max-sessions",
        "sessions tracked at once; the least recently active is closed beyond it",
    ),
    key(
        "default_turn_type",
        Str,
        "\"main\"",
        &[],
        "default-turn-type",
        "turn type of requests that do not say: main or side",
    ),
    key(
        "session_id_pattern",
        Str,
        "\"\"",
        &["SESSION_ID_PATTERN"],
        "session-id-pattern",
        "regular expression whose first group, found in a system or user message, is the session id (OpenClaw: 'sessionId=([^ |]+)'); empty: none",
    ),
    key(
        "session_idle_timeout",
        Int,
        "600",
        &[],
        "session-idle-timeout",
        "seconds before an idle session is closed",
    ),
    key(
        "rl_buffer_dir",
        Str,
        "\"./rl_buffer\"",
        &["RL_BUFFER_DIR"],
        "rl-buffer-dir",
        "the durable buffer of turns, judgements and samples",
    ),
    key(
        "fsync_interval_ms",
        Int,
        "0",
        &[],
        "fsync-interval-ms",
        "0: fsync every buffer record; N: at most every N ms",
    ),
    key(
        "buffer_unwritable_timeout",
        Int,
        "600",
        &[],
        "buffer-unwritable-timeout",
        "seconds the buffer may fail to write before run and serve stop (0: never)",
    ),
    key(
        "shutdown_grace",
        Int,
        "30",
        &[],
        "shutdown-grace",
        "seconds run and serve wait for training and requests to finish when stopping",
    ),
    // Judging
    key(
        "judge",
        Str,
        "\"\"",
        &["OPENCLAW_JUDGE"],
        "judge",
        "judge without a judge model: self (the starting policy judges) or rule (keyword rules written for the simulated users)",
    ),
    key(
        "judge_model_path",
        Str,
        "\"\"",
        &["JUDGE_MODEL_PATH"],
        "judge-model-path",
        "the judge model (distillation's hints; the outcome votes too when PRM_MODEL_PATH is not given)",
    ),
    key(
        "prm_model_path",
        Str,
        "\"\"",
        &["PRM_MODEL_PATH"],
        "prm-model-path",
        "the judge model answering the outcome (PRM) prompt of binary RL; a sequence classifier here serves --custom-rm-path",
    ),
    key(
        "judge_endpoint",
        Str,
        "\"\"",
        &["JUDGE_ENDPOINT"],
        "judge-endpoint",
        "judge with an OpenAI-compatible server at this URL",
    ),
    secret(key(
        "judge_api_key",
        Str,
        "\"\"",
        &["JUDGE_API_KEY"],
        "judge-api-key",
        "bearer key for --judge-endpoint",
    )),
    key(
        "judge_model",
        Str,
        "\"\"",
        &["JUDGE_MODEL"],
        "judge-model",
        "model id at --judge-endpoint (empty: the first it lists)",
    ),
    aliased(
        key(
            "majority_vote_n",
            Int,
            "3",
            &["MAJORITY_VOTE_N", "PRM_M"],
            "majority-vote-n",
            "judge votes per turn",
        ),
        &["prm-m"],
    ),
    key(
        "majority_vote_threshold",
        Float,
        "0.5",
        &["MAJORITY_VOTE_THRESHOLD"],
        "majority-vote-threshold",
        "share of valid votes a value needs to win (ties score 0)",
    ),
    key(
        "num_judge_workers",
        Int,
        "4",
        &["NUM_JUDGE_WORKERS"],
        "num-judge-workers",
        "judge calls in flight",
    ),
    aliased(
        key(
            "judge_temperature",
            Float,
            "0.6",
            &["PRM_TEMPERATURE"],
            "judge-temperature",
            "judge sampling temperature",
        ),
        &["prm-temperature"],
    ),
    aliased(
        key(
            "judge_max_tokens",
            Int,
            "4096",
            &[],
            "judge-max-tokens",
            "judge output cap",
        ),
        &["prm-max-new-tokens"],
    ),
    key(
        "judge_timeout",
        Int,
        "120",
        &[],
        "judge-timeout",
        "seconds before a judge call is abandoned",
    ),
    key(
        "teacher",
        Str,
        "\"frozen\"",
        &[],
        "teacher",
        "OPD teacher: frozen (initial model) or current (the policy)",
    ),
    key(
        "feedback",
        Str,
        "\"instead\"",
        &[],
        "feedback",
        "explicit feedback: instead (the verdict) or beside (votes with the judge)",
    ),
    key(
        "distill_topk",
        Int,
        "50",
        &[],
        "distill-topk",
        "teacher top-k entries per token for top-k distillation",
    ),
    // Training
    aliased(
        key(
            "rollout_batch_size",
            Int,
            "16",
            &[],
            "rollout-batch-size",
            "samples per optimizer step",
        ),
        &[],
    ),
    aliased(
        key(
            "num_rollouts_per_prompt",
            Int,
            "0",
            &[],
            "num-rollouts-per-prompt",
            "episodes per task, a group for GRPO (0: 8 with --env; live sessions give one sample per turn)",
        ),
        &["n-samples-per-prompt"],
    ),
    key(
        "batch_timeout",
        Int,
        "300",
        &[],
        "batch-timeout",
        "seconds before training takes a partial batch",
    ),
    key(
        "max_staleness",
        Int,
        "2",
        &[],
        "max-staleness",
        "weight versions a sample may lag and still train",
    ),
    key(
        "stale_policy",
        Str,
        "\"drop\"",
        &[],
        "stale-policy",
        "samples over max staleness: drop or correct (importance weight)",
    ),
    key(
        "update_weights_interval",
        Int,
        "1",
        &[],
        "update-weights-interval",
        "optimizer steps between weight publications",
    ),
    key(
        "max_steps",
        Int,
        "0",
        &[],
        "max-steps",
        "stop after this many optimizer steps (0: run until stopped or the data ends)",
    ),
    key(
        "max_failed_steps",
        Int,
        "10",
        &[],
        "max-failed-steps",
        "training steps that may fail one after another (a loss error, non-finite values) before the run stops naming the cause",
    ),
    key(
        "simulate_users",
        Int,
        "0",
        &["OPENCLAW_SIMULATE_USERS"],
        "simulate-users",
        "simulated users talking to the server during `run` (the built-in default uses 8)",
    ),
    key(
        "simulate_requests",
        Float,
        "0.4",
        &["OPENCLAW_SIMULATE_REQUESTS"],
        "simulate-requests",
        "share of the simulated users' requests that ask for a style in so many words (markdown with a numbered list, or plain text)",
    ),
    key(
        "simulate_preferences",
        Str,
        "\"plain\"",
        &["OPENCLAW_SIMULATE_PREFERENCES"],
        "simulate-preferences",
        "what the simulated users prefer: plain, markdown, or plain,markdown (two groups taking turns; each group is a user, named by X-User-Id, as --adapters per-user answers them)",
    ),
    key(
        "max_tokens_per_batch",
        Int,
        "8192",
        &[],
        "max-tokens-per-batch",
        "token budget of one micro-batch",
    ),
    key("lr", Float, "1e-5", &[], "lr", "learning rate"),
    key(
        "lr_schedule",
        Str,
        "\"constant\"",
        &[],
        "lr-schedule",
        "constant, warmup or cosine",
    ),
    key(
        "lr_warmup_steps",
        Int,
        "0",
        &[],
        "lr-warmup-steps",
        "linear warmup steps",
    ),
    key(
        "min_lr",
        Float,
        "0.0",
        &[],
        "min-lr",
        "floor of the cosine schedule",
    ),
    key(
        "weight_decay",
        Float,
        "0.1",
        &[],
        "weight-decay",
        "AdamW weight decay",
    ),
    key("adam_beta1", Float, "0.9", &[], "adam-beta1", "AdamW beta1"),
    key(
        "adam_beta2",
        Float,
        "0.98",
        &[],
        "adam-beta2",
        "AdamW beta2",
    ),
    key("adam_eps", Float, "1e-8", &[], "adam-eps", "AdamW epsilon"),
    key(
        "max_grad_norm",
        Float,
        "1.0",
        &[],
        "max-grad-norm",
        "global gradient norm clip (0: off)",
    ),
    key(
        "offload_optimizer_state",
        Bool,
        "false",
        &[],
        "offload-optimizer-state",
        "keep optimizer moments in host memory",
    ),
    key(
        "use_lora",
        Bool,
        "false",
        &[],
        "use-lora",
        "train LoRA adapters instead of all weights",
    ),
    key("lora_rank", Int, "16", &[], "lora-rank", "LoRA rank"),
    key("lora_alpha", Float, "32.0", &[], "lora-alpha", "LoRA alpha"),
    key(
        "lora_dropout",
        Float,
        "0.0",
        &[],
        "lora-dropout",
        "LoRA dropout",
    ),
    key(
        "lora_target_modules",
        Str,
        "\"q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj\"",
        &[],
        "lora-target-modules",
        "projections that get adapters",
    ),
    // Environments
    key(
        "env",
        Str,
        "\"\"",
        &["ENV_TYPE"],
        "env",
        "train on episodes of this environment plugin (a crate directory, library, or a name under envs/); empty: live conversations",
    ),
    key(
        "env_config",
        Str,
        "\"\"",
        &["ENV_CONFIG"],
        "env-config",
        "the environment's configuration file (TOML); empty: the plugin's default",
    ),
    key(
        "tools_config",
        Str,
        "\"\"",
        &["TOOLS_CONFIG"],
        "tools-config",
        "the tools and their limits: a TOML file of [tools.<name>] tables added to the environment's configuration",
    ),
    key(
        "swe_bench_path",
        Str,
        "\"\"",
        &["SWE_BENCH_PATH"],
        "swe-bench-path",
        "the SWE environment's instances: a SWE-bench JSONL file or a folder of them (its env.instances); empty: its built-in set",
    ),
    key(
        "screenshot_backend",
        Str,
        "\"\"",
        &["SCREENSHOT_BACKEND"],
        "screenshot-backend",
        "the GUI environment's browser driver (its env.screenshot_backend): webdriver; the original's playwright and selenium are refused",
    ),
    key(
        "env_pool_url",
        Str,
        "\"\"",
        &["ENV_POOL_URL"],
        "env-pool-url",
        "run the episodes on remote environment pools (env-pool serve, or the original's terminal, SWE or GUI workers), comma-separated in failover order; empty: load the plugin here",
    ),
    key(
        "env_pool_dialect",
        Str,
        "\"auto\"",
        &["ENV_POOL_DIALECT"],
        "env-pool-dialect",
        "how to talk to the environment pools: auto (this host's protocol where a pool's /status names it, else the original's terminal workers'), terminal, swe (the original's SWE pool: /exec, /diff, /evaluate) or gui (its GUI pool: /step with computer_use actions)",
    ),
    secret(key(
        "env_pool_api_key",
        Str,
        "\"\"",
        &["ENV_POOL_API_KEY"],
        "env-pool-api-key",
        "the bearer key the environment pools ask (their --api-key)",
    )),
    key(
        "env_split",
        Str,
        "\"train\"",
        &[],
        "env-split",
        "the environment's task split episodes are drawn from (unless --data-path names a task file)",
    ),
    key(
        "parallel_envs",
        Int,
        "4",
        &["PARALLEL_ENVS"],
        "parallel-envs",
        "environment episodes running at once",
    ),
    aliased(
        key(
            "max_episode_steps",
            Int,
            "16",
            &["MAX_STEPS"],
            "max-episode-steps",
            "agent steps before the host cuts an episode off (it is still evaluated)",
        ),
        &["max-turns"],
    ),
    key(
        "env_call_timeout",
        Int,
        "60",
        &[],
        "env-call-timeout",
        "seconds one environment call (reset, step, close) may take; evaluate gets ten times as long",
    ),
    key(
        "prm_step_coef",
        Float,
        "0.0",
        &[],
        "prm-step-coef",
        "with --env: judge every step with the method's reward plugin and train on outcome + this times the mean step score (0: outcome only)",
    ),
    key(
        "env_eval_interval",
        Int,
        "0",
        &[],
        "env-eval-interval",
        "evaluate the environment's eval split every N training steps (0: never)",
    ),
    key(
        "env_eval_tasks",
        Int,
        "50",
        &[],
        "env-eval-tasks",
        "tasks of the eval split each evaluation runs (one greedy episode each)",
    ),
    // Scale
    key(
        "backend",
        Str,
        "\"embedded\"",
        &["OPENCLAW_BACKEND"],
        "backend",
        "serving engine: embedded (the original's sglang and vllm are refused: not built)",
    ),
    key(
        "train_gpus",
        Str,
        "\"\"",
        &["TRAIN_GPUS"],
        "train-gpus",
        "devices for training (CUDA ordinals, e.g. 0,1); empty: CPU",
    ),
    key(
        "rollout_gpus",
        Str,
        "\"\"",
        &["ROLLOUT_GPUS"],
        "rollout-gpus",
        "devices for serving; empty: CPU",
    ),
    key(
        "prm_gpus",
        Str,
        "\"\"",
        &["PRM_GPUS"],
        "prm-gpus",
        "devices for the judge and reward models; empty: CPU",
    ),
    // Checkpoints
    key(
        "save_interval",
        Int,
        "50",
        &[],
        "save-interval",
        "optimizer steps between checkpoints (0: only at the end)",
    ),
    key(
        "keep_checkpoints",
        Int,
        "3",
        &[],
        "keep-checkpoints",
        "checkpoints kept; older ones are deleted",
    ),
    key(
        "resume_from_checkpoint",
        Str,
        "\"\"",
        &[],
        "resume-from-checkpoint",
        "a checkpoint directory, or latest",
    ),
    key(
        "allow_changed_data",
        Bool,
        "false",
        &[],
        "allow-changed-data",
        "resume `train` although its data file changed since the checkpoint",
    ),
    // Logs
    key(
        "tensorboard_dir",
        Str,
        "\"\"",
        &["TENSORBOARD_DIR"],
        "tensorboard-dir",
        "also write every training-log and scoreboard metric as TensorBoard event files here",
    ),
    key(
        "log_dir",
        Str,
        "\"logs\"",
        &["OPENCLAW_LOG_DIR"],
        "log-dir",
        "where training.log and plots go",
    ),
];

/// The spec of `key`.
pub fn spec(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|k| k.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_start_in_table_order_and_cover_every_key() {
        let starts: Vec<usize> = Group::ALL
            .iter()
            .map(|g| {
                KEYS.iter()
                    .position(|k| k.key == g.first_key())
                    .unwrap_or_else(|| panic!("{g:?} starts at an unknown key"))
            })
            .collect();
        assert_eq!(starts[0], 0);
        assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
        assert_eq!(Group::of("lr"), Some(Group::Training));
        assert_eq!(Group::of("save_dir"), Some(Group::Model));
        assert_eq!(Group::of("log_dir"), Some(Group::Logs));
        assert_eq!(Group::of("judge_model_path"), Some(Group::Judging));
        assert_eq!(Group::of("nope"), None);
    }

    #[test]
    fn keys_flags_and_envs_are_unique_and_defaults_parse() {
        let mut seen = std::collections::HashSet::new();
        for k in KEYS {
            assert!(seen.insert(k.key), "key {} twice", k.key);
            assert!(
                seen.insert(k.flag) || k.flag == k.key,
                "flag {} twice",
                k.flag
            );
            for a in k.aliases {
                assert!(seen.insert(a), "alias {a} twice");
            }
            let v: toml::Table = toml::from_str(&format!("x = {}", k.default)).unwrap();
            let ok = match k.kind {
                Kind::Str => v["x"].is_str(),
                Kind::Int => v["x"].is_integer(),
                Kind::Float => v["x"].is_float(),
                Kind::Bool => v["x"].is_bool(),
            };
            assert!(ok, "default of {} is not a {:?}", k.key, k.kind);
        }
        let mut envs = std::collections::HashSet::new();
        for e in KEYS.iter().flat_map(|k| k.env.iter()) {
            assert!(envs.insert(e), "env {e} twice");
        }
    }
}

//! `plugins new`: a plugin crate that builds, loads and passes the contract harness as written,
//! the `cargo new --lib` path with the plugin parts filled in.

use anyhow::{bail, Context, Result};
use openclaw_plugin_api::PluginKind;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to scaffold.
#[derive(Clone, Debug)]
pub struct NewPlugin {
    /// The plugin's (and crate's) name.
    pub name: String,
    /// The kinds to include.
    pub kinds: Vec<PluginKind>,
    /// The folder to create the crate in (the crate is `dir/name`).
    pub dir: PathBuf,
}

/// Checks that `name` can be a crate name and a plugin name.
pub fn validate_name(name: &str) -> Result<()> {
    let ok_start = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok_start || !ok_chars {
        bail!(
            "invalid plugin name `{name}`: use lowercase letters, digits, `-` and `_`, starting with a letter"
        );
    }
    Ok(())
}

/// Writes the crate and returns its directory.
pub fn create(spec: &NewPlugin) -> Result<PathBuf> {
    validate_name(&spec.name)?;
    if spec.kinds.is_empty() {
        bail!("no kinds given (use --kind loss,reward,...)");
    }
    let root = spec.dir.join(&spec.name);
    if root.exists() {
        bail!(
            "{} already exists; choose another name or --dir",
            root.display()
        );
    }
    std::fs::create_dir_all(root.join("src"))
        .with_context(|| format!("cannot create {}", root.display()))?;
    let write = |rel: &str, text: String| -> Result<()> {
        let p = root.join(rel);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("Cargo.toml", cargo_toml(&spec.name, false))?;
    write("plugin.toml", plugin_toml(spec))?;
    write("config.toml", config_toml(spec))?;
    write("README.md", readme(spec))?;
    write(".gitignore", "/target\n".into())?;
    write("src/lib.rs", lib_rs(spec))?;
    for kind in &spec.kinds {
        write(&format!("src/{}.rs", kind.as_str()), module_rs(*kind))?;
    }
    // A crate created inside another workspace that does not list it needs its own
    // `[workspace]` table, or cargo refuses to build it.
    if !cargo_accepts(&root) {
        write("Cargo.toml", cargo_toml(&spec.name, true))?;
    }
    Ok(root)
}

fn cargo_accepts(root: &Path) -> bool {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How the new crate depends on the plugin API: the source tree the host was built from when
/// it is still there, else the published version.
fn api_dependency() -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin-api");
    match source.canonicalize() {
        Ok(p) => format!(
            "openclaw-plugin-api = {{ path = {:?} }}",
            p.display().to_string()
        ),
        Err(_) => format!(
            "openclaw-plugin-api = \"{}\"",
            openclaw_plugin_api::API_VERSION
        ),
    }
}

fn cargo_toml(name: &str, own_workspace: bool) -> String {
    let ws = if own_workspace {
        "\n# This crate is its own workspace.\n[workspace]\n"
    } else {
        ""
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"

[lib]
# cdylib: the library openclaw-host loads; rlib: lets tests and benches call it directly.
crate-type = ["cdylib", "rlib"]

[dependencies]
{api}

# Dependencies optimised even in debug builds: the host calls this library in hot loops.
[profile.dev.package."*"]
opt-level = 3
{ws}"#,
        api = api_dependency()
    )
}

fn kinds_array(spec: &NewPlugin) -> String {
    spec.kinds
        .iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plugin_toml(spec: &NewPlugin) -> String {
    format!(
        "[plugin]\nname = \"{}\"\nversion = \"0.1.0\"\nkinds = [{}]\ndescription = \"{}\"\n",
        spec.name,
        kinds_array(spec),
        description(spec)
    )
}

fn description(spec: &NewPlugin) -> String {
    format!(
        "A new method ({})",
        spec.kinds
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn config_toml(spec: &NewPlugin) -> String {
    let mut out =
        String::from("# Default configuration; the host passes the user's overrides merged in.\n");
    for k in &spec.kinds {
        out.push_str(match k {
            PluginKind::Loss => "\n[loss]\n# PPO clip range around ratio 1.\nclip_eps = 0.2\n",
            PluginKind::Reward => "\n[reward]\n# Words in the next state that mean the answer was good or bad.\npositive = [\"thanks\", \"thank you\", \"great\", \"perfect\"]\nnegative = [\"wrong\", \"no,\", \"redo\", \"again\", \"not what\"]\n",
            PluginKind::Rollout => "\n[rollout]\n# The prompts each rollout answers, in turn.\nprompts = [\"Say hello.\", \"Name a colour.\"]\n",
            PluginKind::Generate => "\n[generate]\n# Cap on generated tokens.\nmax_tokens = 64\n",
            PluginKind::Env => "\n[env]\n# Steps before an episode is cut off.\nmax_steps = 5\n",
        });
    }
    out
}

fn readme(spec: &NewPlugin) -> String {
    format!(
        "# {name}\n\n{desc}.\n\nBuild, load and check it:\n\n```\nopenclaw-host plugins test {name}\n```\n\nUse it in a run with `--plugin <this folder>`, or replace one kind of another method with\n`--custom-loss-function-path <this folder>` (and `--custom-rm-path`, `--rollout-function-path`,\n`--custom-generate-function-path`). Defaults live in `config.toml`.\n",
        name = spec.name,
        desc = description(spec)
    )
}

fn lib_rs(spec: &NewPlugin) -> String {
    let mods: String = spec
        .kinds
        .iter()
        .map(|k| format!("pub mod {};\n", k.as_str()))
        .collect();
    let kinds: String = spec
        .kinds
        .iter()
        .map(|k| {
            let ty = match k {
                PluginKind::Loss => "loss::MyLoss",
                PluginKind::Reward => "reward::MyReward",
                PluginKind::Rollout => "rollout::MyRollout",
                PluginKind::Generate => "generate::MyGenerate",
                PluginKind::Env => "env::MyEnv",
            };
            format!("    {k}: {ty},\n")
        })
        .collect();
    format!(
        "//! {name}: an openclaw-host plugin.\n\n{mods}\nopenclaw_plugin_api::export_plugin! {{\n    name: \"{name}\",\n    description: \"{desc}\",\n    default_config: include_str!(\"../config.toml\"),\n{kinds}}}\n",
        name = spec.name,
        desc = description(spec),
    )
}

fn module_rs(kind: PluginKind) -> String {
    match kind {
        PluginKind::Loss => LOSS_TEMPLATE,
        PluginKind::Reward => REWARD_TEMPLATE,
        PluginKind::Rollout => ROLLOUT_TEMPLATE,
        PluginKind::Generate => GENERATE_TEMPLATE,
        PluginKind::Env => ENV_TEMPLATE,
    }
    .to_string()
}

const LOSS_TEMPLATE: &str = r#"//! The loss: a clipped policy gradient with the sample's reward as its advantage.
//!
//! The host gives per-token log-probabilities; the loss returns its value and dL/dlogp per
//! token, and the host backpropagates that through the model.

use openclaw_plugin_api::math::{ppo_clip, SampleMean};
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Loss, LossBatch, LossOutput, Metric, PluginResult,
};

/// The `[loss]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// PPO clip range around ratio 1.
    pub clip_eps: f32,
}

impl Default for Config {
    fn default() -> Self {
        Config { clip_eps: 0.2 }
    }
}

/// The loss object the host constructs once per run.
pub struct MyLoss {
    cfg: Config,
}

impl Loss for MyLoss {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "loss")?;
        if !(0.0..1.0).contains(&cfg.clip_eps) {
            return Err(format!("loss.clip_eps must be in [0, 1), got {}", cfg.clip_eps));
        }
        Ok(MyLoss { cfg })
    }

    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        batch.validate()?;
        let reduce = SampleMean::new(batch);
        let owner = batch.token_samples();
        let mut loss = 0.0;
        let mut grad = vec![0.0f32; batch.num_tokens()];
        let mut clipped = 0.0;
        for t in 0..batch.num_tokens() {
            let w = reduce.weight(t);
            if w == 0.0 {
                continue; // masked token, or a sample with nothing to train
            }
            let advantage = batch.rewards[owner[t]];
            let tok = ppo_clip(batch.logp[t], batch.old_logp[t], advantage, self.cfg.clip_eps, self.cfg.clip_eps);
            loss += w * tok.loss;
            grad[t] = (w * tok.grad) as f32;
            clipped += tok.clipped as u8 as f64;
        }
        let counted = batch.loss_mask.iter().filter(|m| **m != 0.0).count().max(1) as f64;
        Ok(LossOutput {
            loss,
            grad_logp: grad.into(),
            grad_topk: Vec::new().into(),
            metrics: vec![
                Metric::new("pg_loss", loss),
                Metric::new("pg_clipfrac", clipped / counted),
                Metric::new("ppo_kl", reduce.token_mean(|t| (batch.old_logp[t] - batch.logp[t]) as f64)),
            ]
            .into(),
        })
    }
}
"#;

const REWARD_TEMPLATE: &str = r#"//! The reward: reads the next state (the user's reply) for praise or correction.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{parse_config_section, HostServices, PluginResult, Reward, Score, ScoreRequest};

/// The `[reward]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Words that mean the answer was good.
    pub positive: Vec<String>,
    /// Words that mean the answer was not.
    pub negative: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            positive: vec!["thanks".into(), "great".into()],
            negative: vec!["wrong".into(), "redo".into()],
        }
    }
}

/// The reward object.
pub struct MyReward {
    cfg: Config,
}

impl Reward for MyReward {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Ok(MyReward { cfg: parse_config_section(config, "reward")? })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        let Some(next) = request.turn.next_state.as_ref().into_option() else {
            // Nothing followed the turn: no evidence either way, so it does not train.
            return Ok(Score::default());
        };
        let text = next.content.to_lowercase();
        let has = |words: &[String]| words.iter().any(|w| text.contains(&w.to_lowercase()));
        let value = match (has(&self.cfg.positive), has(&self.cfg.negative)) {
            (true, false) => 1.0,
            (false, true) => -1.0,
            _ => 0.0,
        };
        Ok(Score {
            value,
            trainable: value != 0.0,
            votes: vec![value].into(),
            judge_text: format!("next state read as {value}").into(),
            ..Score::default()
        })
    }
}
"#;

const ROLLOUT_TEMPLATE: &str = r#"//! The rollout: asks the policy a fixed list of prompts and returns its answers as samples.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Message, PluginResult, Policy, Rollout, RolloutOutput,
    RolloutRequest, SamplingParams, TrainingSample,
};

/// The `[rollout]` section of config.toml.
#[derive(Deserialize, Default)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// The prompts to ask, in turn.
    pub prompts: Vec<String>,
}

/// The rollout object.
pub struct MyRollout {
    cfg: Config,
    policy: Policy,
}

impl Rollout for MyRollout {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "rollout")?;
        if cfg.prompts.is_empty() {
            return Err("rollout.prompts is empty".into());
        }
        let policy = host.policy().ok_or("this rollout needs the host's policy")?;
        Ok(MyRollout { cfg, policy })
    }

    fn rollout(&self, request: &RolloutRequest) -> PluginResult<RolloutOutput> {
        let mut samples = Vec::new();
        for i in 0..request.batch_size as usize {
            let prompt = &self.cfg.prompts[(request.rollout_id as usize + i) % self.cfg.prompts.len()];
            let g = self.policy.chat(&[Message::new("user", prompt)], "", &SamplingParams::default())?;
            let n = g.response_ids.len();
            samples.push(TrainingSample {
                session_id: format!("rollout-{}", request.rollout_id).into(),
                turn_index: i as u32,
                group_id: i as u64,
                prompt_ids: g.prompt_ids,
                response_ids: g.response_ids,
                rollout_logprobs: g.logprobs,
                loss_mask: vec![1.0; n].into(),
                weight_version: g.weight_version,
                reward: 0.0,
                advantages: None.into(),
                teacher_logprobs: None.into(),
                teacher_topk: None.into(),
                metadata_json: "{}".into(),
            });
        }
        Ok(RolloutOutput { samples: samples.into(), metrics: Vec::new().into() })
    }
}
"#;

const GENERATE_TEMPLATE: &str = r#"//! The generate function: one prompt in, the policy's answer out as one sample.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, Generate, GenerateRequest, HostServices, PluginResult, Policy,
    TrainingSample,
};

/// The `[generate]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Cap on generated tokens.
    pub max_tokens: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_tokens: 64 }
    }
}

/// The generate object.
pub struct MyGenerate {
    cfg: Config,
    policy: Policy,
}

impl Generate for MyGenerate {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg = parse_config_section(config, "generate")?;
        let policy = host.policy().ok_or("this generate function needs the host's policy")?;
        Ok(MyGenerate { cfg, policy })
    }

    fn generate(&self, request: &GenerateRequest) -> PluginResult<Vec<TrainingSample>> {
        let mut sampling = request.sampling.clone();
        sampling.max_tokens = sampling.max_tokens.min(self.cfg.max_tokens);
        let g = self.policy.chat(&request.messages, &request.tools_json, &sampling)?;
        let n = g.response_ids.len();
        Ok(vec![TrainingSample {
            session_id: "generate".into(),
            turn_index: 0,
            group_id: 0,
            prompt_ids: g.prompt_ids,
            response_ids: g.response_ids,
            rollout_logprobs: g.logprobs,
            loss_mask: vec![1.0; n].into(),
            weight_version: g.weight_version,
            reward: 0.0,
            advantages: None.into(),
            teacher_logprobs: None.into(),
            teacher_topk: None.into(),
            metadata_json: request.metadata_json.clone(),
        }])
    }
}
"#;

const ENV_TEMPLATE: &str = r#"//! The environment: the agent counts upwards, one number per step.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, Action, Env, EnvInfo, Evaluation, HostServices, Message, Observation,
    PluginResult, StepOutcome, Task,
};
use std::collections::HashMap;
use std::sync::Mutex;

/// The `[env]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Steps before an episode is cut off.
    pub max_steps: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_steps: 5 }
    }
}

struct Episode {
    start: u32,
    next: u32,
    steps: u32,
}

/// The environment object; episodes are kept by id so parallel workers can share it.
pub struct MyEnv {
    cfg: Config,
    episodes: Mutex<HashMap<u64, Episode>>,
    next_id: Mutex<u64>,
}

impl Env for MyEnv {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "env")?;
        if cfg.max_steps == 0 {
            return Err("env.max_steps must be at least 1".into());
        }
        Ok(MyEnv { cfg, episodes: Mutex::default(), next_id: Mutex::new(0) })
    }

    fn tasks(&self, _split: &str) -> PluginResult<Vec<Task>> {
        Ok((1..=3)
            .map(|start| Task {
                id: format!("count-from-{start}").into(),
                instruction: format!("Count upwards from {start}, one number per message.").into(),
                data_json: format!("{{\"start\": {start}}}").into(),
            })
            .collect())
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let start = task.id.rsplit('-').next().and_then(|s| s.parse().ok()).unwrap_or(1);
        let mut id = self.next_id.lock().map_err(|e| e.to_string())?;
        *id += 1;
        self.episodes.lock().map_err(|e| e.to_string())?.insert(*id, Episode { start, next: start, steps: 0 });
        let obs = Observation { messages: vec![Message::new("user", &task.instruction)].into(), tools_json: "".into() };
        Ok((*id, obs))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        let mut eps = self.episodes.lock().map_err(|e| e.to_string())?;
        let ep = eps.get_mut(&episode).ok_or_else(|| format!("no episode {episode}"))?;
        ep.steps += 1;
        let said_it = action.message.content.contains(&ep.next.to_string());
        if said_it {
            ep.next += 1;
        }
        let done = ep.steps >= self.cfg.max_steps;
        Ok(StepOutcome {
            observation: Observation {
                messages: vec![Message::new("user", if said_it { "Good, go on." } else { "That is not the next number." })].into(),
                tools_json: "".into(),
            },
            reward: if said_it { 1.0 } else { -1.0 },
            done,
            info: EnvInfo { truncated: done, metadata_json: "{}".into() },
        })
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        self.episodes.lock().map_err(|e| e.to_string())?.remove(&episode);
        Ok(())
    }

    /// The outcome, after the loop (also when the host cut it off): the share of steps that
    /// said the next number.
    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        let eps = self.episodes.lock().map_err(|e| e.to_string())?;
        let ep = eps.get(&episode).ok_or_else(|| format!("no episode {episode}"))?;
        let counted = ep.next - ep.start;
        Ok(Evaluation {
            reward: counted as f32 / self.cfg.max_steps as f32,
            solved: counted == self.cfg.max_steps,
            details_json: format!("{{\"counted\": {counted}}}").into(),
        })
    }
}
"#;

//! Layering the configuration and remembering where each value came from.

use super::keys::{spec, KeySpec, Kind, KEYS};
use super::RunConfig;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use toml::{Table, Value};

/// Where a value came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The built-in default.
    Default,
    /// The named plugin's default configuration.
    Plugin(String),
    /// The configuration file.
    File(PathBuf),
    /// An environment variable.
    Env(String),
    /// A command-line flag, as spelled.
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::Plugin(n) => write!(f, "plugin {n}"),
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag(s) => write!(f, "flag {s}"),
        }
    }
}

/// Reads an environment variable (a closure, so tests can give their own environment).
pub type EnvReader = Box<dyn Fn(&str) -> Option<String>>;

/// What the configuration is built from, apart from plugins.
pub struct ConfigInputs {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// Flags given on the command line: (key, raw value, the flag as spelled).
    pub flags: Vec<(String, String, String)>,
    /// `--set KEY=VALUE` assignments (`method.k=v`, `plugins.NAME.k=v`, or a run key).
    pub sets: Vec<String>,
    /// Reads an environment variable.
    pub env: EnvReader,
}

impl ConfigInputs {
    /// Inputs with the process environment and nothing else.
    pub fn from_env() -> Self {
        ConfigInputs {
            file: None,
            flags: Vec::new(),
            sets: Vec::new(),
            env: Box::new(|k| std::env::var(k).ok()),
        }
    }
}

/// The plugins whose configuration is resolved: the method first, then replacements.
///
/// Resolution runs twice: once before any plugin is loaded, to learn which plugins the run
/// uses (`loaded` false: plugin tables in the file and `--set method.*` wait), then with
/// their default configurations (`loaded` true).
#[derive(Default)]
pub struct PluginConfigs {
    /// Whether the run's plugins are loaded; plugin settings are checked only then.
    pub loaded: bool,
    /// (name, default configuration as TOML text) of the main plugin.
    pub main: Option<(String, String)>,
    /// The same for each replacement plugin.
    pub others: Vec<(String, String)>,
}

/// One plugin's resolved configuration.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    /// The plugin's name.
    pub name: String,
    /// Whether it is the method (`[method]`) or a replacement (`[plugins.NAME]`).
    pub is_main: bool,
    /// The merged configuration.
    pub table: Table,
    /// Where each leaf came from, by dotted path.
    pub sources: BTreeMap<String, Source>,
}

impl PluginConfig {
    /// The configuration as TOML text, to hand to the plugin's constructor.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.table).unwrap_or_default()
    }
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The typed, validated settings.
    pub config: RunConfig,
    /// Each setting's value and source, in [`KEYS`] order.
    pub values: Vec<(&'static KeySpec, Value, Source)>,
    /// Each plugin's configuration.
    pub plugins: Vec<PluginConfig>,
}

/// The settings a flag-group variable (`LORA_ARGS="--use-lora --lora-rank 64"`) holds, split on
/// white space as the shell splits an unquoted `$LORA_ARGS`: (spec, raw value, flag as spelled).
fn group_flags(var: &str, text: &str) -> Result<Vec<(&'static KeySpec, String, String)>> {
    let mut out = Vec::new();
    let mut words = text.split_whitespace();
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--") else {
            bail!("{var}: `{word}` is not a flag (the variable holds flags, as in `--lr 1e-6`)");
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let s = KEYS
            .iter()
            .find(|k| k.flag == name || k.aliases.contains(&name))
            .ok_or_else(|| {
                anyhow!("{var}: unknown flag --{name} (`openclaw-host run --help` lists them)")
            })?;
        let raw = match (inline, s.kind) {
            (Some(v), _) => v,
            (None, Kind::Bool) => "true".to_string(),
            (None, _) => words
                .next()
                .filter(|v| !v.starts_with("--"))
                .ok_or_else(|| anyhow!("{var}: --{name} needs a value"))?
                .to_string(),
        };
        out.push((s, raw, format!("--{name}")));
    }
    Ok(out)
}

/// Resolves the configuration from its layers and validates it.
pub fn resolve(inputs: &ConfigInputs, plugins: &PluginConfigs) -> Result<Resolved> {
    let mut values: BTreeMap<&'static str, (Value, Source)> = BTreeMap::new();
    for k in KEYS {
        let v: Table = toml::from_str(&format!("v = {}", k.default)).expect("defaults parse");
        values.insert(k.key, (v["v"].clone(), Source::Default));
    }
    let mut pconfigs: Vec<PluginConfig> = Vec::new();
    if let Some((name, text)) = &plugins.main {
        pconfigs.push(plugin_config(name, text, true, &mut values)?);
    }
    for (name, text) in &plugins.others {
        if pconfigs.iter().any(|p| &p.name == name) {
            continue;
        }
        pconfigs.push(plugin_config(name, text, false, &mut values)?);
    }

    if let Some(path) = &inputs.file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        let mut file: Table = toml::from_str(&text).map_err(|e| {
            anyhow!(
                "invalid config file {}: {}",
                path.display(),
                e.message().trim().replace('\n', " ")
            )
        })?;
        let src = Source::File(path.clone());
        if !plugins.loaded {
            file.remove("method");
            file.remove("plugins");
        }
        if let Some(m) = file.remove("method") {
            let t = as_table(m, "method", path)?;
            let main = pconfigs.iter_mut().find(|p| p.is_main).ok_or_else(|| {
                anyhow!(
                    "{} has a [method] table but no plugin is given (use --plugin)",
                    path.display()
                )
            })?;
            merge(&mut main.table, t, "", &src, &mut main.sources);
        }
        if let Some(ps) = file.remove("plugins") {
            for (name, t) in as_table(ps, "plugins", path)? {
                let t = as_table(t, &format!("plugins.{name}"), path)?;
                let p = pconfigs
                    .iter_mut()
                    .find(|p| p.name == name)
                    .ok_or_else(|| {
                        anyhow!(
                            "{} configures plugin `{name}`, which this run does not load",
                            path.display()
                        )
                    })?;
                merge(&mut p.table, t, "", &src, &mut p.sources);
            }
        }
        for (k, v) in file {
            let s = spec(&k).ok_or_else(|| anyhow!("unknown key `{k}` in {}", path.display()))?;
            let v = typed(s, v, &src)?;
            values.insert(s.key, (v, src.clone()));
        }
    }

    for (var, why) in crate::UNREAD_ENV {
        if (inputs.env)(var).is_some_and(|v| !v.trim().is_empty()) {
            bail!("{var} is set, but nothing here reads it: {why}");
        }
    }
    for k in KEYS {
        for var in k.env {
            if let Some(raw) = (inputs.env)(var) {
                if raw.is_empty() && k.kind != Kind::Str {
                    continue;
                }
                let src = Source::Env(var.to_string());
                let v = parse_raw(k, &raw, &src)?;
                values.insert(k.key, (v, src));
                break;
            }
        }
    }

    for var in crate::FLAG_GROUPS {
        if let Some(text) = (inputs.env)(var) {
            for (s, raw, spelled) in group_flags(var, &text)? {
                let src = Source::Env(format!("{var} ({spelled})"));
                let v = parse_raw(s, &raw, &src)?;
                values.insert(s.key, (v, src));
            }
        }
    }

    for (key, raw, spelled) in &inputs.flags {
        let s = spec(key).ok_or_else(|| anyhow!("unknown setting `{key}`"))?;
        let src = Source::Flag(spelled.clone());
        let v = parse_raw(s, raw, &src)?;
        values.insert(s.key, (v, src));
    }

    for set in &inputs.sets {
        let (path, raw) = set
            .split_once('=')
            .ok_or_else(|| anyhow!("--set `{set}`: expected KEY=VALUE"))?;
        let path = path.trim();
        let src = Source::Flag(format!("--set {path}"));
        let plugin_setting = path.starts_with("method.") || path.starts_with("plugins.");
        if plugin_setting && !plugins.loaded {
            continue;
        }
        let (target, rest) = if let Some(rest) = path.strip_prefix("method.") {
            let p = pconfigs
                .iter_mut()
                .find(|p| p.is_main)
                .ok_or_else(|| anyhow!("--set {path}: no plugin is given (use --plugin)"))?;
            (p, rest)
        } else if let Some(rest) = path.strip_prefix("plugins.") {
            let (name, rest) = rest
                .split_once('.')
                .ok_or_else(|| anyhow!("--set {path}: expected plugins.NAME.KEY=VALUE"))?;
            let p = pconfigs
                .iter_mut()
                .find(|p| p.name == name)
                .ok_or_else(|| anyhow!("--set {path}: this run loads no plugin `{name}`"))?;
            (p, rest)
        } else {
            let s = spec(path).ok_or_else(|| {
                anyhow!("--set {path}: unknown setting (method settings are method.KEY)")
            })?;
            let v = parse_raw(s, raw, &src)?;
            values.insert(s.key, (v, src));
            continue;
        };
        let value = literal(raw);
        set_path(&mut target.table, rest, value).map_err(|e| anyhow!("--set {path}: {e}"))?;
        target.sources.insert(rest.to_string(), src);
    }

    let table: Table = values
        .iter()
        .map(|(k, (v, _))| (k.to_string(), v.clone()))
        .collect();
    let config: RunConfig = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow!("invalid configuration: {}", e.message().trim()))?;
    // Type-level range problems (a negative port, say) surface in try_into above; value rules here.
    if let Err((key, problem)) = config.validate() {
        if key == "env" {
            // An environment's setting without an environment: name the setting and its
            // source (a leftover MAX_STEPS, say), not the empty `env`.
            let set = crate::ENV_ONLY
                .iter()
                .map(|k| (k, &values[k]))
                .find(|(_, (_, src))| !matches!(src, Source::Default));
            if let Some((k, (v, src))) = set {
                bail!(
                    "`{k}` = {v} (from {src}) applies only to an environment run: give --env \
                     (ENV_TYPE), or leave it out"
                );
            }
        }
        let (v, src) = &values[key];
        bail!("invalid value for `{key}` = {v} (from {src}): {problem}");
    }
    // The original's how-to sets LORA_ARGS="--lora-rank 64 ..." without --use-lora; training
    // full weights then, without a word, is not what was asked.
    if !config.use_lora {
        let asked = [
            "lora_rank",
            "lora_alpha",
            "lora_dropout",
            "lora_target_modules",
        ]
        .into_iter()
        .find(|k| {
            matches!(
                values[k].1,
                Source::File(_) | Source::Env(_) | Source::Flag(_)
            )
        });
        if let Some(key) = asked {
            let (v, src) = &values[key];
            bail!(
                "`{key}` = {v} (from {src}) sets up LoRA adapters, but use_lora is off: add \
                 --use-lora to train adapters, or leave the LoRA settings out to train every weight"
            );
        }
    }
    let ordered = KEYS
        .iter()
        .map(|k| {
            let (v, s) = values.remove(k.key).expect("every key has a value");
            (k, v, s)
        })
        .collect();
    Ok(Resolved {
        config,
        values: ordered,
        plugins: pconfigs,
    })
}

/// A plugin's default configuration; its `[run]` table (the main plugin's only) suggests run
/// settings.
fn plugin_config(
    name: &str,
    text: &str,
    is_main: bool,
    values: &mut BTreeMap<&'static str, (Value, Source)>,
) -> Result<PluginConfig> {
    let mut table: Table = toml::from_str(text).map_err(|e| {
        anyhow!(
            "plugin `{name}` has an invalid default configuration: {}",
            e.message().trim()
        )
    })?;
    if let Some(run) = table.remove("run") {
        let Value::Table(run) = run else {
            bail!("plugin `{name}`: `run` in its default configuration must be a table");
        };
        if is_main {
            for (k, v) in run {
                let s = spec(&k)
                    .ok_or_else(|| anyhow!("plugin `{name}` suggests unknown run key `{k}`"))?;
                let src = Source::Plugin(name.to_string());
                let v = typed(s, v, &src)?;
                values.insert(s.key, (v, src));
            }
        }
    }
    let mut sources = BTreeMap::new();
    leaves(&table, "", &mut |path| {
        sources.insert(path, Source::Plugin(name.to_string()));
    });
    Ok(PluginConfig {
        name: name.to_string(),
        is_main,
        table,
        sources,
    })
}

fn as_table(v: Value, what: &str, path: &std::path::Path) -> Result<Table> {
    match v {
        Value::Table(t) => Ok(t),
        other => bail!(
            "`{what}` in {} must be a table, found {}",
            path.display(),
            other.type_str()
        ),
    }
}

/// Checks a TOML value's type against the key's (an integer is accepted for a float).
fn typed(s: &KeySpec, v: Value, src: &Source) -> Result<Value> {
    let ok = match (s.kind, &v) {
        (Kind::Str, Value::String(_))
        | (Kind::Int, Value::Integer(_))
        | (Kind::Float, Value::Float(_))
        | (Kind::Bool, Value::Boolean(_)) => true,
        (Kind::Float, Value::Integer(i)) => return Ok(Value::Float(*i as f64)),
        _ => false,
    };
    if !ok {
        bail!(
            "invalid value for `{}` = {v} (from {src}): expected {}",
            s.key,
            kind_name(s.kind)
        );
    }
    range_checked(s, v, src)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Str => "a string",
        Kind::Int => "a whole number",
        Kind::Float => "a number",
        Kind::Bool => "true or false",
    }
}

/// Integers must fit the field's unsigned type; caught here so the message names the source.
fn range_checked(s: &KeySpec, v: Value, src: &Source) -> Result<Value> {
    if let Value::Integer(i) = v {
        let max = if s.key == "port" {
            65535
        } else {
            u32::MAX as i64
        };
        if i < 0 || (i > max && s.key != "seed") {
            bail!(
                "invalid value for `{}` = {i} (from {src}): must be between 0 and {max}",
                s.key
            );
        }
    }
    Ok(v)
}

/// Parses a value typed on the command line or in the environment.
fn parse_raw(s: &KeySpec, raw: &str, src: &Source) -> Result<Value> {
    let t = raw.trim();
    let v = match s.kind {
        // `--set key="text"` is TOML-shaped; the quotes are not part of the value.
        Kind::Str => Value::String(
            raw.strip_prefix('"')
                .and_then(|r| r.strip_suffix('"'))
                .unwrap_or(raw)
                .to_string(),
        ),
        Kind::Int => Value::Integer(t.parse().map_err(|_| {
            anyhow!(
                "invalid value for `{}` = `{raw}` (from {src}): expected a whole number",
                s.key
            )
        })?),
        Kind::Float => {
            let f: f64 = t.parse().map_err(|_| {
                anyhow!(
                    "invalid value for `{}` = `{raw}` (from {src}): expected a number",
                    s.key
                )
            })?;
            if !f.is_finite() {
                bail!(
                    "invalid value for `{}` = `{raw}` (from {src}): expected a finite number",
                    s.key
                );
            }
            Value::Float(f)
        }
        Kind::Bool => Value::Boolean(match t.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => bail!(
                "invalid value for `{}` = `{raw}` (from {src}): expected true or false",
                s.key
            ),
        }),
    };
    range_checked(s, v, src)
}

/// A `--set` value: a TOML literal when it parses as one, else a string.
fn literal(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}

fn set_path(table: &mut Table, path: &str, value: Value) -> Result<(), String> {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().filter(|l| !l.is_empty()).ok_or("empty key")?;
    let mut t = table;
    for p in parts {
        t = match t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()))
        {
            Value::Table(inner) => inner,
            other => return Err(format!("`{p}` is a {}, not a table", other.type_str())),
        };
    }
    t.insert(last.to_string(), value);
    Ok(())
}

fn merge(
    base: &mut Table,
    over: Table,
    prefix: &str,
    src: &Source,
    sources: &mut BTreeMap<String, Source>,
) {
    for (k, v) in over {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o, &path, src, sources),
            (_, v) => {
                if let Value::Table(t) = &v {
                    leaves(t, &path, &mut |p| {
                        sources.insert(p, src.clone());
                    });
                } else {
                    sources.insert(path, src.clone());
                }
                base.insert(k, v);
            }
        }
    }
}

fn leaves(t: &Table, prefix: &str, f: &mut dyn FnMut(String)) {
    for (k, v) in t {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(inner) => leaves(inner, &path, f),
            _ => f(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn inputs(
        env: &[(&str, &str)],
        flags: &[(&str, &str)],
        sets: &[&str],
        file: Option<PathBuf>,
    ) -> ConfigInputs {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ConfigInputs {
            file,
            flags: flags
                .iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        v.to_string(),
                        format!("--{}", k.replace('_', "-")),
                    )
                })
                .collect(),
            sets: sets.iter().map(|s| s.to_string()).collect(),
            env: Box::new(move |k| env.get(k).cloned()),
        }
    }

    fn value<'a>(r: &'a Resolved, key: &str) -> (&'a Value, &'a Source) {
        let (_, v, s) = r.values.iter().find(|(k, _, _)| k.key == key).unwrap();
        (v, s)
    }

    #[test]
    fn the_original_flag_group_variables_are_read_below_the_command_line() {
        let r = resolve(
            &inputs(
                &[
                    ("LORA_ARGS", "--use-lora --lora-rank 64 --lora-alpha=128"),
                    ("OPTIMIZER_ARGS", "--lr 1e-6 --weight-decay 0.01"),
                    ("ROLLOUT_ARGS", "--rollout-batch-size 64"),
                    ("CKPT_ARGS", "--save-interval 100 --save-dir ./ck"),
                ],
                &[("lr", "2e-6")],
                &[],
                None,
            ),
            &PluginConfigs::default(),
        )
        .unwrap();
        assert!(r.config.use_lora);
        assert_eq!((r.config.lora_rank, r.config.lora_alpha), (64, 128.0));
        assert_eq!(
            value(&r, "lora_rank").1,
            &Source::Env("LORA_ARGS (--lora-rank)".into())
        );
        assert_eq!(r.config.lr, 2e-6, "the command line wins");
        assert_eq!(r.config.weight_decay, 0.01);
        assert_eq!(r.config.rollout_batch_size, 64);
        assert_eq!(
            (r.config.save_interval, r.config.save_dir.as_str()),
            (100, "./ck")
        );
        for (var, text, says) in [
            (
                "ROLLOUT_ARGS",
                "--rollout-max-response-len 8",
                "ROLLOUT_ARGS: unknown flag --rollout-max-response-len",
            ),
            ("LORA_ARGS", "64", "LORA_ARGS: `64` is not a flag"),
            (
                "OPTIMIZER_ARGS",
                "--lr",
                "OPTIMIZER_ARGS: --lr needs a value",
            ),
        ] {
            let e = resolve(
                &inputs(&[(var, text)], &[], &[], None),
                &PluginConfigs::default(),
            )
            .err()
            .unwrap()
            .to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn layers_rise_in_priority_and_remember_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.toml");
        std::fs::write(
            &file,
            "lr = 3e-4\nrollout_batch_size = 4\nport = 9000\n[method]\nw_rl = 0.5\n",
        )
        .unwrap();
        let plugins = PluginConfigs {
            loaded: true,
            main: Some((
                "combine".into(),
                "w_opd = 1.0\nw_rl = 1.0\n[run]\nmajority_vote_n = 1\n".into(),
            )),
            others: vec![],
        };
        let r = resolve(
            &inputs(
                &[("OPENCLAW_PORT", "9100"), ("MODEL_PATH", "/m")],
                &[("rollout_batch_size", "8")],
                &["method.w_opd=2"],
                Some(file.clone()),
            ),
            &plugins,
        )
        .unwrap();
        assert_eq!(r.config.lr, 3e-4);
        assert_eq!(value(&r, "lr").1, &Source::File(file.clone()));
        assert_eq!(r.config.rollout_batch_size, 8);
        assert_eq!(
            value(&r, "rollout_batch_size").1,
            &Source::Flag("--rollout-batch-size".into())
        );
        assert_eq!(r.config.port, 9100);
        assert_eq!(value(&r, "port").1, &Source::Env("OPENCLAW_PORT".into()));
        assert_eq!(r.config.majority_vote_n, 1);
        assert_eq!(
            value(&r, "majority_vote_n").1,
            &Source::Plugin("combine".into())
        );
        assert_eq!(r.config.model_path, "/m");
        assert_eq!(value(&r, "weight_decay").1, &Source::Default);
        let m = &r.plugins[0];
        assert_eq!(m.table["w_opd"].as_integer(), Some(2));
        assert_eq!(m.table["w_rl"].as_float(), Some(0.5));
        assert_eq!(m.sources["w_rl"], Source::File(file));
        assert!(matches!(m.sources["w_opd"], Source::Flag(_)));
    }

    #[test]
    fn errors_name_the_key_the_value_and_the_source() {
        let none = PluginConfigs::default();
        let e = resolve(&inputs(&[], &[("lr", "-1")], &[], None), &none).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value for `lr` = -1.0 (from flag --lr): must be > 0"
        );
        let e = resolve(
            &inputs(&[("MAJORITY_VOTE_N", "three")], &[], &[], None),
            &none,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "`majority_vote_n` = `three` (from env MAJORITY_VOTE_N): expected a whole number"
            ),
            "{e}"
        );
        let e = resolve(&inputs(&[], &[("port", "70000")], &[], None), &none).unwrap_err();
        assert!(e.to_string().contains("`port` = 70000"), "{e}");
        let e = resolve(&inputs(&[], &[("backend", "tgi")], &[], None), &none).unwrap_err();
        assert!(
            e.to_string()
                .contains("must be one of embedded, sglang, vllm"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.toml");
        std::fs::write(&file, "rollout_batchsize = 4\n").unwrap();
        let e = resolve(&inputs(&[], &[], &[], Some(file.clone())), &none).unwrap_err();
        assert!(
            e.to_string().contains("unknown key `rollout_batchsize`"),
            "{e}"
        );
        std::fs::write(&file, "use_lora = \"yes\"\n").unwrap();
        let e = resolve(&inputs(&[], &[], &[], Some(file)), &none).unwrap_err();
        assert!(e.to_string().contains("expected true or false"), "{e}");
        let loaded = PluginConfigs {
            loaded: true,
            ..Default::default()
        };
        let e = resolve(&inputs(&[], &[], &["method.x=1"], None), &loaded).unwrap_err();
        assert!(e.to_string().contains("no plugin is given"), "{e}");
    }

    #[test]
    fn lora_and_bool_flags_parse() {
        let none = PluginConfigs::default();
        let r = resolve(
            &inputs(
                &[],
                &[("use_lora", "true"), ("lora_rank", "8")],
                &["lr=2e-4"],
                None,
            ),
            &none,
        )
        .unwrap();
        assert!(r.config.use_lora);
        assert_eq!(r.config.lora_rank, 8);
        assert_eq!(r.config.lr, 2e-4);
        let e = resolve(
            &inputs(&[], &[("lora_target_modules", "q_proj,qkv")], &[], None),
            &none,
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown module `qkv`"), "{e}");
        // The original's variables: read where there is an equivalent, refused by name where not.
        let r = resolve(&inputs(&[("BASE_MODEL_PATH", "/m")], &[], &[], None), &none).unwrap();
        assert_eq!(r.config.model_path, "/m");
        for var in ["TINKER_API_KEY", "TINKER_ENDPOINT"] {
            let e = resolve(&inputs(&[(var, "x")], &[], &[], None), &none).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("{var} is set, but nothing here reads it")),
                "{e}"
            );
        }
        // A Python file where the original took one names the command that scaffolds a plugin.
        let e = resolve(
            &inputs(
                &[],
                &[("custom_loss_function_path", "./my_method/custom_loss.py")],
                &[],
                None,
            ),
            &none,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("is a Python file; plugins here are Rust crates: `openclaw-host plugins new my-loss --kind loss`"),
            "{e}"
        );
        // LoRA settings without use_lora are refused by name, wherever they come from.
        let e = resolve(
            &inputs(
                &[],
                &[("lora_rank", "64"), ("lora_alpha", "128")],
                &[],
                None,
            ),
            &none,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("`lora_rank` = 64 (from flag --lora-rank) sets up LoRA adapters, but use_lora is off: add --use-lora"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.toml");
        std::fs::write(&file, "lora_dropout = 0.05\n").unwrap();
        let e = resolve(&inputs(&[], &[], &[], Some(file)), &none).unwrap_err();
        assert!(
            e.to_string().contains("`lora_dropout` = 0.05 (from file"),
            "{e}"
        );
    }
}

//! An environment as a run names it: the plugin (a crate directory, a library, or a name under
//! `envs/`), its configuration, and its tasks (a split of its own set, or a task file).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use openclaw_plugin_api::{HostServices, Task};
use serde_json::Value;

use super::TimedEnv;
use openclaw_plugins::instance::TracingLog;
use openclaw_plugins::{EnvHandle, LoadedPlugin};

/// A crate directory, a library, `name@version` of an installed environment, or a name: under
/// `envs/` of the project root, then among the installed plugins, then under `envs/` of the
/// install root (see [`openclaw_plugins::discover::roots`]).
pub fn env_location(spec: &str) -> Result<PathBuf> {
    use openclaw_plugins::installed;
    let p = PathBuf::from(spec);
    if p.exists() {
        return Ok(p);
    }
    let plugin_dir = installed::plugin_dir();
    let an_env = |i: installed::Installed| -> Result<PathBuf> {
        if !i.record.kinds.iter().any(|k| k == "env") {
            bail!(
                "environment `{spec}`: the installed plugin {} is not an environment (it provides: {})",
                i.id(),
                i.record.kinds.join(", ")
            );
        }
        Ok(i.dir)
    };
    if let Some((name, version)) = installed::split_pinned(spec) {
        let i = installed::find(&plugin_dir, name, Some(version))?
            .expect("find errs when none matches");
        return an_env(i);
    }
    let roots = openclaw_plugins::discover::roots();
    let folders: Vec<PathBuf> = roots.iter().map(|r| r.join("envs")).collect();
    if spec.contains('/') {
        // `envs/terminal` typed outside a checkout: the same path under the install root.
        if let Some(found) = roots
            .iter()
            .map(|r| r.join(spec))
            .find(|d| d.join("plugin.toml").is_file())
        {
            return Ok(found);
        }
    } else {
        let named = |f: &PathBuf| Some(f.join(spec)).filter(|d| d.join("plugin.toml").is_file());
        // The project's own first, then an installed one, then the one beside the binary.
        if let Some(d) = folders.first().and_then(named) {
            return Ok(d);
        }
        if let Some(i) = installed::find(&plugin_dir, spec, None)? {
            return an_env(i);
        }
        if let Some(d) = folders.iter().skip(1).find_map(named) {
            return Ok(d);
        }
    }
    let mut known: Vec<String> = folders
        .iter()
        .flat_map(|f| openclaw_plugins::discover::crates_in(f))
        .filter_map(|d| Some(d.file_name()?.to_string_lossy().into_owned()))
        .chain(
            installed::list(&plugin_dir)
                .into_iter()
                .filter(|i| i.record.kinds.iter().any(|k| k == "env"))
                .map(|i| i.record.name),
        )
        .collect();
    known.sort();
    known.dedup();
    bail!(
        "environment `{spec}`: no such crate directory or library, no {spec}/plugin.toml in {}, and none installed in {} (environments there: {})",
        folders
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        plugin_dir.display(),
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )
}

/// The files that configure an environment.
#[derive(Clone, Debug, Default)]
pub struct EnvFiles {
    /// Its configuration (`ENV_CONFIG`; the plugin's default when `None`).
    pub config: Option<PathBuf>,
    /// The tools and their limits (`TOOLS_CONFIG`): a TOML file of `[tools.<name>]` tables,
    /// added to the configuration.
    pub tools: Option<PathBuf>,
    /// Remote pools serving the environment (`ENV_POOL_URL`, in failover order): when given,
    /// nothing is loaded here and the pools' own configuration applies.
    pub pool_urls: Vec<String>,
    /// The pools' bearer key (`ENV_POOL_API_KEY`); empty: none sent.
    pub pool_key: String,
    /// How to talk to the pools (`ENV_POOL_DIALECT`: `auto`, `terminal`, `swe` or `gui`);
    /// empty: `auto`.
    pub pool_dialect: String,
    /// The SWE environment's instances (`SWE_BENCH_PATH`), its `env.instances`.
    pub swe_bench_path: Option<PathBuf>,
    /// The GUI environment's driver (`SCREENSHOT_BACKEND`), its `env.screenshot_backend`.
    pub screenshot_backend: Option<String>,
}

/// Reads a `TOOLS_CONFIG` file: TOML with a `[tools]` table and nothing else (anything else
/// would be read by no one), or the same as a JSON object (`{"tools": {"<name>": {...}}}`, as
/// the original's how-to names a `tools_config.json`); returns it as TOML.
fn tools_text(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the tools configuration {}", path.display()))?;
    // TOML first (whose tables start with `[` too), then JSON.
    let table: toml::Table = match toml::from_str(&text) {
        Ok(t) => t,
        Err(toml_error) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(serde_json::Value::Array(_)) => bail!(
                "{}: a JSON array is not a tools configuration; TOOLS_CONFIG sets the environment's own tools as {{\"tools\": {{\"<name>\": {{...}}}}}} (JSON) or [tools.<name>] tables (TOML), and the tool definitions the agent sees come from the environment",
                path.display()
            ),
            Ok(v) => match toml::Value::try_from(v) {
                Ok(toml::Value::Table(t)) => t,
                _ => bail!(
                    "{}: a JSON tools configuration is an object without nulls",
                    path.display()
                ),
            },
            Err(_) => {
                return Err(anyhow::Error::new(toml_error)
                    .context(format!("{}: neither TOML nor JSON", path.display())))
            }
        },
    };
    if let Some(k) = table.keys().find(|k| *k != "tools") {
        bail!(
            "{}: `{k}` is not a tools table; TOOLS_CONFIG lists tools as [tools.<name>] tables",
            path.display()
        );
    }
    Ok(toml::to_string(&table)?)
}

/// Opens the environment `spec` configured by `files`, building the plugin when its library
/// is stale.
pub fn open_env(spec: &str, files: &EnvFiles) -> Result<TimedEnv> {
    let dialect = crate::pool::Dialect::parse(&files.pool_dialect)?;
    if files.pool_urls.is_empty() && dialect != crate::pool::Dialect::Auto {
        bail!(
            "--env-pool-dialect {} says how to talk to environment pools, and no --env-pool-url names one",
            dialect.name()
        );
    }
    if !files.pool_urls.is_empty() {
        if files.config.is_some() || files.tools.is_some() {
            bail!("ENV_CONFIG and TOOLS_CONFIG configure an environment loaded here; with --env-pool-url the pools run it with their own (give them to `env-pool serve`)");
        }
        // The environment's name, for messages: what --env names, without its folders.
        let name = Path::new(spec)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(spec);
        let remote = crate::pool::RemoteEnv::connect(
            name,
            &crate::pool::client::RemoteOptions {
                urls: files.pool_urls.clone(),
                timeout: Duration::from_secs(330),
                heartbeat: Duration::from_secs(30),
                api_key: files.pool_key.clone(),
                dialect,
            },
        )?;
        return Ok(TimedEnv::with_calls(std::sync::Arc::new(remote)));
    }
    let plugin = LoadedPlugin::open(&env_location(spec)?)?;
    let mut config = match &files.config {
        Some(p) => std::fs::read_to_string(p)
            .with_context(|| format!("reading the environment configuration {}", p.display()))?,
        None => plugin.manifest.default_config.to_string(),
    };
    if let Some(tools) = &files.tools {
        let text = tools_text(tools)?;
        if toml::from_str::<toml::Table>(&config).is_ok_and(|t| t.contains_key("tools")) {
            bail!(
                "both the environment configuration and TOOLS_CONFIG ({}) have a [tools] table; keep one",
                tools.display()
            );
        }
        config.push('\n');
        config.push_str(&text);
    }
    if let Some(instances) = &files.swe_bench_path {
        if plugin.name() != "swe" {
            bail!(
                "SWE_BENCH_PATH ({}) is read by the `swe` environment; this run's environment is `{}`: unset it, or run --env swe",
                instances.display(),
                plugin.name()
            );
        }
        config = with_env_key(
            &config,
            "instances",
            &instances.display().to_string(),
            files.config.is_some(),
        )
        .with_context(|| format!("SWE_BENCH_PATH={}", instances.display()))?;
    }
    if let Some(backend) = &files.screenshot_backend {
        if plugin.name() != "gui" {
            bail!(
                "SCREENSHOT_BACKEND ({backend}) is read by the `gui` environment; this run's environment is `{}`: unset it, or run --env gui",
                plugin.name()
            );
        }
        config = with_env_key(
            &config,
            "screenshot_backend",
            backend,
            files.config.is_some(),
        )
        .with_context(|| format!("SCREENSHOT_BACKEND={backend}"))?;
    }
    let host = HostServices::builder()
        .log(TracingLog::new(plugin.name()))
        .build();
    Ok(TimedEnv::new(EnvHandle::new(&plugin, &config, host)?))
}

/// `config` with `[env] key = value` set. The plugin's default configuration gives way; a
/// user's configuration file (`from_file`) that sets another value is refused, since two places
/// would name the same thing.
fn with_env_key(config: &str, key: &str, value: &str, from_file: bool) -> Result<String> {
    let mut table: toml::Table =
        toml::from_str(config).context("the environment's configuration")?;
    let env = table
        .entry("env")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .context("`env` in the environment's configuration is not a table")?;
    let set = env
        .get(key)
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty());
    if let Some(set) = set.filter(|s| from_file && *s != value) {
        bail!("ENV_CONFIG sets env.{key} = {set:?} too; keep one");
    }
    env.insert(key.into(), toml::Value::String(value.into()));
    Ok(toml::to_string(&table)?)
}

/// The tasks of a task file: JSON Lines (or one JSON array) of objects. A line's `id` is its
/// task id (else its `task_name`, else a SWE-bench row's `instance_id`, else `task-<line>`),
/// its `instruction` (or `question`, `prompt`, or a SWE-bench row's `problem_statement`) what
/// the agent is told, and the whole object the task's data, which the
/// environment reads (the tool-call environment its `question` and `answer`, the terminal one
/// its `task_name` or `task_path`). The original terminal rows, `{"task": {…}}`, are read from
/// their inner object. Errors name the line.
pub fn read_tasks(path: &Path) -> Result<Vec<Task>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the task file {}", path.display()))?;
    let items: Vec<(usize, Value)> = if text.trim_start().starts_with('[') {
        let all: Vec<Value> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a JSON array of tasks", path.display()))?;
        all.into_iter()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect()
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map(|v| (i + 1, v))
                    .with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))
            })
            .collect::<Result<_>>()?
    };
    let mut tasks = Vec::with_capacity(items.len());
    for (line, v) in items {
        let Some(outer) = v.as_object() else {
            bail!("{}:{line}: a task must be a JSON object", path.display());
        };
        // The original terminal environment's rows nest the task: `{"task": {task_name,
        // task_path, instruction, …}}`.
        let o = match outer.get("task").and_then(Value::as_object) {
            Some(inner) if !outer.contains_key("instruction") => inner,
            _ => outer,
        };
        let last_message = o
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .and_then(|m| m.get("content"))
            .and_then(Value::as_str);
        let instruction = ["instruction", "question", "prompt", "problem_statement"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .or(last_message)
            .with_context(|| {
                format!(
                    "{}:{line}: a task needs `instruction`, `question`, `prompt` or `problem_statement` (text), or `messages`",
                    path.display()
                )
            })?;
        let id = match o.get("id").or(o.get("task_name")).or(o.get("instance_id")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => format!("task-{line}"),
        };
        tasks.push(Task {
            id: id.into(),
            instruction: instruction.into(),
            data_json: v.to_string().into(),
        });
    }
    if tasks.is_empty() {
        bail!("{}: no tasks", path.display());
    }
    Ok(tasks)
}

/// The first messages of a task from a task file: its `messages` array when the line has one
/// (`{role, content}` objects), else the instruction as a user message.
pub fn read_task_messages(task: &Task) -> Vec<openclaw_plugin_api::Message> {
    let data: Value = serde_json::from_str(&task.data_json).unwrap_or_default();
    let from_data: Option<Vec<openclaw_plugin_api::Message>> =
        data.get("messages").and_then(Value::as_array).map(|ms| {
            ms.iter()
                .filter_map(|m| {
                    Some(openclaw_plugin_api::Message::new(
                        m.get("role")?.as_str()?,
                        m.get("content")?.as_str()?,
                    ))
                })
                .collect()
        });
    match from_data {
        Some(ms) if !ms.is_empty() => ms,
        _ => vec![openclaw_plugin_api::Message::new("user", &task.instruction)],
    }
}

/// The tasks of a run: the task file when one is named, else the environment's `split`.
pub fn run_tasks(
    env: &TimedEnv,
    data_path: &str,
    split: &str,
    timeout: Duration,
) -> Result<Vec<Task>> {
    let tasks = if data_path.is_empty() {
        env.tasks(split, timeout)?
    } else {
        read_tasks(Path::new(data_path))?
    };
    if tasks.is_empty() {
        bail!(
            "environment `{}` has no tasks in split `{split}`",
            env.plugin()
        );
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_originals_tracks_are_found_by_name() {
        for name in ["toolcall", "terminal", "swe", "gui"] {
            assert!(env_location(name).unwrap().join("plugin.toml").is_file());
        }
        let e = env_location("osworld").unwrap_err().to_string();
        assert!(
            e.contains("environments there: ") && e.contains("gui, swe"),
            "{e}"
        );
    }

    #[test]
    fn a_tools_file_holds_tools_tables_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tools.toml");
        std::fs::write(&p, "[tools.code_interpreter]\nmax_calls = 2\n").unwrap();
        assert!(tools_text(&p).unwrap().contains("max_calls"));
        std::fs::write(&p, "[code_interpreter]\nmax_calls = 2\n").unwrap();
        let e = tools_text(&p).unwrap_err().to_string();
        assert!(e.contains("`code_interpreter` is not a tools table"), "{e}");
        // The same as JSON, as the original's how-to names it.
        let j = dir.path().join("tools_config.json");
        std::fs::write(&j, r#"{"tools": {"code_interpreter": {"max_calls": 2}}}"#).unwrap();
        let t: toml::Table = toml::from_str(&tools_text(&j).unwrap()).unwrap();
        assert_eq!(
            t["tools"]["code_interpreter"]["max_calls"].as_integer(),
            Some(2)
        );
        std::fs::write(&j, r#"[{"type": "function"}]"#).unwrap();
        let e = tools_text(&j).unwrap_err().to_string();
        assert!(
            e.contains("a JSON array is not a tools configuration"),
            "{e}"
        );
    }

    #[test]
    fn task_files_read_lines_or_an_array_and_name_the_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(
            &p,
            "{\"question\": \"2+2?\", \"answer\": \"4\"}\n\n{\"id\": 7, \"instruction\": \"x\"}\n",
        )
        .unwrap();
        let t = read_tasks(&p).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].id.as_str(), t[0].instruction.as_str()),
            ("task-1", "2+2?")
        );
        assert_eq!(t[1].id.as_str(), "7");
        let data: Value = serde_json::from_str(&t[0].data_json).unwrap();
        assert_eq!(data["answer"], "4");
        std::fs::write(&p, "[{\"prompt\": \"p\"}]").unwrap();
        assert_eq!(read_tasks(&p).unwrap()[0].instruction.as_str(), "p");
        std::fs::write(&p, "{\"question\": \"q\"}\n{\"answer\": 1}\n").unwrap();
        let e = read_tasks(&p).unwrap_err().to_string();
        assert!(e.contains("t.jsonl:2") && e.contains("instruction"), "{e}");
        std::fs::write(&p, "{oops\n").unwrap();
        let e = format!("{:#}", read_tasks(&p).unwrap_err());
        assert!(e.contains("t.jsonl:1: not JSON"), "{e}");
        // The original terminal environment's rows.
        std::fs::write(
            &p,
            "{\"task\": {\"task_name\": \"hello\", \"task_path\": \"/t/hello\", \"instruction\": \"Say hi\", \"data_source\": \"tb\"}}\n",
        )
        .unwrap();
        let t = read_tasks(&p).unwrap();
        assert_eq!(
            (t[0].id.as_str(), t[0].instruction.as_str()),
            ("hello", "Say hi")
        );
        let data: Value = serde_json::from_str(&t[0].data_json).unwrap();
        assert_eq!(data["task"]["task_path"], "/t/hello");
        // SWE-bench rows, for the SWE dialect's pools.
        std::fs::write(
            &p,
            "{\"instance_id\": \"a__b-1\", \"repo\": \"a/b\", \"problem_statement\": \"It breaks.\"}\n",
        )
        .unwrap();
        let t = read_tasks(&p).unwrap();
        assert_eq!(
            (t[0].id.as_str(), t[0].instruction.as_str()),
            ("a__b-1", "It breaks.")
        );
    }
}

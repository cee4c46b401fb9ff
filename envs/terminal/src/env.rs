//! The environment object: its tasks, episodes, shell sessions and the tests after the loop.

use openclaw_env_kit::{first_observation, observation, step_outcome, EpisodeTable, Progress};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::serde_json::{json, Value};
use openclaw_plugin_api::{
    parse_config_section, serde_json, Action, Env, Evaluation, HostServices, Observation,
    PluginResult, StepOutcome, Task,
};
use openclaw_sandbox::{Background, Limits, Run, Sandbox, SandboxConfig, Status, Workdir};

use crate::grade;
use crate::tasks::{self, TaskSpec};
use crate::tools::{self, Call};

/// The default configuration (`config.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// Where the agent works inside the sandbox (terminal-bench's working directory).
pub const APP: &str = "/app";

/// The `[env]` section of the configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// A folder of task folders; empty for the built-in set.
    pub tasks_dir: String,
    /// Every n-th task goes to the `eval` split.
    pub eval_every: usize,
    /// Assistant turns per episode.
    pub max_turns: u32,
    /// Unreadable tool calls before the episode ends.
    pub max_parse_errors: u32,
    /// Most seconds of one blocking command.
    pub exec_seconds: u64,
    /// Most seconds of all the calls of one message.
    pub step_seconds: u64,
    /// Most seconds a background process lives.
    pub background_seconds: u64,
    /// Characters of a tool's output kept.
    pub output_chars: usize,
    /// Most seconds of the task's tests.
    pub eval_seconds: u64,
    /// Address space of each process, MiB.
    pub memory_mb: u64,
    /// Memory of all of a command's processes together, MiB.
    pub memory_total_mb: u64,
    /// The bubblewrap binary.
    pub bwrap: String,
    /// What a task's image (its Dockerfile or image.toml) does: `build` it and run the task on
    /// it, or run the task on the `host`'s system without it.
    pub images: String,
    /// Where built images are kept; empty: `OPENCLAW_IMAGE_CACHE`, else the default cache.
    pub image_cache: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tasks_dir: String::new(),
            eval_every: 5,
            max_turns: 10,
            max_parse_errors: 3,
            exec_seconds: 40,
            step_seconds: 45,
            background_seconds: 300,
            output_chars: 4096,
            eval_seconds: 50,
            memory_mb: 512,
            memory_total_mb: 8192,
            bwrap: "bwrap".into(),
            images: "build".into(),
            image_cache: String::new(),
        }
    }
}

/// One tool's entry of the `[tools]` section (what `TOOLS_CONFIG` lists).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct ToolLimits {
    /// Characters of its output kept (`env.output_chars` when not given).
    pub output_chars: Option<usize>,
}

/// The tools offered and the output each may return.
#[derive(Clone, Debug)]
struct Offered {
    tools: Vec<&'static str>,
    output_chars: HashMap<&'static str, usize>,
}

impl Offered {
    /// Every tool, or only those a `[tools]` section names.
    fn new(cfg: &Config, section: &HashMap<String, ToolLimits>) -> PluginResult<Offered> {
        let mut tools = Vec::new();
        let mut output_chars = HashMap::new();
        for name in tools::ALL {
            let limits = match section.get(name) {
                Some(l) => l.clone(),
                None if section.is_empty() => ToolLimits::default(),
                None => continue,
            };
            tools.push(name);
            output_chars.insert(name, limits.output_chars.unwrap_or(cfg.output_chars));
        }
        if let Some(unknown) = section.keys().find(|k| !tools::ALL.contains(&k.as_str())) {
            return Err(format!(
                "[tools] names `{unknown}`; the terminal environment offers {}",
                tools::ALL.join(", ")
            ));
        }
        if !tools.contains(&tools::SHELL_EXEC) {
            return Err("[tools] must offer `shell_exec`: without it nothing can be done".into());
        }
        Ok(Offered {
            tools,
            output_chars,
        })
    }
}

/// A named shell session.
#[derive(Default)]
struct Session {
    /// Where its next command starts.
    cwd: String,
    /// Its background process, if it started one.
    background: Option<Background>,
    /// The output of its last blocking command (what `shell_view` shows without a process).
    last: String,
}

impl Session {
    /// `command` as a script that starts where the session's last command ended (`/app` at
    /// first, and when that directory is gone).
    fn script(&self, command: &str) -> String {
        let cwd = if self.cwd.is_empty() { APP } else { &self.cwd };
        format!("cd -- {} 2>/dev/null || cd {APP}\n{command}\n", quote(cwd))
    }
}

struct Episode {
    task: TaskSpec,
    workdir: Workdir,
    progress: Progress,
    sessions: HashMap<String, Session>,
    parse_errors: u32,
}

/// The terminal environment.
pub struct TerminalEnv {
    cfg: Config,
    offered: Offered,
    tools_json: String,
    sandbox: Sandbox,
    root: PathBuf,
    tasks: Vec<TaskSpec>,
    /// The built-in tasks' folder, removed with the environment.
    _builtin: Option<tempfile::TempDir>,
    episodes: EpisodeTable<Episode>,
    /// The task folders that did not load, and why.
    problems: Vec<String>,
    /// Tasks with their own image, by name: the sandbox on it, and the image's `/app` (what
    /// its Dockerfile copied there), seeded into each episode's work directory.
    imaged: HashMap<String, (Sandbox, Option<PathBuf>)>,
}

/// `s` quoted for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Marks the end of a blocking command's stderr with the directory it ended in.
const CWD_MARK: char = '\u{1e}';

impl TerminalEnv {
    /// A command with the environment every command gets (git's identity and branch name,
    /// which a fresh home directory lacks).
    fn command<I: IntoIterator<Item = S>, S: Into<String>>(argv: I) -> Run {
        Run::new(argv)
            .env("GIT_AUTHOR_NAME", "agent")
            .env("GIT_AUTHOR_EMAIL", "agent@sandbox")
            .env("GIT_COMMITTER_NAME", "agent")
            .env("GIT_COMMITTER_EMAIL", "agent@sandbox")
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "init.defaultBranch")
            .env("GIT_CONFIG_VALUE_0", "main")
            .env("PYTHONDONTWRITEBYTECODE", "1")
    }

    /// The task a `Task` names: `{"task": {task_name, task_path}}` (the original's task file
    /// rows), the same keys at the top, or a task id of this environment's set. Only tasks of
    /// the set are run: a `task_path` must be one of its folders, since whoever sends the task
    /// (a pool's client among them) would otherwise choose which host files are read and shown.
    fn task_of(&self, task: &Task) -> PluginResult<TaskSpec> {
        let data: Value = if task.data_json.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&task.data_json)
                .map_err(|e| format!("task `{}`: data_json is not JSON: {e}", task.id))?
        };
        let inner = if data["task"].is_object() {
            &data["task"]
        } else {
            &data
        };
        // By name first: a path is only meaningful on the machine (and, for the built-in set,
        // in the process) that listed it.
        let name = inner["task_name"].as_str().unwrap_or(task.id.as_str());
        if let Some(t) = self.tasks.iter().find(|t| t.name == name) {
            return Ok(t.clone());
        }
        if let Some(p) = inner["task_path"].as_str() {
            let p = Path::new(p);
            let real = std::fs::canonicalize(if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.root.join(p)
            })
            .ok();
            if let Some(t) = self.tasks.iter().find(|t| Some(&t.dir) == real.as_ref()) {
                return Ok(t.clone());
            }
            return Err(format!(
                "task `{}`: task_path `{}` is not a folder of {}; this environment runs only its own tasks",
                task.id,
                p.display(),
                self.set_name()
            ));
        }
        Err(format!(
            "task `{}`: no task `{name}` in {} (give `task_name` of one of its {} tasks)",
            task.id,
            self.set_name(),
            self.tasks.len()
        ))
    }

    /// The task set, as errors name it (a client of a pool sees them: no host path).
    fn set_name(&self) -> &'static str {
        if self._builtin.is_some() {
            "the built-in task set"
        } else {
            "the task set (env.tasks_dir)"
        }
    }

    /// Runs `call` in the episode; the text the agent gets back (errors start `[TOOL_ERROR]`).
    fn execute(&self, ep: &mut Episode, call: &Call, left: Duration) -> Result<String, String> {
        let args = tools::readable(call, &self.offered.tools)?;
        let name = call.name.as_str();
        match name {
            tools::SHELL_EXEC => {
                let id = tools::text(args, "id", name)?.to_string();
                let command = tools::text(args, "command", name)?;
                let block = args.get("block").and_then(Value::as_bool).unwrap_or(true);
                let asked = args.get("timeout").and_then(Value::as_f64).unwrap_or(20.0);
                if block {
                    Ok(self.exec_blocking(ep, &id, command, asked, left))
                } else {
                    self.exec_background(ep, &id, command)
                }
            }
            tools::SHELL_VIEW => {
                let id = tools::text(args, "id", name)?;
                let session = ep.sessions.get_mut(id).ok_or_else(|| no_session(id))?;
                Ok(match &session.background {
                    Some(bg) => {
                        let (out, dropped) = bg.take_output();
                        let mut text = String::from_utf8_lossy(&out).into_owned();
                        if dropped {
                            text.push_str("\n[its output past the sandbox's limit was dropped]");
                        }
                        text.push_str(&status_line(bg.status()));
                        text
                    }
                    None => session.last.clone(),
                })
            }
            tools::SHELL_WRITE_TO_PROCESS => {
                let id = tools::text(args, "id", name)?;
                let line = tools::text(args, "command", name)?;
                let session = ep.sessions.get_mut(id).ok_or_else(|| no_session(id))?;
                let bg = session
                    .background
                    .as_mut()
                    .filter(|bg| bg.status() == Status::Running)
                    .ok_or_else(|| {
                        format!("session `{id}` has no running process (start one with shell_exec and block=false)")
                    })?;
                bg.write(format!("{line}\n").as_bytes())
                    .map_err(|e| format!("writing to session `{id}`'s process: {e}"))?;
                // Its answer: what it prints within a second (or until it ends).
                let status = bg.wait(Duration::from_secs(1).min(left));
                let (out, _) = bg.take_output();
                let mut text = String::from_utf8_lossy(&out).into_owned();
                if status != Status::Running {
                    text.push_str(&status_line(status));
                }
                Ok(text)
            }
            tools::SHELL_WRITE_CONTENT_TO_FILE => {
                let content = tools::text(args, "content", name)?;
                let path = tools::text(args, "file_path", name)?;
                if path.trim().is_empty() {
                    return Err("`file_path` is empty".into());
                }
                // Written inside the sandbox, never from the host: a link the agent left
                // cannot turn it into a write outside its directory.
                let run = Self::command([
                    "bash",
                    "-c",
                    "cd -- \"$0\" 2>/dev/null || cd /app; mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"",
                    "/app",
                    path,
                ])
                .stdin(content.as_bytes().to_vec())
                .wall(left.min(Duration::from_secs(self.cfg.exec_seconds)));
                let out = ep.workdir.run(&run).map_err(|e| e.to_string())?;
                if out.success() {
                    Ok(format!("Content successfully written to file: {path}"))
                } else {
                    Err(format!(
                        "could not write {path}: {}",
                        out.stderr_text().trim()
                    ))
                }
            }
            _ => unreachable!("offered tools are the four above"),
        }
    }

    fn exec_blocking(
        &self,
        ep: &mut Episode,
        id: &str,
        command: &str,
        asked: f64,
        left: Duration,
    ) -> String {
        let session = ep.sessions.entry(id.to_string()).or_default();
        let wall =
            Duration::from_secs_f64(asked.clamp(1.0, self.cfg.exec_seconds as f64)).min(left);
        let script = format!(
            "{}__openclaw_status=$?\nprintf '\\036%s' \"$PWD\" >&2\nexit $__openclaw_status\n",
            session.script(command)
        );
        let run = Self::command(["bash", "-c", script.as_str()]).wall(wall);
        let text = match ep.workdir.run(&run) {
            Err(e) => format!("[TOOL_ERROR] sandbox: {e}"),
            Ok(out) => {
                let mut stderr = out.stderr_text();
                if let Some(at) = stderr.rfind(CWD_MARK) {
                    let dir = stderr[at + CWD_MARK.len_utf8()..].to_string();
                    if dir.starts_with('/') {
                        session.cwd = dir;
                    }
                    stderr.truncate(at);
                }
                let mut text = out.stdout_text();
                text.push_str(&stderr);
                if out.timed_out {
                    text.push_str(&format!(
                        "\n[timed out after {:.0} s; the command was killed]",
                        wall.as_secs_f64()
                    ));
                } else if let Some(code) = out.exit_code.filter(|c| *c != 0) {
                    text.push_str(&format!("\n[exit code {code}]"));
                }
                if out.truncated {
                    text.push_str("\n[output past the sandbox's limit dropped]");
                }
                if out.memory_exceeded {
                    text.push_str(
                        "\n[killed: the command's processes used more than the sandbox's memory]",
                    );
                }
                if out.workdir_full {
                    text.push_str("\n[killed: /app grew past the sandbox's size limit]");
                }
                text
            }
        };
        session.last = text.clone();
        text
    }

    fn exec_background(&self, ep: &mut Episode, id: &str, command: &str) -> Result<String, String> {
        let session = ep.sessions.entry(id.to_string()).or_default();
        if session
            .background
            .as_ref()
            .is_some_and(|bg| bg.status() == Status::Running)
        {
            return Err(format!(
                "session `{id}` already runs a process; use shell_view or shell_write_to_process, or another session id"
            ));
        }
        let script = session.script(command);
        let run = Self::command(["bash", "-c", script.as_str()])
            .wall(Duration::from_secs(self.cfg.background_seconds));
        let bg = ep
            .workdir
            .start(&run)
            .map_err(|e| format!("sandbox: {e}"))?;
        // What it prints first (a prompt, an error) is usually what the agent needs next.
        let status = bg.wait(Duration::from_millis(500));
        let (out, _) = bg.take_output();
        let mut text = format!("[started in the background in session `{id}`]\n");
        text.push_str(&String::from_utf8_lossy(&out));
        if status != Status::Running {
            text.push_str(&status_line(status));
        }
        session.background = Some(bg);
        Ok(text)
    }

    /// Runs the task's tests against the episode's `/app`.
    fn run_tests(&self, ep: &mut Episode) -> PluginResult<(Vec<grade::Outcome>, Value)> {
        for s in ep.sessions.values_mut() {
            if let Some(bg) = s.background.take() {
                bg.stop();
            }
        }
        let stage = tempfile::Builder::new()
            .prefix("openclaw-tests-")
            .tempdir()
            .map_err(|e| format!("staging the tests: {e}"))?;
        // Both checked again: the folder may have changed since the task set was read.
        let missing = |what: &str| format!("task `{}`: {what} is gone", ep.task.name);
        let tests = ep.task.file("tests")?.ok_or_else(|| missing("tests/"))?;
        let script = ep
            .task
            .file("run-tests.sh")?
            .ok_or_else(|| missing("run-tests.sh"))?;
        copy_tree(&ep.task.root, &tests, stage.path())
            .and_then(|_| std::fs::copy(&script, stage.path().join("run-tests.sh")).map(|_| ()))
            .and_then(|_| readable(stage.path()))
            .map_err(|e| format!("task `{}`: staging its tests: {e}", ep.task.name))?;
        let limit = (4.0 * ep.task.yaml.max_test_timeout_sec).min(self.cfg.eval_seconds as f64);
        let wall = Duration::from_secs_f64(limit.max(1.0));
        // Python must not import what the agent left in /app or its home before the tests
        // do (a planted `pytest.py` or `.pth` file could print a passing summary).
        let run = Self::command(["bash", "/tests/run-tests.sh"])
            .env("TEST_DIR", "/tests")
            .env("PYTHONSAFEPATH", "1")
            .env("PYTHONNOUSERSITE", "1")
            .ro_bind(stage.path(), "/tests")
            .wall(wall);
        let out = ep
            .workdir
            .run(&run)
            .map_err(|e| format!("task `{}`: running its tests: {e}", ep.task.name))?;
        let text = format!("{}{}", out.stdout_text(), out.stderr_text());
        let outcomes = grade::pytest_summary(&text);
        let details = json!({
            "exit_code": out.exit_code,
            "timed_out": out.timed_out,
            "seconds": out.elapsed.as_secs_f64(),
            "output_tail": tools::cut(&text, 2000),
        });
        Ok((outcomes, details))
    }
}

fn no_session(id: &str) -> String {
    format!("no session `{id}` (a session starts with its first shell_exec)")
}

fn status_line(status: Status) -> String {
    match status {
        Status::Running => "\n[still running]".into(),
        Status::Exited(Some(c)) => format!("\n[the process exited with code {c}]"),
        Status::Exited(None) => "\n[the process was ended by a signal]".into(),
        Status::Killed => "\n[the process was killed at its time limit]".into(),
    }
}

/// Copies the tree `from` into the existing folder `to`; links are not followed (nor copied),
/// and `from` must lie inside `root`.
fn copy_tree(root: &Path, from: &Path, to: &Path) -> std::io::Result<()> {
    if !from.starts_with(root) {
        return Err(std::io::Error::other("a folder outside the task set"));
    }
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let kind = e.file_type()?;
        let dest = to.join(e.file_name());
        if kind.is_dir() {
            std::fs::create_dir(&dest)?;
            copy_tree(root, &e.path(), &dest)?;
        } else if kind.is_file() {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// Makes the tree readable (and folders enterable) by the sandbox's user.
fn readable(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            readable(&e.path())?;
        } else {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o644))?;
        }
    }
    Ok(())
}

impl Env for TerminalEnv {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "env")?;
        let section: HashMap<String, ToolLimits> = parse_config_section(config, "tools")?;
        let offered = Offered::new(&cfg, &section)?;
        if cfg.eval_every < 2 {
            return Err(format!(
                "env.eval_every must be at least 2, got {}",
                cfg.eval_every
            ));
        }
        if cfg.max_turns == 0
            || cfg.exec_seconds == 0
            || cfg.step_seconds == 0
            || cfg.eval_seconds == 0
            || cfg.background_seconds == 0
        {
            return Err("env.max_turns, env.exec_seconds, env.step_seconds, env.eval_seconds and env.background_seconds must be at least 1".into());
        }
        if !(64..=1 << 20).contains(&cfg.memory_mb) {
            return Err(format!(
                "env.memory_mb must be between 64 and 1048576, got {}",
                cfg.memory_mb
            ));
        }
        if !(cfg.memory_mb..=1 << 22).contains(&cfg.memory_total_mb) {
            return Err(format!(
                "env.memory_total_mb must be between env.memory_mb ({}) and 4194304, got {}",
                cfg.memory_mb, cfg.memory_total_mb
            ));
        }
        if offered
            .output_chars
            .values()
            .any(|&n| !(16..=1 << 20).contains(&n))
        {
            return Err("output_chars must be between 16 and 1048576".into());
        }
        let (root, builtin) = if cfg.tasks_dir.is_empty() {
            // Named with the pid, so a later start clears what a killed process left.
            let prefix = "openclaw-terminal-tasks-";
            openclaw_sandbox::clear_dead_folders(&std::env::temp_dir(), prefix);
            let dir = tempfile::Builder::new()
                .prefix(&format!("{prefix}{}-", std::process::id()))
                .tempdir()
                .map_err(|e| format!("env `terminal`: unpacking the built-in tasks: {e}"))?;
            tasks::extract_builtin(dir.path())
                .map_err(|e| format!("env `terminal`: unpacking the built-in tasks: {e}"))?;
            (dir.path().to_path_buf(), Some(dir))
        } else {
            (PathBuf::from(&cfg.tasks_dir), None)
        };
        let (root, tasks, problems) = tasks::load_all(&root)?;
        for p in &problems {
            host.warn(&format!("env `terminal`: skipped {p}"));
        }
        let longest = cfg
            .exec_seconds
            .max(cfg.eval_seconds)
            .max(cfg.background_seconds);
        let sandbox_config = SandboxConfig {
            bwrap: PathBuf::from(&cfg.bwrap),
            limits: Limits {
                memory_bytes: cfg.memory_mb << 20,
                memory_total_bytes: cfg.memory_total_mb << 20,
                cpu_seconds: longest,
                processes: 64,
                wall: Duration::from_secs(longest),
                ..Limits::default()
            },
            work_mount: PathBuf::from(APP),
            ..SandboxConfig::default()
        };
        let sandbox =
            Sandbox::new(sandbox_config.clone()).map_err(|e| format!("env `terminal`: {e}"))?;
        let (mut tasks, mut problems) = (tasks, problems);
        let imaged = images(&cfg, &sandbox_config, &host, &mut tasks, &mut problems)?;
        Ok(TerminalEnv {
            tools_json: tools::schema(&offered.tools),
            offered,
            cfg,
            sandbox,
            root,
            tasks,
            _builtin: builtin,
            episodes: EpisodeTable::default(),
            problems,
            imaged,
        })
    }

    fn tasks(&self, split: &str) -> PluginResult<Vec<Task>> {
        let keep = |i: usize| {
            let eval = i % self.cfg.eval_every == self.cfg.eval_every - 1;
            match split {
                "train" => Ok(!eval),
                "eval" | "test" => Ok(eval),
                "all" => Ok(true),
                other => Err(format!(
                    "unknown split `{other}`; the splits are `train`, `eval` and `all`"
                )),
            }
        };
        let mut out = Vec::new();
        for (i, t) in self.tasks.iter().enumerate() {
            if keep(i)? {
                out.push(Task {
                    id: t.name.as_str().into(),
                    instruction: t.prompt().into(),
                    data_json: json!({"task": {
                        "task_name": t.name,
                        "instruction": t.yaml.instruction,
                        "data_source": "terminal",
                        "difficulty": t.yaml.difficulty,
                        "category": t.yaml.category,
                    }})
                    .to_string()
                    .into(),
                });
            }
        }
        Ok(out)
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let spec = self.task_of(task)?;
        let (sandbox, app) = match self.imaged.get(&spec.name) {
            Some((s, app)) => (s, app.as_ref()),
            None => (&self.sandbox, None),
        };
        let workdir = sandbox
            .workdir()
            .map_err(|e| format!("env `terminal`: {e}"))?;
        if let Some(app) = app {
            // Copied inside the sandbox, so the episode's user owns what the image put in /app.
            let out = workdir
                .run(
                    &Self::command(["bash", "-c", "cp -a /image-app/. /app/"])
                        .ro_bind(app, "/image-app")
                        .wall(Duration::from_secs(self.cfg.exec_seconds)),
                )
                .map_err(|e| format!("task `{}`: seeding /app from its image: {e}", spec.name))?;
            if !out.success() {
                return Err(format!(
                    "task `{}`: seeding /app from its image failed: {}",
                    spec.name,
                    tools::cut(out.stderr_text().trim(), 500)
                ));
            }
        }
        if let Some(setup) = spec.setup()? {
            let script = std::fs::read(&setup)
                .map_err(|e| format!("task `{}`: setup.sh: {e}", spec.name))?;
            let out = workdir
                .run(
                    &Self::command(["bash", "-s"])
                        .stdin(script)
                        .wall(Duration::from_secs(self.cfg.exec_seconds)),
                )
                .map_err(|e| format!("task `{}`: setup.sh: {e}", spec.name))?;
            if !out.success() {
                return Err(format!(
                    "task `{}`: setup.sh failed ({}): {}",
                    spec.name,
                    if out.timed_out {
                        "timed out".to_string()
                    } else {
                        format!("exit code {:?}", out.exit_code)
                    },
                    tools::cut(out.stderr_text().trim(), 500)
                ));
            }
        }
        let prompt = spec.prompt();
        let id = self.episodes.open(Episode {
            task: spec,
            workdir,
            progress: Progress::default(),
            sessions: HashMap::new(),
            parse_errors: 0,
        })?;
        Ok((id, first_observation(&prompt, &self.tools_json)))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        self.episodes.with(episode, |ep| {
            ep.progress.next_turn(episode)?;
            let calls = tools::calls(&action.message);
            let step_end = Instant::now() + Duration::from_secs(self.cfg.step_seconds);
            let mut messages = Vec::with_capacity(calls.len());
            for call in &calls {
                let left = step_end.saturating_duration_since(Instant::now());
                let output = if left < Duration::from_secs(1) {
                    format!(
                        "[TOOL_ERROR] this message's calls used its {} s; call again in your next message",
                        self.cfg.step_seconds
                    )
                } else {
                    match self.execute(ep, call, left) {
                        Ok(text) => {
                            ep.progress.tool_calls += 1;
                            text
                        }
                        Err(why) => {
                            if tools::readable(call, &self.offered.tools).is_err() {
                                ep.parse_errors += 1;
                            }
                            format!("[TOOL_ERROR] {why}")
                        }
                    }
                };
                let limit = self
                    .offered
                    .output_chars
                    .get(call.name.as_str())
                    .copied()
                    .unwrap_or(self.cfg.output_chars);
                messages.push(tools::result_message(call, &tools::cut(&output, limit)));
            }
            let finished = calls.is_empty();
            let given_up = ep.parse_errors >= self.cfg.max_parse_errors;
            let truncated = !finished && !given_up && ep.progress.turns >= self.cfg.max_turns;
            ep.progress.done = finished || given_up || truncated;
            let metadata = json!({
                "tool_calls": ep.progress.tool_calls,
                "turns": ep.progress.turns,
                "parse_errors": ep.parse_errors,
                "ended": if given_up { "parse_errors" } else if truncated { "max_turns" } else if finished { "answered" } else { "" },
            });
            let next = observation(messages, &self.tools_json);
            Ok(step_outcome(next, ep.progress.done, truncated, &metadata))
        })
    }

    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        self.episodes.with(episode, |ep| {
            let (outcomes, mut details) = self.run_tests(ep)?;
            let score = grade::score(&outcomes);
            let passed = outcomes.iter().filter(|o| o.passed).count();
            details["task"] = json!(ep.task.name);
            details["passed"] = json!(passed);
            details["total"] = json!(outcomes.len());
            details["tests"] = outcomes
                .iter()
                .map(|o| json!({"test": o.test, "status": o.status}))
                .collect();
            details["tool_calls"] = json!(ep.progress.tool_calls);
            details["turns"] = json!(ep.progress.turns);
            Ok(Evaluation {
                reward: score as f32,
                solved: !outcomes.is_empty() && passed == outcomes.len(),
                details_json: details.to_string().into(),
            })
        })
    }

    fn reference(&self, task: &Task) -> PluginResult<Vec<Action>> {
        let spec = self.task_of(task)?;
        let path = spec
            .solution()?
            .ok_or_else(|| format!("task `{}` has no solution.sh", spec.name))?;
        let script = std::fs::read_to_string(&path)
            .map_err(|e| format!("task `{}`: solution.sh: {e}", spec.name))?;
        // The solution as one blocking shell_exec, then a message without calls (done).
        let call = json!([{"id": "call_reference", "type": "function", "function": {
            "name": tools::SHELL_EXEC,
            "arguments": json!({"id": "main", "command": script, "timeout": self.cfg.exec_seconds}).to_string(),
        }}]);
        let mut run = openclaw_plugin_api::Message::new("assistant", "");
        run.tool_calls_json =
            openclaw_plugin_api::abi_stable::std_types::ROption::RSome(call.to_string().into());
        Ok(vec![
            Action { message: run },
            Action {
                message: openclaw_plugin_api::Message::new("assistant", "Done."),
            },
        ])
    }

    fn problems(&self) -> Vec<String> {
        self.problems.clone()
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        let ep = self.episodes.close(episode)?;
        // Background processes first (and waited for), so nothing writes into the work
        // directory while it is removed.
        if let Some(ep) = &ep {
            if let Ok(mut ep) = ep.lock() {
                for s in ep.sessions.values_mut() {
                    if let Some(bg) = s.background.take() {
                        bg.stop();
                    }
                }
            }
        }
        // Dropping the episode kills its background processes and removes its directory,
        // outside the table's lock.
        drop(ep);
        Ok(())
    }
}

/// Builds the tasks' images (each distinct one once; a cached one is reused) and a sandbox on
/// each. A task whose image cannot be built is reported and left out; with `images = "host"`
/// the tasks run on the host's system, each said once.
fn images(
    cfg: &Config,
    base: &SandboxConfig,
    host: &HostServices,
    tasks: &mut Vec<TaskSpec>,
    problems: &mut Vec<String>,
) -> PluginResult<HashMap<String, (Sandbox, Option<PathBuf>)>> {
    let mut out = HashMap::new();
    if !tasks.iter().any(|t| t.image.is_some()) {
        return Ok(out);
    }
    match cfg.images.as_str() {
        "build" => {}
        "host" => {
            for t in tasks.iter().filter(|t| t.image.is_some()) {
                host.warn(&format!(
                    "env `terminal`: task `{}` runs on the host's system, not its image (env.images = \"host\")",
                    t.name
                ));
            }
            return Ok(out);
        }
        other => {
            return Err(format!(
                "env.images = {other:?}: the values are \"build\" (run each task on its image) and \"host\" (on the host's system)"
            ))
        }
    }
    let cache = if cfg.image_cache.is_empty() {
        openclaw_env_images::ImageCache::at_default()
    } else {
        Ok(openclaw_env_images::ImageCache::new(&cfg.image_cache))
    }
    .map_err(|e| format!("env `terminal`: the image cache: {e}"))?;
    let items: Vec<(String, openclaw_env_images::ImageSpec)> = tasks
        .iter()
        .filter_map(|t| Some((t.name.clone(), t.image.clone()?)))
        .collect();
    let built = openclaw_env_images::sandboxes(&cache, &items, base, |name, spec| {
        host.info(&format!(
            "env `terminal`: building the image of task `{name}` ({}); a first build takes a minute or two",
            spec.origin
        ))
    });
    let mut failed = Vec::new();
    for (name, made) in built {
        match made {
            Ok((sandbox, image)) => {
                out.insert(name, (sandbox, image.folder(Path::new(APP))));
            }
            Err(e) => failed.push((name, e)),
        }
    }
    for (name, why) in failed {
        let line = format!("task `{name}`: its image: {why}");
        host.warn(&format!("env `terminal`: skipped {line}"));
        problems.push(line);
        tasks.retain(|t| t.name != name);
    }
    if tasks.is_empty() {
        return Err(format!(
            "env `terminal`: no task is left:\n  {}",
            problems.join("\n  ")
        ));
    }
    Ok(out)
}

impl TerminalEnv {
    /// The tasks this environment has, in order (their folders and `task.yaml`).
    pub fn task_specs(&self) -> &[TaskSpec] {
        &self.tasks
    }
}

//! The environment object: its tasks and server, chromedriver, the episodes' browser
//! sessions, and the check after the loop.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use openclaw_env_kit::{
    first_observation, observation, step_outcome, EpisodeTable, Progress, ToolCall,
};
use openclaw_plugin_api::abi_stable::std_types::ROption::RSome;
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::serde_json::{self, json, Value};
use openclaw_plugin_api::{
    parse_config_section, Action, Env, Evaluation, HostServices, Message, Observation,
    PluginResult, StepOutcome, Task,
};

use crate::actions::{self, Act, Viewport};
use crate::ax;
use crate::browser::{self, Cdp, Driver, Failure};
use crate::serve::Server;
use crate::tasks::{self, Broken, TaskSpec};

/// The default configuration (`config.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The `[env]` section of the configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// A folder of task folders; empty for the built-in set.
    pub tasks_dir: String,
    /// The screenshot driver: only `webdriver` (the original's SCREENSHOT_BACKEND).
    pub screenshot_backend: String,
    /// The chromedriver program.
    pub chromedriver: String,
    /// The Chromium program.
    pub chromium: String,
    /// The viewport's width, CSS pixels.
    pub width: u32,
    /// The viewport's height, CSS pixels.
    pub height: u32,
    /// Most seconds one WebDriver call may take before the episode's browser counts as hung.
    pub action_seconds: u64,
    /// Most seconds the calls of one message may start in (a `wait` is cut to what is left).
    pub step_seconds: u64,
    /// Milliseconds the page gets after each action (three times that after a scroll).
    pub settle_ms: u64,
    /// Steps per episode at most (a task's `max_steps` is cut to it).
    pub max_turns: u32,
    /// Unreadable calls (or messages without one) before the episode ends.
    pub max_parse_errors: u32,
    /// Characters of the accessibility tree shown.
    pub ax_chars: usize,
    /// Where each episode's screenshots are kept; empty for a temporary folder removed with the
    /// environment.
    pub screenshots_dir: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tasks_dir: String::new(),
            screenshot_backend: "webdriver".into(),
            chromedriver: "chromedriver".into(),
            chromium: "chromium".into(),
            width: 1000,
            height: 800,
            action_seconds: 20,
            step_seconds: 30,
            settle_ms: 150,
            max_turns: 25,
            max_parse_errors: 3,
            ax_chars: 6000,
            screenshots_dir: String::new(),
        }
    }
}

impl Config {
    /// Checks every value; errors name the key.
    fn check(&self) -> PluginResult<()> {
        match self.screenshot_backend.as_str() {
            "webdriver" => {}
            "playwright" | "selenium" => {
                return Err(format!(
                    "env.screenshot_backend = {:?}: the original's playwright/selenium backends are Python; this environment drives Chromium over WebDriver: set SCREENSHOT_BACKEND=webdriver or unset it",
                    self.screenshot_backend
                ))
            }
            other => {
                return Err(format!(
                    "env.screenshot_backend = {other:?} is not a backend; the one here is \"webdriver\" (the original's \"playwright\" and \"selenium\" are refused: this environment drives Chromium over WebDriver)"
                ))
            }
        }
        let range = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("env.{key} must be between {lo} and {hi}, got {v}"))
            }
        };
        range("width", self.width.into(), 200, 4000)?;
        range("height", self.height.into(), 200, 4000)?;
        range("action_seconds", self.action_seconds, 1, 300)?;
        range("step_seconds", self.step_seconds, 1, 600)?;
        range("settle_ms", self.settle_ms, 0, 10_000)?;
        range("max_turns", self.max_turns.into(), 1, 1000)?;
        range("max_parse_errors", self.max_parse_errors.into(), 1, 1000)?;
        range("ax_chars", self.ax_chars as u64, 200, 1 << 20)?;
        for (key, v) in [
            ("chromedriver", &self.chromedriver),
            ("chromium", &self.chromium),
        ] {
            if v.trim().is_empty() {
                return Err(format!(
                    "env.{key} is empty: name the program (or its path)"
                ));
            }
        }
        Ok(())
    }
}

/// Kills a session's browser processes and removes its profile folder when dropped.
struct Profile(PathBuf);

impl Profile {
    fn pids(&self) -> Vec<u32> {
        browser::browser_pids(&self.0)
    }

    /// Kills the browser and waits (a little) for its processes to go.
    fn kill(&self) {
        let end = Instant::now() + Duration::from_secs(2);
        loop {
            let pids = self.pids();
            if pids.is_empty() || Instant::now() > end {
                break;
            }
            browser::kill(&pids);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One episode: its task, its browser session and what it counted.
struct Episode {
    task: TaskSpec,
    client: Option<Client>,
    profile: Profile,
    /// Its screenshots' folder.
    dir: PathBuf,
    progress: Progress,
    parse_errors: u32,
    /// The pointer's position, viewport pixels.
    pointer: (i64, i64),
    screenshots: u32,
    /// Steps it gets: the task's `max_steps`, cut to `max_turns`.
    limit: u32,
    /// How it ended: `terminate`, `max_steps`, `parse_errors` or `browser`.
    ended: Option<&'static str>,
    /// Why its browser is gone, when it is.
    dead: Option<String>,
    /// `terminate`'s status.
    status: Option<bool>,
    /// `[innerWidth, innerHeight, devicePixelRatio]` after the page loaded.
    viewport_seen: Value,
}

/// What an observation of the page gave.
struct Seen {
    screenshot: Option<PathBuf>,
    text: String,
}

/// The GUI environment.
pub struct GuiEnv {
    cfg: Config,
    viewport: Viewport,
    tools_json: String,
    chromium: PathBuf,
    driver: Mutex<Driver>,
    server: Server,
    root: PathBuf,
    tasks: Vec<TaskSpec>,
    broken: Vec<Broken>,
    builtin: bool,
    shots: PathBuf,
    work: tempfile::TempDir,
    seq: AtomicU64,
    episodes: EpisodeTable<Episode>,
    rt: Option<tokio::runtime::Runtime>,
}

/// How long closing a session may take before its browser is killed.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);
/// How long a session's browser may take to start (at least; `action_seconds` when longer).
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long chromedriver may take to start.
const DRIVER_START: Duration = Duration::from_secs(20);
/// The prefix of the environment's temporary folders (then the pid).
const WORK_PREFIX: &str = "openclaw-gui-";

impl GuiEnv {
    fn action_limit(&self) -> Duration {
        Duration::from_secs(self.cfg.action_seconds)
    }

    fn settle(&self) -> Duration {
        Duration::from_millis(self.cfg.settle_ms)
    }

    /// Runs `fut` to its end on the environment's runtime (from a thread of its own when the
    /// caller is itself inside a Tokio runtime, where blocking on another is refused).
    fn run<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        let rt = self
            .rt
            .as_ref()
            .expect("the runtime lives as long as the environment");
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                s.spawn(move || rt.block_on(fut))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            rt.block_on(fut)
        }
    }

    /// The task a `Task` names: `{"task": {"task_name": …}}`, the same key at the top, or a
    /// task id of this environment's set. Only tasks of the set are run.
    fn task_of(&self, task: &Task) -> PluginResult<&TaskSpec> {
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
        let name = inner["task_name"].as_str().unwrap_or(task.id.as_str());
        self.tasks.iter().find(|t| t.id == name).ok_or_else(|| {
            format!(
                "task `{}`: no task `{name}` in {} (give the id of one of its {} tasks)",
                task.id,
                if self.builtin {
                    "the built-in task set"
                } else {
                    "the task set (env.tasks_dir)"
                },
                self.tasks.len()
            )
        })
    }

    fn spec(&self, task_id: &str) -> PluginResult<&TaskSpec> {
        self.tasks
            .iter()
            .find(|t| t.id == task_id)
            .ok_or_else(|| format!("no task `{task_id}`"))
    }

    /// `fut`, a WebDriver call doing `what`, within the action limit.
    async fn timed<T>(
        limit: Duration,
        what: &str,
        fut: impl Future<Output = Result<T, fantoccini::error::CmdError>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(limit, fut).await {
            Err(_) => Err(Failure::Dead(format!(
                "the browser did not answer within {} s while {what} (a hung page, or a hung browser)",
                limit.as_secs()
            ))),
            Ok(Err(e)) => Err(browser::classify(what, &e)),
            Ok(Ok(v)) => Ok(v),
        }
    }

    /// Ends the episode's browser: records why, drops the session and kills its processes.
    fn fail(&self, ep: &mut Episode, why: String) -> String {
        ep.dead = Some(why.clone());
        // Killed first: a hung call then fails at once, and the dropped session's shutdown
        // (sent by fantoccini when its last handle goes) is answered.
        ep.profile.kill();
        ep.client = None;
        why
    }

    /// The page as it is now: a screenshot saved as `step-NNN.png` and the accessibility tree
    /// as text. A refused screenshot or tree is noted; a dead browser is an error.
    async fn observe(&self, ep: &Episode, step: u32) -> Result<Seen, Failure> {
        let client = ep
            .client
            .as_ref()
            .ok_or_else(|| Failure::Dead("the browser is gone".into()))?;
        let limit = self.action_limit();
        let mut notes = Vec::new();
        let name = format!("step-{step:03}.png");
        let screenshot = match Self::timed(limit, "taking a screenshot", client.screenshot()).await
        {
            Ok(png) => {
                let path = ep.dir.join(&name);
                match std::fs::write(&path, &png) {
                    Ok(()) => Some(path),
                    Err(e) => {
                        notes.push(format!("[the screenshot could not be saved: {e}]"));
                        None
                    }
                }
            }
            Err(Failure::Refused(why)) => {
                notes.push(format!("[no screenshot: {why}]"));
                None
            }
            Err(dead) => return Err(dead),
        };
        let layout = match Self::timed(
            limit,
            "reading the page's layout",
            client.issue_cmd(Cdp {
                cmd: "DOMSnapshot.captureSnapshot",
                params: json!({"computedStyles": []}),
            }),
        )
        .await
        {
            Ok(v) => ax::Layout::from_snapshot(&v, self.viewport),
            Err(Failure::Refused(_)) => ax::Layout::none(self.viewport),
            Err(dead) => return Err(dead),
        };
        let tree = match Self::timed(
            limit,
            "reading the accessibility tree",
            client.issue_cmd(Cdp {
                cmd: "Accessibility.getFullAXTree",
                params: json!({}),
            }),
        )
        .await
        {
            Ok(v) => ax::text(&v, &layout, self.cfg.ax_chars),
            Err(Failure::Refused(why)) => {
                format!("(the accessibility tree could not be read: {why})")
            }
            Err(dead) => return Err(dead),
        };
        let mut text = format!("The page's accessibility tree (@[x, y]: an element's center on the 0..999 grid):\n{tree}");
        for n in notes {
            text.push('\n');
            text.push_str(&n);
        }
        if screenshot.is_some() {
            text.push_str(&format!(
                "\n[screenshot {name}, {}x{} pixels]",
                self.viewport.width, self.viewport.height
            ));
        }
        Ok(Seen { screenshot, text })
    }

    /// Does one action; the text the agent gets back.
    fn act(&self, ep: &mut Episode, act: &Act, step_end: Instant) -> String {
        let plan = actions::plan(act, self.viewport, ep.pointer);
        if let Some(batch) = plan.batch.clone() {
            let Some(client) = ep.client.as_ref() else {
                return "[TOOL_ERROR] the browser is gone".into();
            };
            let done = self.run(Self::timed(
                self.action_limit(),
                "carrying out the action",
                client.perform_actions(batch.into_actions()),
            ));
            match done {
                Ok(()) => {}
                Err(Failure::Refused(why)) => {
                    return format!("[TOOL_ERROR] the browser refused the action: {why}")
                }
                Err(Failure::Dead(why)) => {
                    let why = self.fail(ep, why);
                    return format!("[TOOL_ERROR] {why}; the episode is over");
                }
            }
        }
        ep.progress.tool_calls += 1;
        ep.pointer = plan.pointer;
        let left = step_end.saturating_duration_since(Instant::now());
        let mut summary = plan.summary;
        if plan.sleep > left {
            summary.push_str(&format!(
                " (cut to {:.1} s: this message's calls have {} s)",
                left.as_secs_f64(),
                self.cfg.step_seconds
            ));
        }
        let pause = plan.sleep.min(left) + self.settle() * plan.settle;
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        if let Some(success) = plan.terminate {
            ep.status = Some(success);
        }
        summary
    }

    /// Opens a session for `spec` and loads its page; the session's profile is killed and
    /// removed on any error.
    fn open(&self, spec: &TaskSpec, seq: u64) -> PluginResult<Episode> {
        let dir = self.shots.join(format!("{seq:05}-{}", spec.id));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("env `gui`: the screenshots' folder {}: {e}", dir.display()))?;
        let profile = Profile(self.work.path().join("profiles").join(seq.to_string()));
        let driver_url = {
            let mut d = self.driver.lock().map_err(|e| e.to_string())?;
            d.ensure(DRIVER_START)?;
            d.url()
        };
        let caps = browser::capabilities(
            &self.chromium,
            &profile.0,
            self.viewport,
            self.action_limit(),
        );
        let limit = self.action_limit();
        // Starting a browser is not an action: a busy machine may take longer.
        let start = limit.max(START_LIMIT);
        let connected = self.run(async {
            let mut builder = ClientBuilder::new(HttpConnector::new());
            builder.capabilities(caps);
            tokio::time::timeout(start, builder.connect(&driver_url)).await
        });
        let client = match connected {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(format!(
                    "task `{}`: the browser did not start: {}",
                    spec.id,
                    e.to_string().lines().next().unwrap_or("")
                ))
            }
            Err(_) => {
                return Err(format!(
                    "task `{}`: the browser did not start within {} s",
                    spec.id,
                    start.as_secs()
                ))
            }
        };
        let mut ep = Episode {
            task: spec.clone(),
            client: Some(client),
            profile,
            dir,
            progress: Progress::default(),
            parse_errors: 0,
            pointer: (0, 0),
            screenshots: 0,
            limit: spec.toml.max_steps.min(self.cfg.max_turns),
            ended: None,
            dead: None,
            status: None,
            viewport_seen: Value::Null,
        };
        let url = self.server.url(&spec.start_path());
        let (w, h) = (self.viewport.width, self.viewport.height);
        let client = ep.client.as_ref().expect("just opened");
        let opened = self.run(Self::timed(limit, "opening the page", async {
            client
                .issue_cmd(Cdp {
                    cmd: "Emulation.setDeviceMetricsOverride",
                    params: json!({"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false}),
                })
                .await?;
            client.goto(&url).await?;
            client
                .execute(
                    "return [window.innerWidth, window.innerHeight, window.devicePixelRatio];",
                    vec![],
                )
                .await
        }));
        match opened {
            Ok(seen) => {
                if seen != json!([w, h, 1]) {
                    eprintln!(
                        "env `gui`: task `{}`: the viewport is {seen}, not [{w}, {h}, 1]",
                        spec.id
                    );
                }
                ep.viewport_seen = seen;
                Ok(ep)
            }
            Err(Failure::Refused(why) | Failure::Dead(why)) => {
                // Dropping the episode kills its browser.
                Err(format!("task `{}`: {why}", spec.id))
            }
        }
    }

    /// The tasks this environment has, in order.
    pub fn task_specs(&self) -> &[TaskSpec] {
        &self.tasks
    }

    /// The task folders skipped as broken, with why.
    pub fn broken_tasks(&self) -> &[Broken] {
        &self.broken
    }

    /// The scripted right run of a task (`solution.json`): computer_use argument objects, for
    /// tests and for checking a task set.
    pub fn reference_actions(&self, task_id: &str) -> PluginResult<Vec<Value>> {
        self.spec(task_id)?
            .actions("solution")
            .map_err(|e| format!("task `{task_id}`: {e}"))
    }

    /// The scripted wrong run of a task (`wrong.json`), which its check must refuse.
    pub fn wrong_actions(&self, task_id: &str) -> PluginResult<Vec<Value>> {
        self.spec(task_id)?
            .actions("wrong")
            .map_err(|e| format!("task `{task_id}`: {e}"))
    }

    /// The process id of the chromedriver the sessions run under.
    pub fn chromedriver_pid(&self) -> u32 {
        self.driver.lock().map(|d| d.pid()).unwrap_or(0)
    }

    /// The living processes of an episode's browser (its main process and descendants), for
    /// tests and diagnostics.
    pub fn browser_pids(&self, episode: u64) -> PluginResult<Vec<u32>> {
        self.episodes.with(episode, |ep| Ok(ep.profile.pids()))
    }

    /// Runs `script` (a WebDriver script body: `return …;`) in an episode's page, for tests
    /// and diagnostics; a hung page fails the episode as any call does.
    pub fn execute_script(&self, episode: u64, script: &str) -> PluginResult<Value> {
        self.episodes.with(episode, |ep| {
            let client = ep
                .client
                .as_ref()
                .ok_or_else(|| format!("episode {episode}: the browser is gone"))?;
            let done = self.run(Self::timed(
                self.action_limit(),
                "running a script",
                client.execute(script, vec![]),
            ));
            match done {
                Ok(v) => Ok(v),
                Err(Failure::Refused(why)) => Err(why),
                Err(Failure::Dead(why)) => Err(self.fail(ep, why)),
            }
        })
    }

    /// The folder the episode's screenshots are kept in.
    pub fn screenshots_folder(&self, episode: u64) -> PluginResult<PathBuf> {
        self.episodes.with(episode, |ep| Ok(ep.dir.clone()))
    }

    /// The folder of the task set (the built-in set's unpacked copy, or `tasks_dir`).
    pub fn tasks_root(&self) -> &Path {
        &self.root
    }
}

/// The tool message answering `call`.
fn result_message(call: &ToolCall, output: &str) -> Message {
    let mut m = Message::new("tool", output);
    if !call.name.is_empty() {
        m.name = RSome(call.name.as_str().into());
    }
    if let Some(id) = &call.id {
        m.tool_call_id = RSome(id.as_str().into());
    }
    m
}

/// The call's action, or why it cannot be read.
fn read(call: &ToolCall) -> Result<Act, String> {
    let args = call.args.as_ref().map_err(Clone::clone)?;
    if call.name != actions::TOOL {
        return Err(if call.name.is_empty() {
            format!("the tool call has no name; the tool is {}", actions::TOOL)
        } else {
            format!(
                "unknown tool `{}`; the tool is {}",
                call.name,
                actions::TOOL
            )
        });
    }
    actions::parse(args)
}

fn append(m: &mut Message, text: &str) {
    let mut content = m.content.to_string();
    if !content.is_empty() {
        content.push_str("\n\n");
    }
    content.push_str(text);
    m.content = content.into();
}

impl Env for GuiEnv {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "env")?;
        cfg.check()?;
        let chromium = browser::find_program(&cfg.chromium).ok_or_else(|| {
            format!(
                "env.chromium: `{}` is not installed (not a file, nor a program on PATH): {}",
                cfg.chromium,
                browser::INSTALL
            )
        })?;
        let driver_program = browser::find_program(&cfg.chromedriver).ok_or_else(|| {
            format!(
                "env.chromedriver: `{}` is not installed (not a file, nor a program on PATH): {}",
                cfg.chromedriver,
                browser::INSTALL
            )
        })?;
        // Named with the pid, so a later start clears what a killed process left.
        openclaw_sandbox::clear_dead_folders(&std::env::temp_dir(), WORK_PREFIX);
        let work = tempfile::Builder::new()
            .prefix(&format!("{WORK_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| format!("env `gui`: a temporary folder: {e}"))?;
        let builtin = cfg.tasks_dir.is_empty();
        let tasks_dir = if builtin {
            let dir = work.path().join("tasks");
            std::fs::create_dir_all(&dir)
                .and_then(|_| tasks::extract_builtin(&dir))
                .map_err(|e| format!("env `gui`: unpacking the built-in tasks: {e}"))?;
            dir
        } else {
            PathBuf::from(&cfg.tasks_dir)
        };
        let (root, tasks, broken) = tasks::load_all(&tasks_dir)?;
        let shots = if cfg.screenshots_dir.is_empty() {
            work.path().join("screenshots")
        } else {
            PathBuf::from(&cfg.screenshots_dir)
        };
        std::fs::create_dir_all(&shots)
            .map_err(|e| format!("env.screenshots_dir `{}`: {e}", shots.display()))?;
        std::fs::create_dir_all(work.path().join("profiles"))
            .map_err(|e| format!("env `gui`: a temporary folder: {e}"))?;
        let server =
            Server::start(&root).map_err(|e| format!("env `gui`: serving the pages: {e}"))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("gui-env")
            .enable_all()
            .build()
            .map_err(|e| format!("env `gui`: a Tokio runtime: {e}"))?;
        let driver = Driver::start(
            &driver_program,
            &work.path().join("chromedriver.log"),
            DRIVER_START,
        )
        .map_err(|e| format!("env `gui`: {e}"))?;
        Ok(GuiEnv {
            viewport: Viewport {
                width: cfg.width,
                height: cfg.height,
            },
            tools_json: actions::schema(),
            chromium,
            driver: Mutex::new(driver),
            server,
            root,
            tasks,
            broken,
            builtin,
            shots,
            work,
            seq: AtomicU64::new(0),
            episodes: EpisodeTable::default(),
            rt: Some(rt),
            cfg,
        })
    }

    fn tasks(&self, split: &str) -> PluginResult<Vec<Task>> {
        Ok(tasks::split(&self.tasks, split)?
            .into_iter()
            .map(|t| Task {
                id: t.id.as_str().into(),
                instruction: t.toml.instruction.trim().into(),
                data_json: json!({"task": {
                    "task_name": t.id,
                    "instruction": t.toml.instruction.trim(),
                    "data_source": "gui",
                    "split": t.toml.split,
                    "category": t.toml.category,
                    "max_steps": t.toml.max_steps,
                }})
                .to_string()
                .into(),
            })
            .collect())
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let spec = self.task_of(task)?;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut ep = self.open(spec, seq)?;
        std::thread::sleep(self.settle());
        let seen = match self.run(self.observe(&ep, 0)) {
            Ok(seen) => seen,
            Err(Failure::Refused(why) | Failure::Dead(why)) => {
                return Err(format!("task `{}`: {why}", spec.id));
            }
        };
        if seen.screenshot.is_some() {
            ep.screenshots += 1;
        }
        let prompt = format!(
            "{}\n\nThe screen shows a web page in a browser window of {}x{} pixels. Act on it with the `{}` tool, one action per call; its coordinates are on a grid from 0 to 999 in both directions ((0, 0) is the top left corner, (999, 999) the bottom right), whatever the window's size. When the task is done, call it with the action `terminate`. You have {} steps.\n\n{}",
            spec.toml.instruction.trim(),
            self.viewport.width,
            self.viewport.height,
            actions::TOOL,
            ep.limit,
            seen.text
        );
        let id = self.episodes.open(ep)?;
        Ok((id, first_observation(&prompt, &self.tools_json)))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        self.episodes.with(episode, |ep| {
            ep.progress.next_turn(episode)?;
            let turn = ep.progress.turns;
            let calls = openclaw_env_kit::tool_calls(&action.message);
            let step_end = Instant::now() + Duration::from_secs(self.cfg.step_seconds);
            let mut messages = Vec::with_capacity(calls.len().max(1));
            let mut acted = false;
            if calls.is_empty() {
                ep.parse_errors += 1;
                messages.push(Message::new(
                    "user",
                    &format!(
                        "[TOOL_ERROR] no tool call found: call `{}` (an OpenAI tool call, or <tool_call>{{\"name\": \"{}\", \"arguments\": {{\"action\": …}}}}</tool_call>); {} of {} unreadable calls or messages so far",
                        actions::TOOL,
                        actions::TOOL,
                        ep.parse_errors,
                        self.cfg.max_parse_errors
                    ),
                ));
            }
            for call in &calls {
                let text = if ep.dead.is_some() || ep.status.is_some() {
                    "[TOOL_ERROR] not run: the episode has ended".to_string()
                } else if step_end.saturating_duration_since(Instant::now()) < Duration::from_secs(1) {
                    format!(
                        "[TOOL_ERROR] not run: this message's calls used its {} s; call again in your next message",
                        self.cfg.step_seconds
                    )
                } else {
                    match read(call) {
                        Err(why) => {
                            ep.parse_errors += 1;
                            format!("[TOOL_ERROR] {why}")
                        }
                        Ok(act) => {
                            acted = true;
                            self.act(ep, &act, step_end)
                        }
                    }
                };
                messages.push(result_message(call, &text));
            }
            let mut screenshot = Value::Null;
            if acted && ep.dead.is_none() {
                let seen = self.run(self.observe(ep, turn));
                let note = match seen {
                    Ok(seen) => {
                        if let Some(p) = &seen.screenshot {
                            ep.screenshots += 1;
                            screenshot = json!(p.display().to_string());
                        }
                        seen.text
                    }
                    Err(Failure::Refused(why) | Failure::Dead(why)) => {
                        let why = self.fail(ep, why);
                        format!("[TOOL_ERROR] {why}; the episode is over")
                    }
                };
                if let Some(last) = messages.last_mut() {
                    append(last, &note);
                }
            }
            let given_up = ep.parse_errors >= self.cfg.max_parse_errors;
            let (done, truncated, ended) = if ep.dead.is_some() {
                (true, true, Some("browser"))
            } else if ep.status.is_some() {
                (true, false, Some("terminate"))
            } else if given_up {
                (true, false, Some("parse_errors"))
            } else if ep.progress.turns >= ep.limit {
                (true, true, Some("max_steps"))
            } else {
                (false, false, None)
            };
            ep.progress.done = done;
            ep.ended = ended;
            let pids = ep.profile.pids();
            let metadata = json!({
                "task": ep.task.id,
                "step": turn,
                "screenshot": screenshot,
                "tool_calls": ep.progress.tool_calls,
                "turns": ep.progress.turns,
                "parse_errors": ep.parse_errors,
                "pointer": [ep.pointer.0, ep.pointer.1],
                "viewport": ep.viewport_seen,
                "browser_processes": pids.len(),
                "browser_rss_mb": browser::rss_bytes(&pids) as f64 / (1024.0 * 1024.0),
                "ended": ended.unwrap_or(""),
                "browser_failure": ep.dead,
                "terminate_status": ep.status.map(|s| if s { "success" } else { "failure" }),
            });
            let next = observation(messages, &self.tools_json);
            Ok(step_outcome(next, done, truncated, &metadata))
        })
    }

    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        self.episodes.with(episode, |ep| {
            let mut check_error = Value::Null;
            // A trailing `;` would end the expression early.
            let check = ep.task.toml.check.trim().trim_end_matches(';').to_string();
            let script = format!(
                "const __v = ({check});\nreturn [!!__v, (__v === null || ['boolean', 'number', 'string', 'undefined'].includes(typeof __v)) ? __v : String(__v)];"
            );
            let done = match (&ep.dead, ep.client.as_ref()) {
                (None, Some(client)) => Some(self.run(Self::timed(
                    self.action_limit(),
                    "running the task's check",
                    client.execute(&script, vec![]),
                ))),
                _ => None,
            };
            let (solved, check_result) = match done {
                Some(Ok(v)) => (v[0].as_bool() == Some(true), v[1].clone()),
                Some(Err(Failure::Refused(why))) => {
                    check_error = json!(why);
                    (false, Value::Null)
                }
                Some(Err(Failure::Dead(why))) => {
                    self.fail(ep, why);
                    (false, Value::Null)
                }
                None => (false, Value::Null),
            };
            let details = json!({
                "task": ep.task.id,
                "check_result": check_result,
                "check_error": check_error,
                "solved": solved,
                "steps": ep.progress.turns,
                "tool_calls": ep.progress.tool_calls,
                "parse_errors": ep.parse_errors,
                "screenshots": ep.screenshots,
                "screenshots_dir": ep.dir.display().to_string(),
                "ended": ep.ended.unwrap_or("not ended (cut off by the host)"),
                "browser_failure": ep.dead,
                "terminate_status": ep.status.map(|s| if s { "success" } else { "failure" }),
            });
            Ok(Evaluation {
                reward: if solved { 1.0 } else { 0.0 },
                solved,
                details_json: details.to_string().into(),
            })
        })
    }

    fn reference(&self, task: &Task) -> PluginResult<Vec<Action>> {
        let spec = self.task_of(task)?;
        let actions = spec
            .actions("solution")
            .map_err(|e| format!("task `{}`: {e}", spec.id))?;
        Ok(actions
            .iter()
            .enumerate()
            .map(|(n, args)| actions::call_message(args, &format!("call_reference_{n}")))
            .collect())
    }

    fn problems(&self) -> Vec<String> {
        self.broken
            .iter()
            .map(|b| format!("task `{}`: {}", b.id, b.why))
            .collect()
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        let Some(ep) = self.episodes.close(episode)? else {
            return Ok(());
        };
        let mut ep = ep.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = ep.client.take() {
            if ep.dead.is_none() {
                // When this fails or hangs, the browser is killed below all the same, and
                // chromedriver drops the session when it finds its browser gone.
                let closed = self
                    .run(async move { tokio::time::timeout(CLOSE_LIMIT, client.close()).await });
                if !matches!(closed, Ok(Ok(()))) {
                    eprintln!(
                        "env `gui`: episode {episode}: the session did not close cleanly; its browser is killed"
                    );
                }
            }
        }
        ep.profile.kill();
        // Screenshots stay; the profile folder goes with the episode.
        Ok(())
    }
}

impl Drop for GuiEnv {
    fn drop(&mut self) {
        // Every browser and chromedriver first, so nothing waits on them; then the runtime,
        // without waiting for what it still runs.
        if let Ok(mut d) = self.driver.lock() {
            d.stop();
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cfg: &str) -> String {
        GuiEnv::new(cfg, HostServices::standalone())
            .err()
            .expect("refused")
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let e = refused("[env]\nscreenshot_backend = \"playwright\"\n");
        assert!(
            e.contains("the original's playwright/selenium backends are Python")
                && e.contains("set SCREENSHOT_BACKEND=webdriver or unset it"),
            "{e}"
        );
        assert!(refused("[env]\nscreenshot_backend = \"selenium\"\n").contains("unset it"));
        let e = refused("[env]\nscreenshot_backend = \"x11\"\n");
        assert!(e.contains("\"x11\"") && e.contains("\"webdriver\""), "{e}");
        assert!(refused("[env]\nwidth = 10\n").contains("env.width"));
        assert!(refused("[env]\naction_seconds = 0\n").contains("env.action_seconds"));
        assert!(refused("[env]\nax_chars = 5\n").contains("env.ax_chars"));
        assert!(refused("[env]\nmax_turn = 3\n").contains("max_turn"));
        assert!(refused("[env]\nchromium = \"\"\n").contains("env.chromium"));
        let e = refused("[env]\nchromium = \"/nonexistent/chromium\"\n");
        assert!(
            e.contains("env.chromium") && e.contains("apt-get install chromium chromium-driver"),
            "{e}"
        );
        let e = refused(
            "[env]\nchromedriver = \"/nonexistent/chromedriver\"\nchromium = \"/bin/sh\"\n",
        );
        assert!(
            e.contains("env.chromedriver")
                && e.contains("apt-get install chromium chromium-driver"),
            "{e}"
        );
    }
}

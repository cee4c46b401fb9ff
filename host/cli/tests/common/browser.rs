//! A page loaded in headless Chromium, for the dashboard's tests: the DOM after its scripts ran
//! for a few seconds of virtual time, its console lines, and a screenshot.
//!
//! Chromium's log (`--enable-logging=stderr`) carries every console message and every uncaught
//! error or Content-Security-Policy refusal as one `CONSOLE` line, without its level, so all
//! of them are returned: a page that logs nothing of its own should have none. Failed
//! requests are not in that log; a page shows those in its DOM.

use anyhow::{anyhow, bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a page left after loading.
#[derive(Debug)]
pub struct Loaded {
    /// The document as serialised after its scripts ran.
    pub dom: String,
    /// Its console lines (`"message", source: URL (line)`), whatever their level.
    pub console: Vec<String>,
}

/// Virtual time the page's scripts get before the DOM is taken (timers and fetches included).
const VIRTUAL_MS: u32 = 5000;
/// The window the screenshot shows.
const WINDOW: &str = "1400,2200";
/// How long Chromium may take in wall time before it is killed.
const WALL: Duration = Duration::from_secs(120);

/// The Chromium to run: `$CHROMIUM`, else `chromium` or `chromium-browser` on `PATH`.
pub fn chromium() -> anyhow::Result<PathBuf> {
    if let Some(given) = std::env::var_os("CHROMIUM").filter(|v| !v.is_empty()) {
        let given = PathBuf::from(given);
        return find(&given).ok_or_else(|| {
            anyhow!(
                "CHROMIUM={} is not a program this test can run",
                given.display()
            )
        });
    }
    ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| find(Path::new(name)))
        .ok_or_else(|| {
            anyhow!(
                "no Chromium found (looked for $CHROMIUM, then chromium and chromium-browser on \
                 PATH): install it with `apt-get install chromium`, or set CHROMIUM to its path"
            )
        })
}

/// `program` itself when it names a file, else the first file of that name on `PATH`.
fn find(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A folder of this process's own, removed when dropped (Chromium's profile and its output).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("openclaw-browser-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads `url` in headless Chromium (a fresh profile), lets its scripts run for
/// [`VIRTUAL_MS`] of virtual time, writes a [`WINDOW`]-sized screenshot to `screenshot` and
/// returns the DOM and the console lines. A URL may carry the dashboard's key as
/// `http://user:KEY@host/dashboard`. Never waits more than [`WALL`].
pub fn load_headless(url: &str, screenshot: &Path) -> anyhow::Result<Loaded> {
    let program = chromium()?;
    let scratch = Scratch::new()?;
    let out_path = scratch.0.join("dom.html");
    let err_path = scratch.0.join("stderr.txt");
    // A screenshot left from an earlier run must not pass for this one's.
    let _ = std::fs::remove_file(screenshot);
    let mut command = Command::new(&program);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.0.join("profile").display()
        ))
        .arg(format!("--virtual-time-budget={VIRTUAL_MS}"))
        .arg(format!("--window-size={WINDOW}"))
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        // Files rather than pipes: nothing has to read them while Chromium runs.
        .stdout(std::fs::File::create(&out_path)?)
        .stderr(std::fs::File::create(&err_path)?);
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let deadline = Instant::now() + WALL;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            // Its renderers and helpers end when the browser process does.
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{} did not finish loading {url} within {WALL:?}:\n{}",
                program.display(),
                tail(&std::fs::read_to_string(&err_path).unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    if !status.success() {
        bail!(
            "{} failed ({status}) loading {url}:\n{}",
            program.display(),
            tail(&stderr)
        );
    }
    let dom = std::fs::read_to_string(&out_path)?;
    // A page that did not load (refused, unreachable) leaves no document.
    if dom.trim().is_empty() || !screenshot.is_file() {
        bail!(
            "{} did not load {url} (no document or no screenshot at {}):\n{}",
            program.display(),
            screenshot.display(),
            tail(&stderr)
        );
    }
    Ok(Loaded {
        dom,
        console: console_lines(&stderr),
    })
}

/// The console lines of Chromium's log: `[pid:tid:time:INFO:CONSOLE:12] "text", source: ...`
/// (older versions write `CONSOLE(12)`), each as what follows the bracket.
fn console_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let (head, rest) = line.split_once("] ")?;
            head.contains(":CONSOLE").then(|| rest.to_string())
        })
        .collect()
}

/// The last lines of a log, for an error message, without the D-Bus complaints every
/// container's Chromium makes.
fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.contains("dbus")).collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

//! Chromium and chromedriver: finding the programs, running chromedriver, what each session is
//! asked for, the Chrome DevTools commands sent through chromedriver, which WebDriver errors
//! end an episode, and the processes of a session's browser (found in `/proc` by the profile
//! folder on its command line, and their descendants) to measure and to kill.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::error::{CmdError, ErrorStatus};
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use openclaw_plugin_api::serde_json::{json, Map, Value};

use crate::actions::Viewport;

/// What to install when a program is missing.
pub const INSTALL: &str = "apt-get install chromium chromium-driver";

/// `program` itself when it names a file, else the first file of that name on `PATH`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.is_empty() {
        return None;
    }
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(p))
        .find(|p| p.is_file())
}

/// A port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
}

/// The body of `GET path` on `127.0.0.1:port`.
fn http_get(port: u16, path: &str, timeout: Duration) -> std::io::Result<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut c = TcpStream::connect_timeout(&addr, timeout)?;
    c.set_read_timeout(Some(timeout))?;
    c.set_write_timeout(Some(timeout))?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    // chromedriver keeps the connection open despite `Connection: close`: read until the
    // body's length is in, or the connection ends.
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if !raw.is_empty()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                break
            }
            Err(e) => return Err(e),
        }
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            });
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

/// The last lines of a log file.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// A running chromedriver, killed (with every browser it started) when dropped.
pub struct Driver {
    child: Child,
    /// Whether it was seen to exit (and was reaped: its pid may then be another process's).
    exited: bool,
    port: u16,
    program: PathBuf,
    log: PathBuf,
}

impl Driver {
    /// Starts `program --port=<free port>`, its output in `log`, and waits (at most `wait`)
    /// until it says it is ready.
    pub fn start(program: &Path, log: &Path, wait: Duration) -> Result<Driver, String> {
        let port = free_port().map_err(|e| format!("chromedriver: no free port: {e}"))?;
        let out = std::fs::File::create(log)
            .map_err(|e| format!("chromedriver: its log {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("chromedriver: its log: {e}"))?;
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e} ({INSTALL})", program.display()))?;
        let mut driver = Driver {
            child,
            exited: false,
            port,
            program: program.to_path_buf(),
            log: log.to_path_buf(),
        };
        let end = Instant::now() + wait;
        loop {
            if let Ok(Some(status)) = driver.child.try_wait() {
                driver.exited = true;
                return Err(format!(
                    "{} exited ({status}) before it was ready:\n{}",
                    program.display(),
                    tail(log)
                ));
            }
            let ready = http_get(port, "/status", Duration::from_secs(2))
                .is_ok_and(|r| r.contains("\"ready\":true") || r.contains("\"ready\": true"));
            if ready {
                return Ok(driver);
            }
            if Instant::now() > end {
                let why = format!(
                    "{} was not ready within {} s:\n{}",
                    program.display(),
                    wait.as_secs(),
                    tail(log)
                );
                driver.stop();
                return Err(why);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The WebDriver URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        if !self.exited && !matches!(self.child.try_wait(), Ok(None)) {
            self.exited = true;
        }
        !self.exited
    }

    /// This driver when it runs, else a new one (its sessions are gone with it).
    pub fn ensure(&mut self, wait: Duration) -> Result<(), String> {
        if self.alive() {
            return Ok(());
        }
        eprintln!(
            "env `gui`: chromedriver exited; starting it again:\n{}",
            tail(&self.log)
        );
        // The old one is reaped: dropping it kills nothing.
        *self = Driver::start(&self.program, &self.log, wait)?;
        Ok(())
    }

    /// Kills every browser it started and then itself (nothing when it already exited: its
    /// browsers are no longer its children then).
    pub fn stop(&mut self) {
        if self.exited {
            return;
        }
        let browsers = descendants(&processes(), &[self.child.id()]);
        kill(&browsers);
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.exited = true;
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a session asks chromedriver for: Chromium at `chromium`, headless, its profile in
/// `profile`, a window of the viewport's size, no network but loopback, and chromedriver's own
/// page-load and script timeouts 5 s past `limit` (the environment's own limit on each call
/// comes first, so a hung page is always reported the same way).
pub fn capabilities(
    chromium: &Path,
    profile: &Path,
    viewport: Viewport,
    limit: Duration,
) -> Capabilities {
    let ms = (limit + Duration::from_secs(5)).as_millis() as u64;
    let mut caps = Map::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert("pageLoadStrategy".into(), json!("normal"));
    caps.insert(
        "timeouts".into(),
        json!({"pageLoad": ms, "script": ms, "implicit": 0}),
    );
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium.to_string_lossy(),
            "args": chromium_args(profile, viewport),
        }),
    );
    caps
}

/// Chromium's command line (after the binary).
pub fn chromium_args(profile: &Path, viewport: Viewport) -> Vec<String> {
    vec![
        "--headless=new".into(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--hide-scrollbars".into(),
        format!("--window-size={},{}", viewport.width, viewport.height),
        "--force-device-scale-factor=1".into(),
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into(),
        "--disable-extensions".into(),
        "--no-first-run".into(),
        // A container's small /dev/shm crashes renderers; this changes nothing a page sees.
        "--disable-dev-shm-usage".into(),
        profile_arg(profile),
    ]
}

/// The argument that names a session's profile folder (and so finds its browser).
pub fn profile_arg(profile: &Path) -> String {
    format!("--user-data-dir={}", profile.display())
}

/// A Chrome DevTools Protocol command, sent through chromedriver's `goog/cdp/execute`.
#[derive(Debug)]
pub struct Cdp {
    /// The method, e.g. `Accessibility.getFullAXTree`.
    pub cmd: &'static str,
    /// Its parameters.
    pub params: Value,
}

impl WebDriverCompatibleCommand for Cdp {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        let id = session_id.ok_or(url::ParseError::EmptyHost)?;
        base_url.join(&format!("session/{id}/goog/cdp/execute"))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"cmd": self.cmd, "params": self.params}).to_string()),
        )
    }
}

/// Why a WebDriver call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The browser refused this one call (an argument it does not take, an alert in the way, a
    /// script that threw); the session goes on.
    Refused(String),
    /// The session is gone or does not answer: the episode ends.
    Dead(String),
}

/// What `e`, from doing `what`, means for the episode.
pub fn classify(what: &str, e: &CmdError) -> Failure {
    match e {
        CmdError::Standard(w)
            if matches!(
                w.error,
                ErrorStatus::InvalidArgument
                    | ErrorStatus::MoveTargetOutOfBounds
                    | ErrorStatus::UnexpectedAlertOpen
                    | ErrorStatus::NoSuchAlert
                    | ErrorStatus::JavascriptError
                    | ErrorStatus::InvalidElementState
                    | ErrorStatus::ElementNotInteractable
                    | ErrorStatus::InvalidCoordinates
                    | ErrorStatus::UnsupportedOperation
            ) =>
        {
            Failure::Refused(first_line(&w.message))
        }
        CmdError::Standard(w) => Failure::Dead(format!(
            "the browser failed while {what}: {}: {}",
            w.error,
            first_line(&w.message)
        )),
        other => Failure::Dead(format!(
            "the browser failed while {what}: {}",
            first_line(&other.to_string())
        )),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// One process: its id, its parent's, and whether it is a zombie.
#[derive(Clone, Copy, Debug)]
pub struct Proc {
    /// Its id.
    pub pid: u32,
    /// Its parent's id.
    pub ppid: u32,
    /// Ended, not yet reaped.
    pub zombie: bool,
}

/// `/proc/<pid>/stat`'s state and parent.
fn stat(pid: u32) -> Option<Proc> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ppid …`: comm may hold spaces and parentheses.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    Some(Proc {
        pid,
        ppid,
        zombie: state == "Z" || state == "X",
    })
}

/// Every process this one can see.
pub fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// The living descendants of `roots` (not the roots themselves).
pub fn descendants(table: &[Proc], roots: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    let mut frontier: Vec<u32> = roots.to_vec();
    while let Some(p) = frontier.pop() {
        for c in table.iter().filter(|c| c.ppid == p && !c.zombie) {
            if !out.contains(&c.pid) && !roots.contains(&c.pid) {
                out.push(c.pid);
                frontier.push(c.pid);
            }
        }
    }
    out
}

/// Whether `pid`'s command line has the argument `arg`.
fn has_arg(pid: u32, arg: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
}

/// The living processes of the browser whose profile is `profile`: those started with it on
/// their command line, and their descendants (zygotes, renderers, helpers).
pub fn browser_pids(profile: &Path) -> Vec<u32> {
    let arg = profile_arg(profile);
    let table = processes();
    let mains: Vec<u32> = table
        .iter()
        .filter(|p| !p.zombie && has_arg(p.pid, &arg))
        .map(|p| p.pid)
        .collect();
    let mut all = mains.clone();
    for d in descendants(&table, &mains) {
        if !all.contains(&d) {
            all.push(d);
        }
    }
    all
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|p| !p.zombie)
}

/// Sends SIGKILL to each of `pids`.
pub fn kill(pids: &[u32]) {
    for &pid in pids {
        if pid > 1 && pid != std::process::id() {
            // SAFETY: kill(2) with a process id and a signal number has no memory effects.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// The resident memory of `pids` together, bytes (shared pages counted in each).
pub fn rss_bytes(pids: &[u32]) -> u64 {
    // SAFETY: sysconf has no memory effects.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/statm")).ok())
        .filter_map(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_path_or_by_their_path() {
        assert!(find_program("sh").is_some());
        assert_eq!(
            find_program("/bin/sh").as_deref(),
            Some(Path::new("/bin/sh"))
        );
        assert!(find_program("no-such-program-openclaw").is_none());
        assert!(find_program("/nonexistent/chromium").is_none());
        assert!(find_program("").is_none());
    }

    #[test]
    fn a_childs_processes_are_found_measured_and_killed() {
        let profile = tempfile::tempdir().unwrap();
        // `sh -c 'sleep 60 & wait' sh --user-data-dir=…`: the argument marks the shell, whose
        // child is the sleep.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 60 & wait", "sh"])
            .arg(profile_arg(profile.path()))
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        let pids = loop {
            let pids = browser_pids(profile.path());
            if pids.len() >= 2 || Instant::now() > end {
                break pids;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert_eq!(pids[0], child.id());
        assert!(rss_bytes(&pids) > 0);
        assert!(descendants(&processes(), &[std::process::id()]).contains(&child.id()));
        kill(&pids);
        child.wait().unwrap();
        assert!(!alive(child.id()));
        let end = Instant::now() + Duration::from_secs(5);
        while !browser_pids(profile.path()).is_empty() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(browser_pids(profile.path()).is_empty());
    }

    #[test]
    fn the_session_asks_for_headless_chromium_at_the_viewport() {
        let caps = capabilities(
            Path::new("/usr/bin/chromium"),
            Path::new("/tmp/p"),
            Viewport {
                width: 1000,
                height: 800,
            },
            Duration::from_secs(20),
        );
        let opts = &caps["goog:chromeOptions"];
        assert_eq!(opts["binary"], "/usr/bin/chromium");
        let args: Vec<&str> = opts["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        for want in [
            "--headless=new",
            "--window-size=1000,800",
            "--force-device-scale-factor=1",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--user-data-dir=/tmp/p",
        ] {
            assert!(args.contains(&want), "{want} in {args:?}");
        }
        assert_eq!(caps["timeouts"]["pageLoad"], 25_000);
        let cmd = Cdp {
            cmd: "Accessibility.getFullAXTree",
            params: json!({}),
        };
        let base = url::Url::parse("http://127.0.0.1:9515/").unwrap();
        assert_eq!(
            cmd.endpoint(&base, Some("abc")).unwrap().as_str(),
            "http://127.0.0.1:9515/session/abc/goog/cdp/execute"
        );
        assert!(cmd.endpoint(&base, None).is_err());
        let (method, body) = cmd.method_and_body(&base);
        assert_eq!(method, http::Method::POST);
        assert_eq!(
            body.unwrap(),
            r#"{"cmd":"Accessibility.getFullAXTree","params":{}}"#
        );
    }

    #[test]
    fn refusals_keep_the_session_and_the_rest_end_it() {
        use fantoccini::error::WebDriver;
        let e = CmdError::Standard(WebDriver::new(
            ErrorStatus::JavascriptError,
            "javascript error: x is not defined\n  (Session info: chrome=1)",
        ));
        assert_eq!(
            classify("checking", &e),
            Failure::Refused("javascript error: x is not defined".into())
        );
        let e = CmdError::Standard(WebDriver::new(
            ErrorStatus::UnknownError,
            "unknown error: session deleted because of page crash",
        ));
        let Failure::Dead(why) = classify("taking a screenshot", &e) else {
            panic!()
        };
        assert!(
            why.contains("taking a screenshot") && why.contains("page crash"),
            "{why}"
        );
        let e = CmdError::Standard(WebDriver::new(
            ErrorStatus::InvalidSessionId,
            "invalid session id",
        ));
        assert!(matches!(classify("x", &e), Failure::Dead(_)));
        let e = CmdError::Lost(std::io::Error::other("gone"));
        assert!(matches!(classify("x", &e), Failure::Dead(_)));
    }
}

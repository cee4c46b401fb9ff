//! What every host integration test shares: the workspace and the binary, one environment
//! hygiene for the binary, free ports, tiny models, the optional SmolLM2 file and the Python
//! client, and a headless browser ([`browser`]). Each test file uses a part of it.
#![allow(dead_code)]

pub mod browser;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The `openclaw-host` binary cargo built for these tests.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_openclaw-host")
}

/// Variables outside the configuration table that change what the binary does.
const OTHER_VARS: [&str; 11] = [
    "OPENCLAW_HOME",
    "ENV_TYPE",
    "ENV_CONFIG",
    "PARALLEL_ENVS",
    "MAX_STEPS",
    "RUST_LOG",
    "RUST_BACKTRACE",
    "OPENCLAW_PLUGIN_PATH",
    "OPENCLAW_TEST_RUN_STEPS",
    "RAYON_NUM_THREADS",
    "OPENCLAW_FAULT_CHECKPOINT_PAUSE_MS",
];

/// The binary, run in `dir`, with none of the caller's settings in its environment: every
/// variable the configuration reads (from its key table, so a new setting is covered) and the
/// others that change behaviour are removed. A developer's `MODEL_PATH` or `TRAIN_GPUS` cannot
/// change a test.
pub fn host_command(dir: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.current_dir(dir);
    for k in openclaw_config::keys::KEYS {
        for var in k.env {
            cmd.env_remove(var);
        }
    }
    for (var, _) in openclaw_config::UNREAD_ENV {
        cmd.env_remove(var);
    }
    for var in OTHER_VARS {
        cmd.env_remove(var);
    }
    // No plugin a developer installed is found: an installed-plugins directory that stays
    // empty (tests that install give their own).
    cmd.env(
        "OPENCLAW_PLUGIN_DIR",
        workspace().join("target").join("no-installed-plugins"),
    );
    cmd
}

/// [`host_command`] with the built-in model's cache (`OPENCLAW_HOME`) inside `dir`.
pub fn host_command_home(dir: &Path) -> Command {
    let mut cmd = host_command(dir);
    cmd.env("OPENCLAW_HOME", dir.join("home"));
    cmd
}

/// Runs the binary in `dir` with `args` (see [`host_command`]).
pub fn run_host(dir: &Path, args: &[&str]) -> Output {
    host_command(dir)
        .args(args)
        .output()
        .expect("run openclaw-host")
}

/// Its standard error, after asserting it succeeded (both streams shown when not).
pub fn ok(o: Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&o.stdout)
    );
    err
}

/// A port nothing listens on now (for a URL that must not answer: a listener started on it
/// later could race another process for it, so servers under test bind port 0 instead, see
/// [`spawn_listening`]).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `cmd` (`serve` or `run` with `--port 0`) with its stderr written to `log`, and waits
/// until it prints the address it bound (`serving NAME on http://ADDR/v1`) and answers
/// `/healthz`: returns the child and `http://ADDR`. Port 0 leaves no window between choosing a
/// port and binding it in which another process could take it.
pub fn spawn_listening(
    cmd: &mut Command,
    log: &Path,
    within: std::time::Duration,
) -> (std::process::Child, String) {
    let mut child = cmd
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let addr = text.lines().find_map(|l| {
            let rest = l.strip_prefix("serving ")?;
            let (_, url) = rest.rsplit_once(" on http://")?;
            Some(url.trim_end_matches("/v1").to_string())
        });
        if let Some(addr) = addr {
            let url = format!("http://{addr}");
            if ureq::get(&format!("{url}/healthz")).call().is_ok() {
                return (child, url);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the host ended ({status}) before it listened:\n{text}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the host did not listen within {within:?}:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `dir/model`: a tiny random Qwen3 whose byte-level BPE tokenizer (`vocab` tokens) is trained
/// on `corpus`.
pub fn tiny_model(dir: &Path, corpus: &str, vocab: u32) -> PathBuf {
    std::fs::write(dir.join("corpus.txt"), corpus).unwrap();
    let vocab = vocab.to_string();
    ok(run_host(
        dir,
        &[
            "init-model",
            "--preset",
            "tiny",
            "--vocab-size",
            &vocab,
            "--out",
            "model",
            "--train-text",
            "corpus.txt",
        ],
    ));
    dir.join("model")
}

/// `dir/qwen3-tiny`: a tiny random Qwen3 with the real Qwen3 tokenizer and template (tools
/// included), from the test assets.
pub fn qwen3_tiny(dir: &Path) -> PathBuf {
    let out = dir.join("qwen3-tiny");
    ok(host_command(dir)
        .args(["init-model", "--out"])
        .arg(&out)
        .arg("--tokenizer")
        .arg(workspace().join(".assets/qwen3-tokenizer"))
        .output()
        .unwrap());
    out
}

/// SmolLM2-135M-Instruct (Q4_1 GGUF) as `scripts/fetch-smollm2.sh` fetches it (the test
/// command does): `None` with a line saying the test is skipped and why, except where
/// `OPENCLAW_REQUIRE_ASSETS=1` (CI sets it), where a missing file fails the test.
pub fn smollm2() -> Option<PathBuf> {
    let gguf = workspace().join(".assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if gguf.is_file() {
        return Some(gguf);
    }
    let why = "scripts/test.sh fetches it (or run scripts/fetch-smollm2.sh)";
    assert!(
        !assets_required(),
        "{} is absent and OPENCLAW_REQUIRE_ASSETS=1: {why}",
        gguf.display()
    );
    eprintln!("SKIPPED: {} is absent; {why}", gguf.display());
    None
}

/// Whether a missing asset fails a test instead of skipping it (`OPENCLAW_REQUIRE_ASSETS=1`).
pub fn assets_required() -> bool {
    std::env::var("OPENCLAW_REQUIRE_ASSETS").is_ok_and(|v| v == "1")
}

/// The Python with the `openai` client: `OPENCLAW_TEST_PYTHON`, else the venv
/// `scripts/test.sh` makes, else `python3`.
pub fn python() -> String {
    if let Ok(p) = std::env::var("OPENCLAW_TEST_PYTHON") {
        return p;
    }
    let venv = workspace().join("target/py-clients/bin/python");
    if venv.is_file() {
        return venv.display().to_string();
    }
    "python3".into()
}

/// The run settings a user would give as flags (`(key, value)`), with nothing read from the
/// environment.
pub fn inputs(flags: &[(&str, String)]) -> openclaw_config::ConfigInputs {
    openclaw_config::ConfigInputs {
        file: None,
        flags: flags
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.clone(),
                    format!("--{}", k.replace('_', "-")),
                )
            })
            .collect(),
        sets: Vec::new(),
        env: Box::new(|_| None),
    }
}

/// A TCP connection to `to` from the loopback address `from` (`127.0.0.2`, ...): every
/// 127.x.y.z address is this machine, so one test can be several clients to a server's
/// per-address limits.
pub fn connect_from(from: &str, to: std::net::SocketAddr) -> std::net::TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let local: std::net::SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&local.into()).unwrap();
    s.connect_timeout(&to.into(), std::time::Duration::from_secs(10))
        .unwrap();
    s.into()
}

/// One HTTP/1.1 request from the loopback address `from` (see [`connect_from`]) with the
/// extra header lines `headers` (`"Authorization: Bearer k"`); the status and body.
pub fn http_from(
    from: &str,
    url: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let mut s = connect_from(from, addr);
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// `n` one-turn trajectory lines (JSONL) scored +1 and -1 by turns, the shape `train` reads.
pub fn scored_trajectories(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            serde_json::json!({"session_id": format!("s{i}"), "turns": [
                {"type": "main", "prompt": [{"role": "user", "content": format!("Question {i}?")}],
                 "response": {"role": "assistant", "content": "An answer."},
                 "reward": if i % 2 == 0 { 1.0 } else { -1.0 }, "trainable": true}]})
            .to_string()
        })
        .collect()
}

/// The four loops (`run`) started in-process from `flags` on the CPU: the handle, what
/// `observe` made of each step, in order, and the step the run resumed from.
pub fn start_four_loops<T: Send + 'static>(
    flags: &[(&str, String)],
    observe: impl Fn(&openclaw_pipeline::StepEvent) -> T + Send + 'static,
) -> (
    openclaw_pipeline::PipelineHandle,
    std::sync::Arc<std::sync::Mutex<Vec<T>>>,
    Option<u64>,
) {
    use openclaw_config::backend::{Cpu, Placement};
    let plugins = openclaw_plugins::RunPlugins::load(|| inputs(flags)).unwrap();
    let cfg = plugins.resolved.config.clone();
    let pipeline = openclaw_pipeline::Pipeline::<Cpu>::four_loops(
        &cfg,
        &plugins,
        &Placement::all(Default::default()),
    )
    .unwrap();
    let resumed_at = pipeline.resumed.as_ref().map(|r| r.step);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let observer = seen.clone();
    let handle = pipeline
        .start(move |ev| observer.lock().unwrap().push(observe(ev)))
        .unwrap();
    (handle, seen, resumed_at)
}

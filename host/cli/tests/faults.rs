//! The fault-injection suite over real processes and files (the buffer's byte-level faults,
//! flips, truncations and a full disk, are its unit tests in `host/buffer/src/log/tests.rs`):
//!
//! - `kill -9` mid-traffic and a restart: every answer a client received is in the buffer,
//!   training resumes from the last checkpoint, and no sample is trained twice;
//! - twenty-five lives on one buffer, ended by `kill -9` (20) or SIGTERM (5) at random
//!   moments (checkpoints written every step, so signals land during their writes), with
//!   clients that reuse their session ids in every life: no acknowledged turn lost, no
//!   (session, turn) recorded twice, every verdict and sample joined to its own turn, none
//!   judged twice;
//! - SIGTERM and `kill -9` in the middle of a checkpoint write: the clean stop finishes it, the
//!   partial one a kill leaves is ignored and removed, training resumes from the last whole one;
//! - plugins that never return: a spinning reward is abandoned while serving goes on; a hung
//!   loss stops the run naming the plugin, and SIGTERM ends the run within its grace;
//! - a second process on a buffer or save directory is refused naming the first, while the
//!   read-only commands still read it;
//! - hostile clients: bodies sent slowly take only their own address's slots and their slots
//!   for the body deadline only, `/healthz` says when every slot is taken, and SIGTERM does not
//!   wait for them; oversized tools are refused before rendering, with bounded memory;
//! - a model with NaN weights is refused at load; a loss that fails every step stops the run
//!   after `--max-failed-steps`, naming it, and `/healthz` says the trainer cannot step.

mod common;

use common::{host_command, spawn_listening, workspace};
use openclaw_buffer::{Log, Record};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn tiny_model(dir: &Path) -> PathBuf {
    let corpus =
        "the owl lives in the forest and eats mice thanks that helps please write plain text\n"
            .repeat(200);
    common::tiny_model(dir, &corpus, 300)
}

struct Host {
    child: Child,
    url: String,
    /// Its stderr.
    log: PathBuf,
}

/// A new file for a host's stderr in `dir`: `host-N.err`, N counting the hosts of the process.
fn host_log(dir: &Path) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("host-{n}.err"))
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, extra: &[&str]) -> Host {
    start_with(dir, &["--plugin", "methods/binary-rl"], extra)
}

/// `run` with `plugins` (flags whose paths are relative to the workspace) and `extra` flags.
fn start_with(dir: &Path, plugins: &[&str], extra: &[&str]) -> Host {
    start_env(dir, plugins, extra, &[])
}

/// [`start_with`] with environment variables set for the host.
fn start_env(dir: &Path, plugins: &[&str], extra: &[&str], vars: &[(&str, &str)]) -> Host {
    let plugins: Vec<String> = plugins
        .iter()
        .map(|a| {
            if a.starts_with("--") {
                a.to_string()
            } else {
                workspace().join(a).display().to_string()
            }
        })
        .collect();
    let log = host_log(dir);
    let (child, url) = spawn_listening(
        host_command(dir)
            .envs(vars.iter().copied())
            .arg("run")
            .args(&plugins)
            .args(["--model-path", "model", "--port", "0"])
            .args(["--judge", "rule"])
            .args([
                "--rollout-batch-size",
                "4",
                "--save-interval",
                "1",
                "--lr",
                "1e-4",
                "--default-max-tokens",
                "12",
                "--max-staleness",
                "1000",
            ])
            .args(extra)
            .stdout(Stdio::null()),
        &log,
        Duration::from_secs(120),
    );
    Host {
        child,
        url: format!("{url}/v1"),
        log,
    }
}

/// What a client saw: (session, answer text).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// How a client names its conversations.
#[derive(Clone, Copy)]
enum Ids {
    /// A new session id per conversation, its feedback alternating thanks and a correction.
    Fresh,
    /// `user-<id>` for every conversation, in every life of the host (as a client with its own
    /// ids does after a restart), always thanking.
    Reused,
}

/// Clients that keep having two-request conversations (the second closing the session) until
/// stopped, recording (session, answer) for every answer they receive.
struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Clients {
    fn start(host: &Host, ids: std::ops::Range<usize>, naming: Ids, seen: &Seen) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = ids
            .map(|id| {
                let (url, stop, seen) = (host.url.clone(), stop.clone(), seen.clone());
                std::thread::spawn(move || converse(&url, id, naming, &stop, &seen))
            })
            .collect();
        Clients { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
    }
}

fn converse(url: &str, id: usize, naming: Ids, stop: &AtomicBool, seen: &Seen) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let (session, feedback) = match naming {
            Ids::Fresh => (
                format!("c{id}-{n}-{}", std::process::id()),
                if n % 2 == 0 {
                    "Thanks, that helps!"
                } else {
                    "Please write plain text, no markdown."
                },
            ),
            Ids::Reused => (format!("user-{id}"), "Thanks, that helps!"),
        };
        let q = json!({"role": "user", "content": "Where does the owl live?"});
        let Ok(mut r) = agent
            .post(&format!("{url}/chat/completions"))
            .header("X-Session-Id", &session)
            .send_json(json!({"messages": [q]}))
        else {
            std::thread::sleep(Duration::from_millis(50)); // the host is down; try again
            continue;
        };
        let Ok(v) = r.body_mut().read_json::<Value>() else {
            continue;
        };
        let answer = v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        seen.lock().unwrap().push((session.clone(), answer.clone()));
        let _ = agent
            .post(&format!("{url}/chat/completions"))
            .header("X-Session-Id", &session)
            .header("X-Session-Done", "true")
            .send_json(json!({"messages": [q, {"role": "assistant", "content": answer}, {"role": "user", "content": feedback}], "max_tokens": 2}));
    }
}

/// Calls `ready` every `every` until it gives a value, failing with `what` after `within`.
fn poll<T>(
    within: Duration,
    every: Duration,
    what: &str,
    mut ready: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = ready() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(every);
    }
}

/// Waits at most `within` for the host to exit; its exit status.
fn exit_of(host: &mut Host, within: Duration, what: &str) -> std::process::ExitStatus {
    poll(within, Duration::from_millis(50), what, || {
        host.child.try_wait().unwrap()
    })
}

fn score_lines(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("logs/score.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn latest_step(dir: &Path) -> u64 {
    std::fs::read_link(dir.join("checkpoints/checkpoint-latest"))
        .ok()
        .and_then(|s| s.to_str()?.strip_prefix("checkpoint-")?.parse().ok())
        .unwrap_or(0)
}

/// Sends SIGTERM and waits at most `limit` for the exit; the exit status.
fn terminate(host: &mut Host, limit: Duration) -> std::process::ExitStatus {
    let pid = host.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let what = format!("still running {} s after SIGTERM", limit.as_secs());
    exit_of(host, limit, &what)
}

/// What a host printed on stderr.
fn stderr_of(host: &Host) -> String {
    std::fs::read_to_string(&host.log).unwrap_or_default()
}

/// Waits until the buffer holds a training sample (so training is about to call the loss).
fn wait_for_a_sample(dir: &Path, within: Duration) {
    poll(
        within,
        Duration::from_millis(200),
        "no sample was recorded",
        || {
            Log::read_all(&dir.join("rl_buffer"))
                .is_ok_and(|r| {
                    r.records
                        .iter()
                        .any(|e| matches!(e.record, Record::Sample { .. }))
                })
                .then_some(())
        },
    )
}

/// `openclaw_plugin_calls_abandoned_total` of the `hang` plugin, and the whole metrics text.
fn abandoned_calls(metrics_url: &str) -> (f64, String) {
    let text = ureq::get(metrics_url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let n = text
        .lines()
        .find(|l| {
            l.starts_with("openclaw_plugin_calls_abandoned_total{") && l.contains("plugin=\"hang\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    (n, text)
}

#[test]
fn a_spinning_reward_is_abandoned_while_serving_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let mut host = start_with(
        dir,
        &[
            "--plugin",
            "methods/binary-rl",
            "--custom-rm-path",
            "tests/fixtures/hang",
        ],
        &["--judge-timeout", "1", "--shutdown-grace", "10"],
    );
    let seen: Seen = Arc::default();
    let clients = Clients::start(&host, 0..2, Ids::Fresh, &seen);
    let metrics_url = host.url.replace("/v1", "/metrics");
    let (abandoned, text) = poll(
        Duration::from_secs(120),
        Duration::from_millis(200),
        "no reward call was abandoned",
        || Some(abandoned_calls(&metrics_url)).filter(|(n, _)| *n >= 2.0),
    );
    assert!(
        text.contains("openclaw_judge_failures_total{reason=\"timeout\"}"),
        "{text}"
    );
    // Serving goes on while abandoned calls spin (at the lowest priority).
    let before = seen.lock().unwrap().len();
    poll(
        Duration::from_secs(60),
        Duration::from_millis(100),
        "serving stalled behind a spinning reward",
        || (seen.lock().unwrap().len() >= before + 3).then_some(()),
    );
    // Past four calls left running, the plugin is not called again: no more threads pile up
    // (calls the other three judge workers had already started may add to the four).
    let (left, _) = abandoned_calls(&metrics_url);
    assert!(left <= 7.0, "{left} calls abandoned");
    let status = terminate(&mut host, Duration::from_secs(30));
    clients.stop();
    let err = stderr_of(&host);
    assert!(status.success(), "{err}");
    assert!(err.contains("was abandoned"), "{err}");
    eprintln!("abandoned reward calls: {abandoned}");
}

#[test]
fn a_hung_loss_stops_the_run_naming_the_plugin_and_sigterm_ends_it_within_the_grace() {
    let plugins = [
        "--plugin",
        "methods/binary-rl",
        "--custom-loss-function-path",
        "tests/fixtures/hang",
    ];
    // Past --plugin-timeout: the run stops by itself with an error naming the call.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let mut host = start_with(
        dir,
        &plugins,
        &[
            "--rollout-batch-size",
            "2",
            "--plugin-timeout",
            "3",
            "--shutdown-grace",
            "2",
        ],
    );
    let seen: Seen = Arc::default();
    let clients = Clients::start(&host, 0..2, Ids::Fresh, &seen);
    let status = exit_of(
        &mut host,
        Duration::from_secs(180),
        "a hung loss never stopped the run",
    );
    clients.stop();
    let err = stderr_of(&host);
    assert!(!status.success());
    assert!(
        err.contains("plugin `hang` (loss) has been in `compute`")
            && err.contains("--plugin-timeout (3 s)"),
        "{err}"
    );

    // SIGTERM while the loss hangs: the run ends within the grace, saying what it left.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let mut host = start_with(
        dir,
        &plugins,
        &["--rollout-batch-size", "2", "--shutdown-grace", "2"],
    );
    let clients = Clients::start(&host, 0..2, Ids::Fresh, &seen);
    wait_for_a_sample(dir, Duration::from_secs(180));
    std::thread::sleep(Duration::from_secs(2));
    let asked = Instant::now();
    let status = terminate(&mut host, Duration::from_secs(20));
    let took = asked.elapsed();
    clients.stop();
    let err = stderr_of(&host);
    assert!(!status.success());
    assert!(
        err.contains("did not stop within --shutdown-grace (2 s)")
            && err.contains("plugin `hang` (loss) has been in `compute`")
            && err.contains("without a final checkpoint: training was in a step")
            && err.contains("no checkpoint was written yet"),
        "{err}"
    );
    eprintln!(
        "SIGTERM with a hung loss: exited after {:.1} s",
        took.as_secs_f64()
    );
}

/// Waits until a checkpoint write is under way (its temporary directory exists); its name.
fn wait_for_a_checkpoint_write(dir: &Path, within: Duration) -> String {
    poll(
        within,
        Duration::from_millis(20),
        "no checkpoint write began",
        || {
            std::fs::read_dir(dir.join("checkpoints"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .find(|n| n.starts_with(".checkpoint-") && n.ends_with(".tmp"))
        },
    )
}

/// SIGTERM and `kill -9` land in the middle of a checkpoint write (held open by the
/// fault-injection pause): SIGTERM lets the write finish, writes the final checkpoint and exits
/// cleanly; `kill -9` leaves the partial write, which the next start ignores and removes,
/// resuming from the last whole checkpoint.
#[test]
fn sigterm_or_kill_during_a_checkpoint_write_keeps_the_last_whole_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let pause = [("OPENCLAW_FAULT_CHECKPOINT_PAUSE_MS", "1500")];
    let plugins = ["--plugin", "methods/binary-rl"];
    let run = |extra: &[&str], vars: &[(&str, &str)]| {
        let mut args = vec!["--rollout-batch-size", "2", "--shutdown-grace", "30"];
        args.extend_from_slice(extra);
        start_env(dir, &plugins, &args, vars)
    };
    let seen: Seen = Arc::default();
    let talk = |host: &Host| Clients::start(host, 0..2, Ids::Fresh, &seen);

    // SIGTERM in the middle of a write.
    let mut host = run(&[], &pause);
    let traffic = talk(&host);
    let writing = wait_for_a_checkpoint_write(dir, Duration::from_secs(180));
    let status = terminate(&mut host, Duration::from_secs(40));
    traffic.stop();
    assert!(status.success(), "{}", stderr_of(&host));
    let after_term = latest_step(dir);
    let step_of = |n: &str| -> u64 {
        n.trim_start_matches(".checkpoint-")
            .trim_end_matches(".tmp")
            .parse()
            .unwrap()
    };
    assert!(
        after_term >= step_of(&writing),
        "the write under way was finished"
    );
    eprintln!("SIGTERM during the write of {writing}: exited cleanly at checkpoint {after_term}");
    let left: Vec<_> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(
        left.is_empty(),
        "a partial checkpoint was left by a clean stop"
    );

    // kill -9 in the middle of a write.
    let mut host = run(&[], &pause);
    let traffic = talk(&host);
    let writing = wait_for_a_checkpoint_write(dir, Duration::from_secs(180));
    let whole = latest_step(dir);
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    traffic.stop();
    assert!(dir.join("checkpoints").join(&writing).exists());
    assert_eq!(
        latest_step(dir),
        whole,
        "checkpoint-latest still names a whole one"
    );

    // The next start resumes from it and trains on.
    let target = whole + 2;
    let before = score_lines(dir).len();
    let mut host = run(&["--max-steps", &target.to_string()], &[]);
    let traffic = talk(&host);
    let status = exit_of(
        &mut host,
        Duration::from_secs(240),
        "the resumed run did not reach its steps",
    );
    traffic.stop();
    assert!(status.success(), "{}", stderr_of(&host));
    assert_eq!(latest_step(dir), target);
    assert!(
        !dir.join("checkpoints").join(&writing).exists(),
        "the partial write was removed"
    );
    let lines = score_lines(dir);
    assert_eq!(
        lines[before]["step"].as_u64().unwrap(),
        whole + 1,
        "the resumed run went on from the last whole checkpoint"
    );
}

/// `serve` of `dir/model` on a port of its choosing with `extra` flags, stderr to
/// `dir/host-N.err`.
fn serve(dir: &Path, extra: &[&str]) -> Host {
    let log = host_log(dir);
    let (child, url) = spawn_listening(
        host_command(dir)
            .args(["serve", "--model-path", "model", "--port", "0"])
            .args(extra)
            .stdout(Stdio::null()),
        &log,
        Duration::from_secs(120),
    );
    Host {
        child,
        url: format!("{url}/v1"),
        log,
    }
}

#[test]
fn a_second_writer_on_a_buffer_or_save_directory_is_refused_naming_the_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let mut first = start(dir, &[]);
    let seen: Seen = Arc::default();
    let clients = Clients::start(&first, 0..2, Ids::Fresh, &seen);
    poll(
        Duration::from_secs(120),
        Duration::from_millis(100),
        "no answer",
        || (seen.lock().unwrap().len() >= 4).then_some(()),
    );
    clients.stop();
    let holder = format!("in use by process {}", first.child.id());
    let binary_rl = workspace().join("methods/binary-rl");
    let second = |args: &[&str]| {
        let o = host_command(dir)
            .args(args)
            .args(["--model-path", "model", "--port", "0"])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} ran beside the first");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // The same defaults (`./rl_buffer`, `./checkpoints`): `run` and `serve`.
    let run = [
        "run",
        "--plugin",
        binary_rl.to_str().unwrap(),
        "--judge",
        "rule",
    ];
    let err = second(&run);
    assert!(err.contains(&holder), "{err}");
    let err = second(&["serve"]);
    assert!(
        err.contains(&holder)
            && err.contains("buffer directory")
            && err.contains("--rl-buffer-dir"),
        "{err}"
    );
    // Another buffer, the same save directory.
    let err = second(&[&run[..], &["--rl-buffer-dir", "other"]].concat());
    assert!(
        err.contains(&holder) && err.contains("save directory") && err.contains("--save"),
        "{err}"
    );
    // Reading needs no lock.
    let check = host_command(dir)
        .args(["buffer", "check", "--rl-buffer-dir", "rl_buffer"])
        .output()
        .unwrap();
    common::ok(check);
    let export = host_command(dir)
        .args(["buffer", "export", "--rl-buffer-dir", "rl_buffer"])
        .output()
        .unwrap();
    assert!(export.status.success());
    assert!(!export.stdout.is_empty());
    // The first serves on, and once it stops the next one starts on the same directories.
    let agent = ureq::agent();
    let r = agent
        .post(&format!("{}/chat/completions", first.url))
        .send_json(json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}));
    assert!(r.is_ok(), "{r:?}");
    assert!(terminate(&mut first, Duration::from_secs(60)).success());
    drop(start(dir, &[]));
}

/// A request's headers and part of its body, then nothing: it holds a slot until the body
/// deadline.
fn slow_body(from: &str, url: &str) -> std::net::TcpStream {
    use std::io::Write;
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    let mut s = common::connect_from(from, addr);
    s.write_all(
        format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"messages\"").as_bytes(),
    )
    .unwrap();
    s
}

fn chat_from(from: &str, url: &str) -> (u16, String) {
    common::http_from(
        from,
        url,
        "POST",
        "/v1/chat/completions",
        &[],
        r#"{"messages": [{"role": "user", "content": "Where does the owl live?"}], "max_tokens": 4}"#,
    )
}

#[test]
fn slow_bodies_take_only_their_clients_slots_and_never_hold_a_stop() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let mut host = serve(
        dir,
        &[
            "--max-inflight",
            "8",
            "--max-inflight-per-client",
            "4",
            "--request-body-timeout",
            "3",
            "--shutdown-grace",
            "3",
        ],
    );
    let health =
        |host: &Host| common::http_from("127.0.0.1", &host.url, "GET", "/healthz", &[], "");
    // Seventy slow bodies from one address take its four slots; the rest are turned away at
    // once, and a real client from another address is answered.
    let mut slow: Vec<_> = (0..70).map(|_| slow_body("127.0.0.2", &host.url)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (s, body) = chat_from("127.0.0.1", &host.url);
    assert_eq!(s, 200, "{body}");
    let (s, h) = health(&host);
    assert_eq!(s, 200, "{h}");
    // A second slow address fills the rest: the server is saturated and says so.
    slow.extend((0..4).map(|_| slow_body("127.0.0.3", &host.url)));
    std::thread::sleep(Duration::from_millis(300));
    let (s, h) = health(&host);
    assert!(s == 503 && h.contains("at capacity"), "{s} {h}");
    let (s, body) = chat_from("127.0.0.1", &host.url);
    assert_eq!(s, 429, "{body}");
    // Past the body deadline their slots are free again.
    poll(
        Duration::from_secs(20),
        Duration::from_millis(200),
        "slow bodies held their slots past --request-body-timeout",
        || (health(&host).0 == 200).then_some(()),
    );
    let (s, body) = chat_from("127.0.0.1", &host.url);
    assert_eq!(s, 200, "{body}");
    drop(slow);
    // SIGTERM while bodies trickle in: the stop does not wait for them.
    let _slow: Vec<_> = (0..4).map(|_| slow_body("127.0.0.2", &host.url)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let status = terminate(&mut host, Duration::from_secs(30));
    let took = asked.elapsed();
    assert!(status.success(), "{}", stderr_of(&host));
    assert!(
        took < Duration::from_secs(3 + 5),
        "SIGTERM took {:.1} s with a grace of 3 s",
        took.as_secs_f64()
    );
}

/// The peak resident memory of process `pid`, bytes.
fn peak_rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[test]
fn oversized_tools_and_arguments_are_refused_before_rendering() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let host = serve(dir, &[]);
    let (s, _) = chat_from("127.0.0.1", &host.url);
    assert_eq!(s, 200);
    let before = peak_rss(host.child.id());
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let user = json!({"role": "user", "content": "hi"});
    let cases = [
        (
            "a 14 MB tool description",
            json!({"messages": [user], "tools": [{"type": "function", "function": {"name": "f",
                "description": "d".repeat(14 << 20), "parameters": {"type": "object"}}}]}),
            "tools",
        ),
        (
            "200,000 tools",
            json!({"messages": [user], "tools": (0..200_000).map(|i| json!({"type": "function",
                "function": {"name": format!("f{i}"), "parameters": {"type": "object"}}})).collect::<Vec<_>>()}),
            "tools",
        ),
        (
            "1,000 tools of 10 kB each",
            json!({"messages": [user], "tools": (0..1000).map(|i| json!({"type": "function",
                "function": {"name": format!("f{i}"), "description": "x".repeat(10_000),
                "parameters": {"type": "object"}}})).collect::<Vec<_>>()}),
            "tools",
        ),
        (
            "a 14 MB tool-call argument",
            json!({"messages": [user, {"role": "assistant", "content": null, "tool_calls": [{"id": "c",
                "type": "function", "function": {"name": "f", "arguments": "a".repeat(14 << 20)}}]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"}]}),
            "messages",
        ),
    ];
    for (what, body, param) in cases {
        let mut r = agent
            .post(&format!("{}/chat/completions", host.url))
            .send_json(&body)
            .unwrap();
        let status = r.status().as_u16();
        let v: Value = r.body_mut().read_json().unwrap();
        assert_eq!(status, 400, "{what}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            v["error"]["code"] == "context_length_exceeded" || message.contains("array too long"),
            "{what}: {v}"
        );
        assert_eq!(v["error"]["param"], param, "{what}: {v}");
    }
    let grew = peak_rss(host.child.id()).saturating_sub(before);
    assert!(
        grew < 1 << 30,
        "refusing them took {} MB more memory",
        grew >> 20
    );
    eprintln!("peak memory grew {} MB refusing the four", grew >> 20);
}

/// Sets the first value of the first F32 tensor of `file` (safetensors) to NaN.
fn poison(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let (_, t) = header
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, t)| *k != "__metadata__" && t["dtype"] == "F32")
        .unwrap();
    let at = 8 + n + t["data_offsets"][0].as_u64().unwrap() as usize;
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn nan_weights_are_refused_and_a_step_that_always_fails_stops_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    // A copy of the model with one NaN weight is refused when loaded, naming it.
    let bad = dir.join("bad");
    std::fs::create_dir(&bad).unwrap();
    for e in std::fs::read_dir(dir.join("model")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), bad.join(e.file_name())).unwrap();
    }
    poison(&bad.join("model.safetensors"));
    let o = host_command(dir)
        .args(["serve", "--model-path", "bad", "--port", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("non-finite values (NaN or infinity)"), "{err}");

    // A loss that fails every step: /healthz says so, and the run stops after four, saying why.
    let mut host = start_with(
        dir,
        &[
            "--plugin",
            "methods/binary-rl",
            "--custom-loss-function-path",
            "tests/fixtures/panicky",
        ],
        &["--rollout-batch-size", "2", "--max-failed-steps", "4"],
    );
    let health_url = host.url.replace("/v1", "/healthz");
    let seen: Seen = Arc::default();
    let clients = Clients::start(&host, 0..2, Ids::Fresh, &seen);
    let mut unhealthy = None;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = poll(
        Duration::from_secs(240),
        Duration::from_millis(50),
        "a loss failing every step never stopped the run",
        || {
            if unhealthy.is_none() {
                if let Ok(mut r) = agent.get(&health_url).call() {
                    if r.status().as_u16() == 503 {
                        unhealthy = r.body_mut().read_to_string().ok();
                    }
                }
            }
            host.child.try_wait().unwrap()
        },
    );
    clients.stop();
    let err = stderr_of(&host);
    assert!(!status.success());
    assert!(
        err.contains("4 training steps in a row failed (--max-failed-steps)")
            && err.contains("panics on purpose"),
        "{err}"
    );
    let said = unhealthy.expect("/healthz never said the trainer cannot step");
    assert!(said.contains("the trainer cannot step"), "{said}");
}

/// The largest resident size of any child process waited for so far, bytes.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    u.ru_maxrss as u64 * 1024
}

#[test]
fn an_oversized_or_undecodable_data_record_is_skipped_unread_and_nothing_trained_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    // One 60 MB line, one line that is not UTF-8, nothing else.
    let mut data = format!(
        r#"{{"session_id":"a","turns":[{{"type":"main","prompt":"{}","response":"x","reward":1.0}}]}}"#,
        "p".repeat(60 << 20)
    )
    .into_bytes();
    data.extend_from_slice(b"\n{\"session_id\":\"\xff\"}\n");
    std::fs::write(dir.join("data.jsonl"), data).unwrap();
    let o = host_command(dir)
        .args([
            "train",
            "--data-path",
            "data.jsonl",
            "--model-path",
            "model",
        ])
        .arg("--plugin")
        .arg(workspace().join("methods/binary-rl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("data.jsonl:1: a record of 62914") && err.contains("past the cap"),
        "{err}"
    );
    assert!(err.contains("data.jsonl:2: not UTF-8"), "{err}");
    assert!(err.contains("no trainable samples"), "{err}");
    let peak = children_peak_rss();
    assert!(peak < 1 << 30, "a child peaked at {} MB", peak >> 20);
    // A directory where a file belongs is named as such.
    let o = host_command(dir)
        .args(["train", "--data-path", ".", "--model-path", "model"])
        .arg("--plugin")
        .arg(workspace().join("methods/binary-rl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("is a directory"),
        "{err}"
    );
}

/// The slow tier: end-to-end runs that take a minute or more. `scripts/test.sh` runs them;
/// `scripts/test.sh --fast` (which passes `--skip slow::`) leaves them out.
mod slow {
    use super::*;

    #[test]
    fn kill_minus_nine_loses_no_answer_and_trains_no_sample_twice() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        tiny_model(dir);
        let seen: Seen = Arc::default();

        // First life: clients talk while it trains; killed once a few checkpoints exist.
        let mut host = start(dir, &[]);
        let clients = Clients::start(&host, 0..3, Ids::Fresh, &seen);
        poll(
            Duration::from_secs(240),
            Duration::from_millis(50),
            "no third checkpoint; see host-*.err",
            || (latest_step(dir) >= 3).then_some(()),
        );
        host.child.kill().unwrap(); // SIGKILL
        host.child.wait().unwrap();
        clients.stop();
        let resumed_step = latest_step(dir);
        let first_life = score_lines(dir);
        drop(host);

        // Second life: same directories; it replays the buffer and trains a few more steps.
        let target = resumed_step + 3;
        let mut host = start(dir, &["--max-steps", &target.to_string()]);
        let clients = Clients::start(&host, 10..12, Ids::Fresh, &seen);
        let status = exit_of(
            &mut host,
            Duration::from_secs(240),
            "the second life did not reach its steps",
        );
        assert!(status.success(), "the second life failed; see host-*.err");
        clients.stop();
        assert_eq!(latest_step(dir), target);
        let all = score_lines(dir);
        let second_life = &all[first_life.len()..];
        assert!(!second_life.is_empty());
        assert_eq!(second_life[0]["step"].as_u64().unwrap(), resumed_step + 1);

        // Every answer a client received is a recorded turn.
        let replay = Log::read_all(&dir.join("rl_buffer")).unwrap();
        let mut recorded: HashSet<(String, String)> = HashSet::new();
        let mut sample_seqs = BTreeSet::new();
        for e in &replay.records {
            match &e.record {
                Record::Turn { turn, .. } => {
                    recorded.insert((
                        turn.session_id.to_string(),
                        turn.response.content.to_string(),
                    ));
                }
                Record::Sample { .. } => {
                    sample_seqs.insert(e.seq);
                }
                _ => {}
            }
        }
        let seen = seen.lock().unwrap();
        assert!(seen.len() > 10, "only {} answers", seen.len());
        for s in seen.iter() {
            assert!(recorded.contains(s), "answer not in the buffer: {s:?}");
        }

        // The steps whose effect the final weights carry: the first life's up to the checkpoint
        // it resumed from, then the second life's. No sample is in two of them.
        let counted = first_life
            .iter()
            .filter(|l| l["step"].as_u64().unwrap() <= resumed_step)
            .chain(second_life.iter());
        let mut trained = HashSet::new();
        for line in counted {
            for q in line["sample_seqs"].as_array().unwrap() {
                let q = q.as_u64().unwrap();
                assert!(sample_seqs.contains(&q), "#{q} is not a recorded sample");
                assert!(trained.insert(q), "sample #{q} trained twice");
            }
        }
        assert!(
            trained.len() >= 4 * target as usize - 4,
            "{} samples",
            trained.len()
        );
    }

    #[test]
    fn twenty_five_lives_ended_by_kill_or_sigterm_lose_nothing_and_mix_up_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        tiny_model(dir);
        let seen: Seen = Arc::default();
        // A fixed sequence of moments, so a failure can be replayed.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let (mut kills, mut terms) = (0, 0);
        for life in 0..25 {
            let mut host = start(
                dir,
                &["--rollout-batch-size", "2", "--shutdown-grace", "20"],
            );
            let clients = Clients::start(&host, 0..2, Ids::Reused, &seen);
            std::thread::sleep(Duration::from_millis(300 + next(2700)));
            if life % 5 == 4 {
                // SIGTERM: requests drain, the final checkpoint is written, the exit is clean.
                let status = terminate(&mut host, Duration::from_secs(40));
                assert!(
                    status.success(),
                    "life {life} did not stop cleanly: {}",
                    stderr_of(&host)
                );
                terms += 1;
            } else {
                host.child.kill().unwrap(); // SIGKILL
                host.child.wait().unwrap();
                kills += 1;
            }
            clients.stop();
        }

        let replay = Log::read_all(&dir.join("rl_buffer")).unwrap();
        assert!(replay.warnings.len() <= kills, "{:?}", replay.warnings);
        let mut turns: std::collections::HashMap<u64, (String, u32)> = Default::default();
        let mut keys = HashSet::new();
        let mut answers = HashSet::new();
        let mut judged = HashSet::new();
        let mut sampled = HashSet::new();
        for e in &replay.records {
            match &e.record {
                Record::Turn { turn, .. } => {
                    let key = (turn.session_id.to_string(), turn.turn_index);
                    assert!(keys.insert(key.clone()), "{key:?} recorded twice");
                    turns.insert(e.seq, key);
                    answers.insert((
                        turn.session_id.to_string(),
                        turn.response.content.to_string(),
                    ));
                }
                Record::Judgement {
                    session_id,
                    turn_index,
                    turn_seq,
                    ..
                } => {
                    let q = turn_seq.expect("a verdict names its turn");
                    assert_eq!(
                        turns.get(&q),
                        Some(&(session_id.clone(), *turn_index)),
                        "verdict #{} joins another turn",
                        e.seq
                    );
                    assert!(judged.insert(q), "turn #{q} judged twice");
                }
                Record::Sample { sample, turn_seq } => {
                    let q = turn_seq.expect("a turn's sample names its turn");
                    assert!(judged.contains(&q), "sample #{} of an unjudged turn", e.seq);
                    assert_eq!(
                        turns.get(&q),
                        Some(&(sample.session_id.to_string(), sample.turn_index))
                    );
                    assert!(sampled.insert(q), "turn #{q} sampled twice");
                }
                _ => {}
            }
        }
        let seen = seen.lock().unwrap();
        for s in seen.iter() {
            assert!(answers.contains(s), "an acknowledged answer is lost: {s:?}");
        }
        assert!(seen.len() >= 20, "only {} answers", seen.len());
        assert!(!judged.is_empty() && !sampled.is_empty());
        eprintln!(
            "25 lives ({kills} kill -9, {terms} SIGTERM): {} acknowledged answers, {} records checked ({} turns, {} verdicts, {} samples), lost 0",
            seen.len(),
            replay.records.len(),
            turns.len(),
            judged.len(),
            sampled.len()
        );
    }
}

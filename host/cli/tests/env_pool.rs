//! `env-pool serve` and `--env-pool-url`: the lease protocol against a real pool serving the
//! terminal environment on loopback (allocate is idempotent, a full pool answers 429 with its
//! code, idle leases are reaped, the original's `/exec_tool` dialect works), `eval` running
//! its episodes on a keyed pool smaller than `--parallel-envs`, failing over past a dead one;
//! and a hostile client: it names only the pool's own tasks and reads no host file through
//! them, its leases are its own, it holds a capped number, it needs the pool's key. And the
//! original's SWE and GUI pool dialects: pools serving `envs/swe` and `envs/gui` answer them,
//! and a run in the SWE dialect is scored as the same episode run here.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::workspace;
use openclaw_episodes::pool::client::RemoteOptions;
use openclaw_episodes::pool::{Dialect, RemoteEnv};
use openclaw_episodes::{Agent, Ending, Episode, EpisodeOptions, TimedEnv};
use openclaw_plugin_api::{Action, HostServices, Message};
use openclaw_plugins::{EnvHandle, LoadedPlugin};
use serde_json::{json, Value};

/// A pool serving an environment on a free port, killed when dropped.
struct PoolProcess {
    child: Child,
    url: String,
}

impl Drop for PoolProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pool(extra: &[&str]) -> PoolProcess {
    pool_of("envs/terminal", "terminal", extra)
}

/// A pool serving the environment at `dir` (named `name`).
fn pool_of(dir: &str, name: &str, extra: &[&str]) -> PoolProcess {
    let mut child = common::host_command(&workspace())
        .args(["env-pool", "serve", "--env", dir, "--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    assert!(
        line.contains(&format!("environment pool `{name}`")),
        "{line}"
    );
    PoolProcess { child, url }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// POSTs `body`; the status and the JSON reply.
fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let mut r = agent()
        .post(&format!("{url}{path}"))
        .send_json(&body)
        .unwrap();
    (r.status().as_u16(), r.body_mut().read_json().unwrap())
}

fn get(url: &str, path: &str) -> Value {
    agent()
        .get(&format!("{url}{path}"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap()
}

#[test]
fn leases_are_idempotent_limited_reaped_and_run_whole_episodes() {
    let p = pool(&[
        "--max-leases",
        "2",
        "--max-leases-per-task",
        "1",
        "--idle-ttl",
        "2",
    ]);
    let status = get(&p.url, "/status");
    assert_eq!(status["protocol"], "openclaw-host-env-pool/1");
    assert_eq!(status["env"], "terminal");
    let tasks = get(&p.url, "/tasks?split=all");
    assert!(tasks["tasks"].as_array().unwrap().len() >= 30);

    // Idempotent on (task_key, request_id).
    let (s, a) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "create-hello", "request_id": "r1"}),
    );
    assert_eq!((s, a["reused"].as_bool()), (200, Some(false)), "{a}");
    let lease = a["lease_id"].as_str().unwrap().to_string();
    // 128 random bits: not a clock reading anyone can guess.
    assert!(
        lease.starts_with("run-")
            && lease.len() == 36
            && lease[4..].chars().all(|c| c.is_ascii_hexdigit()),
        "{lease}"
    );
    let (_, again) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "create-hello", "request_id": "r1"}),
    );
    assert_eq!(
        (again["lease_id"].as_str(), again["reused"].as_bool()),
        (Some(lease.as_str()), Some(true))
    );
    // Full: per task, then in all.
    let (s, full) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "create-hello", "request_id": "r2"}),
    );
    assert_eq!(
        (s, full["code"].as_str()),
        (429, Some("TASK_SLOTS_EXHAUSTED")),
        "{full}"
    );
    let (s, b) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "count-words", "request_id": "r3"}),
    );
    assert_eq!(s, 200, "{b}");
    let (s, full) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "top-words", "request_id": "r4"}),
    );
    assert_eq!(
        (s, full["code"].as_str()),
        (429, Some("RUN_SLOTS_EXHAUSTED")),
        "{full}"
    );
    let (s, e) = post(&p.url, "/allocate", json!({"task_key": "x"}));
    assert!(
        s == 400 && e["error"].as_str().unwrap().contains("request_id"),
        "{e}"
    );

    // A whole episode through /step: the reference solution scores 1.
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": lease, "task": {"id": "create-hello", "instruction": ""}}),
    );
    assert_eq!(s, 200, "{r}");
    assert!(r["user_msg"]
        .as_str()
        .unwrap()
        .starts_with("Task name:create-hello"));
    assert_eq!(r["tool_schemas"].as_array().unwrap().len(), 4);
    let call = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "shell_exec", "arguments": "{\"id\": \"m\", \"command\": \"echo 'Hello, world!' > /app/hello.txt && echo done\"}"}}]});
    let (s, st) = post(&p.url, "/step", json!({"lease_id": lease, "message": call}));
    assert_eq!(s, 200, "{st}");
    assert_eq!(st["observation"]["messages"][0]["content"], "done\n");
    assert_eq!(st["observation"]["messages"][0]["tool_call_id"], "c1");
    let (_, st) = post(
        &p.url,
        "/step",
        json!({"lease_id": lease, "message": {"role": "assistant", "content": "Finished."}}),
    );
    assert_eq!(st["done"], true);
    let (_, ev) = post(&p.url, "/evaluate", json!({"lease_id": lease}));
    assert_eq!(
        (ev["score"].as_f64(), ev["solved"].as_bool()),
        (Some(1.0), Some(true)),
        "{ev}"
    );
    let (_, c) = post(&p.url, "/close", json!({"lease_id": lease}));
    assert_eq!(c["found"], true);
    let (s, _) = post(&p.url, "/heartbeat", json!({"lease_id": lease}));
    assert_eq!(s, 404);

    // The idle lease (r3) is reaped; heartbeats keep another alive.
    let (_, kept) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "top-words", "request_id": "r5"}),
    );
    let kept = kept["lease_id"].as_str().unwrap().to_string();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        let (s, _) = post(&p.url, "/heartbeat", json!({"lease_id": kept}));
        assert_eq!(s, 200);
        std::thread::sleep(Duration::from_millis(400));
    }
    let (s, gone) = post(&p.url, "/heartbeat", json!({"lease_id": b["lease_id"]}));
    assert!(
        s == 404 && gone["error"].as_str().unwrap().contains("reaped"),
        "{gone}"
    );
    assert!(get(&p.url, "/status")["reaped"].as_u64().unwrap() >= 1);
}

#[test]
fn the_originals_exec_tool_dialect_runs_an_episode() {
    let p = pool(&[]);
    let (_, a) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "count-words", "request_id": "x"}),
    );
    let lease = a["lease_id"].as_str().unwrap();
    // The original's reset: the task row's object, a run context, timeouts.
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": lease, "task_meta": {"task_name": "count-words", "instruction": "count"},
               "run_ctx": {"uid": "u1", "group_index": 0, "sample_index": 0}, "task_timeouts": {}}),
    );
    assert_eq!(s, 200, "{r}");
    assert!(r["user_msg"]
        .as_str()
        .unwrap()
        .starts_with("Task name:count-words"));
    let (s, o) = post(
        &p.url,
        "/exec_tool",
        json!({"lease_id": lease, "tool_call": {"name": "shell_exec",
               "arguments": {"id": "a", "command": "wc -w < text.txt | tr -d ' ' | tee count.txt"}}}),
    );
    assert_eq!((s, o["observation"].as_str()), (200, Some("23\n")), "{o}");
    let (_, o) = post(
        &p.url,
        "/exec_tool",
        json!({"lease_id": lease, "tool_call": {"name": "no_such_tool", "arguments": "{}"}}),
    );
    assert!(
        o["observation"]
            .as_str()
            .unwrap()
            .starts_with("[TOOL_ERROR]"),
        "{o}"
    );
    let (_, ev) = post(&p.url, "/evaluate", json!({"lease_id": lease}));
    assert_eq!(ev["score"].as_f64(), Some(1.0), "{ev}");
}

/// `eval --env-pool-url DEAD,LIVE` with three episodes at once on a keyed pool of one lease:
/// every episode runs on the live pool (waiting for its slot), none fails, and the pool is
/// left with no lease.
#[test]
fn eval_runs_its_episodes_on_a_small_keyed_pool_past_a_dead_one() {
    let p = pool(&["--max-leases", "1", "--api-key", "pool-key"]);
    let dir = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(dir.path());
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let out = dir.path().join("episodes.jsonl");
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "terminal", "--model-path"])
        .arg(&model)
        .args([
            "--eval-tasks",
            "3",
            "--samples-per-prompt",
            "2",
            "--parallel-envs",
            "3",
        ])
        .args([
            "--max-new-tokens",
            "8",
            "--max-episode-steps",
            "2",
            "--episodes-out",
        ])
        .arg(&out)
        .env("ENV_POOL_URL", format!("{dead},{}", p.url))
        .env("ENV_POOL_API_KEY", "pool-key")
        .output()
        .unwrap();
    common::ok(o.clone());
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("failed 0"), "{said}");
    let eps: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(eps.len(), 6);
    for e in &eps {
        // A random model does nothing useful: scored 0 by the task's tests on the pool.
        assert_eq!(
            (e["reward"].as_f64(), e["evaluated"].as_bool()),
            (Some(0.0), Some(true)),
            "{e}"
        );
    }
    let (_, status) = keyed(&p.url, "GET", "/status", "pool-key", "");
    assert_eq!(
        (status["leases"].as_u64(), status["granted"].as_u64()),
        (Some(0), Some(6)),
        "{status}"
    );
    // Without the key the run is refused at once, naming why.
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "terminal", "--model-path"])
        .arg(&model)
        .args(["--eval-tasks", "1", "--env-pool-url", &p.url])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("401") && err.contains("bearer"), "{err}");

    // Settings of an environment loaded here are refused with a pool.
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "terminal", "--model-path"])
        .arg(&model)
        .args([
            "--env-pool-url",
            &p.url,
            "--env-config",
            "envs/terminal/config.toml",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("with --env-pool-url the pools run it"));
    // No pool answering at all is an error naming them.
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "terminal", "--model-path"])
        .arg(&model)
        .args(["--env-pool-url", &dead])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no environment pool answers") && err.contains(&dead),
        "{err}"
    );
}

/// A request from `from` (a loopback address) with the pool's key; the status and JSON reply.
fn keyed_from(
    from: &str,
    url: &str,
    method: &str,
    path: &str,
    key: &str,
    body: &str,
) -> (u16, Value) {
    let auth = format!("Authorization: Bearer {key}");
    let headers: Vec<&str> = if key.is_empty() {
        vec![]
    } else {
        vec![auth.as_str()]
    };
    let (s, text) = common::http_from(from, url, method, path, &headers, body);
    (
        s,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn keyed(url: &str, method: &str, path: &str, key: &str, body: &str) -> (u16, Value) {
    keyed_from("127.0.0.1", url, method, path, key, body)
}

/// The pool's own tasks by id, nothing else: a task id it does not serve, a path in the data
/// (absolute, relative, or a folder another lease planted in its own work directory, found
/// through `/proc/self/mountinfo`), or a task set with a link out of it, never lets a client
/// read a host file.
#[test]
fn a_pool_client_names_only_the_pools_tasks_and_reads_no_host_file() {
    let p = pool(&[
        "--max-leases",
        "32",
        "--max-leases-per-client",
        "32",
        "--max-leases-per-task",
        "32",
    ]);
    let mut n = 0;
    let mut lease = |key: &str| {
        n += 1;
        let (s, a) = post(
            &p.url,
            "/allocate",
            json!({"task_key": key, "request_id": format!("r{n}")}),
        );
        assert_eq!(s, 200, "{a}");
        a["lease_id"].as_str().unwrap().to_string()
    };
    // One lease plants a task folder whose files link to host secrets, and reads where its
    // work directory is.
    let planter = lease("count-words");
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": planter, "task": {"id": "count-words"}}),
    );
    assert_eq!(s, 200, "{r}");
    let plant = "mkdir -p /app/evil && cd /app/evil && printf 'instruction: x\\n' > task.yaml \
        && ln -s /etc/shadow setup.sh && ln -s /etc tests && ln -s /etc/passwd run-tests.sh \
        && grep ' /app ' /proc/self/mountinfo | cut -d' ' -f4";
    let call = json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "shell_exec", "arguments": json!({"id": "m", "command": plant}).to_string()}}]});
    let (s, st) = post(
        &p.url,
        "/step",
        json!({"lease_id": planter, "message": call}),
    );
    assert_eq!(s, 200, "{st}");
    let root = st["observation"]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .trim()
        .to_string();
    // As root each work directory is a tmpfs of its own: its root inside says nothing of where
    // it is on the host.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(root, "/", "the sandbox's mountinfo shows a host path");
    }
    let planted = format!("{}/evil", root.trim_end_matches('/'));

    let secrets = ["root:", "/bin/bash", "daemon:"];
    for (i, task) in [
        json!({"id": "evil", "data_json": json!({"task": {"task_name": "evil", "task_path": planted}}).to_string()}),
        json!({"id": "count-words", "data_json": json!({"task": {"task_name": "evil", "task_path": planted}}).to_string()}),
        json!({"id": "count-words", "data_json": json!({"task": {"task_path": "/etc"}}).to_string()}),
        json!({"id": "/etc/passwd"}),
        json!({"id": "../../../../etc"}),
    ]
    .into_iter()
    .enumerate()
    {
        let id = lease("count-words");
        let (s, r) = post(&p.url, "/reset", json!({"lease_id": id, "task": task}));
        let text = r.to_string();
        assert_eq!(s, 400, "case {i}: {text}");
        assert!(
            text.contains("not one of this pool's") || text.contains("not the pool's own"),
            "case {i}: {text}"
        );
        assert!(!secrets.iter().any(|x| text.contains(x)), "case {i}: {text}");
    }
    // The original's form names a task too, and only that.
    let id = lease("count-words");
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": id, "task_meta": {"task_name": "evil", "task_path": planted}}),
    );
    assert_eq!(s, 400, "{r}");
    // A lease runs the task it was allocated for, and no other; a task the pool does not
    // have gets no lease (so the per-task cap counts real tasks).
    let id = lease("count-words");
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": id, "task": {"id": "top-words"}}),
    );
    assert!(
        s == 400 && r.to_string().contains("allocated for task `count-words`"),
        "{r}"
    );
    let (s, r) = post(
        &p.url,
        "/allocate",
        json!({"task_key": "made-up", "request_id": "x"}),
    );
    assert!(
        s == 400 && r.to_string().contains("not one of this pool's"),
        "{r}"
    );
    // The pool's own task by id, and with its own data, runs.
    let id = lease("top-words");
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": id, "task": {"id": "top-words"}}),
    );
    assert_eq!(s, 200, "{r}");
    let own = get(&p.url, "/tasks?split=all")["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "create-hello")
        .unwrap()
        .clone();
    let id = lease("create-hello");
    let (s, r) = post(&p.url, "/reset", json!({"lease_id": id, "task": own}));
    assert_eq!(s, 200, "{r}");
    assert!(
        !own["data_json"].as_str().unwrap().contains("task_path"),
        "{own}"
    );

    // A task set with a link out of it is refused at start, naming the task.
    let set = tempfile::tempdir().unwrap();
    let t = set.path().join("linked");
    std::fs::create_dir_all(&t).unwrap();
    std::fs::write(t.join("task.yaml"), "instruction: x\n").unwrap();
    std::fs::write(t.join("run-tests.sh"), "true\n").unwrap();
    std::os::unix::fs::symlink("/etc", t.join("tests")).unwrap();
    let cfg = set.path().join("env.toml");
    std::fs::write(&cfg, format!("[env]\ntasks_dir = {:?}\n", set.path())).unwrap();
    let o = common::host_command(&workspace())
        .args([
            "env-pool",
            "serve",
            "--env",
            "envs/terminal",
            "--port",
            "0",
            "--env-config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("task `linked`: tests leads outside the task set"),
        "{err}"
    );
}

/// A pool with a key: every call but `/healthz` needs it; lease ids are bound to the address
/// that allocated them (another client is told there is no such lease, and cannot take it over
/// by reusing its request id); each client holds at most its share of leases; a public bind
/// without a key is warned about.
#[test]
fn a_keyed_pool_binds_leases_to_their_client_and_caps_each_client() {
    let p = pool(&[
        "--api-key",
        "pool-key",
        "--max-leases",
        "4",
        "--max-leases-per-client",
        "2",
    ]);
    let (s, _) = keyed(&p.url, "GET", "/healthz", "", "");
    assert_eq!(s, 200);
    for key in ["", "wrong"] {
        let (s, r) = keyed(&p.url, "GET", "/status", key, "");
        assert_eq!(s, 401, "{r}");
        let (s, r) = keyed(
            &p.url,
            "POST",
            "/allocate",
            key,
            r#"{"task_key": "t", "request_id": "x"}"#,
        );
        assert_eq!(s, 401, "{r}");
    }
    let alloc = |from: &str, req: &str| {
        keyed_from(
            from,
            &p.url,
            "POST",
            "/allocate",
            "pool-key",
            &json!({"task_key": "count-words", "request_id": req}).to_string(),
        )
    };
    let (s, a1) = alloc("127.0.0.1", "a1");
    assert_eq!(s, 200, "{a1}");
    let a1 = a1["lease_id"].as_str().unwrap().to_string();
    let (s, _) = alloc("127.0.0.1", "a2");
    assert_eq!(s, 200);
    let (s, full) = alloc("127.0.0.1", "a3");
    assert_eq!(s, 429, "{full}");
    assert!(
        full["error"]
            .as_str()
            .unwrap()
            .contains("--max-leases-per-client"),
        "{full}"
    );
    // Another client still gets a lease, and not the first's by repeating its request id.
    let (s, b) = alloc("127.0.0.2", "a1");
    assert_eq!((s, b["reused"].as_bool()), (200, Some(false)), "{b}");
    assert_ne!(b["lease_id"].as_str(), Some(a1.as_str()));
    // The first client's lease is not the second's to use.
    for path in ["/heartbeat", "/reset", "/step", "/exec_tool", "/evaluate"] {
        let body = json!({"lease_id": a1, "task": {"id": "count-words"},
            "message": {"role": "assistant", "content": "x"}, "tool_call": {"name": "shell_exec"}});
        let (s, r) = keyed_from(
            "127.0.0.2",
            &p.url,
            "POST",
            path,
            "pool-key",
            &body.to_string(),
        );
        assert_eq!(s, 404, "{path}: {r}");
    }
    // Closing it from there closes nothing.
    let (s, r) = keyed_from(
        "127.0.0.2",
        &p.url,
        "POST",
        "/close",
        "pool-key",
        &json!({"lease_id": a1}).to_string(),
    );
    assert_eq!((s, r["found"].as_bool()), (200, Some(false)), "{r}");
    let (s, r) = keyed(
        &p.url,
        "POST",
        "/reset",
        "pool-key",
        &json!({"lease_id": a1, "task": {"id": "count-words"}}).to_string(),
    );
    assert_eq!(s, 200, "{r}");
    let (s, r) = keyed(
        &p.url,
        "POST",
        "/close",
        "pool-key",
        &json!({"lease_id": a1}).to_string(),
    );
    assert_eq!((s, r["found"].as_bool()), (200, Some(true)), "{r}");

    // A public address without a key is warned about.
    let mut child = common::host_command(&workspace())
        .args([
            "env-pool",
            "serve",
            "--env",
            "envs/terminal",
            "--port",
            "0",
            "--host",
            "0.0.0.0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let _ = child.wait();
    assert!(line.contains("no key asked"), "{line}");
    assert!(
        err.contains("warning: listening on 0.0.0.0 without a key"),
        "{err}"
    );
}

/// The built-in SWE instance the dialect's tests work on, and its gold patch.
const SWE_INSTANCE: &str = "openclaw__slugkit-1";

fn gold_patch() -> String {
    std::fs::read_to_string(
        workspace()
            .join("envs/swe/tasks")
            .join(SWE_INSTANCE)
            .join("gold.patch"),
    )
    .unwrap()
}

/// A pool serving `swe` answers the original's SWE pool: allocate an instance (idempotent with
/// a request id), run commands in its repository (variables, a directory, exit codes; one that
/// cannot travel as one block is refused), the repository's diff, and its score by the
/// instance's own tests: the gold patch applied through a here-document resolves it, no change
/// does not. A client's eval script and a patch other than the diff are refused by name.
#[test]
fn a_pool_serving_swe_answers_the_originals_swe_dialect() {
    let p = pool_of("envs/swe", "swe", &[]);
    assert_eq!(get(&p.url, "/status")["dialect"], "swe");
    let alloc = json!({"image": "swebench/sweb.eval.x86_64.openclaw_1776_slugkit-1:latest",
        "instance_id": SWE_INSTANCE, "request_id": "s1"});
    let (s, a) = post(&p.url, "/allocate", alloc.clone());
    assert_eq!(s, 200, "{a}");
    let lease = a["lease_id"].as_str().unwrap().to_string();
    assert_eq!(a["container_id"], lease.as_str());
    assert_eq!(a["node_url"], p.url.as_str());
    assert!(a["observation"]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("<pr_description>"));
    let (_, again) = post(&p.url, "/allocate", alloc);
    assert_eq!(
        (again["lease_id"].as_str(), again["reused"].as_bool()),
        (Some(lease.as_str()), Some(true))
    );
    let exec = |mut body: Value| {
        body["lease_id"] = json!(lease);
        post(&p.url, "/exec", body)
    };
    let (s, o) = exec(
        json!({"command": "git status --short && git rev-parse --is-inside-work-tree",
        "cwd": "/testbed", "timeout": 30, "env": {}}),
    );
    assert_eq!((s, o["returncode"].as_i64()), (200, Some(0)), "{o}");
    assert!(o["output"].as_str().unwrap().ends_with("true\n"), "{o}");
    let (_, o) = exec(
        json!({"command": "echo \"$GREETING\" && pwd", "cwd": "/tmp",
        "env": {"GREETING": "it's me"}}),
    );
    assert_eq!(o["output"], "it's me\n/tmp\n", "{o}");
    let (_, o) = exec(json!({"command": "echo no; exit 3"}));
    assert_eq!(
        (o["returncode"].as_i64(), o["output"].as_str()),
        (Some(3), Some("no\n"))
    );
    let (s, o) = exec(json!({"command": "echo a\n```\necho b"}));
    assert!(
        s == 400 && o["error"].as_str().unwrap().contains("one agent step"),
        "{o}"
    );
    let (s, o) = exec(json!({"command": "ls", "env": {"A B": "x"}}));
    assert_eq!(s, 400, "{o}");
    // A second call while one runs on the same lease is refused, not queued.
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| exec(json!({"command": "sleep 2; echo slept"})));
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (s, o) = exec(json!({"command": "echo quick"}));
        assert_eq!(s, 409, "{o}");
        assert!(
            o["error"].as_str().unwrap().contains("has a step running"),
            "{o}"
        );
        let (s, o) = slow.join().unwrap();
        assert_eq!((s, o["output"].as_str()), (200, Some("slept\n")), "{o}");
    });

    // The gold patch through a here-document, then the submit.
    let gold = gold_patch();
    let (s, o) = exec(json!({"command": format!("git apply <<'EOF_GOLD'\n{gold}EOF_GOLD")}));
    assert_eq!((s, o["returncode"].as_i64()), (200, Some(0)), "{o}");
    let (_, o) = exec(
        json!({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"}),
    );
    assert_eq!(o["done"], true, "{o}");
    let (s, d) = post(
        &p.url,
        "/diff",
        json!({"lease_id": lease, "cwd": "/testbed"}),
    );
    let patch = d["patch"].as_str().unwrap_or_default().to_string();
    assert!(s == 200 && patch.starts_with("diff --git"), "{d}");
    let (s, e) = post(
        &p.url,
        "/evaluate",
        json!({"lease_id": lease, "patch": patch, "eval_script": "exit 0"}),
    );
    assert!(
        s == 400 && e["error"].as_str().unwrap().contains("eval_script"),
        "{e}"
    );
    let (s, e) = post(
        &p.url,
        "/evaluate",
        json!({"lease_id": lease, "patch": "diff --git a/x b/x\n", "eval_script": ""}),
    );
    assert!(
        s == 409 && e["error"].as_str().unwrap().contains("/diff gives it"),
        "{e}"
    );
    let (s, ev) = post(
        &p.url,
        "/evaluate",
        json!({"lease_id": lease, "patch": patch, "eval_script": "", "cwd": "/testbed", "timeout": 300}),
    );
    assert_eq!(
        (s, ev["resolved"].as_bool(), ev["score"].as_f64()),
        (200, Some(true), Some(1.0)),
        "{ev}"
    );

    // A lease with no change: an empty diff, not resolved. Without a request id each
    // allocate is a lease of its own.
    let (_, b) = post(
        &p.url,
        "/allocate",
        json!({"image": "", "instance_id": SWE_INSTANCE}),
    );
    let other = b["lease_id"].as_str().unwrap().to_string();
    assert_ne!(other, lease);
    let (_, d) = post(&p.url, "/diff", json!({"lease_id": other}));
    assert_eq!(d["patch"], "", "{d}");
    let (_, ev) = post(
        &p.url,
        "/evaluate",
        json!({"lease_id": other, "patch": "", "eval_script": ""}),
    );
    assert_eq!(ev["resolved"], false, "{ev}");
    for id in [&lease, &other] {
        let (_, c) = post(&p.url, "/close", json!({"lease_id": id}));
        assert_eq!(c["found"], true);
    }
    // Only the pool's own instances; and the GUI dialect is not this pool's.
    let (s, e) = post(
        &p.url,
        "/allocate",
        json!({"image": "x", "instance_id": "django__django-11099"}),
    );
    assert!(
        s == 400
            && e["error"]
                .as_str()
                .unwrap()
                .contains("not one of this pool's"),
        "{e}"
    );
    let (s, e) = post(&p.url, "/get_obs", json!({"lease_id": other}));
    assert!(
        s == 400 && e["error"].as_str().unwrap().contains("gui pool dialect"),
        "{e}"
    );
}

/// Whether Chromium and chromedriver are on PATH; without them the GUI test fails in CI
/// (`OPENCLAW_REQUIRE_ASSETS=1`) and is skipped elsewhere.
fn have_browser() -> bool {
    let on_path = |program: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
    };
    let missing: Vec<&str> = ["chromium", "chromedriver"]
        .into_iter()
        .filter(|p| !on_path(p))
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        !common::assets_required(),
        "{} not found and OPENCLAW_REQUIRE_ASSETS=1: apt-get install chromium chromium-driver",
        missing.join(" and ")
    );
    eprintln!(
        "SKIPPED: {} not found (apt-get install chromium chromium-driver)",
        missing.join(" and ")
    );
    false
}

/// A pool serving `gui` answers the original's GUI pool: a lease, a reset naming the task by
/// id (an OSWorld task's own setup or evaluator is refused), its observation again from
/// `/get_obs`, the task's solution as computer_use arguments (its end as OSWorld's `DONE`),
/// and the score 1. pyautogui code is refused by name.
#[test]
fn a_pool_serving_gui_answers_the_originals_gui_dialect() {
    if !have_browser() {
        return;
    }
    let p = pool_of("envs/gui", "gui", &[]);
    let task = "close-editor-tabs";
    let mut solution: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            workspace()
                .join("envs/gui/tasks")
                .join(task)
                .join("solution.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(solution.last().unwrap()["action"], "terminate");
    *solution.last_mut().unwrap() = json!("DONE");
    let (s, a) = post(&p.url, "/allocate", json!({"episode_id": "e1"}));
    assert_eq!(s, 200, "{a}");
    let lease = a["lease_id"].as_str().unwrap().to_string();
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": lease, "task_config": {"id": task, "evaluator": {"func": "x"}}}),
    );
    assert!(
        s == 400 && r["error"].as_str().unwrap().contains("`evaluator`"),
        "{r}"
    );
    let (s, r) = post(
        &p.url,
        "/reset",
        json!({"lease_id": lease, "task_config": {"id": task}}),
    );
    assert_eq!(s, 200, "{r}");
    let obs = &r["observation"];
    assert!(
        obs["instruction"].as_str().unwrap().contains("notes.md"),
        "{obs}"
    );
    assert!(
        obs["accessibility_tree"]
            .as_str()
            .unwrap()
            .contains("accessibility tree"),
        "{obs}"
    );
    let (_, o) = post(&p.url, "/get_obs", json!({"lease_id": lease}));
    assert_eq!(&o["observation"], obs);
    let (s, e) = post(
        &p.url,
        "/step",
        json!({"lease_id": lease, "action": "pyautogui.click(10, 10)", "sleep_after_execution": 0}),
    );
    assert!(
        s == 400 && e["error"].as_str().unwrap().contains("pyautogui"),
        "{e}"
    );
    let n = solution.len();
    for (i, action) in solution.into_iter().enumerate() {
        let (s, st) = post(
            &p.url,
            "/step",
            json!({"lease_id": lease, "action": action, "sleep_after_execution": 0.0}),
        );
        assert_eq!(s, 200, "{st}");
        assert_eq!(st["done"].as_bool(), Some(i + 1 == n), "{st}");
    }
    let (_, ev) = post(&p.url, "/evaluate", json!({"lease_id": lease}));
    assert_eq!(ev["score"].as_f64(), Some(1.0), "{ev}");
    let (s, e) = post(&p.url, "/exec", json!({"lease_id": lease, "command": "ls"}));
    assert!(
        s == 400 && e["error"].as_str().unwrap().contains("swe pool dialect"),
        "{e}"
    );
    let (_, c) = post(&p.url, "/close", json!({"lease_id": lease}));
    assert_eq!(c["found"], true);
}

/// Replays its actions in order.
struct Script(Vec<Action>);

impl Agent for Script {
    fn act(&mut self, _: &[Message], _: &str) -> anyhow::Result<Action> {
        if self.0.is_empty() {
            anyhow::bail!("the script ran out");
        }
        Ok(self.0.remove(0))
    }
}

fn say(text: &str) -> Action {
    Action {
        message: Message::new("assistant", text),
    }
}

/// Each message's role and text.
fn said(e: &Episode) -> Vec<(String, String)> {
    e.conversation
        .iter()
        .map(|m| (m.role.to_string(), m.content.to_string()))
        .collect()
}

/// A run in the SWE dialect (`RemoteEnv`, `--env-pool-dialect swe`) against a pool serving
/// `swe`: a scripted episode (a reply without a block, a command, the reference fix, the
/// submit) reads word for word as the same episode with the plugin loaded here, and is scored
/// the same, by `/diff` and `/evaluate`; doing nothing is not resolved, there as here.
#[test]
fn a_run_in_the_swe_dialect_is_scored_as_a_local_episode() {
    let p = pool_of("envs/swe", "swe", &[]);
    let plugin = LoadedPlugin::open(&workspace().join("envs/swe")).unwrap();
    let local = TimedEnv::new(EnvHandle::new(&plugin, "", HostServices::standalone()).unwrap());
    let remote = RemoteEnv::connect(
        "swe",
        &RemoteOptions {
            urls: vec![p.url.clone()],
            timeout: Duration::from_secs(120),
            heartbeat: Duration::from_secs(30),
            api_key: String::new(),
            dialect: Dialect::Swe,
        },
    )
    .unwrap();
    let remote = TimedEnv::with_calls(Arc::new(remote));
    let call = Duration::from_secs(60);
    let task = remote
        .tasks("all", call)
        .unwrap()
        .into_iter()
        .find(|t| t.id.as_str() == SWE_INSTANCE)
        .unwrap();
    let reference = local.reference(&task).unwrap().unwrap();
    let submit = reference.last().unwrap().clone();
    let mut script = vec![
        say("I will look around first."),
        say("THOUGHT: where am I?\n\n```bash\npwd && git status --short\n```"),
    ];
    script.extend(reference);
    let opts = EpisodeOptions::new(8, call);
    let run = |env: &TimedEnv, actions: &[Action]| {
        env.episode(&task, 0, &mut Script(actions.to_vec()), &opts)
    };
    let (here, there) = (run(&local, &script[..]), run(&remote, &script[..]));
    assert_eq!(said(&there), said(&here));
    assert_eq!(there.ending, Ending::Done, "{:?}", there.ending);
    for ep in [&here, &there] {
        let o = ep.outcome.as_ref().unwrap();
        assert_eq!(
            (o.reward, o.solved),
            (1.0, Some(true)),
            "{}",
            o.details_json
        );
    }
    let d: Value = serde_json::from_str(&there.outcome.as_ref().unwrap().details_json).unwrap();
    assert!(
        d["patch"].as_str().unwrap().starts_with("diff --git") && d["resolved"] == true,
        "{d}"
    );

    let only_submit = [submit];
    let (here, there) = (
        run(&local, &only_submit[..]),
        run(&remote, &only_submit[..]),
    );
    assert_eq!(said(&there), said(&here));
    for ep in [&here, &there] {
        let o = ep.outcome.as_ref().unwrap();
        assert_eq!(
            (o.reward, o.solved),
            (0.0, Some(false)),
            "{}",
            o.details_json
        );
    }
    // The pool is left with no lease.
    assert_eq!(get(&p.url, "/status")["leases"], 0);
}

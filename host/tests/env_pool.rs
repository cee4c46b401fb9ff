//! `env-pool serve` and `--env-pool-url`: the lease protocol against a real pool serving the
//! terminal environment on loopback (allocate is idempotent, a full pool answers 429 with its
//! code, idle leases are reaped, the original's `/exec_tool` dialect works), and `eval` running
//! its episodes on the pool, failing over past a dead one.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::workspace;
use serde_json::{json, Value};

/// A pool serving `envs/terminal` on a free port, killed when dropped.
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
    let mut child = common::host_command(&workspace())
        .args(["env-pool", "serve", "--env", "envs/terminal", "--port", "0"])
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
    assert!(line.contains("environment pool `terminal`"), "{line}");
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
    assert!(lease.starts_with("run-") && lease.len() == 20, "{lease}");
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
        json!({"lease_id": lease, "task": {"id": "create-hello", "instruction": "", "data_json": "{\"task\": {\"task_name\": \"create-hello\"}}"}}),
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

/// `eval --env-pool-url DEAD,LIVE`: every episode runs on the live pool, none fails, and the
/// pool is left with no lease.
#[test]
fn eval_runs_its_episodes_on_the_pool_past_a_dead_one() {
    let p = pool(&[]);
    let dir = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(dir.path());
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let out = dir.path().join("episodes.jsonl");
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "terminal", "--model-path"])
        .arg(&model)
        .args(["--eval-tasks", "3", "--samples-per-prompt", "2"])
        .args([
            "--max-new-tokens",
            "8",
            "--max-episode-steps",
            "2",
            "--episodes-out",
        ])
        .arg(&out)
        .env("ENV_POOL_URL", format!("{dead},{}", p.url))
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
    let status = get(&p.url, "/status");
    assert_eq!(
        (status["leases"].as_u64(), status["granted"].as_u64()),
        (Some(0), Some(6)),
        "{status}"
    );

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

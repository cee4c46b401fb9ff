//! `openclaw-host bench serve`: a load test of the server. N concurrent streaming clients for
//! T seconds, once against `serve` (no training) and once against `run` (training with a
//! weight update every step), each host a child process on a free port. Reports failed
//! requests, time-to-first-token percentiles and the ratio between the two runs. With
//! `--schema`, both runs are `serve`, the second asked for replies under a JSON schema: the
//! cost of structured outputs, in decoded tokens per second.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct ServeBenchOptions {
    /// The model directory.
    pub model: String,
    /// The method plugin for the training run.
    pub plugin: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Seconds each run lasts.
    pub seconds: u64,
    /// Tokens per answer.
    pub max_tokens: u32,
    /// What the second run changes.
    pub compare: Compare,
}

/// What the two runs of a load test differ in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// `serve`, then `run` (training with a weight update every step).
    Training,
    /// `serve` answering plain text, then `serve` answering under [`schema`]'s JSON schema.
    Schema,
}

/// The schema of the structured run: an object of a few kinds of values, its strings free.
fn schema() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {"name": "answer", "strict": true, "schema": {
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "confident": {"type": "boolean"},
                "steps": {"type": "integer", "minimum": 0},
                "style": {"enum": ["plain", "markdown"]},
            },
            "required": ["answer", "confident", "steps", "style"],
            "additionalProperties": false,
        }},
    })
}

/// One run's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// `serve` or `run`.
    pub mode: String,
    /// Streaming requests finished.
    pub requests: usize,
    /// Requests that failed (transport error, HTTP error, stream without its end).
    pub failed: usize,
    /// Time to first token, median, in milliseconds.
    pub ttft_p50_ms: f64,
    /// Time to first token, 99th percentile, in milliseconds.
    pub ttft_p99_ms: f64,
    /// Whole request, median, in milliseconds.
    pub latency_p50_ms: f64,
    /// Completion tokens of every answer, per second of the run.
    pub tokens_per_s: f64,
    /// Whether the answers were asked for under a JSON schema.
    pub schema: bool,
    /// Optimizer steps the host took during the run.
    pub train_steps: u64,
}

struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start(mode: &str, o: &ServeBenchOptions, dir: &Path, port: u16) -> Result<Host> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg(mode)
        .args(["--model-path", &o.model, "--port", &port.to_string()])
        .args(["--default-max-tokens", &o.max_tokens.to_string()])
        .arg("--rl-buffer-dir")
        .arg(dir.join("rl_buffer"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("{mode}.err")))?);
    if mode == "run" {
        cmd.args(["--plugin", &o.plugin])
            .args([
                "--rollout-batch-size",
                "4",
                "--update-weights-interval",
                "1",
            ])
            .args(["--save-interval", "0", "--max-staleness", "1000"]);
    }
    let host = Host(cmd.spawn().context("cannot start the host")?);
    let deadline = Instant::now() + Duration::from_secs(300);
    while ureq::get(&format!("http://127.0.0.1:{port}/healthz"))
        .call()
        .is_err()
    {
        if Instant::now() > deadline {
            bail!(
                "the {mode} host did not come up; see {}",
                dir.join(format!("{mode}.err")).display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(host)
}

#[derive(Default)]
struct Samples {
    ttft: Vec<f64>,
    latency: Vec<f64>,
    tokens: u64,
    failed: usize,
}

/// One streamed request; returns (ttft, total) in seconds, the answer and its tokens.
fn stream_once(
    agent: &ureq::Agent,
    url: &str,
    session: &str,
    question: &Value,
    schema: bool,
) -> Result<(f64, f64, String, u64)> {
    let t0 = Instant::now();
    let mut body = json!({"messages": [question], "stream": true,
        "stream_options": {"include_usage": true}});
    if schema {
        body["response_format"] = self::schema();
    }
    let resp = agent
        .post(url)
        .header("X-Session-Id", session)
        .send_json(body)?;
    if !resp.status().is_success() {
        bail!("HTTP {}", resp.status());
    }
    let reader = BufReader::new(resp.into_body().into_reader());
    let (mut ttft, mut done, mut text, mut tokens) = (None, false, String::new(), 0);
    for line in reader.lines() {
        let line = line?;
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            done = true;
            break;
        }
        let v: Value = serde_json::from_str(data)?;
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            tokens = n;
        }
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            if !c.is_empty() && ttft.is_none() {
                ttft = Some(t0.elapsed().as_secs_f64());
            }
            text.push_str(c);
        }
    }
    if !done {
        bail!("the stream ended without [DONE]");
    }
    let total = t0.elapsed().as_secs_f64();
    Ok((ttft.unwrap_or(total), total, text, tokens))
}

fn load(port: u16, o: &ServeBenchOptions, schema: bool) -> Samples {
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let out = Arc::new(Mutex::new(Samples::default()));
    let end = Instant::now() + Duration::from_secs(o.seconds);
    let tasks = openclaw_sim::TaskSet::standard().train;
    let threads: Vec<_> = (0..o.clients)
        .map(|c| {
            let (url, out, tasks) = (url.clone(), out.clone(), tasks.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(Duration::from_secs(120)))
                    .http_status_as_error(false)
                    .build()
                    .into();
                let mut n = 0usize;
                while Instant::now() < end {
                    n += 1;
                    let session = format!("load-{c}-{n}");
                    let task = &tasks[(c * 7919 + n * 104729) % tasks.len()];
                    let q = json!({"role": "user", "content": task.prompt});
                    match stream_once(&agent, &url, &session, &q, schema) {
                        Ok((ttft, total, answer, tokens)) => {
                            {
                                let mut s = out.lock().unwrap_or_else(|e| e.into_inner());
                                s.ttft.push(ttft);
                                s.latency.push(total);
                                s.tokens += tokens;
                            }
                            // The user's reply: the answer's next state, so training has data.
                            let reply = if n.is_multiple_of(2) { "Thanks, great!" } else { "Please write plain text, no markdown." };
                            let r = agent
                                .post(&url)
                                .header("X-Session-Id", &session)
                                .header("X-Session-Done", "true")
                                .send_json(json!({"messages": [q, {"role": "assistant", "content": answer}, {"role": "user", "content": reply}], "max_tokens": 2}));
                            if !r.is_ok_and(|r| r.status().is_success()) {
                                out.lock().unwrap_or_else(|e| e.into_inner()).failed += 1;
                            }
                        }
                        Err(_) => out.lock().unwrap_or_else(|e| e.into_inner()).failed += 1,
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    Arc::try_unwrap(out)
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .unwrap_or_default()
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i] * 1000.0
}

fn train_steps(port: u16) -> u64 {
    let Ok(mut r) = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call() else {
        return 0;
    };
    let text = r.body_mut().read_to_string().unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("openclaw_train_steps_total"))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// Runs both loads and returns their reports (`serve` first).
pub fn run(o: &ServeBenchOptions) -> Result<Vec<LoadReport>> {
    let mut out = Vec::new();
    let runs: [(&str, bool); 2] = match o.compare {
        Compare::Training => [("serve", false), ("run", false)],
        Compare::Schema => [("serve", false), ("serve", true)],
    };
    for (mode, schema) in runs {
        let dir = tempfile_dir(mode)?;
        let port = free_port()?;
        let host = start(mode, o, &dir, port)?;
        let under = if schema { " under a JSON schema" } else { "" };
        eprintln!(
            "{mode}{under}: {} clients for {} s ...",
            o.clients, o.seconds
        );
        let t0 = Instant::now();
        let mut s = load(port, o, schema);
        let elapsed = t0.elapsed().as_secs_f64();
        let steps = train_steps(port);
        drop(host);
        let _ = std::fs::remove_dir_all(&dir);
        out.push(LoadReport {
            mode: mode.into(),
            requests: s.ttft.len(),
            failed: s.failed,
            ttft_p50_ms: percentile(&mut s.ttft, 0.5),
            ttft_p99_ms: percentile(&mut s.ttft, 0.99),
            latency_p50_ms: percentile(&mut s.latency, 0.5),
            tokens_per_s: s.tokens as f64 / elapsed,
            schema,
            train_steps: steps,
        });
    }
    Ok(out)
}

fn tempfile_dir(mode: &str) -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("openclaw-bench-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

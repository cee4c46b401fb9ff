//! The real OpenClaw agent (npm `openclaw@2026.9.6` on Node 24, installed by `scripts/test.sh`)
//! talking to `openclaw-host serve` for a three-message conversation: the buffer must hold one
//! session whose main turns carry the user's next messages as their next states, without the
//! agent's ephemeral internal-context block. The model is a random tiny Qwen3 with the real
//! Qwen3 tokenizer (OpenClaw's prompt is about 12,000 tokens with it).

mod common;

use common::{host_command, ok, spawn_listening, workspace};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where `scripts/test.sh` installs the agent and its Node.
fn openclaw() -> (PathBuf, PathBuf) {
    let root = workspace().join(".assets/openclaw");
    let agent = root.join("oc/node_modules/.bin/openclaw");
    let node_bin = root.join("node24/node_modules/.bin");
    assert!(
        agent.exists() && node_bin.join("node").exists(),
        "the OpenClaw agent is not installed under {}: run `bash scripts/test.sh` (it installs \
         openclaw@2026.9.6 and node@24.21.0 from npm)",
        root.display()
    );
    (agent, node_bin)
}

/// A random tiny Qwen3 with the real tokenizer and room for OpenClaw's long prompt.
fn model(dir: &Path) -> PathBuf {
    let out = common::qwen3_tiny(dir);
    let path = out.join("config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["max_position_embeddings"] = 32768.into();
    std::fs::write(&path, config.to_string()).unwrap();
    out
}

/// The agent's configuration: one OpenAI-completions provider at the server, its default model.
fn configure(home: &Path, port: u16) {
    let config = serde_json::json!({
        "agents": {"defaults": {"model": {"primary": "host/default"}}},
        "models": {"mode": "merge", "providers": {"host": {
            "baseUrl": format!("http://127.0.0.1:{port}/v1"),
            "apiKey": "sk-local",
            "api": "openai-completions",
            "models": [{
                "id": "default", "name": "default", "reasoning": false, "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 32768, "maxTokens": 16
            }]
        }}}
    });
    std::fs::create_dir_all(home.join(".openclaw")).unwrap();
    std::fs::write(home.join(".openclaw/openclaw.json"), config.to_string()).unwrap();
}

/// One `openclaw agent --local` turn in session `session`.
fn turn(home: &Path, session: &str, message: &str) {
    let (agent, node_bin) = openclaw();
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let o = Command::new(&agent)
        .args([
            "agent",
            "--local",
            "--session-id",
            session,
            "--message",
            message,
        ])
        .args(["--timeout", "300", "--json"])
        .current_dir(home)
        .env("PATH", path)
        .env("HOME", home)
        .env("OPENCLAW_HOME", home)
        .env("OPENCLAW_NO_AUTO_UPDATE", "1")
        .env("OPENCLAW_OFFLINE", "1")
        .env("OPENCLAW_DISABLE_BONJOUR", "1")
        .env("NO_COLOR", "1")
        .env("OPENCLAW_LOG_LEVEL", "error")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", agent.display()));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "openclaw agent failed ({}):\n{stdout}\n{stderr}",
        o.status
    );
    eprintln!(
        "openclaw turn {message:?}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The slow tier: end-to-end runs that take a minute or more. `scripts/test.sh` runs them;
/// `scripts/test.sh --fast` (which passes `--skip slow::`) leaves them out.
mod slow {
    use super::*;

    #[test]
    fn a_conversation_of_the_real_openclaw_agent_is_one_session_with_next_states() {
        openclaw();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let model = model(dir);
        let buffer = dir.join("rl_buffer");
        let (child, url) = spawn_listening(
            host_command(dir)
                .arg("serve")
                .arg("--model-path")
                .arg(&model)
                .args(["--port", "0", "--default-max-tokens", "16"])
                .arg("--rl-buffer-dir")
                .arg(&buffer)
                .stdout(Stdio::null()),
            &dir.join("host.err"),
            Duration::from_secs(60),
        );
        let server = Server(child);
        let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
        let home = dir.join("home");
        configure(&home, port);
        let messages = [
            "Write a short haiku about the sea.",
            "That is too long and uses markdown. Please write plain text, one line.",
            "Thanks, that's better.",
        ];
        for m in messages {
            turn(&home, "verify1", m);
        }
        // Turns 2 and 3 repeat turn 1's system prompt, tools and first message: their keys and
        // values come from the prefix cache.
        let metrics = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        let reused: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("openclaw_prefix_reused_tokens_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no prefix-cache counter in {metrics}"));
        assert!(reused > 2.0 * 10_000.0, "prompt tokens reused: {reused}");
        drop(server);

        let exported = dir.join("export.jsonl");
        ok(host_command(dir)
            .args(["buffer", "export", "--rl-buffer-dir"])
            .arg(&buffer)
            .arg("--out")
            .arg(&exported)
            .output()
            .unwrap());
        let sessions: Vec<Value> = std::fs::read_to_string(&exported)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let summary: Vec<(String, usize)> = sessions
            .iter()
            .map(|s| {
                (
                    s["session_id"].as_str().unwrap().to_string(),
                    s["turns"].as_array().unwrap().len(),
                )
            })
            .collect();
        let main: Vec<&Value> = sessions
            .iter()
            .flat_map(|s| s["turns"].as_array().unwrap())
            .filter(|t| t["type"] == "main")
            .collect();
        assert_eq!(main.len(), 3, "three main turns: {summary:?}");
        let with_main: Vec<&Value> = sessions
            .iter()
            .filter(|s| {
                s["turns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["type"] == "main")
            })
            .collect();
        assert_eq!(with_main.len(), 1, "one session: {summary:?}");
        let turns = with_main[0]["turns"].as_array().unwrap();
        let main: Vec<&Value> = turns.iter().filter(|t| t["type"] == "main").collect();
        for (t, expected) in main.iter().zip(&messages[1..]) {
            let ns = &t["next_state"];
            assert_eq!(ns["role"], "user", "{ns}");
            let content = ns["content"].as_str().unwrap();
            assert!(content.contains(expected), "{content}");
            assert!(!content.contains("OPENCLAW_INTERNAL_CONTEXT"), "{content}");
            assert!(
                t["prompt_ids"].as_array().unwrap().len() > 5_000,
                "OpenClaw's long prompt"
            );
        }
        assert!(
            main[2]["next_state"].is_null(),
            "the last turn has no reply yet"
        );
    }
}

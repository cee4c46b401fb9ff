//! Simulated users over HTTP: each thread asks a task, reads the answer, and replies like a
//! person (thanks, or a correction saying what it wants), ending the session with that reply.
//! The reply is the answer's next state, which the judge reads.

use super::scoreboard::{FirstAnswer, Scoreboard};
use anyhow::{anyhow, Context, Result};
use openclaw_sim::{SimulatedUser, Style, Task};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Settings of the simulated users.
#[derive(Clone, Debug)]
pub struct SimUsersOptions {
    /// The server's API base, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// Sent as a bearer token when not empty.
    pub api_key: String,
    /// Concurrent users.
    pub users: usize,
    /// Seeds the users' choices.
    pub seed: u64,
    /// Share of requests with an explicit style instruction (`--simulate-requests`).
    pub requests: f64,
    /// The tasks they ask.
    pub tasks: Vec<Task>,
    /// What they prefer: user `i` prefers `preferences[i % len]`. With more than one, each
    /// preference is a group of users who name themselves after it (`X-User-Id: plain`), so
    /// a server with one adapter per user answers each group with its own.
    pub preferences: Vec<Style>,
}

/// The user id a group of simulated users sends: its preference's name.
pub fn group_name(style: Style) -> &'static str {
    match style {
        Style::Plain => "plain",
        Style::Markdown => "markdown",
    }
}

/// Running simulated users.
pub struct SimUsers {
    threads: Vec<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    /// Conversations that failed (HTTP errors), for the report.
    pub failures: Arc<AtomicU64>,
}

struct Client {
    agent: ureq::Agent,
    url: String,
    api_key: String,
    /// Sent as `X-User-Id` when set.
    user: Option<&'static str>,
}

impl Client {
    fn chat(&self, session: &str, done: bool, body: Value) -> Result<Value> {
        let mut req = self
            .agent
            .post(&self.url)
            .header("X-Session-Id", session)
            .header("X-Session-Done", if done { "true" } else { "false" });
        if !self.api_key.is_empty() {
            req = req.header("Authorization", &format!("Bearer {}", self.api_key));
        }
        if let Some(user) = self.user {
            req = req.header("X-User-Id", user);
        }
        let mut resp = req.send_json(&body).context("the server did not answer")?;
        let status = resp.status();
        let v: Value = resp
            .body_mut()
            .read_json()
            .context("the server's answer is not JSON")?;
        if !status.is_success() {
            return Err(anyhow!("HTTP {status}: {v}"));
        }
        Ok(v)
    }
}

/// One conversation: the question, the answer, the user's reply (which ends the session).
fn converse(
    client: &Client,
    user: &mut SimulatedUser,
    board: &Scoreboard,
    session: &str,
) -> Result<()> {
    let request = user.next_request();
    let question = json!({"role": "user", "content": request.prompt});
    let r = client.chat(
        session,
        false,
        // No max_tokens: the server's default (`--default-max-tokens`), which it fits to the
        // model's context, as it does for any client that asks for none.
        json!({"model": "default", "messages": [question], "temperature": 1.0}),
    )?;
    let choice = &r["choices"][0];
    let answer = choice["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let finished = choice["finish_reason"].as_str() == Some("stop");
    let reply = user.reply_to(&request, &answer, finished);
    board.add(FirstAnswer {
        weight_version: r["weight_version"].as_u64().unwrap_or(0),
        verdict: reply.verdict,
        on_topic: reply.on_topic,
        text: answer.clone(),
        requested: request.requested,
        prefers: user.prefers(),
    });
    // The reply ends the conversation; its own short answer is not judged (no next state).
    client.chat(
        session,
        true,
        json!({"model": "default", "messages": [question, {"role": "assistant", "content": answer}, {"role": "user", "content": reply.text}], "max_tokens": 8, "temperature": 1.0}),
    )?;
    Ok(())
}

impl SimUsers {
    /// Starts `opts.users` threads that converse until [`SimUsers::stop`].
    pub fn start(opts: SimUsersOptions, board: Arc<Scoreboard>) -> SimUsers {
        let stop = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(AtomicU64::new(0));
        let threads = (0..opts.users)
            .map(|i| {
                let stop = stop.clone();
                let failures = failures.clone();
                let board = board.clone();
                let opts = opts.clone();
                let prefers = match opts.preferences.as_slice() {
                    [] => Style::Plain,
                    p => p[i % p.len()],
                };
                std::thread::Builder::new()
                    .name(format!("sim-user-{i}"))
                    .spawn(move || {
                        let client = Client {
                            // A real model on a CPU with 8 users at once can take minutes
                            // per answer; a user that gave up would lose the turn.
                            agent: ureq::Agent::config_builder()
                                .timeout_global(Some(Duration::from_secs(900)))
                                .http_status_as_error(false)
                                .build()
                                .into(),
                            url: format!(
                                "{}/chat/completions",
                                opts.base_url.trim_end_matches('/')
                            ),
                            api_key: opts.api_key.clone(),
                            user: (opts.preferences.len() > 1).then(|| group_name(prefers)),
                        };
                        let mut user = SimulatedUser::new(
                            opts.seed.wrapping_add(i as u64),
                            opts.tasks.clone(),
                        )
                        .with_requests(opts.requests)
                        .preferring(prefers);
                        let mut n = 0u64;
                        while !stop.load(Ordering::SeqCst) {
                            let session = format!("sim-{}-{i}-{n}", opts.seed);
                            n += 1;
                            if let Err(e) = converse(&client, &mut user, &board, &session) {
                                if stop.load(Ordering::SeqCst) {
                                    break;
                                }
                                failures.fetch_add(1, Ordering::SeqCst);
                                tracing::warn!("simulated user {i}: {e:#}");
                                std::thread::sleep(Duration::from_millis(200));
                            }
                        }
                    })
                    .expect("spawn a simulated user")
            })
            .collect();
        SimUsers {
            threads,
            stop,
            failures,
        }
    }

    /// Stops the users after their current request and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

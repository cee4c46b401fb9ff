//! `--env-pool-url`: an environment reached over HTTP, on one or more pools, with failover.
//!
//! `--env-pool-dialect` ([`Dialect`]) says how to talk to them: this host's protocol where a
//! pool's `/status` names it, else the original's terminal workers' `/exec_tool` (`auto`, the
//! default); the terminal workers' dialect always (`terminal`); or the original's SWE pool
//! (`swe`: each reply's one ```` ```bash ```` block goes to `/exec`, its result comes back in
//! mini-swe-agent's format, and the episode is scored by `/diff` then `/evaluate` with that
//! patch) or GUI pool (`gui`: each `computer_use` call goes to `/step`, as its arguments object
//! to this host's pools and as pyautogui code to the original's OSWorld workers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{Action, EnvInfo, Evaluation, Message, Observation, StepOutcome, Task};
use serde_json::{json, Value};

use super::{gui, swe};
use crate::EnvCalls;
use openclaw_buffer::messages::{from_json, to_json};

/// How the client talks to its pools (`--env-pool-dialect`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// This host's protocol (`/step`, `/tasks`) where a pool's `/status` names it, else the
    /// original's terminal workers' `/exec_tool`.
    #[default]
    Auto,
    /// The original's terminal workers' (`/reset {task_meta}`, `/exec_tool`), on any pool.
    Terminal,
    /// The original's SWE pool's (`/allocate {image, instance_id}`, `/exec`, `/diff`,
    /// `/evaluate {patch, eval_script}`).
    Swe,
    /// The original's GUI pool's (`/allocate {episode_id}`, `/reset {task_config}`,
    /// `/step {action}`, `/evaluate`).
    Gui,
}

/// The names `--env-pool-dialect` takes.
pub const DIALECTS: [&str; 4] = ["auto", "terminal", "swe", "gui"];

impl Dialect {
    /// The dialect named `name` (empty: `auto`).
    pub fn parse(name: &str) -> Result<Dialect> {
        Ok(match name.trim() {
            "" | "auto" => Dialect::Auto,
            "terminal" => Dialect::Terminal,
            "swe" => Dialect::Swe,
            "gui" => Dialect::Gui,
            other => bail!(
                "--env-pool-dialect {other:?} is not a dialect; the dialects are {}",
                DIALECTS.join(", ")
            ),
        })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Auto => "auto",
            Dialect::Terminal => "terminal",
            Dialect::Swe => "swe",
            Dialect::Gui => "gui",
        }
    }
}

/// Why a pool call did not succeed.
#[derive(Debug)]
enum PoolError {
    /// No answer (refused, reset, timed out): another pool may do.
    Unreachable(String),
    /// HTTP 429: the pool is full (its `code`).
    Full(String),
    /// Any other error reply (status, message).
    Refused(u16, String),
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::Unreachable(e) => write!(f, "unreachable: {e}"),
            PoolError::Full(e) => write!(f, "full: {e}"),
            PoolError::Refused(s, e) => write!(f, "HTTP {s}: {e}"),
        }
    }
}

/// One pool: its base URL and whether it speaks this host's protocol (known once it answered).
struct Pool {
    base: String,
    native: Mutex<Option<bool>>,
}

struct Lease {
    pool: usize,
    id: String,
    /// Whether its pool is one of this host's (known once it answered `/status`).
    native: bool,
    /// What the SWE and GUI dialects count of the episode here.
    count: Count,
}

/// What the SWE and GUI dialects keep of an episode on the client's side, as the local
/// environments keep it: replies, commands run, replies or calls that could not be read, and
/// the task's `eval_script` (sent to the original's SWE pool, which scores by it).
#[derive(Default)]
struct Count {
    turns: u32,
    commands: u32,
    errors: u32,
    eval_script: String,
}

struct Shared {
    agent: ureq::Agent,
    /// Heartbeats' own agent, with a short deadline: a pool that does not answer must not
    /// delay the heartbeats of the others past their idle limit.
    beat: ureq::Agent,
    pools: Vec<Pool>,
    leases: Mutex<HashMap<u64, Lease>>,
    /// `Authorization` header value sent with every call, when the pools ask a key.
    auth: Option<String>,
}

/// An environment on remote pools. Episodes go to the pool picked by the task's name (as the
/// original's router does), the next one when it is unreachable or full; a lease lives on the
/// pool that granted it, kept alive by heartbeats.
pub struct RemoteEnv {
    name: String,
    shared: Arc<Shared>,
    next: AtomicU64,
    dialect: Dialect,
}

/// Settings of the client.
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// The pools' base URLs, in failover order.
    pub urls: Vec<String>,
    /// Deadline of each HTTP call.
    pub timeout: Duration,
    /// How often live leases are renewed.
    pub heartbeat: Duration,
    /// The pools' key (`ENV_POOL_API_KEY`); empty: none sent.
    pub api_key: String,
    /// How to talk to them (`ENV_POOL_DIALECT`).
    pub dialect: Dialect,
}

impl Shared {
    fn call(&self, pool: usize, path: &str, body: Option<&Value>) -> Result<Value, PoolError> {
        let url = format!("{}{path}", self.pools[pool].base);
        let resp = match (body, &self.auth) {
            (Some(b), Some(a)) => self
                .agent
                .post(&url)
                .header("Authorization", a)
                .send_json(b),
            (Some(b), None) => self.agent.post(&url).send_json(b),
            (None, Some(a)) => self.agent.get(&url).header("Authorization", a).call(),
            (None, None) => self.agent.get(&url).call(),
        };
        let mut resp = resp.map_err(|e| PoolError::Unreachable(format!("{url}: {e}")))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| PoolError::Unreachable(format!("{url}: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|_| {
            PoolError::Refused(
                status,
                format!(
                    "{url}: not JSON: {}",
                    text.chars().take(200).collect::<String>()
                ),
            )
        })?;
        let said = || {
            format!(
                "{url}: {}",
                v["error"].as_str().unwrap_or("no error message")
            )
        };
        match status {
            200..=299 if v["ok"] != json!(false) => Ok(v),
            429 => Err(PoolError::Full(format!(
                "{} ({})",
                said(),
                v["code"].as_str().unwrap_or("no code")
            ))),
            _ => Err(PoolError::Refused(status, said())),
        }
    }

    /// Whether pool `i` speaks this host's protocol (asked once).
    fn native(&self, i: usize) -> Result<bool, PoolError> {
        if let Some(n) = *self.pools[i].native.lock().expect("pool") {
            return Ok(n);
        }
        let v = self.call(i, "/status", None)?;
        let n = v["protocol"].as_str() == Some(super::PROTOCOL);
        *self.pools[i].native.lock().expect("pool") = Some(n);
        Ok(n)
    }

    fn heartbeats(weak: Weak<Shared>, every: Duration) {
        loop {
            std::thread::sleep(every);
            let Some(shared) = weak.upgrade() else { return };
            let live: Vec<(usize, String)> = shared
                .leases
                .lock()
                .expect("leases")
                .values()
                .map(|l| (l.pool, l.id.clone()))
                .collect();
            let mut failed = std::collections::HashSet::new();
            for (pool, id) in live {
                if failed.contains(&pool) {
                    continue;
                }
                let url = format!("{}/heartbeat", shared.pools[pool].base);
                let mut req = shared.beat.post(&url);
                if let Some(a) = &shared.auth {
                    req = req.header("Authorization", a);
                }
                let ok = req
                    .send_json(json!({"lease_id": id}))
                    .map(|r| r.status().is_success());
                if !matches!(ok, Ok(true)) {
                    tracing::warn!(lease = %id, "heartbeat to {url} failed: {ok:?}");
                    failed.insert(pool);
                }
            }
        }
    }
}

/// A number for the task's name, the same in every process (FNV-1a), to pick its first pool.
fn task_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl RemoteEnv {
    /// Connects to the pools: at least one must answer `/status` now.
    pub fn connect(name: &str, opts: &RemoteOptions) -> Result<RemoteEnv> {
        if opts.urls.is_empty() {
            bail!("--env-pool-url names no pool");
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(opts.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let pools = opts
            .urls
            .iter()
            .map(|u| Pool {
                base: u.trim_end_matches('/').to_string(),
                native: Mutex::new(None),
            })
            .collect();
        let beat: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build()
            .into();
        let shared = Arc::new(Shared {
            agent,
            beat,
            pools,
            leases: Mutex::default(),
            auth: (!opts.api_key.is_empty()).then(|| format!("Bearer {}", opts.api_key)),
        });
        let mut reasons = Vec::new();
        for i in 0..shared.pools.len() {
            match shared.native(i) {
                Ok(native) => tracing::info!(
                    pool = %shared.pools[i].base,
                    "environment pool ({}; dialect {})",
                    if native { "one of this host's" } else { "one of the original's" },
                    opts.dialect.name()
                ),
                Err(e) => reasons.push(e.to_string()),
            }
        }
        if reasons.len() == shared.pools.len() {
            bail!("no environment pool answers: {}", reasons.join("; "));
        }
        for r in &reasons {
            tracing::warn!("environment pool {r} (tried again when its turn comes)");
        }
        let weak = Arc::downgrade(&shared);
        let every = opts.heartbeat;
        std::thread::Builder::new()
            .name("env-pool-heartbeat".into())
            .spawn(move || Shared::heartbeats(weak, every))?;
        Ok(RemoteEnv {
            name: name.to_string(),
            shared,
            next: AtomicU64::new(1),
            dialect: opts.dialect,
        })
    }

    fn lease(&self, episode: u64) -> Result<(usize, String)> {
        self.shared
            .leases
            .lock()
            .expect("leases")
            .get(&episode)
            .map(|l| (l.pool, l.id.clone()))
            .ok_or_else(|| anyhow!("no episode {episode} (never started, or closed)"))
    }

    /// Allocates and resets on pool `i`.
    fn start_on(
        &self,
        i: usize,
        task: &Task,
        seed: u64,
        request_id: &str,
    ) -> Result<(String, Value), PoolError> {
        // `terminal` speaks the original's dialect to this host's pools too.
        let native = self.shared.native(i)? && self.dialect == Dialect::Auto;
        let a = self.shared.call(
            i,
            "/allocate",
            Some(&json!({"task_key": task.id.as_str(), "request_id": request_id})),
        )?;
        let lease = a["lease_id"]
            .as_str()
            .ok_or_else(|| PoolError::Refused(200, "allocate gave no lease_id".into()))?
            .to_string();
        let body = if native {
            json!({"lease_id": lease, "seed": seed, "task": {
                "id": task.id.as_str(), "instruction": task.instruction.as_str(),
                "data_json": task.data_json.as_str()}})
        } else {
            // The original's workers take the task row's object and a run context.
            let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
            let mut meta = if data["task"].is_object() {
                data["task"].clone()
            } else {
                data
            };
            if !meta.is_object() {
                meta = json!({});
            }
            if meta.get("task_name").is_none() {
                meta["task_name"] = json!(task.id.as_str());
            }
            if meta.get("instruction").is_none() {
                meta["instruction"] = json!(task.instruction.as_str());
            }
            json!({"lease_id": lease, "task_meta": meta,
                   "run_ctx": {"uid": request_id, "group_index": 0, "sample_index": 0},
                   "task_timeouts": {}})
        };
        match self.shared.call(i, "/reset", Some(&body)) {
            Ok(v) => Ok((lease, v)),
            Err(e) => {
                let _ = self
                    .shared
                    .call(i, "/close", Some(&json!({"lease_id": lease})));
                Err(e)
            }
        }
    }

    /// The SWE dialect's start on pool `i`: `/allocate {image, instance_id}` (the instance
    /// from the task's `instance_id`, else its id; the image from its `image`, else
    /// SWE-bench's name for the instance's).
    fn start_swe(
        &self,
        i: usize,
        task: &Task,
        request_id: &str,
    ) -> Result<(String, Value), PoolError> {
        let native = self.shared.native(i)?;
        let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
        let script = data["eval_script"].as_str().unwrap_or_default();
        if !native && script.trim().is_empty() {
            // The original's pool runs the script it is sent and counts exit 0 as resolved.
            return Err(PoolError::Refused(
                400,
                format!(
                    "{}: task `{}` has no `eval_script`, and the original's SWE pool scores an episode by the script it is sent (an empty one exits 0: every patch would count as resolved); give the tasks an `eval_script`, or serve the instances with `env-pool serve --env swe`, which runs their own tests",
                    self.shared.pools[i].base, task.id
                ),
            ));
        }
        let instance = data["instance_id"]
            .as_str()
            .unwrap_or(task.id.as_str())
            .to_string();
        let image = data["image"]
            .as_str()
            .or(data["image_name"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| swe::image(&instance));
        let a = self.shared.call(
            i,
            "/allocate",
            Some(&json!({"image": image, "instance_id": instance, "request_id": request_id})),
        )?;
        let lease = a["lease_id"]
            .as_str()
            .ok_or_else(|| PoolError::Refused(200, "allocate gave no lease_id".into()))?
            .to_string();
        Ok((lease, a))
    }

    /// The GUI dialect's start on pool `i`: `/allocate {episode_id}`, then `/reset` with the
    /// task: `{"id"}` to this host's pools, the task's own `task_config` (or its row, when it
    /// is an OSWorld task) to the original's.
    fn start_gui(
        &self,
        i: usize,
        task: &Task,
        request_id: &str,
    ) -> Result<(String, Value), PoolError> {
        let native = self.shared.native(i)?;
        let a = self
            .shared
            .call(i, "/allocate", Some(&json!({"episode_id": request_id})))?;
        let lease = a["lease_id"]
            .as_str()
            .ok_or_else(|| PoolError::Refused(200, "allocate gave no lease_id".into()))?
            .to_string();
        let config = if native {
            json!({"id": task.id.as_str()})
        } else {
            let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
            if data["task_config"].is_object() {
                data["task_config"].clone()
            } else if data.get("evaluator").is_some() || data.get("config").is_some() {
                data
            } else {
                json!({"id": task.id.as_str(), "instruction": task.instruction.as_str()})
            }
        };
        match self.shared.call(
            i,
            "/reset",
            Some(&json!({"lease_id": lease, "task_config": config})),
        ) {
            Ok(v) => Ok((lease, v)),
            Err(e) => {
                let _ = self
                    .shared
                    .call(i, "/close", Some(&json!({"lease_id": lease})));
                Err(e)
            }
        }
    }

    /// The first observation of a started episode: the mini-swe-agent prompt for the SWE
    /// dialect (a SWE-bench row's issue, or the task's instruction, which a pool's own task
    /// already is); the instruction and the screen's accessibility tree with the
    /// `computer_use` tool from the original's GUI workers; else what the pool sent.
    fn first_observation(&self, task: &Task, v: &Value) -> Result<Observation> {
        match self.dialect {
            Dialect::Swe => {
                let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
                let prompt = match data["problem_statement"].as_str() {
                    Some(issue) => swe::prompt(issue, data["repo"].as_str().unwrap_or("(unnamed)")),
                    None => task.instruction.to_string(),
                };
                Ok(Observation {
                    messages: vec![Message::new("user", &prompt)].into(),
                    tools_json: "".into(),
                })
            }
            Dialect::Gui if !v["observation"]["messages"].is_array() => {
                let obs = if v["observation"].is_object() {
                    &v["observation"]
                } else {
                    v
                };
                let instruction = obs["instruction"]
                    .as_str()
                    .filter(|s| !s.trim().is_empty())
                    .unwrap_or(task.instruction.as_str());
                Ok(Observation {
                    messages: vec![Message::new(
                        "user",
                        &gui::prompt(instruction, &gui::page_text(obs)),
                    )]
                    .into(),
                    tools_json: gui::schema().into(),
                })
            }
            _ => observation_of(v),
        }
    }

    /// A count of the episode's, changed by `f`.
    fn counted<T>(&self, episode: u64, f: impl FnOnce(&mut Count) -> T) -> Result<T> {
        let mut leases = self.shared.leases.lock().expect("leases");
        let lease = leases
            .get_mut(&episode)
            .ok_or_else(|| anyhow!("no episode {episode} (never started, or closed)"))?;
        Ok(f(&mut lease.count))
    }

    /// The SWE dialect's step: the reply's one block runs by `/exec` and its result is shown
    /// as mini-swe-agent shows it; a reply without exactly one block gets the reminder. The
    /// episode ends on a submit, on its third unreadable reply, or (truncated) at the step
    /// limit, as `envs/swe` ends its own.
    fn step_swe(
        &self,
        episode: u64,
        pool: usize,
        lease: &str,
        action: &Action,
    ) -> Result<StepOutcome> {
        let blocks = swe::bash_blocks(&action.message.content);
        // (return code, submitted, the pool ended the episode, ... truncated)
        let mut ran: Option<(Option<i32>, bool, bool, bool)> = None;
        let reply = if blocks.len() == 1 {
            let v = self
                .shared
                .call(
                    pool,
                    "/exec",
                    Some(
                        &json!({"lease_id": lease, "command": blocks[0], "cwd": swe::TESTBED,
                        "timeout": swe::EXEC_SECONDS, "env": {}}),
                    ),
                )
                .map_err(|e| anyhow!("environment pool: {e}"))?;
            let output = v["output"].as_str().unwrap_or_default();
            let code = v["returncode"].as_i64().map(|c| c as i32);
            ran = Some((
                code,
                swe::submits(output),
                v["done"].as_bool() == Some(true),
                v["truncated"].as_bool() == Some(true),
            ));
            swe::observation(
                code,
                v["note"].as_str().unwrap_or_default(),
                output,
                swe::OUTPUT_CHARS,
            )
        } else {
            swe::format_error(blocks.len())
        };
        let (turns, commands, errors) = self.counted(episode, |c| {
            c.turns += 1;
            if ran.is_some() {
                c.commands += 1;
            } else {
                c.errors += 1;
            }
            (c.turns, c.commands, c.errors)
        })?;
        let (code, submitted, pool_done, pool_truncated) =
            ran.unwrap_or((None, false, false, false));
        let given_up = errors >= swe::MAX_FORMAT_ERRORS;
        let truncated = !submitted && !given_up && (turns >= swe::MAX_TURNS || pool_truncated);
        let done = submitted || given_up || truncated || pool_done;
        let ended = if submitted {
            "submitted"
        } else if given_up {
            "format_errors"
        } else if truncated {
            "max_turns"
        } else if pool_done {
            "ended by the pool"
        } else {
            ""
        };
        let metadata = json!({"commands": commands, "turns": turns, "format_errors": errors,
            "ended": ended, "returncode": code});
        Ok(StepOutcome {
            observation: Observation {
                messages: vec![Message::new("user", &reply)].into(),
                tools_json: "".into(),
            },
            reward: 0.0,
            done,
            info: EnvInfo {
                truncated,
                metadata_json: metadata.to_string().into(),
            },
        })
    }

    /// The GUI dialect's step: each `computer_use` call of the message goes to `/step` (as
    /// its arguments to this host's pools, as pyautogui code to the original's workers) and is
    /// answered with a tool message showing the screen after it; a message without a call
    /// gets the reminder, and the third unreadable call or message ends the episode.
    fn step_gui(
        &self,
        episode: u64,
        pool: usize,
        lease: &str,
        action: &Action,
    ) -> Result<StepOutcome> {
        let native = self
            .shared
            .leases
            .lock()
            .expect("leases")
            .get(&episode)
            .map(|l| l.native)
            .unwrap_or(false);
        let calls = gui::calls(&action.message);
        let mut messages = Vec::new();
        let (mut done, mut truncated, mut reward) = (false, false, 0.0f32);
        let mut info = Value::Null;
        let mut errors = u32::from(calls.is_empty());
        for call in &calls {
            let text = if done {
                "[TOOL_ERROR] not run: the episode has ended".to_string()
            } else {
                let sent = gui::readable(call).and_then(|args| {
                    if native {
                        Ok(args.clone())
                    } else {
                        gui::pyautogui(args, gui::SCREEN).map(Value::String)
                    }
                });
                match sent {
                    Err(why) => {
                        errors += 1;
                        format!("[TOOL_ERROR] {why}")
                    }
                    Ok(sent) => {
                        let v = self
                            .shared
                            .call(
                                pool,
                                "/step",
                                Some(&json!({"lease_id": lease, "action": sent,
                                    "sleep_after_execution": gui::SLEEP_AFTER})),
                            )
                            .map_err(|e| anyhow!("environment pool: {e}"))?;
                        reward += v["reward"].as_f64().unwrap_or(0.0) as f32;
                        done |= v["done"].as_bool().unwrap_or(false);
                        truncated |= v["truncated"].as_bool().unwrap_or(false);
                        info = v["info"].clone();
                        shown_after(&v["observation"])
                    }
                }
            };
            let mut m = Message::new("tool", &text);
            if let Some(id) = &call.id {
                m.tool_call_id = ROption::RSome(id.as_str().into());
            }
            if !call.name.is_empty() {
                m.name = ROption::RSome(call.name.as_str().into());
            }
            messages.push(m);
        }
        let errors = self.counted(episode, |c| {
            c.turns += 1;
            c.errors += errors;
            c.errors
        })?;
        if calls.is_empty() {
            messages.push(Message::new("user", &gui::no_call(errors)));
        }
        if errors >= gui::MAX_PARSE_ERRORS {
            done = true;
        }
        let mut metadata = if info.is_object() { info } else { json!({}) };
        metadata["client_parse_errors"] = json!(errors);
        Ok(StepOutcome {
            observation: Observation {
                messages: messages.into(),
                tools_json: "".into(),
            },
            reward,
            done,
            info: EnvInfo {
                truncated,
                metadata_json: metadata.to_string().into(),
            },
        })
    }

    /// The SWE dialect's score: `/diff`, then `/evaluate` with that patch and the task's
    /// `eval_script`; reward 1 when resolved (or the pool's own `score`), else 0.
    fn evaluate_swe(&self, episode: u64, pool: usize, lease: &str) -> Result<Option<Evaluation>> {
        let script = self.counted(episode, |c| c.eval_script.clone())?;
        let d = self
            .shared
            .call(
                pool,
                "/diff",
                Some(&json!({"lease_id": lease, "cwd": swe::TESTBED})),
            )
            .map_err(|e| anyhow!("environment pool: {e}"))?;
        let patch = d["patch"].as_str().unwrap_or_default().to_string();
        let v = self
            .shared
            .call(
                pool,
                "/evaluate",
                Some(
                    &json!({"lease_id": lease, "patch": patch, "eval_script": script,
                    "cwd": swe::TESTBED, "timeout": swe::EVAL_SECONDS}),
                ),
            )
            .map_err(|e| anyhow!("environment pool: {e}"))?;
        let resolved = v["resolved"]
            .as_bool()
            .or_else(|| v["solved"].as_bool())
            .unwrap_or(false);
        let reward = v["score"]
            .as_f64()
            .map(|s| s as f32)
            .unwrap_or(if resolved { 1.0 } else { 0.0 });
        let mut details = if v["details"].is_object() {
            v["details"].clone()
        } else {
            let mut o = v.clone();
            if let Some(m) = o.as_object_mut() {
                m.remove("ok");
            }
            o
        };
        if !details.is_object() {
            details = json!({});
        }
        if details.get("patch").is_none() {
            details["patch"] = json!(patch);
        }
        details["resolved"] = json!(resolved);
        Ok(Some(Evaluation {
            reward,
            solved: resolved,
            details_json: details.to_string().into(),
        }))
    }
}

/// What a GUI `/step`'s observation shows the policy: the text of its messages (a pool of
/// this host's), else the accessibility tree (the original's workers).
fn shown_after(obs: &Value) -> String {
    match obs["messages"].as_array() {
        Some(list) => list
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        None => gui::page_text(obs),
    }
}

/// Messages of a JSON observation (`observation.messages`, or the original's `user_msg`).
fn observation_of(v: &Value) -> Result<Observation> {
    let obs = &v["observation"];
    let messages: Vec<Message> = match obs["messages"].as_array() {
        Some(list) => list
            .iter()
            .map(|m| from_json(m, "tool").map_err(|e| anyhow!("a message from the pool: {e}")))
            .collect::<Result<_>>()?,
        None => match v["user_msg"].as_str() {
            Some(u) => vec![Message::new("user", u)],
            None => bail!("the pool's reply has no observation"),
        },
    };
    let tools = if obs["tools"].is_array() {
        &obs["tools"]
    } else {
        &v["tool_schemas"]
    };
    Ok(Observation {
        messages: messages.into(),
        tools_json: if tools.is_array() {
            tools.to_string()
        } else {
            String::new()
        }
        .into(),
    })
}

impl EnvCalls for RemoteEnv {
    fn plugin(&self) -> &str {
        &self.name
    }

    fn tasks(&self, split: &str) -> Result<Vec<Task>> {
        let mut reasons = Vec::new();
        for i in 0..self.shared.pools.len() {
            match self.shared.native(i) {
                Ok(true) => {}
                Ok(false) => {
                    reasons.push(format!(
                        "{} is an OpenClaw-RL worker, which does not list tasks",
                        self.shared.pools[i].base
                    ));
                    continue;
                }
                Err(e) => {
                    reasons.push(e.to_string());
                    continue;
                }
            }
            match self.shared.call(i, &format!("/tasks?split={split}"), None) {
                Ok(v) => {
                    return Ok(v["tasks"]
                        .as_array()
                        .map(|list| {
                            list.iter()
                                .map(|t| Task {
                                    id: t["id"].as_str().unwrap_or_default().into(),
                                    instruction: t["instruction"]
                                        .as_str()
                                        .unwrap_or_default()
                                        .into(),
                                    data_json: t["data_json"].as_str().unwrap_or_default().into(),
                                })
                                .collect()
                        })
                        .unwrap_or_default())
                }
                Err(e) => reasons.push(e.to_string()),
            }
        }
        bail!(
            "no environment pool lists the tasks of `{split}` ({}); give them with --data-path",
            reasons.join("; ")
        )
    }

    fn reset(&self, task: &Task, seed: u64) -> Result<(u64, Observation)> {
        let n = self.shared.pools.len();
        let first = (task_hash(task.id.as_str()) % n as u64) as usize;
        let episode = self.next.fetch_add(1, Ordering::Relaxed);
        let request_id = format!(
            "{}-{episode}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let mut reasons = Vec::new();
        let (mut full, mut refused) = (0, 0);
        let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
        let eval_script = data["eval_script"].as_str().unwrap_or_default().to_string();
        for k in 0..n {
            let i = (first + k) % n;
            let started = match self.dialect {
                Dialect::Swe => self.start_swe(i, task, &request_id),
                Dialect::Gui => self.start_gui(i, task, &request_id),
                Dialect::Auto | Dialect::Terminal => self.start_on(i, task, seed, &request_id),
            };
            match started {
                Ok((lease, v)) => {
                    let obs = match self.first_observation(task, &v) {
                        Ok(o) => o,
                        Err(e) => {
                            let _ =
                                self.shared
                                    .call(i, "/close", Some(&json!({"lease_id": lease})));
                            return Err(e);
                        }
                    };
                    let native = self.shared.native(i).unwrap_or(false);
                    self.shared.leases.lock().expect("leases").insert(
                        episode,
                        Lease {
                            pool: i,
                            id: lease,
                            native,
                            count: Count {
                                eval_script: eval_script.clone(),
                                ..Count::default()
                            },
                        },
                    );
                    return Ok((episode, obs));
                }
                // A request the pool refuses for what it is would be refused by every pool.
                Err(PoolError::Refused(s, e)) if (400..500).contains(&s) => {
                    bail!("environment pool: {e}")
                }
                Err(e) => {
                    match e {
                        PoolError::Full(_) => full += 1,
                        PoolError::Refused(..) => refused += 1,
                        PoolError::Unreachable(_) => {}
                    }
                    reasons.push(e.to_string())
                }
            }
        }
        let why = format!(
            "no environment pool could start task `{}`: {}",
            task.id,
            reasons.join("; ")
        );
        // Full pools free slots as their episodes end (an unreachable one may come back):
        // the caller may wait.
        if full > 0 && refused == 0 {
            return Err(anyhow::Error::new(crate::PoolsFull(why)));
        }
        bail!(why)
    }

    fn step(&self, episode: u64, action: &Action) -> Result<StepOutcome> {
        let (pool, lease) = self.lease(episode)?;
        match self.dialect {
            Dialect::Swe => return self.step_swe(episode, pool, &lease, action),
            Dialect::Gui => return self.step_gui(episode, pool, &lease, action),
            Dialect::Auto | Dialect::Terminal => {}
        }
        if self.dialect == Dialect::Auto && self.shared.native(pool).map_err(|e| anyhow!("{e}"))? {
            let v = self
                .shared
                .call(
                    pool,
                    "/step",
                    Some(&json!({"lease_id": lease, "message": to_json(&action.message)})),
                )
                .map_err(|e| anyhow!("environment pool: {e}"))?;
            return Ok(StepOutcome {
                observation: observation_of(&v)?,
                reward: v["reward"].as_f64().unwrap_or(0.0) as f32,
                done: v["done"].as_bool().unwrap_or(false),
                info: EnvInfo {
                    truncated: v["truncated"].as_bool().unwrap_or(false),
                    metadata_json: v["metadata"].to_string().into(),
                },
            });
        }
        // The original's dialect: each call by itself; a message without calls ends the
        // episode, as its agent loop does.
        let calls: Vec<Value> = action
            .message
            .tool_calls_json
            .as_ref()
            .into_option()
            .and_then(|t| serde_json::from_str::<Vec<Value>>(t).ok())
            .unwrap_or_default();
        let mut messages = Vec::new();
        for c in &calls {
            let f = &c["function"];
            let v = self
                .shared
                .call(
                    pool,
                    "/exec_tool",
                    Some(&json!({"lease_id": lease, "tool_call": {"name": f["name"], "arguments": f["arguments"]}})),
                )
                .map_err(|e| anyhow!("environment pool: {e}"))?;
            let mut m = Message::new("tool", v["observation"].as_str().unwrap_or_default());
            if let Some(id) = c["id"].as_str() {
                m.tool_call_id = ROption::RSome(id.into());
            }
            if let Some(name) = f["name"].as_str() {
                m.name = ROption::RSome(name.into());
            }
            messages.push(m);
        }
        Ok(StepOutcome {
            observation: Observation {
                messages: messages.into(),
                tools_json: "".into(),
            },
            reward: 0.0,
            done: calls.is_empty(),
            info: EnvInfo {
                truncated: false,
                metadata_json: "{}".into(),
            },
        })
    }

    fn evaluate(&self, episode: u64) -> Result<Option<Evaluation>> {
        let (pool, lease) = self.lease(episode)?;
        if self.dialect == Dialect::Swe {
            return self.evaluate_swe(episode, pool, &lease);
        }
        let v = self
            .shared
            .call(pool, "/evaluate", Some(&json!({"lease_id": lease})))
            .map_err(|e| anyhow!("environment pool: {e}"))?;
        let Some(score) = v["score"].as_f64() else {
            return Ok(None);
        };
        Ok(Some(Evaluation {
            reward: score as f32,
            solved: v["solved"].as_bool().unwrap_or(score >= 1.0),
            details_json: v.get("details").unwrap_or(&Value::Null).to_string().into(),
        }))
    }

    fn close(&self, episode: u64) -> Result<()> {
        let Some(lease) = self.shared.leases.lock().expect("leases").remove(&episode) else {
            return Ok(());
        };
        self.shared
            .call(lease.pool, "/close", Some(&json!({"lease_id": lease.id})))
            .map(|_| ())
            .map_err(|e| anyhow!("environment pool: {e}"))
    }
}

impl Drop for RemoteEnv {
    fn drop(&mut self) {
        // Leases of episodes that never closed (a run that stopped) are handed back.
        let left: Vec<Lease> = self
            .shared
            .leases
            .lock()
            .expect("leases")
            .drain()
            .map(|(_, l)| l)
            .collect();
        for l in left {
            let _ = self
                .shared
                .call(l.pool, "/close", Some(&json!({"lease_id": l.id})));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_first_pool_is_the_same_everywhere() {
        assert_eq!(task_hash("create-hello"), task_hash("create-hello"));
        assert_ne!(task_hash("a") % 7, task_hash("b") % 7);
    }

    #[test]
    fn dialects_are_named() {
        for name in DIALECTS {
            assert_eq!(Dialect::parse(name).unwrap().name(), name);
        }
        assert_eq!(Dialect::parse("").unwrap(), Dialect::Auto);
        let e = Dialect::parse("osworld").unwrap_err().to_string();
        assert!(e.contains("auto, terminal, swe, gui"), "{e}");
    }
}

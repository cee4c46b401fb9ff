//! `--env-pool-url`: an environment reached over HTTP, on one or more pools, with failover.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{Action, EnvInfo, Evaluation, Message, Observation, StepOutcome, Task};
use serde_json::{json, Value};

use crate::EnvCalls;
use openclaw_buffer::messages::{from_json, to_json};

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
                    "environment pool ({})",
                    if native { "this host's protocol" } else { "the original's /exec_tool dialect" }
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
        let native = self.shared.native(i)?;
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
        for k in 0..n {
            let i = (first + k) % n;
            match self.start_on(i, task, seed, &request_id) {
                Ok((lease, v)) => {
                    let obs = match observation_of(&v) {
                        Ok(o) => o,
                        Err(e) => {
                            let _ =
                                self.shared
                                    .call(i, "/close", Some(&json!({"lease_id": lease})));
                            return Err(e);
                        }
                    };
                    self.shared
                        .leases
                        .lock()
                        .expect("leases")
                        .insert(episode, Lease { pool: i, id: lease });
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
        if self.shared.native(pool).map_err(|e| anyhow!("{e}"))? {
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
}

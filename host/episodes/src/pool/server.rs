//! `env-pool serve`: one environment plugin behind the lease protocol.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{Action, Message, Observation, StepOutcome, Task};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::TimedEnv;
use openclaw_buffer::messages::{from_json, to_json};

/// Settings of a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Leases at once (`RUN_SLOTS_EXHAUSTED` past it).
    pub max_leases: usize,
    /// Leases of one task at once (`TASK_SLOTS_EXHAUSTED` past it).
    pub max_leases_per_task: usize,
    /// A lease with no call for this long is closed.
    pub idle_ttl: Duration,
    /// Deadline of each environment call but `evaluate`.
    pub call_timeout: Duration,
    /// Deadline of `evaluate`.
    pub evaluate_timeout: Duration,
    /// Leases one client (address) holds at once, so one client cannot take the whole pool.
    pub max_leases_per_client: usize,
    /// A lease is closed this long after it was granted, heartbeats or not.
    pub max_lease_age: Duration,
    /// Bearer key every call but `/healthz` must carry; empty: none asked.
    pub api_key: String,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_leases: 16,
            max_leases_per_task: 8,
            idle_ttl: Duration::from_secs(600),
            call_timeout: Duration::from_secs(60),
            evaluate_timeout: Duration::from_secs(300),
            max_leases_per_client: 8,
            max_lease_age: Duration::from_secs(4 * 3600),
            api_key: String::new(),
        }
    }
}

struct Lease {
    task_key: String,
    request_id: String,
    /// The address that allocated it: only calls from there may use it.
    client: IpAddr,
    granted: Instant,
    /// Whether a reset is running (a second one is refused).
    resetting: bool,
    episode: Option<u64>,
    last_seen: Instant,
}

/// The pool's state.
pub struct Pool {
    env: TimedEnv,
    opts: PoolOptions,
    /// The tasks the environment lists, by id: the only ones a client may run. A client
    /// names a task; its data (a folder, files) is never the client's to choose.
    tasks: HashMap<String, Task>,
    leases: Mutex<HashMap<String, Lease>>,
    /// Leases closed by the reaper, for `/status`.
    reaped: AtomicU64,
    /// Leases granted since the start, for `/status`.
    granted: AtomicU64,
}

/// An error reply: HTTP status, message and, for a full pool, its code.
struct Failure(StatusCode, String, Option<&'static str>);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut body = json!({"ok": false, "error": self.1});
        if let Some(code) = self.2 {
            body["code"] = json!(code);
        }
        (self.0, Json(body)).into_response()
    }
}

/// HTTP 429 with the original's code for what is full.
fn full(msg: String, code: &'static str) -> Failure {
    Failure(StatusCode::TOO_MANY_REQUESTS, msg, Some(code))
}

fn bad(msg: impl Into<String>) -> Failure {
    Failure(StatusCode::BAD_REQUEST, msg.into(), None)
}

type Reply = Result<Json<Value>, Failure>;

/// The splits a pool asks its environment for; the union is the tasks it serves.
const SPLITS: [&str; 4] = ["all", "train", "eval", "test"];

impl Pool {
    /// A pool over `env`, serving the tasks the environment lists in any of its splits.
    pub fn new(env: TimedEnv, opts: PoolOptions) -> Result<Arc<Pool>> {
        let mut tasks = HashMap::new();
        let mut reasons = Vec::new();
        for split in SPLITS {
            match env.tasks(split, opts.call_timeout) {
                Ok(list) => {
                    for t in list {
                        tasks.entry(t.id.to_string()).or_insert(t);
                    }
                }
                Err(e) => reasons.push(format!("{split}: {e:#}")),
            }
        }
        if tasks.is_empty() {
            bail!(
                "environment `{}` lists no tasks ({}); a pool runs only the tasks its environment lists, so give it a task set (its ENV_CONFIG)",
                env.plugin(),
                if reasons.is_empty() { "every split is empty".into() } else { reasons.join("; ") }
            );
        }
        Ok(Arc::new(Pool {
            env,
            opts,
            tasks,
            leases: Mutex::default(),
            reaped: AtomicU64::new(0),
            granted: AtomicU64::new(0),
        }))
    }

    /// The number of tasks the pool serves.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The lease `lease_id` of `client`, marked seen. Another client's lease is answered as
    /// missing, so ids cannot be probed.
    fn touch<'a>(
        leases: &'a mut HashMap<String, Lease>,
        lease_id: &str,
        client: IpAddr,
    ) -> Result<&'a mut Lease, Failure> {
        let lease = leases
            .get_mut(lease_id)
            .filter(|l| l.client == client)
            .ok_or_else(|| no_lease(lease_id))?;
        lease.last_seen = Instant::now();
        Ok(lease)
    }

    /// The lease's episode, marking it seen.
    fn episode_of(&self, lease_id: &str, client: IpAddr) -> Result<u64, Failure> {
        let mut leases = self.leases.lock().expect("lease table");
        let lease = Self::touch(&mut leases, lease_id, client)?;
        lease.episode.ok_or_else(|| {
            Failure(
                StatusCode::CONFLICT,
                format!("lease `{lease_id}` has no episode yet: call /reset first"),
                None,
            )
        })
    }

    /// Closes every lease idle past the limit or older than the age limit; how many.
    pub fn reap(&self) -> usize {
        let expired: Vec<(String, Option<u64>)> = {
            let mut leases = self.leases.lock().expect("lease table");
            let old: Vec<String> = leases
                .iter()
                .filter(|(_, l)| {
                    l.last_seen.elapsed() > self.opts.idle_ttl
                        || l.granted.elapsed() > self.opts.max_lease_age
                })
                .map(|(k, _)| k.clone())
                .collect();
            old.into_iter()
                .filter_map(|k| leases.remove(&k).map(|l| (k, l.episode)))
                .collect()
        };
        for (id, episode) in &expired {
            tracing::info!(lease = %id, "idle past {:?} or older than {:?}: closed", self.opts.idle_ttl, self.opts.max_lease_age);
            if let Some(ep) = episode {
                if let Err(e) = self.env.close(*ep, self.opts.call_timeout) {
                    tracing::warn!(lease = %id, "closing its episode: {e:#}");
                }
            }
        }
        self.reaped
            .fetch_add(expired.len() as u64, Ordering::Relaxed);
        expired.len()
    }
}

fn no_lease(id: &str) -> Failure {
    Failure(
        StatusCode::NOT_FOUND,
        format!("no lease `{id}` (never allocated, closed, or reaped after idling)"),
        None,
    )
}

fn env_failed(e: anyhow::Error) -> Failure {
    let text = format!("{e:#}");
    let status = if text.contains("did not return within") {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    Failure(status, text, None)
}

/// Refuses a call without the pool's key (every route but `/healthz`).
async fn keyed(State(pool): State<Arc<Pool>>, request: Request, next: Next) -> Response {
    if request.uri().path() != "/healthz" {
        let given = request
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if let Some(why) = openclaw_config::access::refusal(given, &pool.opts.api_key) {
            return Failure(StatusCode::UNAUTHORIZED, why.into(), None).into_response();
        }
    }
    next.run(request).await
}

/// The routes. Serve them with `into_make_service_with_connect_info::<SocketAddr>()`: leases
/// are bound to the address that allocated them.
pub fn router(pool: Arc<Pool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"ok": true})) }))
        .route("/status", get(status))
        .route("/tasks", get(tasks))
        .route("/allocate", post(allocate))
        .route("/heartbeat", post(heartbeat))
        .route("/reset", post(reset))
        .route("/step", post(step))
        .route("/exec_tool", post(exec_tool))
        .route("/evaluate", post(evaluate))
        .route("/close", post(close))
        .layer(axum::middleware::from_fn_with_state(pool.clone(), keyed))
        .with_state(pool)
}

/// The caller's address, which leases are bound to.
type Client = ConnectInfo<SocketAddr>;

/// Runs the reaper every quarter of the idle limit (at most every 5 s) until the process ends.
pub fn spawn_reaper(pool: Arc<Pool>) {
    let every = (pool.opts.idle_ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let p = Arc::clone(&pool);
            let _ = tokio::task::spawn_blocking(move || p.reap()).await;
        }
    });
}

/// Runs a blocking environment call off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("environment call thread")
}

async fn status(State(pool): State<Arc<Pool>>) -> Json<Value> {
    let leases = pool.leases.lock().expect("lease table").len();
    Json(json!({
        "ok": true,
        "protocol": super::PROTOCOL,
        "env": pool.env.plugin(),
        "leases": leases,
        "max_leases": pool.opts.max_leases,
        "max_leases_per_task": pool.opts.max_leases_per_task,
        "max_leases_per_client": pool.opts.max_leases_per_client,
        "tasks": pool.tasks.len(),
        "idle_ttl_s": pool.opts.idle_ttl.as_secs_f64(),
        "reaped": pool.reaped.load(Ordering::Relaxed),
        "granted": pool.granted.load(Ordering::Relaxed),
    }))
}

#[derive(Deserialize)]
struct SplitQuery {
    #[serde(default = "train")]
    split: String,
}

fn train() -> String {
    "train".into()
}

async fn tasks(State(pool): State<Arc<Pool>>, Query(q): Query<SplitQuery>) -> Reply {
    let timeout = pool.opts.call_timeout;
    let env = pool.env.clone();
    let tasks = blocking(move || env.tasks(&q.split, timeout))
        .await
        .map_err(env_failed)?;
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| json!({"id": t.id.as_str(), "instruction": t.instruction.as_str(), "data_json": t.data_json.as_str()}))
        .collect();
    Ok(Json(json!({"ok": true, "tasks": tasks})))
}

/// A request body, with the fields every call names read out.
fn field<'a>(body: &'a Value, key: &str) -> Result<&'a str, Failure> {
    body.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad(format!("the request needs a string `{key}`")))
}

async fn allocate(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let client = addr.ip();
    let task_key = field(&body, "task_key")?.to_string();
    let request_id = field(&body, "request_id")?.to_string();
    if task_key.len() > 512 || request_id.len() > 512 {
        return Err(bad("`task_key` and `request_id` are at most 512 bytes"));
    }
    // The per-task cap counts real tasks: a lease is for one of the pool's, and `/reset` runs
    // that one only.
    if !pool.tasks.contains_key(&task_key) {
        return Err(bad(format!(
            "task `{}` is not one of this pool's {} tasks (GET /tasks lists them)",
            task_key.chars().take(100).collect::<String>(),
            pool.tasks.len()
        )));
    }
    let mut leases = pool.leases.lock().expect("lease table");
    if let Some((id, lease)) = leases
        .iter_mut()
        .find(|(_, l)| l.client == client && l.task_key == task_key && l.request_id == request_id)
    {
        lease.last_seen = Instant::now();
        return Ok(Json(json!({"ok": true, "lease_id": id, "reused": true})));
    }
    if leases.len() >= pool.opts.max_leases {
        return Err(full(
            format!(
                "all {} leases are taken; try another pool or later",
                pool.opts.max_leases
            ),
            "RUN_SLOTS_EXHAUSTED",
        ));
    }
    let mine = leases.values().filter(|l| l.client == client).count();
    if mine >= pool.opts.max_leases_per_client {
        return Err(full(
            format!(
                "this client holds its {} leases (--max-leases-per-client); close one or try later",
                pool.opts.max_leases_per_client
            ),
            "RUN_SLOTS_EXHAUSTED",
        ));
    }
    let of_task = leases.values().filter(|l| l.task_key == task_key).count();
    if of_task >= pool.opts.max_leases_per_task {
        return Err(full(
            format!(
                "task `{task_key}` has its {} leases; try another pool or later",
                pool.opts.max_leases_per_task
            ),
            "TASK_SLOTS_EXHAUSTED",
        ));
    }
    pool.granted.fetch_add(1, Ordering::Relaxed);
    // 128 bits from a generator seeded by the OS: an id cannot be guessed, and one from
    // before a restart never matches.
    let id = format!("run-{:032x}", rand::random::<u128>());
    leases.insert(
        id.clone(),
        Lease {
            task_key,
            request_id,
            client,
            granted: Instant::now(),
            resetting: false,
            episode: None,
            last_seen: Instant::now(),
        },
    );
    Ok(Json(json!({"ok": true, "lease_id": id, "reused": false})))
}

async fn heartbeat(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let id = field(&body, "lease_id")?;
    let mut leases = pool.leases.lock().expect("lease table");
    Pool::touch(&mut leases, id, addr.ip())?;
    Ok(Json(json!({"ok": true})))
}

/// An observation as JSON: OpenAI messages and the tools array.
pub fn observation_json(o: &Observation) -> Value {
    let tools: Value = serde_json::from_str(&o.tools_json).unwrap_or(Value::Array(Vec::new()));
    json!({
        "messages": o.messages.iter().map(to_json).collect::<Vec<_>>(),
        "tools": tools,
    })
}

/// The pool's own task that a `/reset` names: `task.id` (this host's form) or
/// `task_meta.task_name` (the original's). Data the client sends with it must be the pool's
/// own; the environment never sees the client's.
fn task_named(pool: &Pool, body: &Value) -> Result<Task, Failure> {
    let (id, sent) = match (&body["task"], &body["task_meta"]) {
        (Value::Object(t), _) => (t.get("id").and_then(Value::as_str), t.get("data_json")),
        (_, Value::Object(meta)) => (meta.get("task_name").and_then(Value::as_str), None),
        _ => return Err(bad(
            "/reset needs `task` ({id, instruction, data_json}) or `task_meta` ({task_name, ...})",
        )),
    };
    let id = id
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad("/reset: the task needs its id (`task.id` or `task_meta.task_name`)"))?;
    let shown: String = id.chars().take(100).collect();
    let task = pool.tasks.get(id).ok_or_else(|| {
        bad(format!(
            "task `{shown}` is not one of this pool's {} tasks (GET /tasks lists them); a pool runs only its environment's own tasks",
            pool.tasks.len()
        ))
    })?;
    if let Some(sent) = sent
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
    {
        let ours: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
        if serde_json::from_str::<Value>(sent).ok() != Some(ours) {
            return Err(bad(format!(
                "task `{shown}`: the data sent is not the pool's own for that task; a pool runs its environment's tasks as it lists them (send the id only, or its data from GET /tasks)"
            )));
        }
    }
    Ok(task.clone())
}

async fn reset(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let lease_id = field(&body, "lease_id")?.to_string();
    let task = task_named(&pool, &body)?;
    {
        let mut leases = pool.leases.lock().expect("lease table");
        let lease = Pool::touch(&mut leases, &lease_id, addr.ip())?;
        if lease.task_key != task.id.as_str() {
            return Err(bad(format!(
                "lease `{lease_id}` was allocated for task `{}`, not `{}`",
                lease.task_key, task.id
            )));
        }
        if lease.episode.is_some() || lease.resetting {
            return Err(Failure(
                StatusCode::CONFLICT,
                format!("lease `{lease_id}` is already reset; allocate another for a new episode"),
                None,
            ));
        }
        lease.resetting = true;
    }
    let seed = body["seed"].as_u64().unwrap_or(0);
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let started = blocking(move || env.reset(&task, seed, timeout)).await;
    if let Err(e) = started {
        if let Some(l) = pool.leases.lock().expect("lease table").get_mut(&lease_id) {
            l.resetting = false;
        }
        return Err(env_failed(e));
    }
    let (episode, first) = started.expect("checked above");
    let stale = {
        let mut leases = pool.leases.lock().expect("lease table");
        match leases.get_mut(&lease_id) {
            Some(l) => {
                l.episode = Some(episode);
                l.resetting = false;
                false
            }
            // Closed or reaped while the reset ran.
            None => true,
        }
    };
    if stale {
        let env = pool.env.clone();
        let _ = blocking(move || env.close(episode, timeout)).await;
        return Err(no_lease(&lease_id));
    }
    let obs = observation_json(&first);
    let user_msg = first
        .messages
        .iter()
        .rev()
        .find(|m| m.role.as_str() == "user")
        .map(|m| m.content.to_string())
        .unwrap_or_default();
    Ok(Json(json!({
        "ok": true,
        "user_msg": user_msg,
        "tool_schemas": obs["tools"],
        "observation": obs,
    })))
}

fn outcome_json(out: &StepOutcome) -> Value {
    let metadata: Value = serde_json::from_str(&out.info.metadata_json).unwrap_or(Value::Null);
    json!({
        "ok": true,
        "observation": observation_json(&out.observation),
        "reward": out.reward,
        "done": out.done,
        "truncated": out.info.truncated,
        "metadata": metadata,
    })
}

async fn step(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let episode = pool.episode_of(field(&body, "lease_id")?, addr.ip())?;
    let message =
        from_json(&body["message"], "assistant").map_err(|e| bad(format!("`message`: {e}")))?;
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let out = blocking(move || env.step(episode, &Action { message }, timeout))
        .await
        .map_err(env_failed)?;
    Ok(Json(outcome_json(&out)))
}

async fn exec_tool(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let episode = pool.episode_of(field(&body, "lease_id")?, addr.ip())?;
    let call = &body["tool_call"];
    let name = call["name"]
        .as_str()
        .ok_or_else(|| bad("`tool_call` needs a string `name`"))?;
    let arguments = match &call["arguments"] {
        Value::String(s) => s.clone(),
        Value::Null => "{}".into(),
        other => other.to_string(),
    };
    // One call is an assistant message with that one call.
    let mut message = Message::new("assistant", "");
    message.tool_calls_json = ROption::RSome(
        json!([{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}])
            .to_string()
            .into(),
    );
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let out = blocking(move || env.step(episode, &Action { message }, timeout))
        .await
        .map_err(env_failed)?;
    let text: Vec<&str> = out
        .observation
        .messages
        .iter()
        .filter(|m| m.role.as_str() == "tool")
        .map(|m| m.content.as_str())
        .collect();
    let mut reply = outcome_json(&out);
    reply["observation"] = json!(text.join("\n"));
    Ok(Json(reply))
}

async fn evaluate(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let episode = pool.episode_of(field(&body, "lease_id")?, addr.ip())?;
    let env = pool.env.clone();
    let timeout = pool.opts.evaluate_timeout;
    let e = blocking(move || env.evaluate(episode, timeout))
        .await
        .map_err(env_failed)?;
    Ok(Json(match e {
        Some(e) => {
            let details: Value = serde_json::from_str(&e.details_json).unwrap_or(Value::Null);
            json!({"ok": true, "score": e.reward, "solved": e.solved, "details": details})
        }
        None => json!({"ok": true, "score": null}),
    }))
}

async fn close(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let id = field(&body, "lease_id")?;
    let lease = {
        let mut leases = pool.leases.lock().expect("lease table");
        match leases.get(id) {
            Some(l) if l.client == addr.ip() => leases.remove(id),
            _ => None,
        }
    };
    let found = lease.is_some();
    if let Some(ep) = lease.and_then(|l| l.episode) {
        let env = pool.env.clone();
        let timeout = pool.opts.call_timeout;
        blocking(move || env.close(ep, timeout))
            .await
            .map_err(env_failed)?;
    }
    Ok(Json(json!({"ok": true, "found": found})))
}

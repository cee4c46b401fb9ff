//! `env-pool serve`: one environment plugin behind the lease protocol.
//!
//! Besides the terminal pool's dialect and this host's `/step` and `/tasks`, a pool serving
//! `swe` answers the original's SWE pool dialect and one serving `gui` its GUI pool dialect:
//!
//! - SWE: `/allocate {image, instance_id, request_id?}` resets that instance (the image is
//!   not used: the instance set holds the repositories) and answers `{lease_id, container_id,
//!   node_url}`; `/exec {lease_id, command, cwd, env}` runs the command as one agent step (a
//!   reply with that one ```` ```bash ```` block) and answers `{returncode, output}`; `/diff`
//!   answers the repository's whole diff, which the environment reports with its score (so
//!   `/diff` scores the lease, and an `/evaluate` with no step since answers with that score);
//!   `/evaluate {patch, eval_script}` refuses a script (an episode is scored by the instance's
//!   own tests) and a patch that is not the repository's diff, and adds `resolved`.
//! - GUI: `/allocate {episode_id}` grants a lease whose task comes with `/reset {lease_id,
//!   task_config: {id}}`; `/step {lease_id, action}` takes one `computer_use` arguments object
//!   (`DONE`, `FAIL` and `WAIT` too; pyautogui code is refused by name) and answers
//!   `{observation, reward, done, info}`; `/get_obs` answers the last observation.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{Action, Evaluation, Message, Observation, StepOutcome, Task};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{gui, swe};
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

/// Clears a lease's `busy` mark when dropped.
struct Busy {
    pool: Arc<Pool>,
    lease_id: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut leases) = self.pool.leases.lock() {
            if let Some(l) = leases.get_mut(&self.lease_id) {
                l.busy = false;
            }
        }
    }
}

struct Lease {
    /// The task it runs (empty for a GUI lease until its reset names one).
    task_key: String,
    /// The task it was allocated for: with `request_id` and the client, what makes allocate
    /// idempotent.
    allocated_for: String,
    request_id: String,
    /// The address that allocated it: only calls from there may use it.
    client: IpAddr,
    granted: Instant,
    /// Whether a reset is running (a second one is refused).
    resetting: bool,
    /// A step of its episode is running: a second one is refused (409) rather than queued,
    /// so one client cannot pile up threads behind one episode's lock.
    busy: bool,
    episode: Option<u64>,
    last_seen: Instant,
    /// Steps so far (`/step`, `/exec_tool`, `/exec`): a kept score is current while this
    /// stays as it was.
    steps: u64,
    /// The last `evaluate` and the step count it saw.
    scored: Option<(u64, Option<Evaluation>)>,
    /// The GUI dialect's last observation, for `/get_obs`.
    last_obs: Option<Value>,
}

/// Which of the original's per-environment dialects a pool answers besides the terminal
/// pool's, by the environment it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Terminal,
    Swe,
    Gui,
}

impl Dialect {
    fn of(env: &str) -> Dialect {
        match env {
            "swe" => Dialect::Swe,
            "gui" => Dialect::Gui,
            _ => Dialect::Terminal,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Terminal => "terminal",
            Dialect::Swe => "swe",
            Dialect::Gui => "gui",
        }
    }
}

/// The pool's state.
pub struct Pool {
    env: TimedEnv,
    opts: PoolOptions,
    /// The original's dialect it answers besides the terminal pool's.
    dialect: Dialect,
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
        let dialect = Dialect::of(env.plugin());
        Ok(Arc::new(Pool {
            env,
            opts,
            dialect,
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

    /// The lease's episode and task for a step, marking it seen, counting the step and marking
    /// it busy until the returned guard is dropped (when the step ends or its deadline passes).
    fn stepped(
        self: &Arc<Self>,
        lease_id: &str,
        client: IpAddr,
    ) -> Result<(u64, String, Busy), Failure> {
        let mut leases = self.leases.lock().expect("lease table");
        let lease = Self::touch(&mut leases, lease_id, client)?;
        let episode = lease.episode.ok_or_else(|| no_episode(lease_id))?;
        if lease.busy {
            return Err(Failure(
                StatusCode::CONFLICT,
                format!("lease `{lease_id}` has a step running; send the next when it answers"),
                None,
            ));
        }
        lease.busy = true;
        lease.steps += 1;
        let busy = Busy {
            pool: Arc::clone(self),
            lease_id: lease_id.to_string(),
        };
        Ok((episode, lease.task_key.clone(), busy))
    }

    /// Refuses a route of another environment's dialect, saying which this pool answers.
    fn needs(&self, dialect: Dialect, what: &str) -> Result<(), Failure> {
        if self.dialect == dialect {
            return Ok(());
        }
        Err(bad(format!(
            "{what} is the original's {} pool dialect; this pool serves `{}`{}",
            dialect.name(),
            self.env.plugin(),
            match self.dialect {
                Dialect::Terminal => ", which answers the terminal pool's (/allocate {task_key, request_id}, /reset, /exec_tool, /evaluate, /close) and /step",
                Dialect::Swe => ", which answers the terminal pool's dialect, /step, and the SWE pool's (/allocate {image, instance_id}, /exec, /diff, /evaluate)",
                Dialect::Gui => ", which answers the terminal pool's dialect, /step, and the GUI pool's (/allocate {episode_id}, /reset {task_config}, /step {action}, /get_obs, /evaluate)",
            }
        )))
    }

    /// A lease for `client` to run `task_key` (empty: a GUI lease, whose task its reset
    /// names), or the one it holds already for the same task and `request_id`: its id and
    /// whether it was held already. Refused with the original's codes when full.
    fn grant(
        &self,
        leases: &mut HashMap<String, Lease>,
        client: IpAddr,
        task_key: &str,
        request_id: &str,
    ) -> Result<(String, bool), Failure> {
        if let Some((id, lease)) = leases.iter_mut().find(|(_, l)| {
            l.client == client && l.allocated_for == task_key && l.request_id == request_id
        }) {
            lease.last_seen = Instant::now();
            return Ok((id.clone(), true));
        }
        if leases.len() >= self.opts.max_leases {
            return Err(full(
                format!(
                    "all {} leases are taken; try another pool or later",
                    self.opts.max_leases
                ),
                "RUN_SLOTS_EXHAUSTED",
            ));
        }
        let mine = leases.values().filter(|l| l.client == client).count();
        if mine >= self.opts.max_leases_per_client {
            return Err(full(
                format!(
                    "this client holds its {} leases (--max-leases-per-client); close one or try later",
                    self.opts.max_leases_per_client
                ),
                "RUN_SLOTS_EXHAUSTED",
            ));
        }
        if !task_key.is_empty() {
            let of_task = leases.values().filter(|l| l.task_key == task_key).count();
            if of_task >= self.opts.max_leases_per_task {
                return Err(full(
                    format!(
                        "task `{task_key}` has its {} leases; try another pool or later",
                        self.opts.max_leases_per_task
                    ),
                    "TASK_SLOTS_EXHAUSTED",
                ));
            }
        }
        self.granted.fetch_add(1, Ordering::Relaxed);
        // 128 bits from a generator seeded by the OS: an id cannot be guessed, and one from
        // before a restart never matches.
        let id = format!("run-{:032x}", rand::random::<u128>());
        leases.insert(
            id.clone(),
            Lease {
                task_key: task_key.to_string(),
                allocated_for: task_key.to_string(),
                request_id: request_id.to_string(),
                client,
                granted: Instant::now(),
                resetting: false,
                busy: false,
                episode: None,
                last_seen: Instant::now(),
                steps: 0,
                scored: None,
                last_obs: None,
            },
        );
        Ok((id, false))
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

fn no_episode(lease_id: &str) -> Failure {
    Failure(
        StatusCode::CONFLICT,
        format!("lease `{lease_id}` has no episode yet: call /reset first"),
        None,
    )
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
        .route("/exec", post(exec))
        .route("/diff", post(diff))
        .route("/get_obs", post(get_obs))
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
        "dialect": pool.dialect.name(),
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
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Reply {
    let client = addr.ip();
    if body.get("task_key").is_none() {
        match pool.dialect {
            Dialect::Swe if body.get("instance_id").is_some() => {
                return swe_allocate(&pool, client, &headers, &body).await
            }
            Dialect::Gui => return gui_allocate(&pool, client, &body),
            _ => {}
        }
    }
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
    let (id, reused) = pool.grant(&mut leases, client, &task_key, &request_id)?;
    Ok(Json(json!({"ok": true, "lease_id": id, "reused": reused})))
}

/// A request id the client gave (`key`, text or a number), or a fresh one: the original's SWE
/// and GUI allocates need not name one, and then each is a lease of its own.
fn request_id_of(body: &Value, key: &str, prefix: &str) -> Result<String, Failure> {
    let id = match body.get(key) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => format!("{prefix}-{:032x}", rand::random::<u128>()),
    };
    if id.len() > 512 {
        return Err(bad(format!("`{key}` is at most 512 bytes")));
    }
    Ok(id)
}

/// The SWE dialect's `/allocate {image, instance_id}`: a lease with its instance reset.
async fn swe_allocate(
    pool: &Arc<Pool>,
    client: IpAddr,
    headers: &HeaderMap,
    body: &Value,
) -> Reply {
    let instance = field(body, "instance_id")?.to_string();
    let request_id = request_id_of(body, "request_id", "swe")?;
    // `image` names a container image of the original's pool; the instance set here holds
    // the repositories, so it is not used.
    let task = pool.tasks.get(&instance).cloned().ok_or_else(|| {
        bad(format!(
            "instance `{}` is not one of this pool's {} instances (GET /tasks lists them)",
            instance.chars().take(100).collect::<String>(),
            pool.tasks.len()
        ))
    })?;
    let node_url = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| format!("http://{h}"))
        .unwrap_or_default();
    let (id, reused) = {
        let mut leases = pool.leases.lock().expect("lease table");
        let (id, reused) = pool.grant(&mut leases, client, &instance, &request_id)?;
        if !reused {
            if let Some(l) = leases.get_mut(&id) {
                l.resetting = true;
            }
        }
        (id, reused)
    };
    let mut reply = json!({"ok": true, "lease_id": id, "container_id": id,
        "node_url": node_url, "reused": reused});
    if reused {
        return Ok(Json(reply));
    }
    match start_episode(pool, &id, task, 0).await {
        Ok(first) => {
            reply["observation"] = observation_json(&first);
            Ok(Json(reply))
        }
        Err(f) => {
            // No episode, no lease: the allocation did not happen.
            pool.leases.lock().expect("lease table").remove(&id);
            Err(f)
        }
    }
}

/// The GUI dialect's `/allocate {episode_id}`: a lease whose task its reset names.
fn gui_allocate(pool: &Pool, client: IpAddr, body: &Value) -> Reply {
    let request_id = request_id_of(body, "episode_id", "gui")?;
    let mut leases = pool.leases.lock().expect("lease table");
    let (id, reused) = pool.grant(&mut leases, client, "", &request_id)?;
    Ok(Json(json!({"ok": true, "lease_id": id, "reused": reused})))
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
    if body.get("task_config").is_some()
        && body.get("task").is_none()
        && body.get("task_meta").is_none()
    {
        pool.needs(Dialect::Gui, "/reset with `task_config`")?;
        return gui_reset(&pool, addr.ip(), &body).await;
    }
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
    let first = start_episode(&pool, &lease_id, task, seed).await?;
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

/// Resets `task` for the lease `lease_id` (whose `resetting` the caller set) and gives the
/// lease the episode: its first observation. A failed reset clears `resetting`; an episode
/// whose lease was closed or reaped while it started is closed.
async fn start_episode(
    pool: &Arc<Pool>,
    lease_id: &str,
    task: Task,
    seed: u64,
) -> Result<Observation, Failure> {
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let started = blocking(move || env.reset(&task, seed, timeout)).await;
    let (episode, first) = match started {
        Ok(r) => r,
        Err(e) => {
            if let Some(l) = pool.leases.lock().expect("lease table").get_mut(lease_id) {
                l.resetting = false;
            }
            return Err(env_failed(e));
        }
    };
    let stale = {
        let mut leases = pool.leases.lock().expect("lease table");
        match leases.get_mut(lease_id) {
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
        return Err(no_lease(lease_id));
    }
    Ok(first)
}

/// The pool's own task a GUI `task_config` names: `{"id": ...}` (OSWorld's key),
/// `task_id` or `task_name`, or the id as a string. Nothing else of a task may be sent: its
/// pages and check are the pool's.
fn task_config_named(pool: &Pool, config: &Value) -> Result<Task, Failure> {
    const KEYS: [&str; 4] = ["id", "task_id", "task_name", "instruction"];
    let id = match config {
        Value::String(s) => s.as_str(),
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
                return Err(bad(format!(
                    "`task_config` has `{}`: a pool runs its environment's own tasks (their pages and checks) and takes only their id, as {{\"id\": ...}} (GET /tasks lists them)",
                    k.chars().take(100).collect::<String>()
                )));
            }
            KEYS[..3]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str))
                .unwrap_or("")
        }
        _ => return Err(bad(
            "/reset needs `task_config`: the task's id, as {\"id\": ...} (GET /tasks lists them)",
        )),
    };
    if id.is_empty() {
        return Err(bad("`task_config` needs the task's id (`id`)"));
    }
    pool.tasks.get(id).cloned().ok_or_else(|| {
        bad(format!(
            "task `{}` is not one of this pool's {} tasks (GET /tasks lists them); a pool runs only its environment's own tasks",
            id.chars().take(100).collect::<String>(),
            pool.tasks.len()
        ))
    })
}

/// A GUI observation as the original's workers give one (`instruction`, `accessibility_tree`,
/// `screenshot`, `terminal`), with this host's `messages` and `tools`. The accessibility tree
/// is the observation's text; the screenshot stays on the pool's disk (its path is in each
/// step's `info.screenshot`).
fn gui_observation(task: &Task, o: &Observation) -> Value {
    let mut v = observation_json(o);
    let text: Vec<&str> = o.messages.iter().map(|m| m.content.as_str()).collect();
    v["instruction"] = json!(task.instruction.as_str());
    v["accessibility_tree"] = json!(text.join("\n\n"));
    v["screenshot"] = Value::Null;
    v["terminal"] = Value::Null;
    v
}

/// The GUI dialect's `/reset {lease_id, task_config}`.
async fn gui_reset(pool: &Arc<Pool>, client: IpAddr, body: &Value) -> Reply {
    let lease_id = field(body, "lease_id")?.to_string();
    let task = task_config_named(pool, &body["task_config"])?;
    {
        let mut leases = pool.leases.lock().expect("lease table");
        let of_task = leases
            .iter()
            .filter(|(k, l)| **k != lease_id && l.task_key == task.id.as_str())
            .count();
        let lease = Pool::touch(&mut leases, &lease_id, client)?;
        if lease.episode.is_some() || lease.resetting {
            return Err(Failure(
                StatusCode::CONFLICT,
                format!("lease `{lease_id}` is already reset; allocate another for a new episode"),
                None,
            ));
        }
        if of_task >= pool.opts.max_leases_per_task {
            return Err(full(
                format!(
                    "task `{}` has its {} leases; try another pool or later",
                    task.id, pool.opts.max_leases_per_task
                ),
                "TASK_SLOTS_EXHAUSTED",
            ));
        }
        lease.task_key = task.id.to_string();
        lease.resetting = true;
    }
    let first = start_episode(pool, &lease_id, task.clone(), 0).await?;
    let obs = gui_observation(&task, &first);
    if let Some(l) = pool.leases.lock().expect("lease table").get_mut(&lease_id) {
        l.last_obs = Some(obs.clone());
    }
    Ok(Json(json!({"ok": true, "observation": obs})))
}

/// What the refusal of a code action says.
const CODE_REFUSED: &str = "`action` is code (pyautogui, as the original's OSWorld workers run it): this pool's GUI environment acts in a browser through computer_use actions and runs no code a client sends; send the call's arguments, such as {\"action\": \"left_click\", \"coordinate\": [500, 300]} (DONE, FAIL and WAIT are read too)";

/// The `computer_use` arguments a GUI `/step` sends: the object itself, or `DONE`, `FAIL` or
/// `WAIT` (OSWorld's special actions). Code and `computer_13` actions are refused by name.
fn gui_action(action: &Value, sleep: &Value) -> Result<Value, Failure> {
    match action {
        Value::Object(o) if o.contains_key("action_type") => Err(bad(
            "`action` is an OSWorld computer_13 action (`action_type`); this pool's GUI environment acts with computer_use arguments: send {\"action\": \"left_click\", \"coordinate\": [x, y]} and the like",
        )),
        Value::Object(o) if o.get("action").is_some_and(Value::is_string) => Ok(action.clone()),
        Value::Object(_) => Err(bad(
            "`action` needs `action`: the computer_use action's name (left_click, type, key, ...)",
        )),
        Value::String(s) => match s.trim() {
            "DONE" => Ok(json!({"action": "terminate", "status": "success"})),
            "FAIL" => Ok(json!({"action": "terminate", "status": "failure"})),
            "WAIT" => {
                let t = sleep
                    .as_f64()
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .unwrap_or(1.0)
                    .min(10.0);
                Ok(json!({"action": "wait", "time": t}))
            }
            t if t.starts_with('{') => match serde_json::from_str::<Value>(t) {
                Ok(v) if v.is_object() => gui_action(&v, sleep),
                _ => Err(bad("`action` is not a JSON object")),
            },
            _ => Err(bad(CODE_REFUSED)),
        },
        _ => Err(bad(
            "`action` must be the computer_use call's arguments (an object)",
        )),
    }
}

/// The GUI dialect's `/step {lease_id, action, sleep_after_execution}`: the action as one
/// `computer_use` call. The environment waits for the page itself (its `settle_ms`), so
/// `sleep_after_execution` is only `WAIT`'s length.
async fn gui_step(pool: &Arc<Pool>, client: IpAddr, body: &Value) -> Reply {
    let lease_id = field(body, "lease_id")?.to_string();
    let args = gui_action(&body["action"], &body["sleep_after_execution"])?;
    let (episode, task_key, _busy) = pool.stepped(&lease_id, client)?;
    let mut message = Message::new("assistant", "");
    message.tool_calls_json = ROption::RSome(
        json!([{"id": "call_0", "type": "function",
                "function": {"name": gui::TOOL, "arguments": args.to_string()}}])
        .to_string()
        .into(),
    );
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let out = blocking(move || env.step(episode, &Action { message }, timeout))
        .await
        .map_err(env_failed)?;
    let obs = match pool.tasks.get(&task_key) {
        Some(t) => gui_observation(t, &out.observation),
        None => observation_json(&out.observation),
    };
    if let Some(l) = pool.leases.lock().expect("lease table").get_mut(&lease_id) {
        l.last_obs = Some(obs.clone());
    }
    let info: Value = serde_json::from_str(&out.info.metadata_json).unwrap_or(Value::Null);
    Ok(Json(json!({
        "ok": true,
        "observation": obs,
        "reward": out.reward,
        "done": out.done,
        "truncated": out.info.truncated,
        "info": info,
    })))
}

/// The GUI dialect's `/get_obs {lease_id}`: the observation of the last reset or step.
async fn get_obs(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    pool.needs(Dialect::Gui, "/get_obs")?;
    let lease_id = field(&body, "lease_id")?;
    let mut leases = pool.leases.lock().expect("lease table");
    let lease = Pool::touch(&mut leases, lease_id, addr.ip())?;
    let obs = lease.last_obs.clone().ok_or_else(|| no_episode(lease_id))?;
    Ok(Json(json!({"ok": true, "observation": obs})))
}

/// The script `/exec` runs: `env`'s variables exported, a `cd` to `cwd` when it is not
/// `/testbed` (where every command starts), then the command.
fn exec_script(command: &str, cwd: &Value, env: &Value) -> Result<String, Failure> {
    let mut script = String::new();
    match env {
        Value::Null => {}
        Value::Object(vars) => {
            for (k, v) in vars {
                let name = !k.is_empty()
                    && k.len() <= 128
                    && !k.starts_with(|c: char| c.is_ascii_digit())
                    && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !name {
                    return Err(bad(format!(
                        "`env`: `{}` is not a variable name",
                        k.chars().take(100).collect::<String>()
                    )));
                }
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return Err(bad(format!("`env`: `{k}` must be a string"))),
                };
                script.push_str(&format!("export {k}={}\n", swe::sh_quote(&v)));
            }
        }
        _ => return Err(bad("`env` must be an object of variables")),
    }
    match cwd {
        Value::Null => {}
        Value::String(d) if d.is_empty() || d.trim_end_matches('/') == swe::TESTBED => {}
        Value::String(d) => script.push_str(&format!("cd {} || exit 1\n", swe::sh_quote(d))),
        _ => return Err(bad("`cwd` must be a string")),
    }
    script.push_str(command);
    Ok(script)
}

/// The SWE dialect's `/exec {lease_id, command, cwd, timeout, env}`: the command as one agent
/// step (a reply with that one ```` ```bash ```` block), answered with its return code and
/// output as the environment reports them (past its `output_chars`, the head and the tail).
/// The environment's `exec_seconds` bounds the command, whatever `timeout` says.
async fn exec(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    pool.needs(Dialect::Swe, "/exec")?;
    let lease_id = field(&body, "lease_id")?.to_string();
    let command = body
        .get("command")
        .and_then(Value::as_str)
        .map(|c| c.trim_end_matches('\n'))
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| bad("/exec needs a non-empty string `command`"))?;
    let script = exec_script(command, &body["cwd"], &body["env"])?;
    let reply = format!("```bash\n{script}\n```");
    // The environment reads a reply's one block as mini-swe-agent does: the command must come
    // out of it whole.
    if swe::bash_blocks(&reply) != [script.as_str()] {
        return Err(bad(
            "`command` cannot run as one agent step: a line of it starts with ``` (the environment reads the command from a reply's one ```bash block)",
        ));
    }
    let (episode, _, _busy) = pool.stepped(&lease_id, addr.ip())?;
    let message = Message::new("assistant", &reply);
    let env = pool.env.clone();
    let timeout = pool.opts.call_timeout;
    let out = blocking(move || env.step(episode, &Action { message }, timeout))
        .await
        .map_err(env_failed)?;
    let text: Vec<&str> = out
        .observation
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    let text = text.join("\n");
    let Some((returncode, note, output)) = swe::read_observation(&text) else {
        return Err(Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the environment's answer is not a command's result: {}",
                text.chars().take(300).collect::<String>()
            ),
            None,
        ));
    };
    let metadata: Value = serde_json::from_str(&out.info.metadata_json).unwrap_or(Value::Null);
    Ok(Json(json!({
        "ok": true,
        "returncode": returncode,
        "output": output,
        "note": note,
        "done": out.done,
        "truncated": out.info.truncated,
        "metadata": metadata,
    })))
}

/// The lease's score: the one kept when no step came since, else a fresh `evaluate` (then
/// kept).
async fn scored(
    pool: &Arc<Pool>,
    lease_id: &str,
    client: IpAddr,
) -> Result<Option<Evaluation>, Failure> {
    let (episode, steps) = {
        let mut leases = pool.leases.lock().expect("lease table");
        let lease = Pool::touch(&mut leases, lease_id, client)?;
        let episode = lease.episode.ok_or_else(|| no_episode(lease_id))?;
        if let Some((at, kept)) = &lease.scored {
            if *at == lease.steps {
                return Ok(kept.clone());
            }
        }
        (episode, lease.steps)
    };
    let env = pool.env.clone();
    let timeout = pool.opts.evaluate_timeout;
    let e = blocking(move || env.evaluate(episode, timeout))
        .await
        .map_err(env_failed)?;
    if let Some(l) = pool.leases.lock().expect("lease table").get_mut(lease_id) {
        l.scored = Some((steps, e.clone()));
    }
    Ok(e)
}

/// The SWE dialect's `/diff {lease_id, cwd}`: the repository's whole diff against the base
/// commit, as the environment reports it with its score.
async fn diff(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    pool.needs(Dialect::Swe, "/diff")?;
    let lease_id = field(&body, "lease_id")?.to_string();
    let e = scored(&pool, &lease_id, addr.ip()).await?;
    let details: Value = e
        .as_ref()
        .and_then(|e| serde_json::from_str::<Value>(&e.details_json).ok())
        .unwrap_or(Value::Null);
    match details.get("patch").and_then(Value::as_str) {
        Some(patch) => Ok(Json(json!({"ok": true, "patch": patch}))),
        None => Err(Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the environment did not report the repository's diff{}",
                details
                    .get("why")
                    .and_then(Value::as_str)
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ),
            None,
        )),
    }
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
    if body.get("message").is_none() && body.get("action").is_some() {
        pool.needs(Dialect::Gui, "/step with `action`")?;
        return gui_step(&pool, addr.ip(), &body).await;
    }
    let message =
        from_json(&body["message"], "assistant").map_err(|e| bad(format!("`message`: {e}")))?;
    let (episode, _, _busy) = pool.stepped(field(&body, "lease_id")?, addr.ip())?;
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
    let (episode, _, _busy) = pool.stepped(field(&body, "lease_id")?, addr.ip())?;
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

/// `/evaluate {lease_id}`, and the SWE dialect's `{patch, eval_script, cwd, timeout}`: the
/// episode as it stands is scored by the environment's own check. A script is refused (none
/// sent by a client runs here), and so is a patch that is not the repository's diff (the
/// repository as the episode left it is what is scored); `resolved` comes with an
/// environment that says it.
async fn evaluate(
    State(pool): State<Arc<Pool>>,
    ConnectInfo(addr): Client,
    Json(body): Json<Value>,
) -> Reply {
    let lease_id = field(&body, "lease_id")?.to_string();
    if body
        .get("eval_script")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.trim().is_empty())
    {
        return Err(bad(
            "`eval_script`: this pool scores an episode with its environment's own check (for `swe`, the instance's FAIL_TO_PASS and PASS_TO_PASS tests after its test_patch) and runs no script a client sends; send an empty one, or none",
        ));
    }
    let Some(e) = scored(&pool, &lease_id, addr.ip()).await? else {
        return Ok(Json(json!({"ok": true, "score": null})));
    };
    let details: Value = serde_json::from_str(&e.details_json).unwrap_or(Value::Null);
    if let Some(sent) = body
        .get("patch")
        .and_then(Value::as_str)
        .filter(|p| !p.trim().is_empty())
    {
        match details.get("patch").and_then(Value::as_str) {
            Some(ours) if ours.trim_end() == sent.trim_end() => {}
            Some(_) => {
                return Err(Failure(
                    StatusCode::CONFLICT,
                    "`patch` is not the lease's repository diff (/diff gives it): this pool scores the repository as the episode left it, not a patch sent with /evaluate; send that diff, an empty patch, or none".into(),
                    None,
                ))
            }
            None => {
                return Err(bad(
                    "`patch`: this pool's environment scores its episode as it stands and takes no patch; leave it out",
                ))
            }
        }
    }
    let resolved = details.get("resolved").cloned();
    let mut reply = json!({"ok": true, "score": e.reward, "solved": e.solved, "details": details});
    if let Some(r) = resolved {
        reply["resolved"] = r;
    }
    Ok(Json(reply))
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

//! The HTTP server: `/v1/chat/completions` (true token streaming, tools), `/v1/models`,
//! `/healthz`, `/metrics`. Every main turn is recorded with its exact tokens, logprobs and
//! weight version before the client sees the end of the response.

use super::protocol::{self, ApiError, ChatRequest};
use super::text::TextPipeline;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use burn::prelude::Backend;
use openclaw_buffer::messages::{content_of, to_abi};
use openclaw_chat::{OutputParser, ParseEvent, ParserOptions, RenderOptions};
use openclaw_collect::{Recorder, SessionTracker};
use openclaw_engine::{Model, SamplingParams};
use openclaw_metrics::Metrics;
use openclaw_plugin_api::{Turn, TurnType};
use openclaw_policy::{GenEvent, PolicyEngine};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Settings of the server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The model id clients use (`default` is accepted too).
    pub served_model_name: String,
    /// Bearer key required when not empty.
    pub api_key: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Completion budget when the request gives none.
    pub default_max_tokens: u32,
    /// Default sampling temperature.
    pub default_temperature: f32,
    /// Record turns for training (`--enable-rl-intercept`); sessions are tracked either way.
    pub record_turns: bool,
    /// How long a request may take to send its body (`--request-body-timeout`): a slot is
    /// held while it is read.
    pub body_timeout: std::time::Duration,
    /// Chat requests one client address may have admitted at once
    /// (`--max-inflight-per-client`), so one client cannot take every slot.
    pub max_inflight_per_client: usize,
    /// Total slots (`--max-inflight`), for `/healthz`.
    pub max_inflight: usize,
}

/// What the handlers share.
pub struct App<B: Backend> {
    /// The served model.
    pub engine: Arc<PolicyEngine<B>>,
    /// Session tracking.
    pub sessions: Arc<Mutex<SessionTracker>>,
    /// Where turns go.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings.
    pub opts: ServerOptions,
    /// Chat requests admitted at once (`--max-inflight`), counted from before the body is read
    /// to the end of the answer, so reading, parsing and tokenizing are bounded too.
    pub admission: Arc<tokio::sync::Semaphore>,
    /// Admitted chat requests per client address.
    pub per_client: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    /// Set when the server stops: requests still sending their body are answered 503 at once
    /// instead of holding the stop.
    pub stopping: tokio::sync::watch::Sender<bool>,
}

/// One admitted request's share of its client's slots, given back when dropped.
struct ClientSlot {
    table: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl ClientSlot {
    /// A slot for `ip`, or `None` when it holds `cap` already.
    fn take(
        table: &Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
        ip: std::net::IpAddr,
        cap: usize,
    ) -> Option<ClientSlot> {
        let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
        let n = t.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            table: table.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = t.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                t.remove(&self.ip);
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            // Clients (the OpenAI SDKs among them) wait this long before retrying.
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        r
    }
}

/// The in-flight gauge's share of one request, given back however the request ends (a client
/// that hangs up drops the handler before its last line).
struct InFlight(Arc<openclaw_metrics::Metrics>);

impl InFlight {
    fn new(metrics: &Arc<openclaw_metrics::Metrics>) -> Self {
        metrics.inflight_requests.inc();
        InFlight(metrics.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.inflight_requests.dec();
    }
}

/// The router.
pub fn router<B: Backend>(app: Arc<App<B>>) -> Router
where
    Model<B>: Send + Sync,
{
    Router::new()
        .route("/v1/chat/completions", post(chat::<B>))
        .route("/v1/models", get(models::<B>))
        .route("/healthz", get(health::<B>))
        .route("/metrics", get(metrics::<B>))
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                message: "Unknown endpoint.".into(),
                kind: "invalid_request_error",
                param: None,
                code: Some("unknown_url"),
            }
        })
        // The chat handler reads the body itself, after the key and admission, with its own
        // limit (so the answer is OpenAI-shaped); no extractor reads one before it.
        .layer(DefaultBodyLimit::disable())
        .with_state(app)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn authorize<B: Backend>(app: &App<B>, headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    match openclaw_config::access::refusal(given, &app.opts.api_key) {
        None => Ok(()),
        Some(why) => Err(ApiError::unauthorized(why)),
    }
}

async fn health<B: Backend>(State(app): State<Arc<App<B>>>) -> Response
where
    Model<B>: Send + Sync,
{
    let free = app.admission.available_permits();
    let failing = app
        .metrics
        .train_failing
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    // Unhealthy when answers cannot be recorded, when what is served can no longer train, or
    // when a chat request now would be refused: a balancer should send clients elsewhere.
    let reason = if let Some((since, why)) = app.recorder.log().unwritable() {
        Some(format!(
            "the buffer cannot record turns (for {:.0} s): {why}",
            since.as_secs_f64()
        ))
    } else if let Some(why) = failing {
        let n = app.metrics.train_failed_in_a_row.get();
        Some(format!(
            "the trainer cannot step: its last {n} steps failed; the last: {why}"
        ))
    } else if free == 0 {
        Some(format!(
            "at capacity: all {} request slots are taken (--max-inflight)",
            app.opts.max_inflight
        ))
    } else {
        None
    };
    let body = json!({
        "ok": reason.is_none(),
        "reason": reason,
        "weight_version": app.engine.weights.version(),
        "inflight": app.opts.max_inflight.saturating_sub(free),
        "max_inflight": app.opts.max_inflight,
    });
    let status = match reason {
        Some(_) => StatusCode::SERVICE_UNAVAILABLE,
        None => StatusCode::OK,
    };
    (status, Json(body)).into_response()
}

async fn metrics<B: Backend>(State(app): State<Arc<App<B>>>) -> Response
where
    Model<B>: Send + Sync,
{
    app.metrics
        .weight_version
        .set(app.engine.weights.version() as i64);
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}

async fn models<B: Backend>(State(app): State<Arc<App<B>>>, headers: HeaderMap) -> Response
where
    Model<B>: Send + Sync,
{
    if let Err(e) = authorize(&app, &headers) {
        return e.into_response();
    }
    Json(json!({"object": "list", "data": [{
        "id": app.opts.served_model_name,
        "object": "model",
        "created": now(),
        "owned_by": "openclaw-host",
        "max_model_len": app.engine.context(),
    }]}))
    .into_response()
}

fn count(app_metrics: &Metrics, status: StatusCode) {
    app_metrics
        .requests
        .get_or_create(&vec![
            ("endpoint".to_string(), "chat".to_string()),
            ("status".to_string(), status.as_u16().to_string()),
        ])
        .inc();
}

async fn chat<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(client): ConnectInfo<std::net::SocketAddr>,
    request: Request,
) -> Response
where
    Model<B>: Send + Sync,
{
    let started = Instant::now();
    let result = chat_inner(app.clone(), client.ip(), request, started).await;
    match result {
        Ok(r) => r,
        Err(e) => {
            count(&app.metrics, e.status);
            e.into_response()
        }
    }
}

/// The bytes of text a request carries: in its messages (content, reasoning, tool calls, names
/// and any other field) and in its tools. A lower bound's input: the rendered prompt holds at
/// least the text of what the template shows.
fn request_text_bytes(
    messages: &[openclaw_chat::ChatMessage],
    tools: Option<&Value>,
) -> (usize, usize) {
    fn strings(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(strings).sum(),
            Value::Object(o) => o.iter().map(|(k, v)| k.len() + strings(v)).sum(),
            _ => 0,
        }
    }
    let text = messages
        .iter()
        .map(|m| {
            content_of(m).len()
                + m.reasoning_content.as_ref().map_or(0, String::len)
                + m.name.as_ref().map_or(0, String::len)
                + m.tool_calls.as_ref().map_or(0, |calls| {
                    calls
                        .iter()
                        .map(|c| c.function.name.len() + strings(&c.function.arguments))
                        .sum()
                })
                + m.extra
                    .iter()
                    .map(|(k, v)| k.len() + strings(v))
                    .sum::<usize>()
        })
        .sum();
    (text, tools.map_or(0, strings))
}

/// Whether reading a body stopped at the size limit.
fn body_too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// Everything a request carries to the end of its generation.
struct Turnkeeper {
    /// Its admission, released when the answer ends (or the client goes away).
    _admitted: tokio::sync::OwnedSemaphorePermit,
    /// Its client's share, likewise.
    _client_slot: ClientSlot,
    /// Its place in the in-flight gauge, likewise.
    _in_flight: InFlight,
    request: ChatRequest,
    assignment: openclaw_collect::Assignment,
    prompt_ids: Vec<u32>,
    id: String,
    created: u64,
}

async fn chat_inner<B: Backend>(
    app: Arc<App<B>>,
    client: std::net::IpAddr,
    request: Request,
    started: Instant,
) -> Result<Response, ApiError>
where
    Model<B>: Send + Sync,
{
    // Refuse before paying: the key and admission are checked before the body is read.
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    authorize(&app, &headers)?;
    let client_slot = ClientSlot::take(&app.per_client, client, app.opts.max_inflight_per_client)
        .ok_or_else(|| {
        ApiError::busy(&format!(
            "This client has {} requests in flight (--max-inflight-per-client); retry shortly.",
            app.opts.max_inflight_per_client
        ))
    })?;
    let admitted = app.admission.clone().try_acquire_owned().map_err(|_| {
        ApiError::busy("The server is at capacity (--max-inflight); retry shortly.")
    })?;
    let limit = app.opts.max_body_bytes;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    // A slot is held while the body arrives: a deadline, and a stop, end the wait.
    let mut stopping = app.stopping.subscribe();
    let deadline = app.opts.body_timeout;
    let body = tokio::select! {
        read = tokio::time::timeout(deadline, axum::body::to_bytes(body, limit.saturating_add(1))) => match read {
            Err(_) => return Err(ApiError::body_timeout(deadline)),
            Ok(read) => read.map_err(|e| {
                if body_too_large(&e) {
                    ApiError::too_large(limit)
                } else {
                    ApiError::invalid(format!("Cannot read the request body: {e}"), None)
                }
            })?,
        },
        _ = stopping.wait_for(|s| *s) => {
            return Err(ApiError::unavailable("The server is stopping; retry on another."));
        }
    };
    if body.len() > limit {
        return Err(ApiError::too_large(limit));
    }
    let request = protocol::parse(&body, &headers)?;
    drop(body);
    let context = app.engine.context();
    if let Some(m) = &request.model {
        if m != &app.opts.served_model_name && m != "default" {
            return Err(ApiError::model_not_found(m));
        }
    }
    // Rendering and tokenizing a long prompt is CPU work: off the async threads.
    let engine = app.engine.clone();
    let (messages, tools) = (request.messages.clone(), request.tools.clone());
    let mut extra = request.template_kwargs.clone();
    let options = RenderOptions {
        add_generation_prompt: true,
        enable_thinking: extra.remove("enable_thinking").and_then(|v| v.as_bool()),
        extra,
    };
    let prompt = tokio::task::spawn_blocking(move || {
        // A prompt whose byte size alone proves it cannot fit is refused before tokenizing it
        // would cost seconds and gigabytes (the bound's first use decodes the vocabulary, also
        // work for this thread, not an async one).
        // Every field counts: tool descriptions and call arguments are rendered too (a 14 MB
        // tool description once took 18 s and 2 GB before its refusal).
        let (text_bytes, tool_bytes) = request_text_bytes(&messages, tools.as_ref());
        if let Some(at_least) = engine.tokens_at_least(text_bytes + tool_bytes) {
            if at_least >= context {
                let e = ApiError::context_length(context, at_least);
                return Err(if tool_bytes > text_bytes {
                    ApiError::invalid(
                        format!(
                            "{} (Most of the request is its `tools`: {tool_bytes} bytes.)",
                            e.message
                        ),
                        Some("tools"),
                    )
                    .with_code("context_length_exceeded")
                } else {
                    e
                });
            }
        }
        engine
            .prompt(&messages, tools.as_ref(), &options)
            .map_err(|e| ApiError::invalid(format!("{e:#}"), Some("messages")))
    })
    .await
    .map_err(|e| ApiError::internal(format!("prompt rendering stopped: {e}")))??;
    if prompt.ids.len() >= context {
        return Err(ApiError::context_length(context, prompt.ids.len()));
    }
    let room = (context - prompt.ids.len()) as u32;
    if let Some(asked) = request.max_tokens.filter(|&m| m > room) {
        // vLLM's answer to a completion budget the context cannot hold.
        return Err(ApiError::invalid(
            format!(
                "This model's maximum context length is {context} tokens. However, you requested {} tokens ({} in the messages, {asked} in the completion). Please reduce the length of the messages or completion.",
                prompt.ids.len() + asked as usize,
                prompt.ids.len()
            ),
            Some("max_tokens"),
        )
        .with_code("context_length_exceeded"));
    }
    let max_tokens = request
        .max_tokens
        .unwrap_or(app.opts.default_max_tokens)
        .min(room)
        .max(1);
    let sampling = SamplingParams {
        temperature: request.temperature.unwrap_or(app.opts.default_temperature),
        top_k: request.top_k.unwrap_or(0) as usize,
        top_p: request.top_p.unwrap_or(1.0),
    };
    let seed = request.seed.unwrap_or_else(rand::random);
    let mut gen_request = app.engine.request(
        prompt.ids.clone(),
        sampling,
        max_tokens as usize,
        request.stop.clone(),
        seed,
    );
    gen_request.top_logprobs = request.logprobs.unwrap_or(0);

    // The session and turn, and the previous turn's next state, recorded before generation.
    let (assignment, closed) = {
        let mut t = app
            .sessions
            .lock()
            .map_err(|_| ApiError::internal("session table poisoned"))?;
        t.on_request(&request.hints, &request.messages, Instant::now())
    };
    for c in closed.iter().filter(|_| app.opts.record_turns) {
        app.recorder
            .closed(&c.session_id, c.reason, c.open_turn)
            .map_err(|e| ApiError::unavailable(format!("cannot record: {e:#}")))?;
    }
    if let Some((turn, ns)) = assignment
        .next_state
        .as_ref()
        .filter(|_| app.opts.record_turns)
    {
        app.recorder
            .next_state(&assignment.session_id, *turn, ns.clone())
            .map_err(|e| ApiError::unavailable(format!("cannot record: {e:#}")))?;
    }

    let rx = app
        .engine
        .scheduler
        .submit(gen_request)
        .map_err(|_| ApiError::busy("The server is at capacity; retry shortly."))?;
    let in_flight = InFlight::new(&app.metrics);
    let parser = OutputParser::new(ParserOptions {
        parse_tool_calls: request.tools.is_some(),
        ..ParserOptions::for_prompt(&prompt.text)
    });
    let pipeline = TextPipeline::new(
        app.engine.tokenizer.incremental_decoder(true),
        &request.stop,
        parser,
    );
    let keeper = Turnkeeper {
        _admitted: admitted,
        _client_slot: client_slot,
        _in_flight: in_flight,
        assignment,
        prompt_ids: prompt.ids,
        id: format!("chatcmpl-{:016x}", rand::random::<u64>()),
        created: now(),
        request,
    };
    if keeper.request.stream {
        let (tx, out) = mpsc::channel::<Result<Event, Infallible>>(64);
        tokio::spawn(stream_task(app.clone(), keeper, rx, pipeline, tx, started));
        count(&app.metrics, StatusCode::OK);
        Ok(Sse::new(ReceiverStream::new(out))
            .keep_alive(KeepAlive::default())
            .into_response())
    } else {
        let r = collect(app.clone(), keeper, rx, pipeline, started).await?;
        count(&app.metrics, StatusCode::OK);
        Ok(Json(r).into_response())
    }
}

fn finish_reason(g: &openclaw_engine::Generation, tool_calls: bool) -> &'static str {
    if tool_calls {
        "tool_calls"
    } else {
        g.finish_reason.as_str()
    }
}

fn assistant_json(m: &openclaw_chat::ParsedMessage) -> Value {
    let mut v = json!({"role": "assistant", "content": if m.content.is_empty() && !m.tool_calls.is_empty() { Value::Null } else { Value::String(m.content.clone()) }});
    if !m.reasoning_content.is_empty() {
        v["reasoning_content"] = json!(m.reasoning_content);
    }
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = Value::Array(
            m.tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect(),
        );
    }
    v
}

/// Records the finished turn (durably) and tells session tracking about the reply.
fn record<B: Backend>(
    app: &App<B>,
    k: &Turnkeeper,
    g: &openclaw_engine::Generation,
    parsed: &openclaw_chat::ParsedMessage,
) -> Result<(), ApiError>
where
    Model<B>: Send + Sync,
{
    let reply = parsed.to_chat_message();
    let closed = match app.sessions.lock() {
        Ok(mut t) => {
            t.on_response(&k.assignment, &k.request.messages, &reply, Instant::now());
            k.request
                .hints
                .done
                .then(|| t.close(&k.assignment.session_id, "done"))
                .flatten()
        }
        Err(_) => None,
    };
    // The session's end is recorded after its last turn, which it may leave open.
    let record_closed = |closed: Option<openclaw_collect::Closed>| match closed {
        Some(c) => app
            .recorder
            .closed(&c.session_id, c.reason, c.open_turn)
            .map_err(|e| ApiError::unavailable(format!("cannot record: {e:#}"))),
        None => Ok(()),
    };
    if !app.opts.record_turns {
        return record_closed(closed);
    }
    let prompt_messages: Vec<_> = k.request.messages.iter().map(to_abi).collect();
    let turn = Turn {
        session_id: k.assignment.session_id.as_str().into(),
        turn_index: k.assignment.turn_index,
        turn_type: k.assignment.turn_type,
        prompt_messages: prompt_messages.into(),
        tools_json: k
            .request
            .tools
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or_default()
            .into(),
        response: to_abi(&reply),
        prompt_ids: k.prompt_ids.clone().into(),
        response_ids: g.token_ids.clone().into(),
        response_logprobs: g.logprobs.clone().into(),
        weight_version: g.weight_version,
        next_state: None.into(),
        trainable: k.assignment.turn_type == TurnType::Main,
    };
    let recorded = app
        .recorder
        .turn(turn)
        .map_err(|e| ApiError::unavailable(format!("cannot record the turn: {e:#}")));
    // The session is closed in memory either way; its end is recorded even if the turn was not.
    let ended = record_closed(closed);
    recorded.and(ended)
}

/// One token as OpenAI's `logprobs.content` lists it: its text, logprob, UTF-8 bytes and the
/// most likely alternatives at its step.
fn token_logprob<B: Backend>(app: &App<B>, id: u32, logprob: f32, top: &[(u32, f32)]) -> Value
where
    Model<B>: Send + Sync,
{
    let entry = |id: u32, logprob: f32| {
        let text = app
            .engine
            .tokenizer
            .decode(&[id], false)
            .unwrap_or_default();
        json!({"token": text, "logprob": logprob, "bytes": text.as_bytes()})
    };
    let mut e = entry(id, logprob);
    e["top_logprobs"] = Value::Array(top.iter().map(|&(t, lp)| entry(t, lp)).collect());
    e
}

fn usage(k: &Turnkeeper, g: &openclaw_engine::Generation) -> Value {
    json!({"prompt_tokens": k.prompt_ids.len(), "completion_tokens": g.token_ids.len(), "total_tokens": k.prompt_ids.len() + g.token_ids.len()})
}

async fn collect<B: Backend>(
    app: Arc<App<B>>,
    k: Turnkeeper,
    mut rx: mpsc::UnboundedReceiver<GenEvent>,
    mut pipeline: TextPipeline,
    started: Instant,
) -> Result<Value, ApiError>
where
    Model<B>: Send + Sync,
{
    let mut first = true;
    let mut logprobs = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            GenEvent::Started { .. } => {}
            GenEvent::Token {
                id,
                logprob,
                stop,
                top,
            } => {
                if first {
                    app.metrics
                        .ttft_seconds
                        .observe(started.elapsed().as_secs_f64());
                    first = false;
                }
                if k.request.logprobs.is_some() {
                    logprobs.push(token_logprob(&app, id, logprob, &top));
                }
                pipeline.token(id, stop.as_ref());
            }
            GenEvent::Failed(e) => return Err(ApiError::invalid(e, Some("messages"))),
            GenEvent::Done(g) => {
                pipeline.finish();
                let m = pipeline.message().clone();
                record(&app, &k, &g, &m)?;
                let reply = assistant_json(&m);
                app.metrics
                    .request_seconds
                    .observe(started.elapsed().as_secs_f64());
                return Ok(json!({
                    "id": k.id,
                    "object": "chat.completion",
                    "created": k.created,
                    "model": app.opts.served_model_name,
                    "choices": [{"index": 0, "message": reply, "finish_reason": finish_reason(&g, !m.tool_calls.is_empty()), "logprobs": k.request.logprobs.map(|_| json!({"content": logprobs}))}],
                    "usage": usage(&k, &g),
                    "session_id": k.assignment.session_id,
                    "weight_version": g.weight_version,
                }));
            }
        }
    }
    Err(ApiError::internal("generation stopped before the end"))
}

fn chunk<B: Backend>(app: &App<B>, k: &Turnkeeper, delta: Value, finish: Option<&str>) -> Event {
    chunk_with(app, k, delta, finish, Vec::new())
}

/// A chunk carrying the logprobs of the tokens its text came from (when the request asked).
fn chunk_with<B: Backend>(
    app: &App<B>,
    k: &Turnkeeper,
    delta: Value,
    finish: Option<&str>,
    logprobs: Vec<Value>,
) -> Event {
    let logprobs = match k.request.logprobs {
        Some(_) if !logprobs.is_empty() => json!({"content": logprobs}),
        _ => Value::Null,
    };
    let body = json!({
        "id": k.id,
        "object": "chat.completion.chunk",
        "created": k.created,
        "model": app.opts.served_model_name,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": logprobs}],
    });
    Event::default().data(body.to_string())
}

async fn stream_task<B: Backend>(
    app: Arc<App<B>>,
    k: Turnkeeper,
    mut rx: mpsc::UnboundedReceiver<GenEvent>,
    mut pipeline: TextPipeline,
    tx: mpsc::Sender<Result<Event, Infallible>>,
    started: Instant,
) where
    Model<B>: Send + Sync,
{
    let send = |e: Event| {
        let tx = tx.clone();
        async move { tx.send(Ok(e)).await.is_ok() }
    };
    let delta_events = |events: Vec<ParseEvent>| -> Vec<Value> {
        events
            .into_iter()
            .filter_map(|e| match e {
                ParseEvent::ContentDelta(t) if !t.is_empty() => Some(json!({"content": t})),
                ParseEvent::ReasoningDelta(t) if !t.is_empty() => Some(json!({"reasoning_content": t})),
                ParseEvent::ToolCall(c) => Some(json!({"tool_calls": [{"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}]})),
                _ => None,
            })
            .collect()
    };
    let mut open = send(chunk(
        &app,
        &k,
        json!({"role": "assistant", "content": ""}),
        None,
    ))
    .await;
    let mut first = true;
    // Logprobs of tokens whose text is not out yet (held back by the decoder or the stop
    // hold): they go with the next chunk.
    let mut pending = Vec::new();
    while let Some(ev) = rx.recv().await {
        match ev {
            GenEvent::Started { .. } => {}
            GenEvent::Token {
                id,
                logprob,
                stop,
                top,
            } => {
                if first {
                    app.metrics
                        .ttft_seconds
                        .observe(started.elapsed().as_secs_f64());
                    first = false;
                }
                if k.request.logprobs.is_some() {
                    pending.push(token_logprob(&app, id, logprob, &top));
                }
                for d in delta_events(pipeline.token(id, stop.as_ref())) {
                    let lp = std::mem::take(&mut pending);
                    open = open && send(chunk_with(&app, &k, d, None, lp)).await;
                }
                if !open {
                    break; // the client went away: dropping `rx` stops its generation
                }
            }
            GenEvent::Failed(e) => {
                let err = ApiError::internal(e);
                let _ = send(Event::default().data(err.body().to_string())).await;
                break;
            }
            GenEvent::Done(g) => {
                for d in delta_events(pipeline.finish()) {
                    let lp = std::mem::take(&mut pending);
                    open = open && send(chunk_with(&app, &k, d, None, lp)).await;
                }
                let m = pipeline.message().clone();
                // Durable before the client sees the end of the turn.
                if let Err(e) = record(&app, &k, &g, &m) {
                    let _ = send(Event::default().data(e.body().to_string())).await;
                    break;
                }
                let finish = finish_reason(&g, !m.tool_calls.is_empty());
                let lp = std::mem::take(&mut pending);
                let _ = send(chunk_with(&app, &k, json!({}), Some(finish), lp)).await;
                if k.request.include_usage {
                    let body = json!({"id": k.id, "object": "chat.completion.chunk", "created": k.created, "model": app.opts.served_model_name, "choices": [], "usage": usage(&k, &g)});
                    let _ = send(Event::default().data(body.to_string())).await;
                }
                let _ = send(Event::default().data("[DONE]")).await;
                app.metrics
                    .request_seconds
                    .observe(started.elapsed().as_secs_f64());
                break;
            }
        }
    }
}

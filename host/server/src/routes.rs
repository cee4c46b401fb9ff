//! The routes: `/v1/chat/completions` (true token streaming, tools), `/v1/completions` (legacy
//! completions, [`crate::completions`]), `/v1/models` and `/v1/models/{id}`, `/healthz`,
//! `/metrics` and the live dashboard, with the key and admission as layers in front of them.

use crate::admission::{self, InFlight};
use crate::answer::{self, Turnkeeper};
use crate::protocol::{self, ApiError};
use crate::text::TextPipeline;
use crate::App;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use burn::prelude::Backend;
use openclaw_buffer::messages::content_of;
use openclaw_chat::{OutputParser, ParserOptions, RenderOptions};
use openclaw_engine::{GenerateRequest, Model, SamplingParams};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// The router.
pub fn router<B: Backend>(app: Arc<App<B>>) -> Router
where
    Model<B>: Send + Sync,
{
    // Layers run outermost first: the key, then admission, then the handler.
    let generate = Router::new()
        .route("/v1/chat/completions", post(chat::<B>))
        .route(
            admission::COMPLETIONS,
            post(crate::completions::completions::<B>),
        )
        .route_layer(from_fn_with_state(app.clone(), admission::admit::<B>));
    let v1 = Router::new()
        .merge(generate)
        .route("/v1/models", get(models::<B>))
        // A wildcard, so an id with a slash (`Qwen/Qwen3-0.6B`, as vLLM serves one) is found.
        .route("/v1/models/{*id}", get(model::<B>))
        .route("/v1/feedback", post(crate::feedback::feedback::<B>))
        // AReaL's online-mode names.
        .route("/rl/set_reward", post(crate::feedback::feedback::<B>))
        .route("/rl/start_session", post(crate::session_keys::start::<B>))
        .route("/rl/end_session", post(crate::session_keys::end::<B>))
        .route("/admin/users", post(crate::user_keys::issue::<B>))
        .route(
            "/admin/users/{user}",
            axum::routing::delete(crate::user_keys::revoke::<B>),
        )
        .route_layer(from_fn_with_state(app.clone(), admission::authorize::<B>));
    // The live dashboard, behind the API's key (an empty key is none).
    let dashboard = crate::dashboard::router(
        app.metrics.clone(),
        Some(Arc::from(app.opts.api_key.as_str())),
    );
    Router::new()
        .merge(v1)
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
        // The chat and completions handlers read the body themselves, after the key and
        // admission, with their own limit (so the answer is OpenAI-shaped); no extractor reads
        // one before them.
        .layer(DefaultBodyLimit::disable())
        .with_state(app)
        .merge(dashboard)
        .layer(axum::middleware::from_fn(access_log))
}

/// Marks a chat answer that writes its own log line when it ends, with its tokens.
#[derive(Clone, Copy)]
pub(crate) struct LogsItself;

/// One line per request at info level: method, path, status and time; never the body or the
/// key. A chat answer logs its own line when it ends (see [`LogsItself`]).
async fn access_log(request: Request, next: axum::middleware::Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    if response.extensions().get::<LogsItself>().is_none() {
        tracing::info!(
            target: crate::ACCESS_LOG,
            "{method} {path} {} {:.1} ms",
            response.status().as_u16(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    response
}

/// Seconds since the epoch, as OpenAI's `created`.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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
    let reason = if let Some((since, why)) = app.turns.recorder.log().unwritable() {
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

/// The served model as OpenAI's model object, with vLLM's `max_model_len`.
fn model_object<B: Backend>(app: &App<B>) -> Value
where
    Model<B>: Send + Sync,
{
    json!({
        "id": app.opts.served_model_name,
        "object": "model",
        "created": now(),
        "owned_by": "openclaw-host",
        "max_model_len": app.engine.context(),
    })
}

/// An adapter served over the model as vLLM lists one: its id, the directory it came from
/// (`root`) and the served model it adapts (`parent`).
fn adapter_object<B: Backend>(app: &App<B>, name: &str, dir: &str) -> Value
where
    Model<B>: Send + Sync,
{
    json!({
        "id": name,
        "object": "model",
        "created": now(),
        "owned_by": "openclaw-host",
        "root": dir,
        "parent": app.opts.served_model_name,
        "max_model_len": app.engine.context(),
    })
}

async fn models<B: Backend>(State(app): State<Arc<App<B>>>) -> Response
where
    Model<B>: Send + Sync,
{
    let mut data = vec![model_object(&app)];
    data.extend(
        app.opts
            .adapters
            .iter()
            .map(|(name, dir)| adapter_object(&app, name, dir)),
    );
    Json(json!({"object": "list", "data": data})).into_response()
}

/// `GET /v1/models/{id}`: the served model's object when `id` is its id or an alias (answered
/// with the served id, the one to use), OpenAI's 404 `model_not_found` otherwise.
async fn model<B: Backend>(State(app): State<Arc<App<B>>>, Path(id): Path<String>) -> Response
where
    Model<B>: Send + Sync,
{
    if app.opts.serves(&id) {
        return Json(model_object(&app)).into_response();
    }
    match app.opts.adapters.iter().find(|(name, _)| *name == id) {
        Some((name, dir)) => Json(adapter_object(&app, name, dir)).into_response(),
        None => ApiError::model_not_found(&id).into_response(),
    }
}

async fn chat<B: Backend>(State(app): State<Arc<App<B>>>, request: Request) -> Response
where
    Model<B>: Send + Sync,
{
    let started = Instant::now();
    match chat_inner(app.clone(), request, started).await {
        Ok(r) => r,
        Err(e) => {
            admission::count(&app.metrics, e.status);
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

/// The engine request for a prompt that fits the context (the caller checked): its completion
/// budget checked against the room the prompt leaves (vLLM's 400 when it cannot fit), and the
/// server's defaults for what the request leaves out. Chat and completions both build theirs
/// here.
pub(crate) fn generation_request<B: Backend>(
    app: &App<B>,
    prompt: Vec<u32>,
    asked: &protocol::Sampling,
) -> Result<GenerateRequest, ApiError>
where
    Model<B>: Send + Sync,
{
    let context = app.engine.context();
    let room = context.saturating_sub(prompt.len()) as u32;
    if let Some(wanted) = asked.max_tokens.filter(|&m| m > room) {
        // vLLM's answer to a completion budget the context cannot hold (its words for both
        // endpoints).
        return Err(ApiError::invalid(
            format!(
                "This model's maximum context length is {context} tokens. However, you requested {} tokens ({} in the messages, {wanted} in the completion). Please reduce the length of the messages or completion.",
                prompt.len() + wanted as usize,
                prompt.len()
            ),
            Some("max_tokens"),
        )
        .with_code("context_length_exceeded"));
    }
    let max_tokens = asked
        .max_tokens
        .unwrap_or(app.opts.default_max_tokens)
        .min(room)
        .max(1);
    let sampling = SamplingParams {
        temperature: asked.temperature.unwrap_or(app.opts.default_temperature),
        top_k: asked.top_k.unwrap_or(0) as usize,
        top_p: asked.top_p.unwrap_or(1.0),
    };
    let seed = asked.seed.unwrap_or_else(rand::random);
    Ok(app.engine.request(
        prompt,
        sampling,
        max_tokens as usize,
        asked.stop.clone(),
        seed,
    ))
}

/// The constraint a reply of `shape` is decoded under, compiled off the async threads (the
/// model's grammar tables are built on first use); a schema that cannot be followed is a 400
/// naming the parameter that asked for it.
async fn grammar<B: Backend>(
    app: &Arc<App<B>>,
    shape: protocol::Shape,
) -> Result<Arc<dyn openclaw_engine::generate::ConstraintFactory>, ApiError>
where
    Model<B>: Send + Sync,
{
    let engine = app.engine.clone();
    let param = match shape {
        protocol::Shape::ToolCalls { .. } => "tool_choice",
        _ => "response_format",
    };
    tokio::task::spawn_blocking(move || {
        let grammars = engine.grammars().map_err(|e| {
            ApiError::invalid(
                format!("Structured outputs are not available for this model: {e}"),
                Some(param),
            )
        })?;
        grammars.compile(&shape).map_err(|e| {
            ApiError::invalid(format!("`{param}` cannot be followed: {e:#}"), Some(param))
        })
    })
    .await
    .map_err(|e| ApiError::internal(format!("grammar compilation stopped: {e}")))?
}

/// The user a request is for with `--adapters per-user`: its key's (a user key), else the
/// `X-User-Id` header, else the body's `user`; its adapter answers. A user key's request may
/// not name another user.
fn user_of(
    headers: &axum::http::HeaderMap,
    user: Option<&str>,
    key: Option<&crate::user_keys::UserKey>,
) -> Result<Arc<str>, ApiError> {
    let header = headers.get("x-user-id").and_then(|v| v.to_str().ok());
    if let Some(crate::user_keys::UserKey(owner)) = key {
        if let Some(other) = [header, user].into_iter().flatten().find(|u| u != owner) {
            return Err(ApiError::invalid(
                format!("This key is user `{owner}`'s, but the request names user `{other}`."),
                Some("user"),
            ));
        }
        return Ok(owner.as_str().into());
    }
    let Some(user) = header.or(user) else {
        return Err(ApiError::invalid(
            "This server answers each user with their own adapter (--adapters per-user): name \
             the user with `user` or the X-User-Id header.",
            Some("user"),
        ));
    };
    if !openclaw_engine::adapters::valid_name(user) {
        return Err(ApiError::invalid(
            format!(
                "The user `{user}` cannot name an adapter: 1-64 letters, digits, `.`, `_` or `-`, \
                 starting with a letter or digit."
            ),
            Some("user"),
        ));
    }
    Ok(user.into())
}

/// Queues a request on the generation thread; a full queue is a 429.
pub(crate) fn submit<B: Backend>(
    app: &App<B>,
    request: GenerateRequest,
) -> Result<mpsc::UnboundedReceiver<openclaw_policy::GenEvent>, ApiError>
where
    Model<B>: Send + Sync,
{
    app.engine
        .scheduler
        .submit(request)
        .map_err(|_| ApiError::busy("The server is at capacity; retry shortly."))
}

async fn chat_inner<B: Backend>(
    app: Arc<App<B>>,
    mut request: Request,
    started: Instant,
) -> Result<Response, ApiError>
where
    Model<B>: Send + Sync,
{
    let admitted = admission::take_admitted(&mut request)
        .ok_or_else(|| ApiError::internal("the chat route runs behind admission"))?;
    let (parts, body) = request.into_parts();
    let body = admission::read_body(&app, &parts.headers, body).await?;
    let mut request = protocol::parse(&body, &parts.headers)?;
    drop(body);
    if let Some(crate::session_keys::SessionKey(s)) = parts.extensions.get() {
        match &request.hints.session_id {
            Some(named) if named != s => {
                return Err(ApiError::invalid(
                    format!(
                        "This key is session `{s}`'s, but the request names session `{named}`."
                    ),
                    Some("session_id"),
                ))
            }
            _ => request.hints.session_id = Some(s.clone()),
        }
    }
    let context = app.engine.context();
    let answered_as = app.opts.adapter_for(request.model.as_deref())?;
    let adapter = match app.opts.per_user {
        true => Some(user_of(
            &parts.headers,
            request.user.as_deref(),
            parts.extensions.get::<crate::user_keys::UserKey>(),
        )?),
        false => answered_as.clone(),
    };
    if app.opts.per_user {
        // A user's requests continue only that user's sessions.
        request.hints.scope = adapter.as_deref().map(str::to_string);
        // So do the ids their clients choose; an id a session key names was issued by this
        // server, unique already.
        let issued = parts
            .extensions
            .get::<crate::session_keys::SessionKey>()
            .is_some();
        if let (Some(id), Some(user), false) = (&request.hints.session_id, &adapter, issued) {
            request.hints.session_id = Some(openclaw_collect::user_session_id(user, id));
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
    let mut gen_request = generation_request(&app, prompt.ids.clone(), &request.sampling)?;
    gen_request.top_logprobs = request.logprobs.unwrap_or(0);
    gen_request.adapter = adapter.clone();
    if let Some(shape) = request.shape.clone() {
        gen_request.constraint = Some(grammar(&app, shape).await?);
    }

    // Each choice past the first holds a request slot of its own (`--max-inflight`).
    let n = request.n;
    if n as usize > app.opts.max_inflight {
        return Err(ApiError::invalid(
            format!(
                "`n` asks for {n} choices, more than this server runs at once ({}, --max-inflight).",
                app.opts.max_inflight
            ),
            Some("n"),
        ));
    }
    let more = match n {
        1 => None,
        _ => Some(
            app.admission
                .clone()
                .try_acquire_many_owned(n - 1)
                .map_err(|_| {
                    ApiError::busy(&format!(
                "The server has no room for {n} choices now (--max-inflight); retry shortly."
            ))
                })?,
        ),
    };

    // The session and turns, and the previous turn's next state, recorded before generation.
    let assignment = app
        .turns
        .open_n(&request.hints, &request.messages, n)
        .map_err(ApiError::from)?;

    // Each choice samples its own stream: the request's seed, then the seeds after it. The
    // scheduler takes them all or none.
    let choices: Vec<GenerateRequest> = (0..n)
        .map(|i| {
            let mut r = gen_request.clone();
            r.seed = gen_request.seed.wrapping_add(u64::from(i));
            r
        })
        .collect();
    let rxs = app
        .engine
        .scheduler
        .submit_all(choices)
        .map_err(|_| ApiError::busy("The server is at capacity; retry shortly."))?;
    let mut runs = Vec::with_capacity(n as usize);
    for i in 0..n {
        let parser = OutputParser::new(ParserOptions {
            parse_tool_calls: request.tools.is_some(),
            ..ParserOptions::for_prompt(&prompt.text)
        });
        let pipeline = TextPipeline::new(
            app.engine.tokenizer.incremental_decoder(true),
            &request.sampling.stop,
            parser,
        );
        runs.push(answer::ChoiceRun::new(i, pipeline));
    }
    let in_flight = InFlight::new(&app.metrics);
    let keeper = Turnkeeper {
        _admitted: admitted,
        _in_flight: in_flight,
        _more: more,
        assignment,
        prompt_ids: prompt.ids,
        id: format!("chatcmpl-{:016x}", rand::random::<u64>()),
        created: now(),
        adapter,
        answered_as,
        request,
    };
    if keeper.request.stream {
        let (tx, out) = mpsc::channel::<Result<Event, Infallible>>(64);
        tokio::spawn(answer::stream(app.clone(), keeper, rxs, runs, tx, started));
        admission::count(&app.metrics, StatusCode::OK);
        let mut response = Sse::new(ReceiverStream::new(out))
            .keep_alive(KeepAlive::default())
            .into_response();
        response.extensions_mut().insert(LogsItself);
        Ok(response)
    } else {
        let r = answer::whole(app.clone(), keeper, rxs, runs, started).await?;
        admission::count(&app.metrics, StatusCode::OK);
        let mut response = Json(r).into_response();
        response.extensions_mut().insert(LogsItself);
        Ok(response)
    }
}

//! `/v1/completions`: legacy completions as vLLM serves them. The prompt is text (tokenized
//! with the tokenizer's special tokens, as vLLM does) or token ids (checked against the
//! vocabulary and the context), and the answer is the text that follows it, whole or streamed
//! as `text_completion` chunks ending with `data: [DONE]`.
//!
//! A completion goes through what a chat request does: the key, admission, the body under its
//! limit and deadline, the generation request ([`routes::generation_request`]) and each token
//! read the same way ([`Steps`]), through the same stop-string hold, as plain text (no
//! reasoning, no tool calls: [`TextPipeline::plain`]).
//!
//! A completion is not recorded as a turn. A turn is a step of a session, judged when the
//! session's next state arrives and trained on as the reply to its messages; a completion has
//! no messages and no session to follow it, so nothing could judge it. It is counted in the
//! metrics and logged like any request, and its tokens are not written to the buffer.

use crate::admission::{self, Admitted, InFlight};
use crate::answer::{Step, Steps};
use crate::protocol::{self, ApiError, CompletionPrompt, CompletionRequest};
use crate::routes::{self, now, LogsItself};
use crate::text::TextPipeline;
use crate::App;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use burn::prelude::Backend;
use openclaw_chat::ParseEvent;
use openclaw_engine::{Generation, Model};
use openclaw_policy::GenEvent;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// The endpoint's name in the request counter.
const ENDPOINT: &str = "completions";

/// `POST /v1/completions`.
pub(crate) async fn completions<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response
where
    Model<B>: Send + Sync,
{
    let started = Instant::now();
    match completions_inner(app.clone(), request, started).await {
        Ok(r) => r,
        Err(e) => {
            admission::count_endpoint(&app.metrics, ENDPOINT, e.status);
            e.into_response()
        }
    }
}

/// Everything a completion carries to the end of its generation.
struct Completion {
    /// Its slots, given back when the answer ends (or the client goes away).
    _admitted: Admitted,
    /// Its place in the in-flight gauge, likewise.
    _in_flight: InFlight,
    id: String,
    created: u64,
    prompt_tokens: usize,
    stream: bool,
    include_usage: bool,
}

async fn completions_inner<B: Backend>(
    app: Arc<App<B>>,
    mut request: Request,
    started: Instant,
) -> Result<Response, ApiError>
where
    Model<B>: Send + Sync,
{
    let admitted = admission::take_admitted(&mut request)
        .ok_or_else(|| ApiError::internal("the completions route runs behind admission"))?;
    let (parts, body) = request.into_parts();
    let body = admission::read_body(&app, &parts.headers, body).await?;
    let request: CompletionRequest = protocol::parse_completion(&body)?;
    drop(body);
    app.opts.check_model(request.model.as_deref())?;
    let context = app.engine.context();
    let ids = prompt_ids(&app, request.prompt).await?;
    if ids.is_empty() {
        // The engine needs a token to start from; vLLM refuses an empty prompt too.
        return Err(ApiError::invalid(
            "The prompt is empty: a completion needs at least one prompt token.",
            Some("prompt"),
        ));
    }
    if ids.len() >= context {
        return Err(prompt_too_long(context, ids.len()));
    }
    let prompt_tokens = ids.len();
    let gen_request = routes::generation_request(&app, ids, &request.sampling)?;
    let rx = routes::submit(&app, gen_request)?;
    let pipeline = TextPipeline::plain(
        app.engine.tokenizer.incremental_decoder(true),
        &request.sampling.stop,
    );
    let c = Completion {
        _admitted: admitted,
        _in_flight: InFlight::new(&app.metrics),
        id: format!("cmpl-{:016x}", rand::random::<u64>()),
        created: now(),
        prompt_tokens,
        stream: request.stream,
        include_usage: request.include_usage,
    };
    let mut response = if c.stream {
        let (tx, out) = mpsc::channel::<Result<Event, Infallible>>(64);
        tokio::spawn(stream(app.clone(), c, rx, pipeline, tx, started));
        Sse::new(ReceiverStream::new(out))
            .keep_alive(KeepAlive::default())
            .into_response()
    } else {
        Json(whole(&app, &c, rx, pipeline, started).await?).into_response()
    };
    admission::count_endpoint(&app.metrics, ENDPOINT, StatusCode::OK);
    response.extensions_mut().insert(LogsItself);
    Ok(response)
}

/// The prompt's token ids: text tokenized off the async threads (a prompt whose size alone
/// proves it cannot fit is refused first, as chat does), ids checked against the vocabulary.
async fn prompt_ids<B: Backend>(
    app: &App<B>,
    prompt: CompletionPrompt,
) -> Result<Vec<u32>, ApiError>
where
    Model<B>: Send + Sync,
{
    match prompt {
        CompletionPrompt::Ids(ids) => {
            // The engine refuses such an id too, but as a failed generation; this names it.
            let vocab = app.engine.config.vocab_size;
            match ids.iter().position(|&id| id as usize >= vocab) {
                None => Ok(ids),
                Some(i) => Err(ApiError::invalid(
                    format!(
                        "Token id {} (position {i} of `prompt`) is out of vocabulary: this model's token ids go from 0 to {}.",
                        ids[i],
                        vocab.saturating_sub(1)
                    ),
                    Some("prompt"),
                )),
            }
        }
        CompletionPrompt::Text(text) => {
            let engine = app.engine.clone();
            let context = engine.context();
            tokio::task::spawn_blocking(move || {
                if let Some(at_least) = engine.tokens_at_least(text.len()) {
                    if at_least >= context {
                        return Err(prompt_too_long(context, at_least));
                    }
                }
                // Special tokens as the tokenizer adds them (a BOS for Llama's), as vLLM
                // tokenizes a completion's prompt: no chat template writes them here.
                engine
                    .tokenizer
                    .encode(&text, true)
                    .map_err(|e| ApiError::invalid(format!("{e:#}"), Some("prompt")))
            })
            .await
            .map_err(|e| ApiError::internal(format!("tokenizing the prompt stopped: {e}")))?
        }
    }
}

/// The prompt does not fit the model's context: chat's answer, naming `prompt`.
fn prompt_too_long(context: usize, tokens: usize) -> ApiError {
    ApiError::invalid(
        format!(
            "This model's maximum context length is {context} tokens. However, your prompt resulted in {tokens} tokens. Please reduce the length of the prompt."
        ),
        Some("prompt"),
    )
    .with_code("context_length_exceeded")
}

/// The text a step let out (a plain pipeline gives content only).
fn text_of(events: Vec<ParseEvent>) -> String {
    events
        .into_iter()
        .filter_map(|e| match e {
            ParseEvent::ContentDelta(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn usage(c: &Completion, g: &Generation) -> Value {
    json!({"prompt_tokens": c.prompt_tokens, "completion_tokens": g.token_ids.len(), "total_tokens": c.prompt_tokens + g.token_ids.len()})
}

/// The request's line in the request log (no content, no key): its outcome, time and tokens.
fn log_line(c: &Completion, started: Instant, outcome: &str, completion_tokens: Option<usize>) {
    tracing::info!(
        target: crate::ACCESS_LOG,
        "POST {} {outcome}{} {:.1} ms, {} prompt + {} completion tokens, not recorded",
        admission::COMPLETIONS,
        if c.stream { " stream" } else { "" },
        started.elapsed().as_secs_f64() * 1e3,
        c.prompt_tokens,
        completion_tokens.map_or("?".to_string(), |n| n.to_string()),
    );
}

/// Counts the request's time and writes its log line.
fn done<B: Backend>(app: &App<B>, c: &Completion, started: Instant, g: &Generation) {
    app.metrics
        .request_seconds
        .observe(started.elapsed().as_secs_f64());
    log_line(c, started, "200", Some(g.token_ids.len()));
}

/// The whole answer, as one JSON body.
async fn whole<B: Backend>(
    app: &App<B>,
    c: &Completion,
    mut rx: mpsc::UnboundedReceiver<GenEvent>,
    mut pipeline: TextPipeline,
    started: Instant,
) -> Result<Value, ApiError>
where
    Model<B>: Send + Sync,
{
    let mut steps = Steps::new(&app.metrics, started);
    while let Some(step) = steps.next(&mut rx, &mut pipeline, |_, _, _| {}).await {
        match step {
            Step::Text(_) => {}
            Step::Failed(e) => return Err(ApiError::invalid(e, Some("prompt"))),
            Step::Done(g) => {
                pipeline.finish();
                let text = pipeline.message().content.clone();
                done(app, c, started, &g);
                return Ok(json!({
                    "id": c.id,
                    "object": "text_completion",
                    "created": c.created,
                    "model": app.opts.served_model_name,
                    "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": g.finish_reason.as_str()}],
                    "usage": usage(c, &g),
                    "weight_version": g.weight_version,
                }));
            }
        }
    }
    Err(ApiError::internal("generation stopped before the end"))
}

/// One streamed chunk: a piece of the text, and the finish reason on the last.
fn chunk<B: Backend>(app: &App<B>, c: &Completion, text: &str, finish: Option<&str>) -> Event {
    let body = json!({
        "id": c.id,
        "object": "text_completion",
        "created": c.created,
        "model": app.opts.served_model_name,
        "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
    });
    Event::default().data(body.to_string())
}

/// The answer streamed as server-sent events, a chunk per token that lets text out.
async fn stream<B: Backend>(
    app: Arc<App<B>>,
    c: Completion,
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
    let mut steps = Steps::new(&app.metrics, started);
    while let Some(step) = steps.next(&mut rx, &mut pipeline, |_, _, _| {}).await {
        match step {
            Step::Text(events) => {
                let text = text_of(events);
                if !text.is_empty() && !send(chunk(&app, &c, &text, None)).await {
                    log_line(&c, started, "200 (client went away)", None);
                    break; // dropping `rx` stops its generation
                }
            }
            Step::Failed(e) => {
                log_line(&c, started, "200 (generation failed)", None);
                let err = ApiError::internal(e);
                let _ = send(Event::default().data(err.body().to_string())).await;
                break;
            }
            Step::Done(g) => {
                let text = text_of(pipeline.finish());
                if !text.is_empty() {
                    let _ = send(chunk(&app, &c, &text, None)).await;
                }
                let finish = g.finish_reason.as_str();
                let _ = send(chunk(&app, &c, "", Some(finish))).await;
                if c.include_usage {
                    let body = json!({"id": c.id, "object": "text_completion", "created": c.created, "model": app.opts.served_model_name, "choices": [], "usage": usage(&c, &g)});
                    let _ = send(Event::default().data(body.to_string())).await;
                }
                let _ = send(Event::default().data("[DONE]")).await;
                done(&app, &c, started, &g);
                break;
            }
        }
    }
}

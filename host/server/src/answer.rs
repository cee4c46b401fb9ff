//! The answer to a chat request, whole or streamed: the engine's tokens through the text
//! pipeline (detokenising, holding back what could begin a stop string, parsing reasoning and
//! tool calls), their logprobs when asked, and the turn recorded (durably) before the client
//! sees its end. Both forms take each token the same way ([`Tokens`]). A request for `n`
//! choices generates them side by side, each with its own pipeline, and records each as a turn
//! of its own; a stream interleaves their chunks, each tagged with its choice's index.

use crate::admission::{Admitted, InFlight};
use crate::protocol::{ApiError, ChatRequest};
use crate::text::TextPipeline;
use crate::App;
use axum::response::sse::Event;
use burn::prelude::Backend;
use openclaw_chat::{ParseEvent, ParsedMessage};
use openclaw_collect::{Answer, Assignment};
use openclaw_engine::{Generation, Model};
use openclaw_metrics::Metrics;
use openclaw_policy::GenEvent;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{StreamExt, StreamMap};

/// Everything a request carries to the end of its generation.
pub struct Turnkeeper {
    /// Its slots, given back when the answer ends (or the client goes away).
    pub(crate) _admitted: Admitted,
    /// Its place in the in-flight gauge, likewise.
    pub(crate) _in_flight: InFlight,
    /// The request slots its further choices hold (one a choice past the first).
    pub(crate) _more: Option<tokio::sync::OwnedSemaphorePermit>,
    pub(crate) request: ChatRequest,
    pub(crate) assignment: Assignment,
    pub(crate) prompt_ids: Vec<u32>,
    pub(crate) id: String,
    pub(crate) created: u64,
    /// The adapter answering it (`model` named one, or its user's), else none: the base.
    pub(crate) adapter: Option<Arc<str>>,
    /// The model id its answer names when not the served model's (`model` named an adapter).
    pub(crate) answered_as: Option<Arc<str>>,
}

impl Turnkeeper {
    /// The model id its answer names: the adapter's it asked for, or the served model's.
    fn model<'a>(&'a self, served: &'a str) -> &'a str {
        self.answered_as.as_deref().unwrap_or(served)
    }
}

/// One step of a generation, as every answer reads it (chat's here, legacy completions' in
/// [`crate::completions`]).
pub(crate) enum Step {
    /// What the pipeline let out of one token.
    Text(Vec<ParseEvent>),
    /// The generation failed.
    Failed(String),
    /// The generation ended.
    Done(Generation),
}

/// The engine's events for one request, read the same way by every answer: the time to the
/// first token observed once, each sampled token shown to the caller (for its logprob entry),
/// and its text through the pipeline.
pub(crate) struct Steps<'a> {
    metrics: &'a Metrics,
    started: Instant,
    first: bool,
}

impl<'a> Steps<'a> {
    /// The steps of a request that arrived at `started`.
    pub(crate) fn new(metrics: &'a Metrics, started: Instant) -> Self {
        Steps {
            metrics,
            started,
            first: true,
        }
    }

    /// Waits for the generation's next step: each token's text through the pipeline (`sampled`
    /// sees its id, logprob and alternatives first), its failure, or its end (`None`: it
    /// stopped without one).
    pub(crate) async fn next(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<GenEvent>,
        pipeline: &mut TextPipeline,
        mut sampled: impl FnMut(u32, f32, &[(u32, f32)]),
    ) -> Option<Step> {
        loop {
            let ev = rx.recv().await?;
            if let Some(step) = self.take(ev, pipeline, &mut sampled) {
                return Some(step);
            }
        }
    }

    /// One event of a generation as a step (`None`: nothing to show yet).
    pub(crate) fn take(
        &mut self,
        ev: GenEvent,
        pipeline: &mut TextPipeline,
        mut sampled: impl FnMut(u32, f32, &[(u32, f32)]),
    ) -> Option<Step> {
        match ev {
            GenEvent::Started { .. } => None,
            GenEvent::Token {
                id,
                logprob,
                stop,
                top,
            } => {
                if self.first {
                    self.metrics
                        .ttft_seconds
                        .observe(self.started.elapsed().as_secs_f64());
                    self.first = false;
                }
                sampled(id, logprob, &top[..]);
                Some(Step::Text(pipeline.token(id, stop.as_ref())))
            }
            GenEvent::Failed(e) => Some(Step::Failed(e)),
            GenEvent::Done(g) => Some(Step::Done(g)),
        }
    }
}

/// One choice of an answer as it is generated: its text pipeline and the logprob entries of
/// tokens whose text is not out yet.
pub struct ChoiceRun {
    index: u32,
    pipeline: TextPipeline,
    logprobs: Vec<Value>,
}

impl ChoiceRun {
    /// Choice `index`, read through `pipeline`.
    pub fn new(index: u32, pipeline: TextPipeline) -> Self {
        ChoiceRun {
            index,
            pipeline,
            logprobs: Vec::new(),
        }
    }
}

/// What both chat answers do with each token: its step ([`Steps`]), its logprob entry when the
/// request asked for them, and the turn's record and log line at the end.
struct Tokens<'a, B: Backend> {
    app: &'a App<B>,
    k: &'a Turnkeeper,
    started: Instant,
    steps: Steps<'a>,
    /// Choices recorded so far.
    recorded: u32,
}

impl<'a, B: Backend> Tokens<'a, B>
where
    Model<B>: Send + Sync,
{
    fn new(app: &'a App<B>, k: &'a Turnkeeper, started: Instant) -> Self {
        Tokens {
            app,
            k,
            started,
            steps: Steps::new(&app.metrics, started),
            recorded: 0,
        }
    }

    /// Waits for a choice's next step (see [`Steps::next`]), keeping each token's logprob
    /// entry when the request asked for them.
    async fn next(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<GenEvent>,
        c: &mut ChoiceRun,
    ) -> Option<Step> {
        let (app, wanted) = (self.app, self.k.request.logprobs.is_some());
        let logprobs = &mut c.logprobs;
        self.steps
            .next(rx, &mut c.pipeline, |id, logprob, top| {
                if wanted {
                    logprobs.push(token_logprob(app, id, logprob, top));
                }
            })
            .await
    }

    /// One event of a choice's generation as a step (see [`Steps::take`]).
    fn take(&mut self, ev: GenEvent, c: &mut ChoiceRun) -> Option<Step> {
        let (app, wanted) = (self.app, self.k.request.logprobs.is_some());
        let logprobs = &mut c.logprobs;
        self.steps.take(ev, &mut c.pipeline, |id, logprob, top| {
            if wanted {
                logprobs.push(token_logprob(app, id, logprob, top));
            }
        })
    }

    /// Records a choice's turn: durable before the client sees its end. The last choice
    /// recorded ends the session when the request said so.
    fn record(
        &mut self,
        choice: u32,
        g: &Generation,
        parsed: &ParsedMessage,
    ) -> Result<(), ApiError> {
        let k = self.k;
        self.recorded += 1;
        let answer = Answer {
            messages: &k.request.messages,
            tools: k.request.tools.as_ref(),
            choice,
            done: k.request.hints.done && self.recorded == k.request.n,
            prompt_ids: &k.prompt_ids,
            reply: parsed.to_chat_message(),
            response_ids: &g.token_ids,
            response_logprobs: &g.logprobs,
            weight_version: g.weight_version,
            constraint: k.request.shape.as_ref().map(crate::protocol::Shape::kind),
            adapter: k.adapter.as_deref(),
            completion_id: &k.id,
        };
        self.app
            .turns
            .record(&k.assignment, answer)
            .map_err(ApiError::from)
    }

    /// Warns of a structured reply its grammar stopped.
    fn ended(&self, g: &Generation) {
        if let Some(openclaw_engine::StopMatch::Grammar(e)) = &g.stop {
            // The reply ends where its grammar could not go on: it does not complete it.
            tracing::warn!(
                id = self.k.id.as_str(),
                "a structured reply ended early, its grammar could not go on: {e}"
            );
        }
    }

    /// Counts the request's time and writes its log line.
    fn done(&self, completion_tokens: usize) {
        self.app
            .metrics
            .request_seconds
            .observe(self.started.elapsed().as_secs_f64());
        self.log_line("200", Some(completion_tokens));
    }

    /// The request's line in the request log (no content, no key): its outcome, time and
    /// tokens.
    fn log_line(&self, outcome: &str, completion_tokens: Option<usize>) {
        let k = self.k;
        tracing::info!(
            target: crate::ACCESS_LOG,
            "POST /v1/chat/completions {outcome}{} {:.1} ms, {} prompt + {} completion tokens, session {} turn {}",
            if k.request.stream { " stream" } else { "" },
            self.started.elapsed().as_secs_f64() * 1e3,
            k.prompt_ids.len(),
            completion_tokens.map_or("?".to_string(), |n| n.to_string()),
            k.assignment.session_id,
            match k.request.n {
                1 => k.assignment.turn_index.to_string(),
                n => format!("{}..={} ({n} choices)", k.assignment.turn_index, k.assignment.turn_index + n - 1),
            },
        );
    }
}

fn finish_reason(g: &Generation, tool_calls: bool) -> &'static str {
    if tool_calls {
        "tool_calls"
    } else {
        g.finish_reason.as_str()
    }
}

fn assistant_json(m: &ParsedMessage) -> Value {
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

/// Usage of the whole request: the prompt once, the completion tokens of every choice.
fn usage(k: &Turnkeeper, completion_tokens: usize) -> Value {
    json!({"prompt_tokens": k.prompt_ids.len(), "completion_tokens": completion_tokens, "total_tokens": k.prompt_ids.len() + completion_tokens})
}

/// The whole answer, as one JSON body: each choice read to its end (they generate side by
/// side meanwhile) and recorded in index order.
pub async fn whole<B: Backend>(
    app: Arc<App<B>>,
    k: Turnkeeper,
    rxs: Vec<mpsc::UnboundedReceiver<GenEvent>>,
    runs: Vec<ChoiceRun>,
    started: Instant,
) -> Result<Value, ApiError>
where
    Model<B>: Send + Sync,
{
    let mut tokens = Tokens::new(&app, &k, started);
    let mut choices = Vec::with_capacity(runs.len());
    let (mut completion_tokens, mut weight_version) = (0, None);
    for (mut rx, mut c) in rxs.into_iter().zip(runs) {
        let g = loop {
            match tokens.next(&mut rx, &mut c).await {
                Some(Step::Text(_)) => {}
                Some(Step::Failed(e)) => return Err(ApiError::invalid(e, Some("messages"))),
                Some(Step::Done(g)) => break g,
                None => return Err(ApiError::internal("generation stopped before the end")),
            }
        };
        c.pipeline.finish();
        let m = c.pipeline.message().clone();
        tokens.record(c.index, &g, &m)?;
        tokens.ended(&g);
        completion_tokens += g.token_ids.len();
        weight_version.get_or_insert(g.weight_version);
        let logprobs = std::mem::take(&mut c.logprobs);
        choices.push(json!({"index": c.index, "message": assistant_json(&m), "finish_reason": finish_reason(&g, !m.tool_calls.is_empty()), "logprobs": k.request.logprobs.map(|_| json!({"content": logprobs}))}));
    }
    tokens.done(completion_tokens);
    Ok(json!({
        "id": k.id,
        "object": "chat.completion",
        "created": k.created,
        "model": k.model(&app.opts.served_model_name),
        "choices": choices,
        "usage": usage(&k, completion_tokens),
        "session_id": k.assignment.session_id,
        "weight_version": weight_version,
    }))
}

/// A chunk carrying the logprobs of the tokens its text came from (when the request asked).
fn chunk<B: Backend>(
    app: &App<B>,
    k: &Turnkeeper,
    index: u32,
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
        "model": k.model(&app.opts.served_model_name),
        "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}],
    });
    Event::default().data(body.to_string())
}

/// The pipeline's events as streamed deltas.
fn deltas(events: Vec<ParseEvent>) -> Vec<Value> {
    events
        .into_iter()
        .filter_map(|e| match e {
            ParseEvent::ContentDelta(t) if !t.is_empty() => Some(json!({"content": t})),
            ParseEvent::ReasoningDelta(t) if !t.is_empty() => Some(json!({"reasoning_content": t})),
            ParseEvent::ToolCall(c) => Some(json!({"tool_calls": [{"index": c.index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}]})),
            _ => None,
        })
        .collect()
}

/// The answer streamed as server-sent events, token by token: a role chunk for each choice,
/// then their chunks as their tokens come (tagged with their index), each choice's finish
/// chunk once its turn is recorded, the usage chunk when asked, and `[DONE]` after the last.
pub async fn stream<B: Backend>(
    app: Arc<App<B>>,
    k: Turnkeeper,
    rxs: Vec<mpsc::UnboundedReceiver<GenEvent>>,
    mut runs: Vec<ChoiceRun>,
    tx: mpsc::Sender<Result<Event, Infallible>>,
    started: Instant,
) where
    Model<B>: Send + Sync,
{
    let send = |e: Event| {
        let tx = tx.clone();
        async move { tx.send(Ok(e)).await.is_ok() }
    };
    let mut open = true;
    for c in &runs {
        let role = json!({"role": "assistant", "content": ""});
        open = open && send(chunk(&app, &k, c.index, role, None, Vec::new())).await;
    }
    // Dropping the map (the client went away, a choice failed) drops every receiver, which
    // stops their generations.
    let mut events: StreamMap<usize, UnboundedReceiverStream<GenEvent>> = rxs
        .into_iter()
        .map(UnboundedReceiverStream::new)
        .enumerate()
        .collect();
    let mut tokens = Tokens::new(&app, &k, started);
    let (mut completion_tokens, mut finished) = (0, 0);
    while let Some((i, ev)) = events.next().await {
        let c = &mut runs[i];
        let Some(step) = tokens.take(ev, c) else {
            continue;
        };
        match step {
            Step::Text(events) => {
                for d in deltas(events) {
                    let lp = std::mem::take(&mut c.logprobs);
                    open = open && send(chunk(&app, &k, c.index, d, None, lp)).await;
                }
                if !open {
                    tokens.log_line("200 (client went away)", None);
                    break;
                }
            }
            Step::Failed(e) => {
                tokens.log_line("200 (generation failed)", None);
                let err = ApiError::internal(e);
                let _ = send(Event::default().data(err.body().to_string())).await;
                break;
            }
            Step::Done(g) => {
                for d in deltas(c.pipeline.finish()) {
                    let lp = std::mem::take(&mut c.logprobs);
                    open = open && send(chunk(&app, &k, c.index, d, None, lp)).await;
                }
                let m = c.pipeline.message().clone();
                if let Err(e) = tokens.record(c.index, &g, &m) {
                    tokens.log_line("200 (not recorded)", Some(g.token_ids.len()));
                    let _ = send(Event::default().data(e.body().to_string())).await;
                    break;
                }
                tokens.ended(&g);
                completion_tokens += g.token_ids.len();
                let finish = finish_reason(&g, !m.tool_calls.is_empty());
                let lp = std::mem::take(&mut c.logprobs);
                let _ = send(chunk(&app, &k, c.index, json!({}), Some(finish), lp)).await;
                finished += 1;
                if finished < runs.len() {
                    continue;
                }
                if k.request.include_usage {
                    let body = json!({"id": k.id, "object": "chat.completion.chunk", "created": k.created, "model": k.model(&app.opts.served_model_name), "choices": [], "usage": usage(&k, completion_tokens)});
                    let _ = send(Event::default().data(body.to_string())).await;
                }
                let _ = send(Event::default().data("[DONE]")).await;
                tokens.done(completion_tokens);
                break;
            }
        }
    }
}

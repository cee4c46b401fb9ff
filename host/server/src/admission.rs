//! Who is let in, and how many at once: the key, each client's share of the request slots and
//! their total (all checked before a byte of the body is read, so refusing costs nothing), and
//! the body itself under its size limit, its deadline and the server's stop.

use crate::protocol::ApiError;
use crate::App;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use burn::prelude::Backend;
use openclaw_metrics::Metrics;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// The chat route's path: its refusals are counted as chat requests.
const CHAT: &str = "/v1/chat/completions";

/// The legacy completions route's path: its refusals are counted as completions.
pub const COMPLETIONS: &str = "/v1/completions";

/// Counts a chat request's answer by status.
pub fn count(metrics: &Metrics, status: StatusCode) {
    count_endpoint(metrics, "chat", status);
}

/// Counts an answer of `endpoint` (`chat`, `completions`) by status.
pub fn count_endpoint(metrics: &Metrics, endpoint: &str, status: StatusCode) {
    metrics
        .requests
        .get_or_create(&vec![
            ("endpoint".to_string(), endpoint.to_string()),
            ("status".to_string(), status.as_u16().to_string()),
        ])
        .inc();
}

/// A refusal as the answer, counted when it is a generation request's.
fn refuse(metrics: &Metrics, path: &str, e: ApiError) -> Response {
    match path {
        CHAT => count(metrics, e.status),
        COMPLETIONS => count_endpoint(metrics, "completions", e.status),
        _ => {}
    }
    e.into_response()
}

/// The layer over the `/v1` routes: the bearer key, when one is asked.
pub async fn authorize<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
    next: Next,
) -> Response {
    let given = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    // A key `/rl/start_session` issued: its requests are that session's; one `/admin/users`
    // issued: its requests are that user's.
    let key = given.and_then(openclaw_config::access::bearer);
    let session = key.and_then(|k| app.session_keys.session_of(k));
    let user = match session {
        Some(_) => None,
        None => key.and_then(|k| app.user_keys.user_of(k)),
    };
    if session.is_some() || user.is_some() {
        let mut request = request;
        if let Some(s) = session {
            request
                .extensions_mut()
                .insert(crate::session_keys::SessionKey(s));
        } else if let Some(u) = user {
            request
                .extensions_mut()
                .insert(crate::user_keys::UserKey(u));
        }
        return next.run(request).await;
    }
    match openclaw_config::access::refusal(given, &app.opts.api_key) {
        None => next.run(request).await,
        Some(why) => refuse(
            &app.metrics,
            request.uri().path(),
            ApiError::unauthorized(why),
        ),
    }
}

/// An admitted request's slots: its client's share and one of the total, given back when the
/// answer ends (or the client goes away), wherever the request is by then.
pub struct Admitted {
    _total: tokio::sync::OwnedSemaphorePermit,
    _client: ClientSlot,
}

/// The layer over the chat and completions routes: a slot of the client's share (`--max-inflight-per-client`),
/// then one of the total (`--max-inflight`), handed to the handler in the request's
/// extensions so the answer holds them to its end.
pub async fn admit<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    let cap = app.opts.max_inflight_per_client;
    let Some(client_slot) = ClientSlot::take(&app.per_client, client.ip(), cap) else {
        let why = format!(
            "This client has {cap} requests in flight (--max-inflight-per-client); retry shortly."
        );
        return refuse(&app.metrics, &path, ApiError::busy(&why));
    };
    let Ok(total) = app.admission.clone().try_acquire_owned() else {
        let why = "The server is at capacity (--max-inflight); retry shortly.";
        return refuse(&app.metrics, &path, ApiError::busy(why));
    };
    request
        .extensions_mut()
        .insert(Arc::new(Mutex::new(Some(Admitted {
            _total: total,
            _client: client_slot,
        }))));
    next.run(request).await
}

/// The admission [`admit`] put in a request's extensions, taken out by the handler.
pub fn take_admitted(request: &mut Request) -> Option<Admitted> {
    request
        .extensions_mut()
        .remove::<Arc<Mutex<Option<Admitted>>>>()
        .and_then(|a| a.lock().unwrap_or_else(|p| p.into_inner()).take())
}

/// One admitted request's share of its client's slots, given back when dropped.
struct ClientSlot {
    table: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl ClientSlot {
    /// A slot for `ip`, or `None` when it holds `cap` already.
    fn take(table: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, cap: usize) -> Option<Self> {
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

/// The in-flight gauge's share of one request, given back however the request ends (a client
/// that hangs up drops the handler before its last line).
pub struct InFlight(Arc<Metrics>);

impl InFlight {
    /// Counts one more request in flight.
    pub fn new(metrics: &Arc<Metrics>) -> Self {
        metrics.inflight_requests.inc();
        InFlight(metrics.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.inflight_requests.dec();
    }
}

/// The body of an admitted request: refused at once when its declared length is over the
/// limit, read with the limit and the deadline (`--request-body-timeout`, then 408), and
/// answered 503 when the server stops meanwhile.
pub async fn read_body<B: Backend>(
    app: &App<B>,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<axum::body::Bytes, ApiError> {
    let limit = app.opts.max_body_bytes;
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
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
    Ok(body)
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

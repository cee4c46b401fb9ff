//! Per-session keys, as AReaL's online mode issues them: `POST /rl/start_session` with the
//! server's key returns a key of its own, and every request made with that key is a turn of
//! one session (no header or history matching needed); `POST /rl/end_session` ends it and
//! revokes the key; `POST /rl/set_reward` is `/v1/feedback`, and with a session key it may
//! leave out the turn: the session's latest.

use crate::error::ApiError;
use crate::App;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use burn::prelude::Backend;
use openclaw_engine::Model;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The most session keys live at once; past it, keys unused for [`IDLE_KEY`] are dropped to
/// make room, and starting a session is refused while none is.
pub const MAX_SESSION_KEYS: usize = 10_000;

/// How long a key may go unused before it may be dropped to make room for a new one.
pub const IDLE_KEY: std::time::Duration = std::time::Duration::from_secs(3600);

/// The session a request's key belongs to (set by the key layer, read by the handlers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionKey(pub String);

/// The live session keys: key to (session, last use).
#[derive(Debug, Default)]
pub struct SessionKeys {
    keys: Mutex<HashMap<String, (String, Instant)>>,
}

/// Why a key was not issued.
enum NoKey {
    Exists,
    Full,
}

impl SessionKeys {
    /// The session of `key`, if it is a live session key (its use is noted).
    pub fn session_of(&self, key: &str) -> Option<String> {
        let mut keys = self.keys.lock().ok()?;
        let (session, used) = keys.get_mut(key)?;
        *used = Instant::now();
        Some(session.clone())
    }

    /// A new key for `session`, which must have none.
    fn issue(&self, session: &str) -> Result<String, NoKey> {
        let mut keys = self.keys.lock().map_err(|_| NoKey::Full)?;
        if keys.values().any(|(s, _)| s == session) {
            return Err(NoKey::Exists);
        }
        if keys.len() >= MAX_SESSION_KEYS {
            keys.retain(|_, (_, used)| used.elapsed() < IDLE_KEY);
            if keys.len() >= MAX_SESSION_KEYS {
                return Err(NoKey::Full);
            }
        }
        let key = format!(
            "oc-sess-{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        keys.insert(key.clone(), (session.to_string(), Instant::now()));
        Ok(key)
    }

    /// Revokes every key of `session`; returns whether there was one.
    fn revoke(&self, session: &str) -> bool {
        let Ok(mut keys) = self.keys.lock() else {
            return false;
        };
        let before = keys.len();
        keys.retain(|_, (s, _)| s != session);
        keys.len() != before
    }
}

/// A body that may be empty, as an object.
async fn object<B: Backend>(
    app: &App<B>,
    request: Request,
) -> Result<(Option<SessionKey>, serde_json::Map<String, Value>), ApiError>
where
    Model<B>: Send + Sync,
{
    let (parts, body) = request.into_parts();
    let key = parts.extensions.get::<SessionKey>().cloned();
    let body = crate::admission::read_body(app, &parts.headers, body).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok((key, Default::default()));
    }
    Ok((key, crate::protocol::read_object(&body)?))
}

fn forbidden(message: &str) -> ApiError {
    ApiError {
        status: StatusCode::FORBIDDEN,
        message: message.into(),
        kind: "invalid_request_error",
        param: None,
        code: Some("session_key_not_allowed"),
    }
}

/// `POST /rl/start_session`: with the server's key (a session key may not), a new session and
/// its key. The body may name the session (`session_id`); otherwise one is made up.
pub async fn start<B: Backend>(State(app): State<Arc<App<B>>>, request: Request) -> Response
where
    Model<B>: Send + Sync,
{
    let r = async {
        if request.extensions().get::<crate::user_keys::UserKey>().is_some() {
            return Err(forbidden("A user key cannot start sessions; use the server's key."));
        }
        let (key, mut o) = object(&app, request).await?;
        if key.is_some() {
            return Err(forbidden("A session key cannot start sessions; use the server's key."));
        }
        let session = match o.remove("session_id") {
            None | Some(Value::Null) => format!("sess-{:016x}", rand::random::<u64>()),
            Some(Value::String(s)) if openclaw_collect::valid_session_id(&s) => s,
            Some(other) => {
                return Err(ApiError::invalid(
                    format!("`session_id` must be 1-256 characters of letters, digits and -_.:@+= with no `..`, got {other}."),
                    Some("session_id"),
                ))
            }
        };
        if let Some(k) = o.keys().next() {
            return Err(ApiError::invalid(format!("Unrecognized request argument supplied: {k}"), Some(k)));
        }
        let api_key = match app.session_keys.issue(&session) {
            Ok(k) => k,
            Err(NoKey::Exists) => {
                return Err(ApiError::invalid(
                    format!("Session `{session}` already has a key."),
                    Some("session_id"),
                )
                .with_code("session_exists"))
            }
            Err(NoKey::Full) => {
                return Err(ApiError::busy(&format!(
                    "{MAX_SESSION_KEYS} sessions have keys in use; end some first (POST /rl/end_session)."
                )))
            }
        };
        Ok(Json(json!({"session_id": session, "api_key": api_key})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

/// `POST /rl/end_session`: ends the session of the key used (or, with the server's key, the
/// body's `session_id`), records its end and revokes its key.
pub async fn end<B: Backend>(State(app): State<Arc<App<B>>>, request: Request) -> Response
where
    Model<B>: Send + Sync,
{
    let r = async {
        if request.extensions().get::<crate::user_keys::UserKey>().is_some() {
            return Err(forbidden("A user key cannot end sessions; use the session's key or the server's."));
        }
        let (key, mut o) = object(&app, request).await?;
        let named = match o.remove("session_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => return Err(ApiError::invalid(format!("`session_id` must be a string, got {other}."), Some("session_id"))),
        };
        let session = match (key, named) {
            (Some(SessionKey(s)), None) => s,
            (Some(SessionKey(s)), Some(n)) if s == n => s,
            (Some(_), Some(_)) => return Err(forbidden("A session key can only end its own session.")),
            (None, Some(n)) => n,
            (None, None) => return Err(ApiError::invalid("Name the session (`session_id`), or call with its key.", Some("session_id"))),
        };
        if !app.session_keys.revoke(&session) {
            return Err(ApiError {
                status: StatusCode::NOT_FOUND,
                message: format!("Session `{session}` has no key (never started with /rl/start_session, or already ended)."),
                kind: "invalid_request_error",
                param: Some("session_id".into()),
                code: Some("session_not_found"),
            });
        }
        let app2 = app.clone();
        let s2 = session.clone();
        tokio::task::spawn_blocking(move || app2.turns.end_session(&s2))
            .await
            .map_err(|e| ApiError::internal(format!("ending the session stopped: {e}")))?
            .map_err(ApiError::from)?;
        Ok(Json(json!({"session_id": session, "status": "ended"})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

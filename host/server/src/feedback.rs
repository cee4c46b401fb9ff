//! `POST /v1/feedback`: a user's own verdict on a turn, by the completion id their client got
//! (or a session and turn index): a reward in [-1, 1] or a thumbs up or down, and perhaps a
//! text. The buffer records it beside the turn; a turn still waiting for its next state is then
//! judged by it (the feedback is its score, the judge is not asked) and trained on. AReaL's
//! `/rl/set_reward` takes the same body (`completion_id`, `reward`).

use crate::error::ApiError;
use crate::App;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use burn::prelude::Backend;
use openclaw_collect::{FeedbackBy, FeedbackError, FeedbackFate, FeedbackTarget};
use openclaw_engine::Model;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The longest feedback text kept, in bytes.
pub const MAX_TEXT: usize = 16 * 1024;

/// A feedback body, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedbackRequest {
    /// The turn (none named: a session key's latest).
    pub target: Option<FeedbackTarget>,
    /// The reward, in [-1, 1].
    pub reward: f32,
    /// What the user wrote.
    pub text: Option<String>,
}

/// Reads a feedback body; every refusal names the field.
pub fn parse(body: &[u8]) -> Result<FeedbackRequest, ApiError> {
    let mut o: Map<String, Value> = crate::protocol::read_object(body)?;
    let bad = |m: String, p: &str| ApiError::invalid(m, Some(p));
    let take_str = |o: &mut Map<String, Value>, k: &str| -> Result<Option<String>, ApiError> {
        match o.remove(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(bad(format!("`{k}` must be a string, got {other}."), k)),
        }
    };
    let completion = take_str(&mut o, "completion_id")?;
    let session = take_str(&mut o, "session_id")?;
    let take_index = |o: &mut Map<String, Value>, k: &'static str, what: &str| match o.remove(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|&i| i <= u32::MAX as u64)
            .map(|i| Some(i as u32))
            .ok_or_else(|| {
                bad(
                    format!("`{k}` must be {what}'s index (0 or more), got {v}."),
                    k,
                )
            }),
    };
    let index = take_index(&mut o, "turn_index", "a turn")?;
    let choice = take_index(&mut o, "choice_index", "a choice")?;
    if choice.is_some() && completion.is_none() {
        return Err(bad(
            "`choice_index` names a choice of the answer `completion_id` names.".into(),
            "choice_index",
        ));
    }
    let target = match (completion, session, index) {
        (Some(c), None, None) => Some(FeedbackTarget::Completion(c, choice)),
        (None, Some(s), Some(i)) => Some(FeedbackTarget::Turn {
            session_id: s,
            turn_index: i,
        }),
        (None, None, None) => None,
        (None, Some(_), None) => {
            return Err(bad(
                "`session_id` needs `turn_index`, the turn of the session the feedback is for."
                    .into(),
                "turn_index",
            ))
        }
        (None, None, Some(_)) => {
            return Err(bad("`turn_index` needs `session_id`.".into(), "session_id"))
        }
        (Some(_), _, _) => return Err(bad(
            "Name the turn one way: `completion_id`, or `session_id` and `turn_index`, not both."
                .into(),
            "completion_id",
        )),
    };
    let thumbs = take_str(&mut o, "thumbs")?;
    let reward = match (
        o.remove("reward").filter(|v| !v.is_null()),
        thumbs.as_deref(),
    ) {
        (Some(v), None) => {
            let r = v
                .as_f64()
                .filter(|r| (-1.0..=1.0).contains(r))
                .ok_or_else(|| {
                    bad(
                        format!("`reward` must be a number from -1 to 1, got {v}."),
                        "reward",
                    )
                })?;
            r as f32
        }
        (None, Some("up")) => 1.0,
        (None, Some("down")) => -1.0,
        (None, Some(other)) => {
            return Err(bad(
                format!("`thumbs` must be \"up\" or \"down\", got \"{other}\"."),
                "thumbs",
            ))
        }
        (None, None) => {
            return Err(bad(
                "Give `reward` (from -1 to 1) or `thumbs` (\"up\" or \"down\").".into(),
                "reward",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(bad("Give `reward` or `thumbs`, not both.".into(), "reward"))
        }
    };
    let text = take_str(&mut o, "text")?;
    if let Some(t) = &text {
        if t.len() > MAX_TEXT {
            return Err(bad(
                format!("`text` is {} bytes; at most {MAX_TEXT} are kept.", t.len()),
                "text",
            ));
        }
    }
    if let Some(k) = o.keys().next() {
        return Err(bad(
            format!("Unrecognized request argument supplied: {k}"),
            k,
        ));
    }
    Ok(FeedbackRequest {
        target,
        reward,
        text,
    })
}

/// Whose turns a key may name: a session key's session's, a user key's user's.
fn by<'a>(session: Option<&'a str>, user: Option<&'a str>) -> FeedbackBy<'a> {
    match (session, user) {
        (Some(s), _) => FeedbackBy::Session(s),
        (None, Some(u)) => FeedbackBy::User(u),
        (None, None) => FeedbackBy::Server,
    }
}

/// The route.
pub async fn feedback<B: Backend>(State(app): State<Arc<App<B>>>, request: Request) -> Response
where
    Model<B>: Send + Sync,
{
    match handle(app, request).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle<B: Backend>(app: Arc<App<B>>, request: Request) -> Result<Response, ApiError>
where
    Model<B>: Send + Sync,
{
    let (parts, body) = request.into_parts();
    let body = crate::admission::read_body(&app, &parts.headers, body).await?;
    let mut f = parse(&body)?;
    let owner = parts
        .extensions
        .get::<crate::session_keys::SessionKey>()
        .map(|k| k.0.clone());
    let user = parts
        .extensions
        .get::<crate::user_keys::UserKey>()
        .map(|k| k.0.clone());
    let target = match (f.target.take(), &owner) {
        (Some(t), _) => t,
        (None, Some(s)) => FeedbackTarget::Latest(s.clone()),
        (None, None) => {
            return Err(ApiError::invalid(
                "Name the turn: `completion_id` (the id of the answer), or `session_id` and `turn_index` (with a session key, leave it out for the session's latest turn).",
                Some("completion_id"),
            ))
        }
    };
    if !app.turns.record_turns {
        return Err(ApiError::invalid(
            "This server does not record turns (`--enable-rl-intercept false`), so there is nothing to give feedback on.",
            None,
        )
        .with_code("not_recording"));
    }
    // Recording waits on the buffer and on collection's answer: not on an async thread.
    let app2 = app.clone();
    let (reward, text) = (f.reward, f.text.clone());
    let target2 = target.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        app2.turns.feedback(
            &target2,
            by(owner.as_deref(), user.as_deref()),
            reward,
            text,
        )
    })
    .await
    .map_err(|e| ApiError::internal(format!("feedback stopped: {e}")))?;
    let (session_id, turn_index, fate) = outcome.map_err(|e| match e {
        FeedbackError::Unknown(m) => ApiError {
            status: StatusCode::NOT_FOUND,
            message: m,
            kind: "invalid_request_error",
            param: Some(match target {
                FeedbackTarget::Completion(..) => "completion_id".into(),
                FeedbackTarget::Turn { .. } | FeedbackTarget::Latest(_) => "session_id".into(),
            }),
            code: Some("turn_not_found"),
        },
        FeedbackError::WhichChoice(m) => {
            ApiError::invalid(m, Some("choice_index")).with_code("choice_index_required")
        }
        FeedbackError::NotTrainable(m) => {
            ApiError::invalid(m, None).with_code("turn_not_trainable")
        }
        FeedbackError::Given(m) => conflict(m),
        FeedbackError::OtherSession(m) => ApiError {
            status: StatusCode::FORBIDDEN,
            message: m,
            kind: "invalid_request_error",
            param: None,
            code: Some("session_key_not_allowed"),
        },
        FeedbackError::Unrecorded(m) => ApiError::unavailable(m),
    })?;
    let (code, status) = match fate {
        FeedbackFate::Judges => (StatusCode::OK, "judged"),
        FeedbackFate::Kept => (StatusCode::OK, "recorded"),
        FeedbackFate::Pending => (StatusCode::ACCEPTED, "pending"),
        FeedbackFate::Busy => {
            return Err(ApiError::busy(
                "Collection is busy and did not take the feedback (nothing was recorded); retry shortly.",
            ))
        }
        FeedbackFate::TooLate => {
            return Err(conflict(format!(
                "Turn {turn_index} of session `{session_id}` was already judged (its next state came first): the feedback is not recorded."
            )))
        }
    };
    Ok((
        code,
        Json(json!({
            "object": "feedback",
            "session_id": session_id,
            "turn_index": turn_index,
            "reward": reward,
            "status": status,
        })),
    )
        .into_response())
}

/// 409 `turn_already_judged`.
fn conflict(message: String) -> ApiError {
    ApiError {
        status: StatusCode::CONFLICT,
        message,
        kind: "invalid_request_error",
        param: None,
        code: Some("turn_already_judged"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(body: Value) -> (String, String) {
        let e = parse(body.to_string().as_bytes()).unwrap_err();
        (e.param.unwrap_or_default(), e.message)
    }

    #[test]
    fn a_feedback_names_one_turn_and_one_reward() {
        let ok = |b: Value| parse(b.to_string().as_bytes()).unwrap();
        let f = ok(json!({"completion_id": "chatcmpl-1", "thumbs": "down", "text": "too long"}));
        assert_eq!(
            f.target,
            Some(FeedbackTarget::Completion("chatcmpl-1".into(), None))
        );
        assert_eq!((f.reward, f.text.as_deref()), (-1.0, Some("too long")));
        let f = ok(json!({"session_id": "s", "turn_index": 2, "reward": 0.5}));
        assert_eq!(
            f.target,
            Some(FeedbackTarget::Turn {
                session_id: "s".into(),
                turn_index: 2
            })
        );
        assert_eq!(f.reward, 0.5);
        // No turn named: a session key's latest (the route checks there is a key).
        assert_eq!(ok(json!({"reward": 1})).target, None);
        assert_eq!(
            ok(json!({"completion_id": "c", "thumbs": "up"})).reward,
            1.0
        );
        for (body, p, words) in [
            (
                json!({"completion_id": "c", "session_id": "s", "turn_index": 0, "reward": 1}),
                "completion_id",
                "one way",
            ),
            (
                json!({"session_id": "s", "reward": 1}),
                "turn_index",
                "needs `turn_index`",
            ),
            (
                json!({"session_id": "s", "turn_index": -1, "reward": 1}),
                "turn_index",
                "0 or more",
            ),
            (json!({"completion_id": "c"}), "reward", "Give `reward`"),
            (
                json!({"completion_id": "c", "reward": 2}),
                "reward",
                "from -1 to 1",
            ),
            (
                json!({"completion_id": "c", "reward": "1"}),
                "reward",
                "from -1 to 1",
            ),
            (
                json!({"completion_id": "c", "thumbs": "sideways"}),
                "thumbs",
                "\"up\" or \"down\"",
            ),
            (
                json!({"completion_id": "c", "thumbs": "up", "reward": 1}),
                "reward",
                "not both",
            ),
            (
                json!({"completion_id": 5, "reward": 1}),
                "completion_id",
                "must be a string",
            ),
            (
                json!({"completion_id": "c", "reward": 1, "text": "x".repeat(MAX_TEXT + 1)}),
                "text",
                "at most",
            ),
            (
                json!({"completion_id": "c", "reward": 1, "stars": 5}),
                "stars",
                "Unrecognized",
            ),
        ] {
            let (got, message) = param(body);
            assert_eq!(got, p, "{message}");
            assert!(message.contains(words), "{message}");
        }
        assert!(parse(b"[1]").is_err());
        assert!(parse(b"{").is_err());
    }
}

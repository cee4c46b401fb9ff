//! Errors as OpenAI sends them: a status and `{error: {message, type, param, code}}`, with
//! `Retry-After` on a 429.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// An error as OpenAI sends it: a status and `{error: {message, type, param, code}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, ...
    pub kind: &'static str,
    /// The request field at fault, if any.
    pub param: Option<String>,
    /// A machine-readable code (`context_length_exceeded`, `model_not_found`, ...).
    pub code: Option<&'static str>,
}

impl ApiError {
    /// 400 invalid_request_error.
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_string),
            code: None,
        }
    }

    /// Sets the code.
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// 401.
    pub fn unauthorized(message: &str) -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message: message.into(),
            kind: "authentication_error",
            param: None,
            code: Some("invalid_api_key"),
        }
    }

    /// 404 for an unknown model.
    pub fn model_not_found(model: &str) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("The model `{model}` does not exist or you do not have access to it."),
            kind: "invalid_request_error",
            param: Some("model".into()),
            code: Some("model_not_found"),
        }
    }

    /// 413.
    pub fn too_large(limit: usize) -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!("The request body is larger than {limit} bytes."),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_too_large"),
        }
    }

    /// 408: the body did not arrive within the deadline.
    pub fn body_timeout(limit: std::time::Duration) -> Self {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "The request body did not arrive within {:.0} s (--request-body-timeout).",
                limit.as_secs_f64()
            ),
            kind: "invalid_request_error",
            param: None,
            code: Some("request_timeout"),
        }
    }

    /// 429 when admission is full.
    pub fn busy(message: &str) -> Self {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: message.into(),
            kind: "rate_limit_error",
            param: None,
            code: Some("server_busy"),
        }
    }

    /// 503: the server cannot do its part now (the buffer cannot record turns).
    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: Some("service_unavailable"),
        }
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
        }
    }

    /// The prompt does not fit the model's context.
    pub fn context_length(limit: usize, prompt: usize) -> Self {
        ApiError::invalid(
            format!(
                "This model's maximum context length is {limit} tokens. However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."
            ),
            Some("messages"),
        )
        .with_code("context_length_exceeded")
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
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

/// Collection's refusals as the answer's: a poisoned session table is the server's fault, a
/// record the buffer did not take makes the server unavailable.
impl From<openclaw_collect::TurnError> for ApiError {
    fn from(e: openclaw_collect::TurnError) -> Self {
        match e {
            openclaw_collect::TurnError::Poisoned => ApiError::internal("session table poisoned"),
            openclaw_collect::TurnError::Unrecorded(why) => ApiError::unavailable(why),
        }
    }
}

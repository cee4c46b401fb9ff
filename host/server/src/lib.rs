//! Serving: the OpenAI-compatible HTTP API.
//!
//! A chat request passes, in order: the key ([`admission::authorize`], a layer over the `/v1`
//! routes), its client's share and the total of request slots ([`admission::admit`], a layer
//! over the chat route, taken before the body is read), the body under its size limit and
//! deadline, the request's parsing into typed fields with errors that name the field
//! ([`protocol`]), the prompt, generation, and the answer, plain or streamed ([`answer`]),
//! whose turn collection records before the client sees its end.
//!
//! A legacy completion (`/v1/completions`, [`completions`]) passes the same key, admission,
//! body and generation, with a prompt of text or token ids instead of messages; it has no
//! session and is not recorded as a turn.
//!
//! The live dashboard ([`dashboard`]) is a router of its own, merged into the API's or served
//! alone by `train`.

pub mod admission;
pub mod answer;
pub mod completions;
pub mod dashboard;
pub mod error;
pub mod feedback;
pub mod protocol;
pub mod routes;
pub mod session_keys;
pub mod text;
pub mod user_keys;

pub use routes::router;

/// The target of the request log: `RUST_LOG=openclaw_server::access=info` shows it alone.
pub const ACCESS_LOG: &str = "openclaw_server::access";

use burn::prelude::Backend;
use openclaw_collect::TurnDesk;
use openclaw_metrics::Metrics;
use openclaw_policy::PolicyEngine;
use std::sync::{Arc, Mutex};

/// Settings of the server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The model id clients use, and the one every answer names.
    pub served_model_name: String,
    /// Other ids a request may name for the same model, answered as `served_model_name`:
    /// `default`, and a GGUF file's own name (`model.gguf`) when the served id leaves out
    /// `.gguf`, so clients set up with the older id keep working. `/v1/models` lists only the
    /// served id.
    pub aliases: Vec<String>,
    /// Bearer key required when not empty.
    pub api_key: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Completion budget when the request gives none.
    pub default_max_tokens: u32,
    /// Default sampling temperature.
    pub default_temperature: f32,
    /// How long a request may take to send its body (`--request-body-timeout`): a slot is
    /// held while it is read.
    pub body_timeout: std::time::Duration,
    /// Chat and completion requests one client address may have admitted at once
    /// (`--max-inflight-per-client`), so one client cannot take every slot.
    pub max_inflight_per_client: usize,
    /// Total slots (`--max-inflight`), for `/healthz`.
    pub max_inflight: usize,
    /// The LoRA adapters served over the model (`--lora-modules`), by the id a request names
    /// in `model` to be answered by one, with the directory each came from.
    pub adapters: Vec<(String, String)>,
    /// `--adapters per-user`: each chat request is answered by its user's adapter (named by the
    /// `X-User-Id` header or the body's `user`), the base while the user has none.
    pub per_user: bool,
}

impl ServerOptions {
    /// Whether a request naming model `id` is for the served model: its id or an alias.
    pub fn serves(&self, id: &str) -> bool {
        id == self.served_model_name || self.aliases.iter().any(|a| a == id)
    }

    /// A request's `model`, when it names one, must be the served model (OpenAI's 404
    /// `model_not_found` otherwise).
    pub fn check_model(&self, model: Option<&str>) -> Result<(), error::ApiError> {
        match model {
            Some(m) if !self.serves(m) => Err(error::ApiError::model_not_found(m)),
            _ => Ok(()),
        }
    }

    /// What a request's `model` asks for: the served model (`None`), or one of its adapters
    /// (`--lora-modules`, as vLLM serves them); anything else is OpenAI's 404.
    pub fn adapter_for(
        &self,
        model: Option<&str>,
    ) -> Result<Option<std::sync::Arc<str>>, error::ApiError> {
        match model {
            Some(m) if !self.serves(m) => match self.adapters.iter().find(|(name, _)| name == m) {
                Some((name, _)) => Ok(Some(name.as_str().into())),
                None => Err(error::ApiError::model_not_found(m)),
            },
            _ => Ok(None),
        }
    }
}

/// What the handlers share.
pub struct App<B: Backend> {
    /// Keys issued by `/rl/start_session`, each naming its session.
    pub session_keys: session_keys::SessionKeys,
    /// Keys that name a user (`--user-keys-file`, `/admin/users`).
    pub user_keys: user_keys::UserKeys,
    /// The served model.
    pub engine: Arc<PolicyEngine<B>>,
    /// Sessions and the recorder: each request's turn, opened and recorded.
    pub turns: TurnDesk,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings.
    pub opts: ServerOptions,
    /// Chat and completion requests admitted at once (`--max-inflight`), counted from before
    /// the body is read to the end of the answer, so reading, parsing and tokenizing are
    /// bounded too.
    pub admission: Arc<tokio::sync::Semaphore>,
    /// Admitted chat and completion requests per client address.
    pub per_client: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    /// Set when the server stops: requests still sending their body are answered 503 at once
    /// instead of holding the stop.
    pub stopping: tokio::sync::watch::Sender<bool>,
}

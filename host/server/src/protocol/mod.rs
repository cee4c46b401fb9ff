//! The OpenAI chat-completions protocol: requests as clients send them (both token-limit
//! names, string or text-part content, tools), responses and stream chunks, and errors in
//! OpenAI's shape; and the legacy completions request ([`parse_completion`]), whose sampling
//! settings are checked by the same rules.
//!
//! A body is read in two steps. serde reads it into typed fields (`wire`), each holding a value
//! of its type or, failing that, the JSON that came instead; [`parse`] then checks the fields
//! in a fixed order and refuses the first bad one with a message that names the field and the
//! rule. serde's own errors name neither, and come in the body's order.

pub use crate::error::ApiError;
pub use completions::{parse_completion, CompletionPrompt, CompletionRequest};
pub use tools::MAX_TOOLS;
pub use wire::{Stop, StreamOptions};

mod completions;
mod messages;
mod structured;
mod tools;
mod wire;

#[cfg(test)]
mod tests;

use axum::http::HeaderMap;
use openclaw_chat::ChatMessage;
use openclaw_collect::SessionHints;
pub use openclaw_grammar::Shape;
use openclaw_plugin_api::TurnType;
use serde_json::{Map, Value};
use wire::Sent;

/// A chat-completions request, after parsing and validation.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The model id asked for.
    pub model: Option<String>,
    /// The messages, parsed once, content normalised to strings.
    pub messages: Vec<ChatMessage>,
    /// Stream token by token.
    pub stream: bool,
    /// Stream options.
    pub include_usage: bool,
    /// Sampling (`max_completion_tokens`, else `max_tokens`, as the budget; top-k, an extension
    /// several servers accept, among them).
    pub sampling: Sampling,
    /// Tools (OpenAI `tools` array), when any and `tool_choice` is not `none`.
    pub tools: Option<Value>,
    /// `chat_template_kwargs` (vLLM): variables for the chat template, `enable_thinking` among
    /// them.
    pub template_kwargs: Map<String, Value>,
    /// `logprobs`: answer with each sampled token's logprob; `Some(k)` with the `k` most
    /// likely alternatives (`top_logprobs`, 0-20).
    pub logprobs: Option<usize>,
    /// What the reply must be (`response_format` JSON, or a `tool_choice` that forces a call),
    /// followed by constrained decoding.
    pub shape: Option<Shape>,
    /// Choices asked for (`n`), each a turn of its own: 1 to [`MAX_CHOICES`].
    pub n: u32,
    /// OpenAI's `user`: the end user the request is for (with `--adapters per-user`, whose
    /// adapter answers).
    pub user: Option<String>,
    /// What the request says about its session.
    pub hints: SessionHints,
}

/// What a request asks of sampling, after its checks: both endpoints' settings, each `None`
/// where the server's default applies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sampling {
    /// The completion budget.
    pub max_tokens: Option<u32>,
    /// Temperature.
    pub temperature: Option<f32>,
    /// Nucleus mass.
    pub top_p: Option<f32>,
    /// Top-k.
    pub top_k: Option<u32>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Seed.
    pub seed: Option<u64>,
}

/// Parameters OpenAI defines that are accepted and ignored (they change nothing a client can
/// observe in the answer here); anything else unknown is refused as OpenAI does, and the
/// sampling parameters this server does not implement are refused by name unless they hold
/// their neutral value ([`NOT_SUPPORTED`]).
const IGNORED: &[&str] = &[
    "store",
    "metadata",
    "reasoning_effort",
    "service_tier",
    "prediction",
    "modalities",
    "audio",
    "function_call",
    "functions",
    "web_search_options",
    "safety_identifier",
    "prompt_cache_key",
    "verbosity",
];

/// Whether a parameter's value is the one that changes nothing.
type IsNeutral = fn(&Value) -> bool;

/// Parameters that change the answer and are not implemented: accepted only at their neutral
/// value, refused by name otherwise, never silently dropped.
const NOT_SUPPORTED: &[(&str, IsNeutral)] = &[
    ("frequency_penalty", |v| v.as_f64() == Some(0.0)),
    ("presence_penalty", |v| v.as_f64() == Some(0.0)),
    ("repetition_penalty", |v| v.as_f64() == Some(1.0)),
    ("min_p", |v| v.as_f64() == Some(0.0)),
    ("logit_bias", |v| {
        v.as_object().is_some_and(|o| o.is_empty())
    }),
];

/// Whether a flag from a header or the body says yes.
fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// A turn type from a header or the body, `param` naming where it came from.
fn turn_type(v: &str, param: &str) -> Result<TurnType, ApiError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "main" => Ok(TurnType::Main),
        "side" => Ok(TurnType::Side),
        other => Err(ApiError::invalid(
            format!("{param} must be `main` or `side`, got `{other}`"),
            Some(param),
        )),
    }
}

/// Parses and validates a request body with its headers. The non-standard keys
/// (`session_id`, `turn_type`, `session_done`) are taken out here and never reach generation.
pub fn parse(body: &[u8], headers: &HeaderMap) -> Result<ChatRequest, ApiError> {
    let sent: wire::Request = read_object(body)?;
    refuse_unknown(&sent.other, |k| IGNORED.contains(&k))?;
    let messages = messages::read(sent.messages)?;
    let n = choices(sent.n)?;
    let temperature = temperature(sent.temperature)?;
    let top_k = top_k(sent.top_k)?;
    let top_p = top_p(sent.top_p)?;
    // Both names are checked, the newer one wins.
    let completion = uint(sent.max_completion_tokens, "max_completion_tokens")?;
    let max_tokens = match (completion, uint(sent.max_tokens, "max_tokens")?) {
        (Some(m), _) | (None, Some(m)) => Some(m.min(u32::MAX as u64) as u32),
        _ => None,
    };
    if max_tokens == Some(0) {
        return Err(ApiError::invalid(
            "`max_completion_tokens` must be at least 1.",
            Some("max_completion_tokens"),
        ));
    }
    let stop = stop(sent.stop)?;
    let stream = stream(sent.stream)?;
    let include_usage = include_usage(sent.stream_options)?;
    let offered = tools::offered(sent.tools)?;
    let choice = tools::choice(sent.tool_choice, &offered.names)?;
    let format = structured::response_format(sent.response_format)?;
    let shape = structured::shape(format, &choice, &offered, sent.parallel_tool_calls)?;
    let tools = (choice != tools::Choice::None && !offered.tools.is_empty())
        .then_some(Value::Array(offered.tools));
    let logprobs = match sent.logprobs {
        None | Some(Sent::Typed(false)) => false,
        Some(Sent::Typed(true)) => true,
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`logprobs` must be a boolean.",
                Some("logprobs"),
            ))
        }
    };
    let top_logprobs = uint(sent.top_logprobs, "top_logprobs")?;
    if let Some(k) = top_logprobs {
        if k > 20 {
            return Err(ApiError::invalid(
                format!("`top_logprobs` must be between 0 and 20, got {k}."),
                Some("top_logprobs"),
            ));
        }
        if !logprobs {
            return Err(ApiError::invalid(
                "`top_logprobs` needs `logprobs` to be true.",
                Some("top_logprobs"),
            ));
        }
    }
    let logprobs = logprobs.then(|| top_logprobs.unwrap_or(0) as usize);
    let template_kwargs = match sent.chat_template_kwargs {
        None => Map::new(),
        Some(Sent::Typed(kwargs)) => kwargs,
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`chat_template_kwargs` must be an object.",
                Some("chat_template_kwargs"),
            ))
        }
    };
    if let Some(t) = template_kwargs.get("enable_thinking") {
        if !t.is_boolean() {
            return Err(ApiError::invalid(
                "`chat_template_kwargs.enable_thinking` must be a boolean.",
                Some("chat_template_kwargs"),
            ));
        }
    }
    let model = model(sent.model)?;
    let user = match &sent.user {
        Some(Sent::Typed(u)) => Some(u.clone()),
        _ => None,
    };
    let hints = hints(
        headers,
        sent.session_id,
        sent.user,
        sent.turn_type,
        sent.session_done,
    )?;
    Ok(ChatRequest {
        model,
        messages,
        stream,
        include_usage,
        sampling: Sampling {
            max_tokens,
            temperature,
            top_p,
            top_k,
            stop,
            seed: uint(sent.seed, "seed")?,
        },
        tools,
        template_kwargs,
        logprobs,
        shape,
        n,
        user,
        hints,
    })
}

/// A body read into its wire type: JSON, and an object. Every field of a wire type takes any
/// JSON, so an object always reads. (Every endpoint's body goes through here, so each refuses
/// a body that is not a JSON object with the same words.)
pub(crate) fn read_object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("The request body is not valid JSON: {e}"), None))?;
    if !v.is_object() {
        return Err(ApiError::invalid(
            "The request body must be a JSON object.",
            None,
        ));
    }
    serde_json::from_value(v).map_err(|e| ApiError::invalid(e.to_string(), None))
}

/// Refuses the first key not known here, in the body's order: a parameter this server does
/// not implement unless at its neutral value, or one OpenAI does not define and `ignored`
/// does not name. A key whose value is `null` is as if it were left out.
fn refuse_unknown(
    other: &Map<String, Value>,
    ignored: impl Fn(&str) -> bool,
) -> Result<(), ApiError> {
    for (k, v) in other {
        if v.is_null() {
            continue;
        }
        if let Some((_, neutral)) = NOT_SUPPORTED.iter().find(|(n, _)| n == k) {
            if !neutral(v) {
                return Err(ApiError::invalid(
                    format!("`{k}` is not supported by this server (got {v}); leave it out."),
                    Some(k),
                ));
            }
            continue;
        }
        if !ignored(k.as_str()) {
            return Err(ApiError::invalid(
                format!("Unrecognized request argument supplied: {k}"),
                Some(k),
            ));
        }
    }
    Ok(())
}

/// The most choices (`n`) one chat request may ask for: each is a sequence in the decode batch
/// and a turn in the buffer.
pub const MAX_CHOICES: u32 = 8;

/// `n` of a chat request: 1 to [`MAX_CHOICES`].
fn choices(sent: Option<Sent<u64>>) -> Result<u32, ApiError> {
    match uint(sent, "n")? {
        None => Ok(1),
        Some(n) if (1..=MAX_CHOICES as u64).contains(&n) => Ok(n as u32),
        Some(n) => Err(ApiError::invalid(
            format!("`n` must be from 1 to {MAX_CHOICES}, got {n}."),
            Some("n"),
        )),
    }
}

/// `n` of a legacy completion: one completion per request.
fn only_one(sent: Option<Sent<u64>>) -> Result<(), ApiError> {
    match uint(sent, "n")? {
        Some(n) if n != 1 => Err(ApiError::invalid("Only n = 1 is supported.", Some("n"))),
        _ => Ok(()),
    }
}

/// `temperature`, between 0 and 2.
fn temperature(sent: Option<Sent<f64>>) -> Result<Option<f32>, ApiError> {
    let temperature = number(sent, "temperature")?.map(|t| t as f32);
    if let Some(t) = temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(ApiError::invalid(
                format!("`temperature` must be between 0 and 2, got {t}."),
                Some("temperature"),
            ));
        }
    }
    Ok(temperature)
}

/// `top_p`, in (0, 1].
fn top_p(sent: Option<Sent<f64>>) -> Result<Option<f32>, ApiError> {
    let top_p = number(sent, "top_p")?.map(|t| t as f32);
    if let Some(p) = top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(ApiError::invalid(
                format!("`top_p` must be in (0, 1], got {p}."),
                Some("top_p"),
            ));
        }
    }
    Ok(top_p)
}

/// `stream`, a boolean.
fn stream(sent: Option<Sent<bool>>) -> Result<bool, ApiError> {
    match sent {
        None => Ok(false),
        Some(Sent::Typed(stream)) => Ok(stream),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            "`stream` must be a boolean.",
            Some("stream"),
        )),
    }
}

/// `stream_options.include_usage`.
fn include_usage(sent: Option<Sent<StreamOptions>>) -> Result<bool, ApiError> {
    match sent {
        None => Ok(false),
        Some(Sent::Typed(options)) => Ok(options.include_usage),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            "`stream_options` must be an object.",
            Some("stream_options"),
        )),
    }
}

/// `model`, a string.
fn model(sent: Option<Sent<String>>) -> Result<Option<String>, ApiError> {
    match sent {
        None => Ok(None),
        Some(Sent::Typed(model)) => Ok(Some(model)),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            "`model` must be a string.",
            Some("model"),
        )),
    }
}

/// A number, refused by name when it is anything else.
fn number(sent: Option<Sent<f64>>, k: &str) -> Result<Option<f64>, ApiError> {
    match sent {
        None => Ok(None),
        Some(Sent::Typed(x)) => Ok(Some(x)),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            format!("`{k}` must be a number."),
            Some(k),
        )),
    }
}

/// A non-negative integer, refused by name when it is anything else.
fn uint(sent: Option<Sent<u64>>, k: &str) -> Result<Option<u64>, ApiError> {
    match sent {
        None => Ok(None),
        Some(Sent::Typed(n)) => Ok(Some(n)),
        Some(Sent::Other(Value::Number(_))) => Err(ApiError::invalid(
            format!("`{k}` must be a non-negative integer."),
            Some(k),
        )),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            format!("`{k}` must be an integer."),
            Some(k),
        )),
    }
}

/// `top_k`, vLLM's convention: -1 (or 0) disables it.
fn top_k(sent: Option<Sent<i64>>) -> Result<Option<u32>, ApiError> {
    let got = match sent {
        None | Some(Sent::Typed(-1 | 0)) => return Ok(None),
        Some(Sent::Typed(k)) if k > 0 => return Ok(Some(k.min(u32::MAX as i64) as u32)),
        Some(Sent::Typed(k)) => k.to_string(),
        Some(Sent::Other(Value::Number(n))) => n.to_string(),
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`top_k` must be an integer.",
                Some("top_k"),
            ))
        }
    };
    Err(ApiError::invalid(
        format!("`top_k` must be a positive integer, or -1 to disable it; got {got}."),
        Some("top_k"),
    ))
}

/// `stop`: a string, or an array of at most 4.
fn stop(sent: Option<Sent<Stop>>) -> Result<Vec<String>, ApiError> {
    match sent {
        None => Ok(Vec::new()),
        Some(Sent::Typed(Stop::One(s))) => Ok(vec![s]),
        Some(Sent::Typed(Stop::Many(v))) if v.len() <= 4 => Ok(v),
        Some(Sent::Typed(Stop::Many(_))) => Err(ApiError::invalid(
            "`stop` takes at most 4 strings.",
            Some("stop"),
        )),
        Some(Sent::Other(_)) => Err(ApiError::invalid(
            "`stop` must be a string or an array of strings.",
            Some("stop"),
        )),
    }
}

/// Session hints: headers first, then the body's keys, whose values are read as text whatever
/// their JSON type. The OpenAI `user` field names an end user (any string), not a
/// conversation: it is accepted and not a session id.
fn hints(
    headers: &HeaderMap,
    session_id: Option<Sent<String>>,
    user: Option<Sent<String>>,
    turn: Option<Sent<String>>,
    done: Option<Sent<String>>,
) -> Result<SessionHints, ApiError> {
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let session_id = header("x-session-id").or_else(|| as_text(session_id));
    if let Some(Sent::Other(_)) = user {
        return Err(ApiError::invalid("`user` must be a string.", Some("user")));
    }
    if let Some(id) = &session_id {
        if !openclaw_collect::valid_session_id(id) {
            return Err(ApiError::invalid(
                "The session id must be 1-256 characters of letters, digits and -_.:@+= with no `..`.",
                Some("session_id"),
            ));
        }
    }
    let turn_type = match header("x-turn-type") {
        Some(t) => Some(turn_type(&t, "X-Turn-Type")?),
        None => match as_text(turn) {
            Some(t) => Some(turn_type(&t, "turn_type")?),
            None => None,
        },
    };
    let done = header("x-session-done")
        .or_else(|| as_text(done))
        .is_some_and(|v| truthy(&v));
    Ok(SessionHints {
        session_id,
        turn_type,
        done,
        scope: None,
    })
}

/// A session key's value as text: a string as it is, any other JSON as written.
fn as_text(sent: Option<Sent<String>>) -> Option<String> {
    sent.map(|s| match s {
        Sent::Typed(s) => s,
        Sent::Other(v) => v.to_string(),
    })
}

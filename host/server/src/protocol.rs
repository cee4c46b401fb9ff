//! The OpenAI chat-completions protocol: requests as clients send them (both token-limit
//! names, string or text-part content, tools), responses and stream chunks, and errors in
//! OpenAI's shape.

pub use crate::error::ApiError;

use axum::http::HeaderMap;
use openclaw_buffer::messages::content_text;
use openclaw_chat::ChatMessage;
use openclaw_collect::SessionHints;
use openclaw_plugin_api::TurnType;
use serde::Deserialize;
use serde_json::{Map, Value};

/// `stop`: one string or several.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Stop {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct StreamOptions {
    /// Send a last chunk with token usage.
    #[serde(default)]
    pub include_usage: bool,
}

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
    /// `max_completion_tokens`, else `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Temperature.
    pub temperature: Option<f32>,
    /// Nucleus mass.
    pub top_p: Option<f32>,
    /// Top-k (an extension several servers accept).
    pub top_k: Option<u32>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Seed.
    pub seed: Option<u64>,
    /// Tools (OpenAI `tools` array), when any and `tool_choice` is not `none`.
    pub tools: Option<Value>,
    /// `chat_template_kwargs` (vLLM): variables for the chat template, `enable_thinking` among
    /// them.
    pub template_kwargs: Map<String, Value>,
    /// `logprobs`: answer with each sampled token's logprob; `Some(k)` with the `k` most
    /// likely alternatives (`top_logprobs`, 0-20).
    pub logprobs: Option<usize>,
    /// What the request says about its session.
    pub hints: SessionHints,
}

/// Parameters OpenAI defines that are accepted and ignored (they change nothing a client can
/// observe in the answer here); anything else unknown is refused as OpenAI does, and the
/// sampling parameters this server does not implement are refused by name unless they hold
/// their neutral value ([`NOT_SUPPORTED`]).
const IGNORED: &[&str] = &[
    "parallel_tool_calls",
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
    ("response_format", |v| {
        v.get("type").and_then(Value::as_str) == Some("text")
    }),
];

const KNOWN: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "seed",
    "tools",
    "tool_choice",
    "n",
    "user",
    "chat_template_kwargs",
    "logprobs",
    "top_logprobs",
    "session_id",
    "turn_type",
    "session_done",
];

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

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

/// What vLLM checks of a tool before serving it: a function with a valid name and object
/// parameters.
/// The most tools a request may offer: no prompt holds more, and each costs memory before the
/// prompt's length is known (OpenAI's own limit is 128).
pub const MAX_TOOLS: usize = 1024;

fn check_tool(tool: &Value) -> Result<(), String> {
    if let Some(t) = tool.get("type") {
        if t != "function" {
            return Err(format!("`type` must be \"function\", got {t}."));
        }
    }
    let f = tool
        .get("function")
        .and_then(Value::as_object)
        .ok_or("has no `function` object.")?;
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .ok_or("has no function.name.")?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(format!(
            "function.name `{name}` must be 1-64 letters, digits, underscores or dashes."
        ));
    }
    match f.get("parameters") {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(p) => Err(format!(
            "function.parameters of `{name}` must be a JSON Schema object, got {p}."
        )),
    }
}

/// Parses and validates a request body with its headers. The non-standard keys
/// (`session_id`, `turn_type`, `session_done`) are taken out here and never reach generation.
pub fn parse(body: &[u8], headers: &HeaderMap) -> Result<ChatRequest, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(format!("The request body is not valid JSON: {e}"), None))?;
    let Value::Object(mut o) = v else {
        return Err(ApiError::invalid(
            "The request body must be a JSON object.",
            None,
        ));
    };
    for (k, v) in o.iter() {
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
        if !KNOWN.contains(&k.as_str()) && !IGNORED.contains(&k.as_str()) {
            return Err(ApiError::invalid(
                format!("Unrecognized request argument supplied: {k}"),
                Some(k),
            ));
        }
    }
    let get = |o: &Map<String, Value>, k: &str| o.get(k).filter(|v| !v.is_null()).cloned();
    let messages = match o.remove("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "`messages` must not be empty.",
                Some("messages"),
            ))
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "`messages` must be an array.",
                Some("messages"),
            ))
        }
        None => {
            return Err(ApiError::invalid(
                "Missing required parameter: 'messages'.",
                Some("messages"),
            ))
        }
    };
    let mut normalised = Vec::with_capacity(messages.len());
    for (i, m) in messages.into_iter().enumerate() {
        let Value::Object(mut m) = m else {
            return Err(ApiError::invalid(
                format!("messages[{i}] must be an object."),
                Some("messages"),
            ));
        };
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !["system", "developer", "user", "assistant", "tool"].contains(&role.as_str()) {
            return Err(ApiError::invalid(
                format!("messages[{i}].role must be one of system, developer, user, assistant, tool; got `{role}`."),
                Some("messages"),
            ));
        }
        let content = content_text(m.get("content").unwrap_or(&Value::Null))
            .map_err(|e| ApiError::invalid(format!("messages[{i}].{e}"), Some("messages")))?;
        m.insert("content".into(), Value::String(content));
        let parsed: ChatMessage = serde_json::from_value(Value::Object(m))
            .map_err(|e| ApiError::invalid(format!("messages[{i}]: {e}"), Some("messages")))?;
        normalised.push(parsed);
    }
    let num = |o: &Map<String, Value>, k: &str| -> Result<Option<f64>, ApiError> {
        match get(o, k) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(ApiError::invalid(
                format!("`{k}` must be a number."),
                Some(k),
            )),
        }
    };
    let uint = |o: &Map<String, Value>, k: &str| -> Result<Option<u64>, ApiError> {
        match get(o, k) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
                ApiError::invalid(format!("`{k}` must be a non-negative integer."), Some(k))
            }),
            Some(_) => Err(ApiError::invalid(
                format!("`{k}` must be an integer."),
                Some(k),
            )),
        }
    };
    if let Some(n) = uint(&o, "n")? {
        if n != 1 {
            return Err(ApiError::invalid("Only n = 1 is supported.", Some("n")));
        }
    }
    let temperature = num(&o, "temperature")?.map(|t| t as f32);
    if let Some(t) = temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(ApiError::invalid(
                format!("`temperature` must be between 0 and 2, got {t}."),
                Some("temperature"),
            ));
        }
    }
    // vLLM's convention: -1 (or 0) disables top-k.
    let top_k = match get(&o, "top_k") {
        None => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(-1 | 0) => None,
            Some(k) if k > 0 => Some(k.min(u32::MAX as i64) as u32),
            _ => {
                return Err(ApiError::invalid(
                    format!("`top_k` must be a positive integer, or -1 to disable it; got {n}."),
                    Some("top_k"),
                ))
            }
        },
        Some(_) => {
            return Err(ApiError::invalid(
                "`top_k` must be an integer.",
                Some("top_k"),
            ))
        }
    };
    let top_p = num(&o, "top_p")?.map(|t| t as f32);
    if let Some(p) = top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(ApiError::invalid(
                format!("`top_p` must be in (0, 1], got {p}."),
                Some("top_p"),
            ));
        }
    }
    let max_tokens = match (uint(&o, "max_completion_tokens")?, uint(&o, "max_tokens")?) {
        (Some(m), _) | (None, Some(m)) => Some(m.min(u32::MAX as u64) as u32),
        _ => None,
    };
    if max_tokens == Some(0) {
        return Err(ApiError::invalid(
            "`max_completion_tokens` must be at least 1.",
            Some("max_completion_tokens"),
        ));
    }
    let stop = match get(&o, "stop") {
        None => Vec::new(),
        Some(v) => match serde_json::from_value::<Stop>(v) {
            Ok(Stop::One(s)) => vec![s],
            Ok(Stop::Many(v)) if v.len() <= 4 => v,
            Ok(Stop::Many(_)) => {
                return Err(ApiError::invalid(
                    "`stop` takes at most 4 strings.",
                    Some("stop"),
                ))
            }
            Err(_) => {
                return Err(ApiError::invalid(
                    "`stop` must be a string or an array of strings.",
                    Some("stop"),
                ))
            }
        },
    };
    let stream = match get(&o, "stream") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => {
            return Err(ApiError::invalid(
                "`stream` must be a boolean.",
                Some("stream"),
            ))
        }
    };
    let include_usage = match get(&o, "stream_options") {
        None => false,
        Some(v) => {
            serde_json::from_value::<StreamOptions>(v)
                .map_err(|_| {
                    ApiError::invalid(
                        "`stream_options` must be an object.",
                        Some("stream_options"),
                    )
                })?
                .include_usage
        }
    };
    let tools = match o.remove("tools").filter(|v| !v.is_null()) {
        None => Vec::new(),
        Some(Value::Array(t)) if t.len() > MAX_TOOLS => {
            return Err(ApiError::invalid(
                format!(
                    "Invalid 'tools': array too long. Expected an array with maximum length {MAX_TOOLS}, but got an array with length {} instead.",
                    t.len()
                ),
                Some("tools"),
            ))
        }
        Some(Value::Array(t)) => {
            for (i, tool) in t.iter().enumerate() {
                check_tool(tool)
                    .map_err(|e| ApiError::invalid(format!("tools[{i}]: {e}"), Some("tools")))?;
            }
            t
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "`tools` must be an array.",
                Some("tools"),
            ))
        }
    };
    let tool_choice_none = match get(&o, "tool_choice") {
        None => false,
        Some(Value::String(c)) => match c.as_str() {
            "none" => true,
            "auto" => false,
            "required" => {
                return Err(ApiError::invalid(
                    "`tool_choice` \"required\" is not supported by this server (the model cannot be forced to call a tool); use \"auto\".",
                    Some("tool_choice"),
                ))
            }
            other => {
                return Err(ApiError::invalid(
                    format!("`tool_choice` must be \"none\", \"auto\", \"required\" or a named function; got \"{other}\"."),
                    Some("tool_choice"),
                ))
            }
        },
        Some(named) => {
            let name = named
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ApiError::invalid(
                        "`tool_choice` must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                        Some("tool_choice"),
                    )
                })?;
            let known = tools
                .iter()
                .any(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name));
            if !known {
                return Err(ApiError::invalid(
                    format!("`tool_choice` names the function `{name}`, which is not in `tools`."),
                    Some("tool_choice"),
                ));
            }
            return Err(ApiError::invalid(
                format!("`tool_choice` naming a function (`{name}`) is not supported by this server (the model cannot be forced to call it); use \"auto\"."),
                Some("tool_choice"),
            ));
        }
    };
    let tools = (!tools.is_empty() && !tool_choice_none).then_some(Value::Array(tools));
    let logprobs = match get(&o, "logprobs") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "`logprobs` must be a boolean.",
                Some("logprobs"),
            ))
        }
    };
    let top_logprobs = uint(&o, "top_logprobs")?;
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
    let template_kwargs = match get(&o, "chat_template_kwargs") {
        None => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
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
    let model = match get(&o, "model") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(ApiError::invalid(
                "`model` must be a string.",
                Some("model"),
            ))
        }
    };

    // Session hints: headers first, then the body's keys. The OpenAI `user` field names an end
    // user (any string), not a conversation: it is accepted and not a session id.
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body_str = |k: &str| {
        get(&o, k).map(|v| match v {
            Value::String(s) => s,
            other => other.to_string(),
        })
    };
    let session_id = header("x-session-id").or_else(|| body_str("session_id"));
    if let Some(user) = get(&o, "user") {
        if !user.is_string() {
            return Err(ApiError::invalid("`user` must be a string.", Some("user")));
        }
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
        None => match body_str("turn_type") {
            Some(t) => Some(turn_type(&t, "turn_type")?),
            None => None,
        },
    };
    let done = header("x-session-done")
        .or_else(|| body_str("session_done"))
        .is_some_and(|v| truthy(&v));
    Ok(ChatRequest {
        model,
        messages: normalised,
        stream,
        include_usage,
        max_tokens,
        temperature,
        top_p,
        top_k,
        stop,
        seed: uint(&o, "seed")?,
        tools,
        template_kwargs,
        logprobs,
        hints: SessionHints {
            session_id,
            turn_type,
            done,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn what_a_stock_agent_client_sends_is_accepted() {
        let body = json!({
            "model": "default",
            "messages": [
                {"role": "system", "content": "You are an agent."},
                {"role": "user", "content": [{"type": "text", "text": "session abc: list files"}]}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 1,
            "tool_choice": "auto",
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
            "parallel_tool_calls": true,
            "store": false
        });
        let r = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap();
        assert!(r.stream && r.include_usage);
        assert_eq!(r.max_tokens, Some(1));
        assert_eq!(r.messages[1].text(), "session abc: list files");
        assert!(r.tools.is_some());
        assert_eq!(r.hints, SessionHints::default());
    }

    #[test]
    fn session_hints_come_from_headers_then_body_and_user_is_only_an_end_user() {
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "session_id": "b", "turn_type": "side", "user": "u", "session_done": true});
        let r = parse(
            body.to_string().as_bytes(),
            &headers(&[("x-session-id", "h"), ("x-turn-type", "MAIN")]),
        )
        .unwrap();
        assert_eq!(r.hints.session_id.as_deref(), Some("h"));
        assert_eq!(r.hints.turn_type, Some(TurnType::Main));
        assert!(r.hints.done);
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "user": "John Smith"});
        let r = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap();
        assert_eq!(
            r.hints.session_id, None,
            "an end user is not a conversation"
        );
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "user": 7});
        let e = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("user"));
    }

    fn param_of(body: Value) -> (Option<String>, String) {
        let e = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap_err();
        (e.param, e.message)
    }

    #[test]
    fn sampling_settings_not_implemented_are_refused_by_name_unless_neutral() {
        let base = || json!({"messages": [{"role": "user", "content": "x"}]});
        for (k, neutral, other) in [
            ("frequency_penalty", json!(0.0), json!(0.5)),
            ("presence_penalty", json!(0), json!(1)),
            ("repetition_penalty", json!(1.0), json!(1.1)),
            ("min_p", json!(0), json!(0.05)),
            ("logit_bias", json!({}), json!({"42": 5})),
            (
                "response_format",
                json!({"type": "text"}),
                json!({"type": "json_object"}),
            ),
        ] {
            let mut b = base();
            b[k] = neutral;
            assert!(
                parse(b.to_string().as_bytes(), &HeaderMap::new()).is_ok(),
                "{k}"
            );
            let mut b = base();
            b[k] = other;
            let (param, message) = param_of(b);
            assert_eq!(param.as_deref(), Some(k));
            assert!(message.contains("not supported"), "{message}");
        }
    }

    #[test]
    fn vllm_habits_top_k_minus_one_tool_choice_tool_schemas_and_template_kwargs() {
        let ok = |b: Value| parse(b.to_string().as_bytes(), &HeaderMap::new()).unwrap();
        let msgs = json!([{"role": "user", "content": "x"}]);
        assert_eq!(ok(json!({"messages": msgs, "top_k": -1})).top_k, None);
        assert_eq!(ok(json!({"messages": msgs, "top_k": 5})).top_k, Some(5));
        assert_eq!(
            param_of(json!({"messages": msgs, "top_k": -3}))
                .0
                .as_deref(),
            Some("top_k")
        );

        let tool = json!({"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}});
        let r = ok(json!({"messages": msgs, "tools": [tool], "tool_choice": "auto"}));
        assert!(r.tools.is_some());
        let r = ok(json!({"messages": msgs, "tools": [tool], "tool_choice": "none"}));
        assert!(r.tools.is_none());
        for choice in [
            json!("sometimes"),
            json!({"type": "function", "function": {"name": "write"}}),
            json!("required"),
        ] {
            let (param, message) =
                param_of(json!({"messages": msgs, "tools": [tool], "tool_choice": choice}));
            assert_eq!(param.as_deref(), Some("tool_choice"), "{message}");
        }
        let (_, message) = param_of(
            json!({"messages": msgs, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "write"}}}),
        );
        assert!(message.contains("not in `tools`"), "{message}");
        for bad in [
            json!({"type": "function", "function": {"name": "has space"}}),
            json!({"type": "retrieval", "function": {"name": "x"}}),
            json!({"type": "function", "function": {"name": "x", "parameters": "object"}}),
            json!({"type": "function"}),
        ] {
            let (param, message) = param_of(json!({"messages": msgs, "tools": [bad]}));
            assert_eq!(param.as_deref(), Some("tools"), "{message}");
            assert!(message.starts_with("tools[0]"), "{message}");
        }

        assert_eq!(ok(json!({"messages": msgs})).logprobs, None);
        assert_eq!(
            ok(json!({"messages": msgs, "logprobs": true})).logprobs,
            Some(0)
        );
        assert_eq!(
            ok(json!({"messages": msgs, "logprobs": true, "top_logprobs": 5})).logprobs,
            Some(5)
        );
        for bad in [
            json!({"messages": msgs, "top_logprobs": 2}),
            json!({"messages": msgs, "logprobs": true, "top_logprobs": 21}),
        ] {
            assert_eq!(param_of(bad).0.as_deref(), Some("top_logprobs"));
        }
        let r = ok(
            json!({"messages": msgs, "chat_template_kwargs": {"enable_thinking": false, "x": 1}}),
        );
        assert_eq!(r.template_kwargs["enable_thinking"], json!(false));
        assert_eq!(
            param_of(json!({"messages": msgs, "chat_template_kwargs": {"enable_thinking": "no"}}))
                .0
                .as_deref(),
            Some("chat_template_kwargs")
        );
    }

    #[test]
    fn bad_requests_get_openai_errors_naming_the_field() {
        let cases: Vec<(&[u8], &str, Option<&str>)> = vec![
            (b"{not json", "not valid JSON", None),
            (b"[1,2]", "must be a JSON object", None),
            (
                br#"{"model":"m"}"#,
                "Missing required parameter: 'messages'",
                Some("messages"),
            ),
            (br#"{"messages":[]}"#, "must not be empty", Some("messages")),
            (
                br#"{"mesages":[{"role":"user","content":"x"}]}"#,
                "Unrecognized request argument supplied: mesages",
                Some("mesages"),
            ),
            (
                br#"{"messages":[{"role":"robot","content":"x"}]}"#,
                "role must be one of",
                Some("messages"),
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
                "type `image_url`",
                Some("messages"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"temperature":5}"#,
                "between 0 and 2",
                Some("temperature"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}"#,
                "non-negative",
                Some("max_tokens"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"n":2}"#,
                "n = 1",
                Some("n"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"session_id":"../../etc"}"#,
                "session id",
                Some("session_id"),
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"turn_type":"middle"}"#,
                "`main` or `side`",
                Some("turn_type"),
            ),
        ];
        for (body, msg, param) in cases {
            let e = parse(body, &HeaderMap::new()).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(
                e.message.contains(msg),
                "{} -> {}",
                String::from_utf8_lossy(body),
                e.message
            );
            assert_eq!(
                e.param.as_deref(),
                param,
                "{}",
                String::from_utf8_lossy(body)
            );
            assert_eq!(e.body()["error"]["type"], "invalid_request_error");
        }
        let e = ApiError::context_length(256, 300);
        assert_eq!(e.body()["error"]["code"], "context_length_exceeded");
    }
}

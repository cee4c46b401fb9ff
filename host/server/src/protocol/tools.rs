//! The tools a request offers, and its `tool_choice`.

use super::wire::{Object, Sent, Tool, ToolChoice};
use super::ApiError;
use serde::Deserialize;
use serde_json::Value;

/// The most tools a request may offer: no prompt holds more, and each costs memory before the
/// prompt's length is known (OpenAI's own limit is 128).
pub const MAX_TOOLS: usize = 1024;

/// The tools a request offers, as sent, with their function names.
pub(super) struct Offered {
    /// The tools, for the chat template.
    pub(super) tools: Vec<Value>,
    /// Their function names, for `tool_choice` to name one.
    pub(super) names: Vec<String>,
}

/// Checks `tools`: an array of at most [`MAX_TOOLS`] tools that vLLM would serve.
pub(super) fn offered(sent: Option<Sent<Vec<Value>>>) -> Result<Offered, ApiError> {
    let tools = match sent {
        None => Vec::new(),
        Some(Sent::Typed(tools)) => tools,
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`tools` must be an array.",
                Some("tools"),
            ))
        }
    };
    if tools.len() > MAX_TOOLS {
        return Err(ApiError::invalid(
            format!(
                "Invalid 'tools': array too long. Expected an array with maximum length {MAX_TOOLS}, but got an array with length {} instead.",
                tools.len()
            ),
            Some("tools"),
        ));
    }
    let mut names = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let name = check(tool).map_err(|e| format!("tools[{i}]: {e}"));
        names.push(name.map_err(|e| ApiError::invalid(e, Some("tools")))?);
    }
    Ok(Offered { tools, names })
}

/// What vLLM checks of a tool before serving it: a function with a valid name and object
/// parameters. Answers the function's name.
fn check(tool: &Value) -> Result<String, String> {
    // A tool that is not an object has no `function` object either.
    let Ok(Object(spec)) = Object::<Tool>::deserialize(tool) else {
        return Err("has no `function` object.".into());
    };
    if let Some(t) = spec.kind.filter(|t| t != "function") {
        return Err(format!("`type` must be \"function\", got {t}."));
    }
    let Some(Sent::Typed(Object(function))) = spec.function else {
        return Err("has no `function` object.".into());
    };
    let Some(Sent::Typed(name)) = function.name else {
        return Err("has no function.name.".into());
    };
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
    if let Some(Sent::Other(p)) = function.parameters {
        return Err(format!(
            "function.parameters of `{name}` must be a JSON Schema object, got {p}."
        ));
    }
    Ok(name)
}

/// What `tool_choice` asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Choice {
    /// No tools reach the model.
    None,
    /// The model calls a tool or not, as it likes (the default).
    Auto,
    /// The reply is one or more tool calls, of any offered tool.
    Required,
    /// The reply calls this function.
    Named(String),
}

/// Reads `tool_choice`; a named function must be among the tools, and forcing a call needs
/// tools to call.
pub(super) fn choice(sent: Option<Sent<ToolChoice>>, names: &[String]) -> Result<Choice, ApiError> {
    let choice = match sent {
        None => Choice::Auto,
        Some(Sent::Typed(ToolChoice::Mode(c))) => match c.as_str() {
            "none" => Choice::None,
            "auto" => Choice::Auto,
            "required" => Choice::Required,
            other => {
                return Err(ApiError::invalid(
                    format!("`tool_choice` must be \"none\", \"auto\", \"required\" or a named function; got \"{other}\"."),
                    Some("tool_choice"),
                ))
            }
        },
        Some(Sent::Typed(ToolChoice::Function(Object(named)))) => {
            let name = named.function.0.name;
            if !names.contains(&name) {
                return Err(ApiError::invalid(
                    format!("`tool_choice` names the function `{name}`, which is not in `tools`."),
                    Some("tool_choice"),
                ));
            }
            Choice::Named(name)
        }
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`tool_choice` must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}.",
                Some("tool_choice"),
            ))
        }
    };
    if choice == Choice::Required && names.is_empty() {
        return Err(ApiError::invalid(
            "`tool_choice` is \"required\" but the request offers no `tools`.",
            Some("tool_choice"),
        ));
    }
    Ok(choice)
}

//! Structured outputs: `response_format` and a `tool_choice` that forces a call, read into the
//! [`Shape`] the reply is decoded under.

use super::tools::{Choice, Offered};
use super::wire::Sent;
use super::ApiError;
use openclaw_grammar::{Function, Shape};
use serde_json::Value;

/// Reads `response_format`: `text` (or none) asks nothing; `json_object` any JSON object;
/// `json_schema` a value under its `json_schema.schema`, as OpenAI and vLLM take it.
pub(super) fn response_format(sent: Option<Value>) -> Result<Option<Shape>, ApiError> {
    let bad = |m: String| ApiError::invalid(m, Some("response_format"));
    let Some(v) = sent.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let Some(obj) = v.as_object() else {
        return Err(bad(format!(
            "`response_format` must be an object with a `type`, got {v}."
        )));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Shape::JsonObject)),
        Some("json_schema") => {
            let Some(spec) = obj.get("json_schema").and_then(Value::as_object) else {
                return Err(bad(
                    "`response_format.json_schema` must be an object with a `schema`.".into(),
                ));
            };
            match spec.get("schema") {
                Some(s @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(Shape::JsonSchema(s.clone()))),
                // OpenAI: a schema left out is an empty one, which any JSON value meets.
                None | Some(Value::Null) => Ok(Some(Shape::JsonSchema(Value::Object(Default::default())))),
                Some(other) => Err(bad(format!(
                    "`response_format.json_schema.schema` must be a JSON Schema object, got {other}."
                ))),
            }
        }
        Some(other) => Err(bad(format!(
            "`response_format.type` must be \"text\", \"json_object\" or \"json_schema\"; got \"{other}\" (grammars, regexes and structural tags are not served)."
        ))),
        None => Err(bad("`response_format` has no `type`.".into())),
    }
}

/// What the reply must be: the format asked for, or the tool calls `tool_choice` forces
/// (`parallel_tool_calls: false` allows one). Both at once are refused: a reply cannot be a
/// JSON document and tool calls.
pub(super) fn shape(
    format: Option<Shape>,
    choice: &Choice,
    offered: &Offered,
    parallel: Option<Sent<bool>>,
) -> Result<Option<Shape>, ApiError> {
    let parallel = match parallel {
        None => true,
        Some(Sent::Typed(p)) => p,
        Some(Sent::Other(_)) => {
            return Err(ApiError::invalid(
                "`parallel_tool_calls` must be a boolean.",
                Some("parallel_tool_calls"),
            ))
        }
    };
    let function = |i: usize| Function {
        name: offered.names[i].clone(),
        parameters: offered.tools[i]
            .get("function")
            .and_then(|f| f.get("parameters"))
            .cloned()
            .unwrap_or(Value::Null),
    };
    let forced = match choice {
        Choice::Required => Some(Shape::ToolCalls {
            tools: (0..offered.names.len()).map(function).collect(),
            parallel,
        }),
        Choice::Named(name) => Some(Shape::ToolCalls {
            tools: offered
                .names
                .iter()
                .position(|n| n == name)
                .map(function)
                .into_iter()
                .collect(),
            parallel: false,
        }),
        Choice::None | Choice::Auto => None,
    };
    match (format, forced) {
        (Some(_), Some(_)) => Err(ApiError::invalid(
            "`response_format` asks for JSON and `tool_choice` forces a tool call; a reply cannot be both.",
            Some("response_format"),
        )),
        (f, t) => Ok(f.or(t)),
    }
}

//! The host's one message type is the chat crate's [`ChatMessage`]: a request's messages are
//! parsed into it once (by `serve::protocol`), rendered by the chat template, tracked by
//! sessions, and converted to the ABI's [`Message`] once, where they cross to plugins or go to
//! the buffer ([`to_abi`]); messages coming back from plugins convert with [`from_abi`].
//! OpenAI JSON is read and written only at the edges (requests, trajectory files, exports).

use abi_stable::std_types::ROption;
use openclaw_chat::{ChatMessage, MessageContent, ToolCall};
use openclaw_plugin_api::{Message, NextState};
use serde_json::{json, Map, Value};

/// A message's content as one string: text parts joined as the server normalises them
/// ([`content_text`]), `""` when absent.
pub fn content_of(m: &ChatMessage) -> String {
    match &m.content {
        Some(MessageContent::Parts(parts)) => parts
            .iter()
            .filter_map(|p| p.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n"),
        Some(MessageContent::Text(t)) => t.clone(),
        None => String::new(),
    }
}

/// A chat message as the ABI carries it: content as one string, tool calls as JSON text.
pub fn to_abi(m: &ChatMessage) -> Message {
    Message {
        role: m.role.as_str().into(),
        content: content_of(m).into(),
        reasoning_content: m.reasoning_content.as_deref().map(Into::into).into(),
        tool_calls_json: m
            .tool_calls
            .as_ref()
            .map(|c| serde_json::to_string(c).unwrap_or_default().into())
            .into(),
        tool_call_id: m.tool_call_id.as_deref().map(Into::into).into(),
        name: m.name.as_deref().map(Into::into).into(),
    }
}

/// An ABI message as a chat message (tool calls parsed back; text that is not a list of
/// calls is dropped with the calls, as a template could not render it).
pub fn from_abi(m: &Message) -> ChatMessage {
    let opt = |o: &ROption<abi_stable::std_types::RString>| -> Option<String> {
        o.as_ref().into_option().map(|s| s.to_string())
    };
    ChatMessage {
        role: m.role.to_string(),
        content: Some(MessageContent::Text(m.content.to_string())),
        reasoning_content: opt(&m.reasoning_content),
        tool_calls: m
            .tool_calls_json
            .as_ref()
            .into_option()
            .and_then(|t| serde_json::from_str::<Vec<ToolCall>>(t).ok()),
        tool_call_id: opt(&m.tool_call_id),
        name: opt(&m.name),
        extra: Map::new(),
    }
}

/// An ABI message as OpenAI JSON (`tool_calls` parsed back into JSON).
pub fn to_json(m: &Message) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), json!(m.role.as_str()));
    o.insert("content".into(), json!(m.content.as_str()));
    if let ROption::RSome(r) = &m.reasoning_content {
        o.insert("reasoning_content".into(), json!(r.as_str()));
    }
    if let ROption::RSome(t) = &m.tool_calls_json {
        let calls = serde_json::from_str(t).unwrap_or_else(|_| json!(t.as_str()));
        o.insert("tool_calls".into(), calls);
    }
    if let ROption::RSome(id) = &m.tool_call_id {
        o.insert("tool_call_id".into(), json!(id.as_str()));
    }
    if let ROption::RSome(n) = &m.name {
        o.insert("name".into(), json!(n.as_str()));
    }
    Value::Object(o)
}

/// OpenAI message JSON as an ABI message: `content` as a string or an array of text parts
/// (joined), `tool_calls` kept as JSON text. A bare string is a user message.
pub fn from_json(v: &Value, default_role: &str) -> Result<Message, String> {
    if let Value::String(s) = v {
        return Ok(Message::new(default_role, s));
    }
    let o = v
        .as_object()
        .ok_or("a message must be an object or a string")?;
    let role = o
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or(default_role);
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(|s| s.into());
    Ok(Message {
        role: role.into(),
        content: content_text(o.get("content").unwrap_or(&Value::Null))?.into(),
        reasoning_content: text("reasoning_content").into(),
        tool_calls_json: o
            .get("tool_calls")
            .filter(|t| !t.is_null())
            .map(|t| t.to_string().into())
            .into(),
        tool_call_id: text("tool_call_id").into(),
        name: text("name").into(),
    })
}

/// The text of an OpenAI `content`: a string, null, or an array of `{type: "text", text}` parts.
pub fn content_text(v: &Value) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .ok_or(format!("content[{i}] has no string `text`"))?
                            .to_string(),
                    ),
                    Some(other) => {
                        return Err(format!(
                            "content[{i}] has type `{other}`; only text parts are supported"
                        ))
                    }
                    None => return Err(format!("content[{i}] has no `type`")),
                }
            }
            Ok(out.join("\n"))
        }
        _ => Err("content must be a string, null or an array of text parts".into()),
    }
}

/// A next state as JSON `{role, content}`.
pub fn next_state_json(n: &NextState) -> Value {
    json!({"role": n.role.as_str(), "content": n.content.as_str()})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let v = json!({"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]});
        let m = from_json(&v, "user").unwrap();
        assert_eq!(m.content.as_str(), "a\nb");
        let back = to_json(&m);
        assert_eq!(back["tool_calls"][0]["function"]["name"], "ls");
        assert_eq!(
            from_json(&json!("hi"), "user").unwrap().role.as_str(),
            "user"
        );
        let e = from_json(
            &json!({"role": "user", "content": [{"type": "image_url"}]}),
            "user",
        )
        .unwrap_err();
        assert!(e.contains("image_url"), "{e}");
    }
}

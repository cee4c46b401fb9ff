//! OpenAI-style chat messages, and the plain JSON a chat template sees.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One message of an OpenAI chat-completions request or reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text, or content parts; `None` for `null` or absent (assistant messages with tool calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<MessageContent>,
    /// The assistant's reasoning (`reasoning` and `thinking` are accepted as aliases when
    /// rendering, as transformers does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Tool calls made by the assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For `tool` messages: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Participant or tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Any other fields; passed to the template unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Message content: a string or an array of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// `[{"type": "text", "text": ...}, {"type": "image_url", ...}, ...]`.
    Parts(Vec<ContentPart>),
}

/// One part of array content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The part's other fields (image URLs etc.).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An OpenAI tool call: `{id, type: "function", function: {name, arguments}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id (`call_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Always `function` today.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name.
    pub name: String,
    /// Arguments as the client sent them: OpenAI clients send a JSON string; an object is
    /// accepted too. Templates get exactly this value, as with transformers.
    #[serde(default = "empty_arguments")]
    pub arguments: Value,
}

fn function_kind() -> String {
    "function".to_owned()
}

fn empty_arguments() -> Value {
    Value::String("{}".to_owned())
}

/// Text parts are joined with one space, as the original system and SGLang do for
/// text-only templates; other parts (images) are dropped.
pub(crate) const PART_SEPARATOR: &str = " ";

impl MessageContent {
    /// The content as one string (text parts joined, other parts dropped).
    pub fn to_text(&self) -> String {
        match self {
            MessageContent::Text(s) => s.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join(PART_SEPARATOR),
        }
    }
}

impl ChatMessage {
    /// A message with a role and text content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: Some(MessageContent::Text(content.into())),
            ..Default::default()
        }
    }

    /// The content as one string ("" when absent).
    pub fn text(&self) -> String {
        self.content
            .as_ref()
            .map(MessageContent::to_text)
            .unwrap_or_default()
    }

    /// The message as a chat template sees it.
    ///
    /// `developer` becomes `system`, content becomes one string (`""` when absent: Qwen-style
    /// templates do string operations on it), fields that are `null` are left out (as
    /// transformers does), and reasoning is exposed as `reasoning_content` and `thinking`
    /// whichever of `reasoning_content`, `thinking`, `reasoning` the client used.
    pub(crate) fn to_template_value(&self) -> Value {
        let mut m = Map::new();
        let role = if self.role == "developer" {
            "system"
        } else {
            self.role.as_str()
        };
        m.insert("role".into(), Value::String(role.into()));
        m.insert("content".into(), Value::String(self.text()));
        if let Some(calls) = &self.tool_calls {
            let calls = serde_json::to_value(calls).expect("tool calls serialize");
            m.insert("tool_calls".into(), calls);
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), Value::String(id.clone()));
        }
        if let Some(name) = &self.name {
            m.insert("name".into(), Value::String(name.clone()));
        }
        for (k, v) in &self.extra {
            if !v.is_null() {
                m.insert(k.clone(), v.clone());
            }
        }
        let reasoning = self
            .reasoning_content
            .clone()
            .map(Value::String)
            .or_else(|| m.get("thinking").cloned())
            .or_else(|| m.get("reasoning").cloned());
        if let Some(r) = reasoning {
            m.entry("thinking").or_insert_with(|| r.clone());
            m.insert("reasoning_content".into(), r);
        }
        Value::Object(m)
    }
}

/// What kind of JSON value `v` is, as an error message says it ("a string", "an array").
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_openai_shapes() {
        let m: ChatMessage = serde_json::from_value(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\":1}"}}],
        }))
        .unwrap();
        assert_eq!(m.content, None);
        let calls = m.tool_calls.as_ref().unwrap();
        assert_eq!(calls[0].function.arguments, json!("{\"a\":1}"));
        let v = m.to_template_value();
        assert_eq!(v["content"], json!(""));
        assert_eq!(v["tool_calls"][0]["function"]["name"], json!("f"));
        assert!(v.get("reasoning_content").is_none());
    }

    #[test]
    fn parts_are_joined_and_developer_is_system() {
        let m: ChatMessage = serde_json::from_value(json!({
            "role": "developer",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}},
                        {"type": "text", "text": "b"}],
        }))
        .unwrap();
        let v = m.to_template_value();
        assert_eq!(v["role"], json!("system"));
        assert_eq!(v["content"], json!("a b"));
        // Round trip keeps the parts.
        let back: ChatMessage = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn reasoning_aliases() {
        let m: ChatMessage =
            serde_json::from_value(json!({"role": "assistant", "content": "x", "reasoning": "r"}))
                .unwrap();
        let v = m.to_template_value();
        assert_eq!(v["reasoning_content"], json!("r"));
        assert_eq!(v["thinking"], json!("r"));
        let m: ChatMessage = serde_json::from_value(
            json!({"role": "assistant", "content": "x", "reasoning_content": "a", "thinking": null}),
        )
        .unwrap();
        let v = m.to_template_value();
        assert_eq!(v["reasoning_content"], json!("a"));
        assert_eq!(v["thinking"], json!("a"));
    }
}

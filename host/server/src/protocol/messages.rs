//! A request's messages, each read into the chat crate's [`ChatMessage`] with its content as
//! one string.

use super::wire::{Content, Message, Object, Part, Sent};
use super::ApiError;
use openclaw_chat::ChatMessage;
use serde_json::{Map, Value};

/// The roles a message may have.
const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// Reads `messages`: a non-empty array, the first bad message refused with its index.
pub(super) fn read(sent: Option<Sent<Vec<Sent<Message>>>>) -> Result<Vec<ChatMessage>, ApiError> {
    let messages = match sent {
        Some(Sent::Typed(messages)) if !messages.is_empty() => messages,
        Some(Sent::Typed(_)) => {
            return Err(ApiError::invalid(
                "`messages` must not be empty.",
                Some("messages"),
            ))
        }
        Some(Sent::Other(_)) => {
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
    messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message(i, m))
        .collect()
}

/// Message `i`: an object with a known role and text content.
fn message(i: usize, sent: Sent<Message>) -> Result<ChatMessage, ApiError> {
    let Sent::Typed(m) = sent else {
        return Err(ApiError::invalid(
            format!("messages[{i}] must be an object."),
            Some("messages"),
        ));
    };
    let role = match m.role {
        Some(Sent::Typed(role)) => role,
        _ => String::new(),
    };
    if !ROLES.contains(&role.as_str()) {
        return Err(ApiError::invalid(
            format!("messages[{i}].role must be one of system, developer, user, assistant, tool; got `{role}`."),
            Some("messages"),
        ));
    }
    let content = text(m.content)
        .map_err(|e| ApiError::invalid(format!("messages[{i}].{e}"), Some("messages")))?;
    // Content goes on as one string, the text every later reader takes; the chat crate reads
    // the other fields.
    let mut fields = Map::new();
    fields.insert("role".into(), Value::String(role));
    fields.insert("content".into(), Value::String(content));
    fields.extend(m.rest);
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::invalid(format!("messages[{i}]: {e}"), Some("messages")))
}

/// The text of `content`: a string, or its text parts joined by newlines; empty when absent.
/// An error names the problem from `content` on, for the caller to say which message.
fn text(content: Option<Sent<Content>>) -> Result<String, String> {
    match content {
        None => Ok(String::new()),
        Some(Sent::Typed(Content::Text(text))) => Ok(text),
        Some(Sent::Typed(Content::Parts(parts))) => {
            let texts = parts
                .into_iter()
                .enumerate()
                .map(|(j, part)| part_text(j, part))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(texts.join("\n"))
        }
        _ => Err("content must be a string, null or an array of text parts".into()),
    }
}

/// The text of part `j`: only text parts are served.
fn part_text(j: usize, part: Sent<Object<Part>>) -> Result<String, String> {
    // A part that is not an object has no `type` either.
    let Sent::Typed(Object(part)) = part else {
        return Err(format!("content[{j}] has no `type`"));
    };
    match part.kind {
        Some(Sent::Typed(kind)) if kind == "text" => match part.text {
            Some(Sent::Typed(text)) => Ok(text),
            _ => Err(format!("content[{j}] has no string `text`")),
        },
        Some(Sent::Typed(kind)) => Err(format!(
            "content[{j}] has type `{kind}`; only text parts are supported"
        )),
        _ => Err(format!("content[{j}] has no `type`")),
    }
}

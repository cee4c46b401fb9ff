//! The request as a client sends it, as serde reads it. Each field holds a value of its type
//! or, failing that, the JSON that came instead ([`Sent`]): any JSON object reads, and the
//! parent module's checks refuse a bad field by name, in their own order.

use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::fmt;
use std::marker::PhantomData;

/// A field as sent: a value of its type, or any other JSON, kept for the check that refuses it.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Sent<T> {
    /// Of the field's type.
    Typed(T),
    /// Anything else.
    Other(Value),
}

/// A JSON object read as `T`. serde's derive reads a struct from an array too, taking its
/// items as the fields in order; an array is not an object to a client, so it is refused.
pub(super) struct Object<T>(pub(super) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

/// Reads an [`Object`] from a map, and from nothing else.
struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
        let value = T::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Object(value))
    }
}

/// Reads a field that is there, `null` included: serde reads `null` into an `Option` as
/// `None`, and for these fields `null` is refused where leaving the field out is not.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// A chat-completions request as sent. The keys named here are the known ones; any other is
/// kept in `other`, to be ignored or refused by name. `null` reads as absent except where
/// said.
#[derive(Deserialize)]
pub(super) struct Request {
    /// The conversation. `null` is refused as not an array, where leaving it out is a missing
    /// parameter.
    #[serde(default, deserialize_with = "present")]
    pub(super) messages: Option<Sent<Vec<Sent<Message>>>>,
    /// The model id asked for.
    pub(super) model: Option<Sent<String>>,
    /// Stream token by token.
    pub(super) stream: Option<Sent<bool>>,
    /// Stream options.
    pub(super) stream_options: Option<Sent<StreamOptions>>,
    /// The completion budget under its older name.
    pub(super) max_tokens: Option<Sent<u64>>,
    /// The completion budget.
    pub(super) max_completion_tokens: Option<Sent<u64>>,
    /// Sampling temperature.
    pub(super) temperature: Option<Sent<f64>>,
    /// Nucleus mass.
    pub(super) top_p: Option<Sent<f64>>,
    /// Top-k; -1 or 0 turns it off.
    pub(super) top_k: Option<Sent<i64>>,
    /// Stop strings.
    pub(super) stop: Option<Sent<Stop>>,
    /// Sampling seed.
    pub(super) seed: Option<Sent<u64>>,
    /// Tools, kept as sent: they reach the chat template unchanged.
    pub(super) tools: Option<Sent<Vec<Value>>>,
    /// `none`, `auto`, `required` or a named function.
    pub(super) tool_choice: Option<Sent<ToolChoice>>,
    /// Whether a forced tool call may be followed by more.
    pub(super) parallel_tool_calls: Option<Sent<bool>>,
    /// `text`, `json_object` or `json_schema`, kept as sent for the checks that name the bad
    /// part.
    pub(super) response_format: Option<Value>,
    /// How many completions.
    pub(super) n: Option<Sent<u64>>,
    /// The end user, by any name.
    pub(super) user: Option<Sent<String>>,
    /// Variables for the chat template.
    pub(super) chat_template_kwargs: Option<Sent<Map<String, Value>>>,
    /// Answer with each token's logprob.
    pub(super) logprobs: Option<Sent<bool>>,
    /// How many alternatives per token.
    pub(super) top_logprobs: Option<Sent<u64>>,
    /// The session: a string, or any other JSON as written.
    pub(super) session_id: Option<Sent<String>>,
    /// `main` or `side`.
    pub(super) turn_type: Option<Sent<String>>,
    /// Whether the session ends with this request.
    pub(super) session_done: Option<Sent<String>>,
    /// Every other key, in the body's order.
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

/// A legacy completions request as sent (`/v1/completions`). As with [`Request`], the keys
/// named here are the known ones and any other is kept in `other`.
#[derive(Deserialize)]
pub(super) struct CompletionRequest {
    /// Text, token ids, or a list of either, kept as sent for the checks that name the bad
    /// item. `null` is refused as not a prompt, where leaving it out is a missing parameter.
    #[serde(default, deserialize_with = "present")]
    pub(super) prompt: Option<Value>,
    /// The model id asked for.
    pub(super) model: Option<Sent<String>>,
    /// Stream token by token.
    pub(super) stream: Option<Sent<bool>>,
    /// Stream options.
    pub(super) stream_options: Option<Sent<StreamOptions>>,
    /// The completion budget.
    pub(super) max_tokens: Option<Sent<u64>>,
    /// Sampling temperature.
    pub(super) temperature: Option<Sent<f64>>,
    /// Nucleus mass.
    pub(super) top_p: Option<Sent<f64>>,
    /// Top-k; -1 or 0 turns it off.
    pub(super) top_k: Option<Sent<i64>>,
    /// Stop strings.
    pub(super) stop: Option<Sent<Stop>>,
    /// Sampling seed.
    pub(super) seed: Option<Sent<u64>>,
    /// How many completions.
    pub(super) n: Option<Sent<u64>>,
    /// The end user, by any name.
    pub(super) user: Option<Sent<String>>,
    /// Every other key, in the body's order.
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

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

/// A message as sent: `role` and `content` are checked here, and the other fields are the
/// chat crate's to read.
#[derive(Deserialize)]
pub(super) struct Message {
    /// The role; anything but a string shows as empty.
    pub(super) role: Option<Sent<String>>,
    /// The content; absent and `null` are empty.
    pub(super) content: Option<Sent<Content>>,
    /// Every other field, in the message's order. Being flattened, it also keeps a message
    /// from reading out of an array.
    #[serde(flatten)]
    pub(super) rest: Map<String, Value>,
}

/// A message's `content`: a string or an array of parts.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    /// Plain text.
    Text(String),
    /// Parts, each as sent.
    Parts(Vec<Sent<Object<Part>>>),
}

/// A content part: only text parts are served.
#[derive(Deserialize)]
pub(super) struct Part {
    /// `text`, `image_url`, ...
    #[serde(rename = "type")]
    pub(super) kind: Option<Sent<String>>,
    /// The text of a text part.
    pub(super) text: Option<Sent<String>>,
}

/// What is checked of a tool; the tool itself reaches the chat template as sent.
#[derive(Deserialize)]
pub(super) struct Tool {
    /// `type`, `null` included: only `"function"` is served.
    #[serde(rename = "type", default, deserialize_with = "present")]
    pub(super) kind: Option<Value>,
    /// The function.
    pub(super) function: Option<Sent<Object<Function>>>,
}

/// What is checked of a tool's function.
#[derive(Deserialize)]
pub(super) struct Function {
    /// Its name.
    pub(super) name: Option<Sent<String>>,
    /// Its parameters, a JSON Schema object: whether it is an object is all that is read.
    pub(super) parameters: Option<Sent<Object<IgnoredAny>>>,
}

/// `tool_choice`: a mode, or a function named as OpenAI names it.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum ToolChoice {
    /// `none`, `auto`, `required`, or a mode that does not exist.
    Mode(String),
    /// `{"type": "function", "function": {"name": ...}}`.
    Function(Object<NamedTool>),
}

/// The function a `tool_choice` names.
#[derive(Deserialize)]
pub(super) struct NamedTool {
    /// The function.
    pub(super) function: Object<FunctionName>,
}

/// A function's name.
#[derive(Deserialize)]
pub(super) struct FunctionName {
    /// The name.
    pub(super) name: String,
}

//! The legacy completions request (`/v1/completions`) as vLLM takes it: a prompt of text or of
//! token ids, the chat request's sampling settings under the same checks, and what the legacy
//! API defines and this server does not do refused by name.

use super::wire::{self, Sent};
use super::{
    include_usage, model, only_one, read_object, refuse_unknown, stop, stream, temperature, top_k,
    top_p, uint, ApiError, IsNeutral, Sampling,
};
use serde_json::Value;

/// A legacy completions request, after parsing and validation.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionRequest {
    /// The model id asked for.
    pub model: Option<String>,
    /// The prompt.
    pub prompt: CompletionPrompt,
    /// Sampling settings.
    pub sampling: Sampling,
    /// Stream token by token.
    pub stream: bool,
    /// Stream options.
    pub include_usage: bool,
}

/// A completion's prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum CompletionPrompt {
    /// Text, tokenized by the server.
    Text(String),
    /// Token ids, fed to the model as they are. Whether each is in the vocabulary is checked
    /// where the model is known (the route).
    Ids(Vec<u32>),
}

/// What the legacy API defines and this server does not do: accepted at its neutral value,
/// refused by name otherwise, with why.
const NOT_SERVED: &[(&str, IsNeutral, &str)] = &[
    (
        "echo",
        |v| v.as_bool() == Some(false),
        "the answer holds the completion only, not the prompt before it",
    ),
    (
        "best_of",
        |v| v.as_u64() == Some(1),
        "one completion is sampled per request",
    ),
    (
        "suffix",
        |v| v.as_str() == Some(""),
        "text to follow the completion (insertion) is not served",
    ),
    (
        "logprobs",
        // `0` is not neutral either: it asks for the sampled tokens' logprobs.
        |_| false,
        "token logprobs are answered by /v1/chat/completions (`logprobs`, `top_logprobs`), not here",
    ),
];

/// Parses and validates a legacy completions body. Session headers and keys do not apply: a
/// completion is no turn of a conversation, and is not recorded.
pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest, ApiError> {
    let sent: wire::CompletionRequest = read_object(body)?;
    for (k, neutral, why) in NOT_SERVED {
        if let Some(v) = sent.other.get(*k).filter(|v| !v.is_null()) {
            if !neutral(v) {
                return Err(ApiError::invalid(
                    format!("`{k}` is not supported on /v1/completions (got {v}): {why}."),
                    Some(*k),
                ));
            }
        }
    }
    // The legacy API defines no key beyond the wire type's and `NOT_SERVED`'s.
    refuse_unknown(&sent.other, |k| NOT_SERVED.iter().any(|(n, _, _)| *n == k))?;
    let prompt = prompt(sent.prompt)?;
    only_one(sent.n)?;
    let temperature = temperature(sent.temperature)?;
    let top_k = top_k(sent.top_k)?;
    let top_p = top_p(sent.top_p)?;
    let max_tokens = match uint(sent.max_tokens, "max_tokens")? {
        Some(0) => {
            return Err(ApiError::invalid(
                "`max_tokens` must be at least 1.",
                Some("max_tokens"),
            ))
        }
        m => m.map(|m| m.min(u32::MAX as u64) as u32),
    };
    let stop = stop(sent.stop)?;
    let stream = stream(sent.stream)?;
    let include_usage = include_usage(sent.stream_options)?;
    let model = model(sent.model)?;
    if let Some(Sent::Other(_)) = sent.user {
        return Err(ApiError::invalid("`user` must be a string.", Some("user")));
    }
    Ok(CompletionRequest {
        model,
        prompt,
        sampling: Sampling {
            max_tokens,
            temperature,
            top_p,
            top_k,
            stop,
            seed: uint(sent.seed, "seed")?,
        },
        stream,
        include_usage,
    })
}

/// `prompt`: text, token ids, or a list of one of either. A list of several prompts (vLLM's
/// batch) is refused: one completion per request, as with `n`.
fn prompt(sent: Option<Value>) -> Result<CompletionPrompt, ApiError> {
    let bad = |message: String| ApiError::invalid(message, Some("prompt"));
    let items = match sent {
        None => {
            return Err(ApiError::invalid(
                "Missing required parameter: 'prompt'.",
                Some("prompt"),
            ))
        }
        Some(Value::String(text)) => return Ok(CompletionPrompt::Text(text)),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(bad(format!(
                "`prompt` must be a string or an array of token ids, got {other}."
            )))
        }
    };
    match items.first() {
        None => Err(bad("`prompt` must not be empty.".into())),
        Some(Value::Number(_)) => token_ids(&items, "prompt").map(CompletionPrompt::Ids),
        Some(Value::String(_) | Value::Array(_)) if items.len() > 1 => Err(bad(format!(
            "`prompt` holds a list of {} prompts; this server completes one prompt per request, so send them one by one.",
            items.len()
        ))),
        Some(Value::String(text)) => Ok(CompletionPrompt::Text(text.clone())),
        Some(Value::Array(ids)) => token_ids(ids, "prompt[0]").map(CompletionPrompt::Ids),
        Some(other) => Err(bad(format!(
            "`prompt[0]` must be a token id, a string or an array of token ids, got {other}."
        ))),
    }
}

/// Token ids as sent (`at` names the array): each a non-negative integer that fits a token id,
/// the first that is not named by its index.
fn token_ids(items: &[Value], at: &str) -> Result<Vec<u32>, ApiError> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    ApiError::invalid(
                        format!(
                            "`{at}[{i}]` must be a token id (a non-negative integer), got {v}."
                        ),
                        Some("prompt"),
                    )
                })
        })
        .collect()
}

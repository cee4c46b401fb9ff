//! Serving: the OpenAI-compatible HTTP API.

pub mod protocol;

//! Serving: the OpenAI-compatible HTTP API.

pub mod protocol;
pub mod server;
pub mod text;

pub use server::{router, App, ServerOptions};

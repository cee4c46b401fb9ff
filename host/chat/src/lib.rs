//! Text in and out of the model: tokenizers, chat templates and the output parser.
//!
//! - [`Tokenizer`] loads a HF `tokenizer.json` (plus `tokenizer_config.json` for the special
//!   tokens), encodes and decodes; [`IncrementalDecoder`] turns sampled ids into text deltas
//!   for streaming; [`train_bpe`] makes a byte-level BPE tokenizer for small models;
//!   [`tokenizer_from_gguf`] builds one (and [`chat_template_from_gguf`] its chat template)
//!   from GGUF tokenizer metadata.
//! - [`ChatTemplate`] renders [`ChatMessage`]s with a checkpoint's Jinja chat template the way
//!   transformers' `apply_chat_template` does; a template without a tools section gets the
//!   tools in the system prompt instead ([`ToolsRoute`], [`tools_system_prompt`]).
//! - [`OutputParser`] splits generated text into reasoning, content and tool calls, one delta
//!   at a time.

#![warn(missing_docs)]

mod config;
mod gguf;
mod incremental;
mod message;
mod parser;
mod pyjson;
mod template;
mod tokenizer;
mod tools;
mod train;

pub use config::TokenizerConfig;
pub use gguf::{
    chat_template_from_gguf, tokenizer_files_from_gguf, tokenizer_from_gguf, GgufTokenizerSpec,
    TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED,
};
pub use incremental::IncrementalDecoder;
pub use message::{json_kind, ChatMessage, ContentPart, FunctionCall, MessageContent, ToolCall};
pub use parser::{OutputParser, ParseEvent, ParsedMessage, ParsedToolCall, ParserOptions};
pub use template::{ChatTemplate, RenderOptions};
pub use tokenizer::{SpecialToken, SpecialTokens, Tokenizer};
pub use tools::{tools_system_prompt, ToolsRoute};
pub use train::{train_bpe, CHATML_TEMPLATE};

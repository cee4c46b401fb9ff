//! Incremental parsing of generated text into reasoning, content and tool calls.
//!
//! The format is Qwen's (also Hermes-style tool calling):
//! `<think>\nreasoning\n</think>\n\ncontent\n<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`.
//! Newlines that only separate a tag from its neighbours belong to the markup: a run of
//! `\n` just before a tag and at the start of a section (after `<think>`, `</think>`,
//! `</tool_call>`, and at the start of the message) is dropped, so that rendering the parsed
//! message with the Qwen3 template gives back the generated text.
//!
//! `<think>` opens reasoning wherever it appears in content (several think blocks are
//! concatenated); `</think>` outside reasoning and `<tool_call>` with tool parsing off are
//! plain text.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::message::{ChatMessage, FunctionCall, MessageContent, ToolCall};

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const TOOL_OPEN: &str = "<tool_call>";
const TOOL_CLOSE: &str = "</tool_call>";

/// How to read the generated text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParserOptions {
    /// The prompt ended inside a think block (e.g. with `<think>\n`), so the text starts as
    /// reasoning until `</think>`.
    pub starts_in_reasoning: bool,
    /// Recognise `<tool_call>` blocks (turn off when the request offered no tools, so the
    /// text stays content).
    pub parse_tool_calls: bool,
}

impl ParserOptions {
    /// Options for output that follows `prompt`: reasoning first when the prompt ends inside
    /// an opened think block (templates of thinking-only models end with `<think>\n`).
    pub fn for_prompt(prompt: &str) -> Self {
        Self {
            starts_in_reasoning: prompt.trim_end().ends_with(THINK_OPEN),
            ..Self::default()
        }
    }
}

impl Default for ParserOptions {
    fn default() -> Self {
        Self {
            starts_in_reasoning: false,
            parse_tool_calls: true,
        }
    }
}

/// A complete tool call found in the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedToolCall {
    /// Position among this message's tool calls, from 0.
    pub index: usize,
    /// A fresh id, `call_` followed by 24 alphanumerics.
    pub id: String,
    /// Function name.
    pub name: String,
    /// Arguments as a JSON string (OpenAI's `function.arguments`), exactly as generated.
    pub arguments: String,
}

/// What [`OutputParser`] reports as text arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseEvent {
    /// More visible answer text.
    ContentDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// A tool call, reported whole when its closing tag arrives.
    ToolCall(ParsedToolCall),
    /// Something was not well-formed (it was kept as content).
    Warning(String),
}

/// The whole parsed message: the sum of all events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedMessage {
    /// Visible answer text.
    pub content: String,
    /// Reasoning text (empty when the model did not think).
    pub reasoning_content: String,
    /// Tool calls in order.
    pub tool_calls: Vec<ParsedToolCall>,
    /// Problems found (malformed or unclosed tool calls).
    pub warnings: Vec<String>,
}

impl ParsedMessage {
    /// Adds one event.
    pub fn apply(&mut self, event: &ParseEvent) {
        match event {
            ParseEvent::ContentDelta(s) => self.content.push_str(s),
            ParseEvent::ReasoningDelta(s) => self.reasoning_content.push_str(s),
            ParseEvent::ToolCall(c) => self.tool_calls.push(c.clone()),
            ParseEvent::Warning(w) => self.warnings.push(w.clone()),
        }
    }

    /// The OpenAI assistant message: `content` is `null` when empty and there are tool calls,
    /// `reasoning_content` is left out when empty.
    pub fn to_chat_message(&self) -> ChatMessage {
        let content = if self.content.is_empty() && !self.tool_calls.is_empty() {
            None
        } else {
            Some(MessageContent::Text(self.content.clone()))
        };
        let tool_calls = (!self.tool_calls.is_empty()).then(|| {
            self.tool_calls
                .iter()
                .map(|c| ToolCall {
                    id: Some(c.id.clone()),
                    kind: "function".to_owned(),
                    function: FunctionCall {
                        name: c.name.clone(),
                        arguments: serde_json::Value::String(c.arguments.clone()),
                    },
                })
                .collect()
        });
        ChatMessage {
            role: "assistant".to_owned(),
            content,
            reasoning_content: (!self.reasoning_content.is_empty())
                .then(|| self.reasoning_content.clone()),
            tool_calls,
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content,
    Reasoning,
    ToolCall,
}

/// Splits generated text, fed in deltas of any size, into [`ParseEvent`]s.
///
/// Only text that could still turn out to be markup is held back: a proper prefix of a tag,
/// with the run of newlines before it. Tool-call bodies are held until their closing tag.
#[derive(Debug, Clone)]
pub struct OutputParser {
    options: ParserOptions,
    mode: Mode,
    /// Unclassified text: a possible tag prefix (Content/Reasoning) or a possible closing
    /// tag prefix (ToolCall).
    pending: String,
    /// Leading newlines of the current section are markup and dropped.
    section_start: bool,
    /// The opening markup of the current tool call, kept to restore it if malformed.
    tool_open: String,
    tool_body: String,
    message: ParsedMessage,
}

impl OutputParser {
    /// A parser at the start of a generated message.
    pub fn new(options: ParserOptions) -> Self {
        Self {
            options,
            mode: if options.starts_in_reasoning {
                Mode::Reasoning
            } else {
                Mode::Content
            },
            pending: String::new(),
            section_start: true,
            tool_open: String::new(),
            tool_body: String::new(),
            message: ParsedMessage::default(),
        }
    }

    /// Parses everything at once.
    pub fn parse(text: &str, options: ParserOptions) -> ParsedMessage {
        let mut parser = Self::new(options);
        parser.push(text);
        parser.finish();
        parser.message
    }

    /// Feeds a text delta; returns the events it completes.
    pub fn push(&mut self, delta: &str) -> Vec<ParseEvent> {
        self.pending.push_str(delta);
        let mut events = Vec::new();
        loop {
            let progressed = match self.mode {
                Mode::ToolCall => self.step_tool_call(&mut events),
                Mode::Content | Mode::Reasoning => self.step_text(&mut events),
            };
            if !progressed {
                break;
            }
        }
        self.record(&events);
        events
    }

    /// Ends the message: flushes held text; an unclosed tool call becomes content.
    pub fn finish(&mut self) -> Vec<ParseEvent> {
        let mut events = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        match self.mode {
            Mode::ToolCall => {
                let text = format!("{}{}{}", self.tool_open, self.tool_body, pending);
                self.tool_open.clear();
                self.tool_body.clear();
                self.mode = Mode::Content;
                events.push(ParseEvent::Warning(format!(
                    "tool call not closed by {TOOL_CLOSE}; kept as content"
                )));
                self.emit(&text, &mut events);
            }
            Mode::Content | Mode::Reasoning => self.emit(&pending, &mut events),
        }
        self.record(&events);
        events
    }

    /// The message parsed so far.
    pub fn message(&self) -> &ParsedMessage {
        &self.message
    }

    /// The parsed message (call after [`finish`](Self::finish)).
    pub fn into_message(self) -> ParsedMessage {
        self.message
    }

    fn record(&mut self, events: &[ParseEvent]) {
        for e in events {
            self.message.apply(e);
        }
    }

    fn tags(&self) -> Vec<&'static str> {
        match self.mode {
            Mode::Content if self.options.parse_tool_calls => vec![THINK_OPEN, TOOL_OPEN],
            Mode::Content => vec![THINK_OPEN],
            Mode::Reasoning => vec![THINK_CLOSE],
            Mode::ToolCall => vec![TOOL_CLOSE],
        }
    }

    /// Content/Reasoning: emits text up to the next tag and switches mode, or emits what
    /// cannot be markup and keeps the rest. Returns whether a tag was consumed.
    fn step_text(&mut self, events: &mut Vec<ParseEvent>) -> bool {
        if self.section_start {
            let trimmed = self.pending.trim_start_matches('\n');
            if trimmed.len() != self.pending.len() {
                self.pending = trimmed.to_owned();
            }
            // A `<think>` opening a reasoning section is the model repeating the tag that the
            // prompt (or a previous `<think>`) already opened: drop it.
            if self.mode == Mode::Reasoning && !self.pending.is_empty() {
                if let Some(rest) = self.pending.strip_prefix(THINK_OPEN) {
                    self.pending = rest.to_owned();
                    return true;
                }
                if THINK_OPEN.starts_with(self.pending.as_str()) {
                    return false;
                }
            }
        }
        let tags = self.tags();
        let found = tags
            .iter()
            .filter_map(|t| self.pending.find(t).map(|i| (i, *t)))
            .min();
        let Some((at, tag)) = found else {
            let keep = held_suffix_start(&self.pending, &tags);
            let ready: String = self.pending.drain(..keep).collect();
            self.emit(&ready, events);
            return false;
        };
        let before = &self.pending[..at];
        let text_end = before.trim_end_matches('\n').len();
        let text = before[..text_end].to_owned();
        let newlines = before[text_end..].to_owned();
        self.pending.drain(..at + tag.len());
        self.emit(&text, events);
        match tag {
            THINK_OPEN => self.mode = Mode::Reasoning,
            THINK_CLOSE => self.mode = Mode::Content,
            TOOL_OPEN => {
                self.mode = Mode::ToolCall;
                self.tool_open = format!("{newlines}{TOOL_OPEN}");
            }
            _ => unreachable!("tags() returns only known tags"),
        }
        self.section_start = true;
        true
    }

    /// ToolCall: collects the body until `</tool_call>`. Returns whether the call closed.
    fn step_tool_call(&mut self, events: &mut Vec<ParseEvent>) -> bool {
        let Some(at) = self.pending.find(TOOL_CLOSE) else {
            let keep = held_suffix_start(&self.pending, &[TOOL_CLOSE]);
            self.tool_body.extend(self.pending.drain(..keep));
            return false;
        };
        self.tool_body.push_str(&self.pending[..at]);
        self.pending.drain(..at + TOOL_CLOSE.len());
        let body = std::mem::take(&mut self.tool_body);
        let open = std::mem::take(&mut self.tool_open);
        self.mode = Mode::Content;
        self.section_start = true;
        match parse_tool_call(&body) {
            Ok((name, arguments)) => {
                let index = self.message.tool_calls.len()
                    + events
                        .iter()
                        .filter(|e| matches!(e, ParseEvent::ToolCall(_)))
                        .count();
                events.push(ParseEvent::ToolCall(ParsedToolCall {
                    index,
                    id: new_call_id(),
                    name,
                    arguments,
                }));
            }
            Err(why) => {
                events.push(ParseEvent::Warning(format!(
                    "malformed tool call ({why}); kept as content"
                )));
                // The markup is restored verbatim, with the newlines around it.
                let text = format!("{open}{body}{TOOL_CLOSE}");
                self.emit_raw(Mode::Content, &text, events);
                self.section_start = false;
            }
        }
        true
    }

    /// Emits text of the current mode, dropping leading newlines at a section start.
    fn emit(&mut self, text: &str, events: &mut Vec<ParseEvent>) {
        let text = if self.section_start {
            text.trim_start_matches('\n')
        } else {
            text
        };
        if text.is_empty() {
            return;
        }
        self.section_start = false;
        self.emit_raw(self.mode, text, events);
    }

    fn emit_raw(&mut self, mode: Mode, text: &str, events: &mut Vec<ParseEvent>) {
        if text.is_empty() {
            return;
        }
        let event = match mode {
            Mode::Reasoning => ParseEvent::ReasoningDelta(text.to_owned()),
            Mode::Content | Mode::ToolCall => ParseEvent::ContentDelta(text.to_owned()),
        };
        // Merge with the previous delta of the same kind: fewer, larger deltas.
        match (events.last_mut(), &event) {
            (Some(ParseEvent::ContentDelta(a)), ParseEvent::ContentDelta(b))
            | (Some(ParseEvent::ReasoningDelta(a)), ParseEvent::ReasoningDelta(b)) => a.push_str(b),
            _ => events.push(event),
        }
    }
}

/// Where the text that may still become markup starts: the longest suffix made of a run of
/// `\n` followed by a proper prefix (possibly empty) of one of `tags`.
fn held_suffix_start(text: &str, tags: &[&str]) -> usize {
    let mut start = text.len();
    for tag in tags {
        // Longest proper prefix of `tag` that `text` ends with (0 when none).
        let k = (1..tag.len())
            .rev()
            .find(|&k| text.ends_with(&tag[..k]))
            .unwrap_or(0);
        let tag_start = text.len() - k;
        let with_newlines = text[..tag_start].trim_end_matches('\n').len();
        start = start.min(with_newlines);
    }
    start
}

#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

/// `{"name": ..., "arguments": ...}` → (name, arguments as a JSON string).
fn parse_tool_call(body: &str) -> Result<(String, String), String> {
    let call: RawCall<'_> = serde_json::from_str(body.trim()).map_err(|e| e.to_string())?;
    if call.name.is_empty() {
        return Err("empty function name".to_owned());
    }
    let arguments = match call.arguments {
        None => "{}".to_owned(),
        Some(raw) => {
            let text = raw.get();
            if text.starts_with('"') {
                // The model wrote the arguments as a JSON string: its content is the JSON.
                serde_json::from_str::<String>(text).map_err(|e| e.to_string())?
            } else if text == "null" {
                "{}".to_owned()
            } else {
                text.to_owned()
            }
        }
    };
    Ok((call.name, arguments))
}

/// `call_` and 24 alphanumerics; unique within the process and unpredictable across runs.
fn new_call_id() -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // RandomState is seeded randomly per process (and differs per instance): hashing a
    // counter with it gives unique, unguessable ids without a random-number dependency.
    let state = RandomState::new();
    let mut id = String::from("call_");
    for part in 0..2u64 {
        let mut h = state.build_hasher();
        h.write_u64(n);
        h.write_u64(part);
        let mut bits = h.finish();
        for _ in 0..12 {
            id.push(ALPHABET[(bits % ALPHABET.len() as u64) as usize] as char);
            bits /= ALPHABET.len() as u64;
        }
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ParsedMessage {
        OutputParser::parse(text, ParserOptions::default())
    }

    #[test]
    fn options_for_prompt() {
        assert!(ParserOptions::for_prompt("<|im_start|>assistant\n<think>\n").starts_in_reasoning);
        let closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
        assert!(!ParserOptions::for_prompt(closed).starts_in_reasoning);
        assert!(!ParserOptions::for_prompt("<|im_start|>assistant\n").starts_in_reasoning);
    }

    #[test]
    fn shareable_across_threads() {
        fn check<T: Send + Sync>() {}
        check::<OutputParser>();
        check::<crate::Tokenizer>();
        check::<crate::ChatTemplate>();
        check::<crate::IncrementalDecoder>();
    }

    #[test]
    fn plain_content() {
        let m = parse("Hello, world!");
        assert_eq!(m.content, "Hello, world!");
        assert_eq!(m.reasoning_content, "");
        assert!(m.tool_calls.is_empty() && m.warnings.is_empty());
    }

    #[test]
    fn qwen3_thinking_and_tool_calls() {
        let text = "<think>\nI should read it.\n</think>\n\nLet me check.\n<tool_call>\n\
                    {\"name\": \"read\", \"arguments\": {\"path\": \"/a\", \"n\": 1}}\n</tool_call>\n\
                    <tool_call>\n{\"name\": \"ls\", \"arguments\": \"{\\\"dir\\\": \\\"/\\\"}\"}\n</tool_call>";
        let m = parse(text);
        assert_eq!(m.reasoning_content, "I should read it.");
        assert_eq!(m.content, "Let me check.");
        assert_eq!(m.tool_calls.len(), 2);
        assert_eq!(m.tool_calls[0].index, 0);
        assert_eq!(m.tool_calls[0].name, "read");
        assert_eq!(m.tool_calls[0].arguments, r#"{"path": "/a", "n": 1}"#);
        assert_eq!(m.tool_calls[1].index, 1);
        assert_eq!(m.tool_calls[1].arguments, r#"{"dir": "/"}"#);
        assert!(m.tool_calls[0].id.starts_with("call_") && m.tool_calls[0].id.len() == 29);
        assert_ne!(m.tool_calls[0].id, m.tool_calls[1].id);
        assert!(m.warnings.is_empty());
    }

    #[test]
    fn starts_in_reasoning() {
        let opts = ParserOptions {
            starts_in_reasoning: true,
            ..Default::default()
        };
        let m = OutputParser::parse("step 1\nstep 2\n</think>\n\nDone.", opts);
        assert_eq!(m.reasoning_content, "step 1\nstep 2");
        assert_eq!(m.content, "Done.");
        // A repeated opening tag is dropped; an unfinished think block stays reasoning.
        let m = OutputParser::parse("<think>\nhmm", opts);
        assert_eq!(m.reasoning_content, "hmm");
        assert_eq!(m.content, "");
    }

    #[test]
    fn split_tags_are_held_only_while_ambiguous() {
        let mut p = OutputParser::new(ParserOptions::default());
        assert_eq!(p.push("Hi <"), vec![ParseEvent::ContentDelta("Hi ".into())]);
        assert_eq!(p.push("b"), vec![ParseEvent::ContentDelta("<b".into())]);
        assert_eq!(
            p.push("> x\n"),
            vec![ParseEvent::ContentDelta("> x".into())]
        );
        assert_eq!(p.push("\n<tool"), vec![]);
        assert_eq!(p.push("_call>{\"name\": \"f\"}</tool_"), vec![]);
        let ev = p.push("call>");
        assert!(
            matches!(&ev[..], [ParseEvent::ToolCall(c)] if c.name == "f" && c.arguments == "{}")
        );
        assert_eq!(p.finish(), vec![]);
        assert_eq!(p.message().content, "Hi <b> x");
    }

    #[test]
    fn malformed_and_unclosed_tool_calls_become_content() {
        let m = parse("A\n<tool_call>\n{not json}\n</tool_call>\nB");
        assert_eq!(m.content, "A\n<tool_call>\n{not json}\n</tool_call>\nB");
        assert_eq!(m.warnings.len(), 1);
        assert!(m.tool_calls.is_empty());
        let m = parse("A<tool_call>{\"name\": \"f\", \"argu");
        assert_eq!(m.content, "A<tool_call>{\"name\": \"f\", \"argu");
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        let m = parse("<tool_call>{\"arguments\": {}}</tool_call>");
        assert_eq!(m.content, "<tool_call>{\"arguments\": {}}</tool_call>");
        assert_eq!(m.warnings.len(), 1);
    }

    #[test]
    fn tool_calls_off_keeps_markup_as_content() {
        let opts = ParserOptions {
            parse_tool_calls: false,
            ..Default::default()
        };
        let text = "x<tool_call>{\"name\": \"f\"}</tool_call>";
        assert_eq!(OutputParser::parse(text, opts).content, text);
    }

    #[test]
    fn trailing_newlines_are_kept_at_finish() {
        let mut p = OutputParser::new(ParserOptions::default());
        assert_eq!(p.push("a\n\n"), vec![ParseEvent::ContentDelta("a".into())]);
        assert_eq!(p.finish(), vec![ParseEvent::ContentDelta("\n\n".into())]);
    }

    #[test]
    fn chat_message_shape() {
        let m = parse("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>");
        let msg = m.to_chat_message();
        assert_eq!(msg.content, None);
        let calls = msg.tool_calls.unwrap();
        assert_eq!(calls[0].function.arguments, serde_json::json!("{\"a\": 1}"));
        let msg = parse("hi").to_chat_message();
        assert_eq!(msg.content, Some(MessageContent::Text("hi".into())));
        assert_eq!(msg.reasoning_content, None);
    }
}

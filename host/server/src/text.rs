//! From sampled tokens to what the client sees: text deltas that never show a stop string,
//! split into reasoning, content and tool calls.

use openclaw_chat::{IncrementalDecoder, OutputParser, ParseEvent, ParsedMessage};
use openclaw_engine::StopMatch;

/// Holds back streamed text that could be the start of a stop string, so a client never sees
/// part of one, and cuts the stop string (and what the model wrote after it) on the token the
/// engine says completed it, as OpenAI servers do. It never decides that a stop string occurred:
/// only the engine does.
#[derive(Debug)]
pub struct StopHold {
    stops: Vec<String>,
    pending: String,
    stopped: bool,
}

impl StopHold {
    /// A hold for these stop strings (empty ones are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopHold {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop string ended the text.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Takes the text of one token and what the engine said it completed; returns what can be
    /// shown now.
    pub fn push(&mut self, delta: &str, stop: Option<&StopMatch>) -> String {
        if self.stopped {
            return String::new();
        }
        self.pending.push_str(delta);
        if let Some(StopMatch::String(_)) = stop {
            // Every earlier byte that could begin the string is still held (see below), so the
            // string lies wholly in `pending`.
            self.stopped = true;
            let out = stop
                .map_or(&*self.pending, |m| m.visible(&self.pending))
                .to_string();
            self.pending.clear();
            return out;
        }
        // Keep the longest tail that is a proper prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .flat_map(|s| {
                (1..s.len())
                    .rev()
                    .filter(move |&n| s.is_char_boundary(n))
                    .map(move |n| &s[..n])
            })
            .filter(|p| self.pending.ends_with(p))
            .map(str::len)
            .max()
            .unwrap_or(0);
        let split = self.pending.len() - keep;
        let out = self.pending[..split].to_string();
        self.pending.drain(..split);
        out
    }

    /// The rest, at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// Tokens in, parsed events out: the incremental detokenizer, the stop filter and the output
/// parser in a row.
pub struct TextPipeline {
    decoder: IncrementalDecoder,
    stop: StopHold,
    /// `None` for plain text: every character is content.
    parser: Option<OutputParser>,
    message: ParsedMessage,
}

impl TextPipeline {
    /// A pipeline for a chat reply: reasoning and tool calls are parsed out of the content.
    pub fn new(decoder: IncrementalDecoder, stops: &[String], parser: OutputParser) -> Self {
        TextPipeline {
            decoder,
            stop: StopHold::new(stops),
            parser: Some(parser),
            message: ParsedMessage::default(),
        }
    }

    /// A pipeline for plain text, as a legacy completion is answered: a completion continues
    /// its prompt wherever that stopped, so `<think>` or `<tool_call>` in it is text, not
    /// markup.
    pub fn plain(decoder: IncrementalDecoder, stops: &[String]) -> Self {
        TextPipeline {
            decoder,
            stop: StopHold::new(stops),
            parser: None,
            message: ParsedMessage::default(),
        }
    }

    fn parse(&mut self, text: &str) -> Vec<ParseEvent> {
        if text.is_empty() {
            return Vec::new();
        }
        let events = match &mut self.parser {
            Some(parser) => parser.push(text),
            None => vec![ParseEvent::ContentDelta(text.to_string())],
        };
        for e in &events {
            self.message.apply(e);
        }
        events
    }

    /// One sampled token, with what the engine said it completed.
    pub fn token(&mut self, id: u32, stop: Option<&StopMatch>) -> Vec<ParseEvent> {
        let mut text = self.decoder.push(id).unwrap_or_default();
        if let Some(StopMatch::String(_)) = stop {
            // The engine matched on all of this token's text; the decoder may still hold some
            // of it back (an unfinished character or grapheme), so release it before the cut.
            text.push_str(&self.decoder.finish().unwrap_or_default());
        }
        let shown = self.stop.push(&text, stop);
        self.parse(&shown)
    }

    /// The end of generation: flushes every stage.
    pub fn finish(&mut self) -> Vec<ParseEvent> {
        let text = self.decoder.finish().unwrap_or_default();
        let mut shown = self.stop.push(&text, None);
        shown.push_str(&self.stop.finish());
        let mut events = self.parse(&shown);
        let tail = match &mut self.parser {
            Some(parser) => parser.finish(),
            None => Vec::new(),
        };
        for e in &tail {
            self.message.apply(e);
        }
        events.extend(tail);
        events
    }

    /// The whole message so far.
    pub fn message(&self) -> &ParsedMessage {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(s: &str) -> Option<StopMatch> {
        Some(StopMatch::String(s.to_string()))
    }

    #[test]
    fn possible_starts_are_held_and_the_engines_match_is_cut() {
        let mut f = StopHold::new(&["END".to_string(), "\n\n".to_string()]);
        let mut shown = String::new();
        shown.push_str(&f.push("Hello E", None));
        assert_eq!(shown, "Hello ", "the E could begin END");
        shown.push_str(&f.push("N", None));
        shown.push_str(&f.push("D and more", end("END").as_ref()));
        shown.push_str(&f.finish());
        assert_eq!(shown, "Hello ");
        assert!(f.stopped());
    }

    #[test]
    fn text_that_looks_like_a_stop_string_is_shown_when_the_engine_did_not_stop() {
        // The hold never matches on its own: without the engine's word the text goes out.
        let mut f = StopHold::new(&["END".to_string()]);
        let mut shown = f.push("Hello E", None);
        shown.push_str(&f.push("NDING", None));
        shown.push_str(&f.finish());
        assert_eq!(shown, "Hello ENDING");
        assert!(!f.stopped());

        let mut f = StopHold::new(&["STOP".to_string()]);
        let mut shown = f.push("A ST", None);
        assert_eq!(shown, "A ");
        shown.push_str(&f.push("AR", None));
        shown.push_str(&f.finish());
        assert_eq!(shown, "A STAR");
    }

    #[test]
    fn a_stop_token_cuts_nothing() {
        let mut f = StopHold::new(&["END".to_string()]);
        let shown = f.push("done", Some(&StopMatch::Token(7)));
        assert_eq!(shown, "done");
        assert!(!f.stopped());
    }

    #[test]
    fn the_cut_is_at_the_first_occurrence() {
        let m = StopMatch::String("END".into());
        assert_eq!(m.visible("a END b END"), "a ");
        assert_eq!(m.visible("no match"), "no match");
        assert_eq!(StopMatch::Token(3).visible("a END"), "a END");
    }
}

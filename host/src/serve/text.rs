//! From sampled tokens to what the client sees: text deltas that never show a stop string,
//! split into reasoning, content and tool calls.

use openclaw_chat::{IncrementalDecoder, OutputParser, ParseEvent, ParsedMessage};

/// Holds back text that could be the start of a stop string, and cuts the stop string (and
/// whatever the model wrote after it) when it appears, as OpenAI servers do.
#[derive(Debug)]
pub struct StopFilter {
    stops: Vec<String>,
    pending: String,
    stopped: bool,
}

impl StopFilter {
    /// A filter for these stop strings (empty ones are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopFilter {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
            stopped: false,
        }
    }

    /// Whether a stop string appeared.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Takes more text; returns what can be shown now.
    pub fn push(&mut self, delta: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.pending.push_str(delta);
        if let Some(cut) = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min()
        {
            self.stopped = true;
            let out = self.pending[..cut].to_string();
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
    stop: StopFilter,
    parser: OutputParser,
    message: ParsedMessage,
}

impl TextPipeline {
    /// A pipeline.
    pub fn new(decoder: IncrementalDecoder, stops: &[String], parser: OutputParser) -> Self {
        TextPipeline {
            decoder,
            stop: StopFilter::new(stops),
            parser,
            message: ParsedMessage::default(),
        }
    }

    /// Whether a stop string ended the text.
    pub fn stopped(&self) -> bool {
        self.stop.stopped()
    }

    fn parse(&mut self, text: &str) -> Vec<ParseEvent> {
        if text.is_empty() {
            return Vec::new();
        }
        let events = self.parser.push(text);
        for e in &events {
            self.message.apply(e);
        }
        events
    }

    /// One sampled token.
    pub fn token(&mut self, id: u32) -> Vec<ParseEvent> {
        let text = self.decoder.push(id).unwrap_or_default();
        let shown = self.stop.push(&text);
        self.parse(&shown)
    }

    /// The end of generation: flushes every stage.
    pub fn finish(&mut self) -> Vec<ParseEvent> {
        let text = self.decoder.finish().unwrap_or_default();
        let mut shown = self.stop.push(&text);
        shown.push_str(&self.stop.finish());
        let mut events = self.parse(&shown);
        let tail = self.parser.finish();
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

    #[test]
    fn stop_strings_are_held_back_and_cut() {
        let mut f = StopFilter::new(&["END".to_string(), "\n\n".to_string()]);
        let mut shown = String::new();
        for piece in ["Hello E", "N", "D and more"] {
            shown.push_str(&f.push(piece));
        }
        shown.push_str(&f.finish());
        assert_eq!(shown, "Hello ");
        assert!(f.stopped());

        let mut f = StopFilter::new(&["END".to_string()]);
        let mut shown = String::new();
        for piece in ["Hello E", "ND", "ING"] {
            shown.push_str(&f.push(piece));
        }
        // "ENDING" contains END: cut there.
        assert_eq!(shown, "Hello ");

        let mut f = StopFilter::new(&["STOP".to_string()]);
        let mut shown = f.push("A ST");
        assert_eq!(shown, "A ");
        shown.push_str(&f.push("AR"));
        shown.push_str(&f.finish());
        assert_eq!(shown, "A STAR");
        assert!(!f.stopped());
    }
}

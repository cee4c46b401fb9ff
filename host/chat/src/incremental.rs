//! Streaming detokenization: token ids in, text deltas out.

use anyhow::Result;
use unicode_segmentation::UnicodeSegmentation;

use crate::tokenizer::Tokenizer;

/// Turns sampled token ids into text deltas, one id at a time.
///
/// A delta never ends inside a UTF-8 character (byte-level tokens can carry part of one) nor
/// inside a grapheme cluster (an emoji sequence or a letter with combining marks can span
/// several tokens): the last grapheme is held back until text after it arrives, and
/// [`finish`](Self::finish) releases it. The concatenation of all deltas equals
/// `decode(all ids)`.
///
/// Decoding is done on a short window of ids that starts with the tokens of the previous
/// delta, so decoders that depend on context (leading-space handling of SentencePiece
/// tokenizers) see it, and each step costs O(window), not O(sequence).
#[derive(Debug)]
pub struct IncrementalDecoder {
    tokenizer: Tokenizer,
    skip_special_tokens: bool,
    /// Ids of the window: context ids (`..prefix_index`) then not yet released ids.
    ids: Vec<u32>,
    /// Decoded text of `ids[..prefix_index]`, already accounted for.
    prefix: String,
    prefix_index: usize,
    /// Decoded text held back because it may be the start of a longer grapheme.
    held: String,
}

impl IncrementalDecoder {
    /// A decoder; `skip_special_tokens` as in [`Tokenizer::decode`].
    pub fn new(tokenizer: Tokenizer, skip_special_tokens: bool) -> Self {
        Self {
            tokenizer,
            skip_special_tokens,
            ids: Vec::new(),
            prefix: String::new(),
            prefix_index: 0,
            held: String::new(),
        }
    }

    /// Feeds one id; returns the text that became stable (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        // A window whose ids all decoded to nothing (skipped special tokens) has an empty
        // prefix; re-anchor it once it decodes to complete text.
        if self.prefix.is_empty() && !self.ids.is_empty() {
            let text = self.decode_window(&self.ids)?;
            if !text.ends_with('\u{FFFD}') {
                self.prefix = text;
                self.prefix_index = self.ids.len();
            }
        }
        self.ids.push(id);
        let text = self.decode_window(&self.ids)?;
        // A trailing U+FFFD means the last character's bytes are still incomplete.
        if text.len() > self.prefix.len()
            && !text.ends_with('\u{FFFD}')
            && text.starts_with(self.prefix.as_str())
        {
            self.held.push_str(&text[self.prefix.len()..]);
            // The ids just released become the context of the next window.
            self.ids.drain(..self.prefix_index);
            self.prefix = self.decode_window(&self.ids)?;
            self.prefix_index = self.ids.len();
            return Ok(self.release_complete_graphemes());
        }
        Ok(String::new())
    }

    /// Ends the stream: returns everything not yet returned.
    pub fn finish(&mut self) -> Result<String> {
        let text = self.decode_window(&self.ids)?;
        let mut out = std::mem::take(&mut self.held);
        if let Some(rest) = text.strip_prefix(self.prefix.as_str()) {
            out.push_str(rest);
        } else {
            // Not reachable with byte-level or SentencePiece decoders; keep what differs.
            let common = common_prefix_len(&text, &self.prefix);
            out.push_str(&text[common..]);
        }
        self.ids.clear();
        self.prefix.clear();
        self.prefix_index = 0;
        Ok(out)
    }

    fn decode_window(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer.decode(ids, self.skip_special_tokens)
    }

    /// Returns `held` up to the start of its last grapheme, which text still to come may
    /// extend. `held` always starts on a grapheme boundary, so segmenting it alone finds the
    /// same boundaries as segmenting the whole text.
    fn release_complete_graphemes(&mut self) -> String {
        let cut = self
            .held
            .grapheme_indices(true)
            .next_back()
            .map_or(0, |(i, _)| i);
        let rest = self.held.split_off(cut);
        std::mem::replace(&mut self.held, rest)
    }
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .find(|((_, ca), cb)| ca != cb)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}

impl Tokenizer {
    /// A streaming decoder over this tokenizer.
    pub fn incremental_decoder(&self, skip_special_tokens: bool) -> IncrementalDecoder {
        IncrementalDecoder::new(self.clone(), skip_special_tokens)
    }
}

//! Streaming detokenization on the real Qwen3 tokenizer.

mod common;

use openclaw_chat::{OutputParser, ParsedMessage, ParserOptions, Tokenizer};
use proptest::prelude::*;
use unicode_segmentation::UnicodeSegmentation;

fn qwen3() -> &'static Tokenizer {
    static TOK: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
    TOK.get_or_init(|| Tokenizer::from_dir(common::qwen3_dir()).unwrap())
}

/// Feeds ids one at a time; checks the deltas against a full decode and returns them.
fn stream(tok: &Tokenizer, ids: &[u32], skip_special: bool) -> Vec<String> {
    let mut dec = tok.incremental_decoder(skip_special);
    let mut deltas: Vec<String> = ids.iter().map(|&id| dec.push(id).unwrap()).collect();
    deltas.push(dec.finish().unwrap());
    let full = tok.decode(ids, skip_special).unwrap();
    assert_eq!(
        deltas.concat(),
        full,
        "deltas must add up to the full decode"
    );
    // Every cut between deltas is a grapheme boundary of the final text.
    let boundaries: std::collections::HashSet<usize> = full
        .grapheme_indices(true)
        .map(|(i, _)| i)
        .chain([full.len()])
        .collect();
    let mut at = 0;
    for d in &deltas {
        at += d.len();
        assert!(
            boundaries.contains(&at),
            "cut at byte {at} of {full:?} splits a grapheme"
        );
    }
    deltas
}

#[test]
fn fixture_texts_stream_exactly() {
    let tok = qwen3();
    let reference = common::reference();
    for e in reference["encodings"].as_array().unwrap() {
        let ids: Vec<u32> = e["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        stream(tok, &ids, false);
        stream(tok, &ids, true);
    }
}

#[test]
fn multi_token_characters_are_not_split() {
    let tok = qwen3();
    // A ZWJ family emoji is one grapheme made of many byte-level tokens.
    let text = "a 👨‍👩‍👧‍👦 b";
    let ids = tok.encode(text, false).unwrap();
    let deltas = stream(tok, &ids, false);
    assert!(deltas.iter().any(|d| d.contains("👨‍👩‍👧‍👦")));
    assert!(deltas.iter().all(|d| !d.contains('\u{FFFD}')));
}

#[test]
fn special_tokens_are_skipped_or_kept() {
    let tok = qwen3();
    let ids = tok
        .encode("<|im_start|>assistant\nhi<|im_end|>", false)
        .unwrap();
    assert_eq!(stream(tok, &ids, true).concat(), "assistant\nhi");
    assert_eq!(
        stream(tok, &ids, false).concat(),
        "<|im_start|>assistant\nhi<|im_end|>"
    );
}

/// Ids straight from the model go through the decoder and the parser one at a time and give
/// the message that parsing the whole text gives.
#[test]
fn token_stream_through_parser_matches_whole_parse() {
    let tok = qwen3();
    let generated = "<think>\nThe user wants 😀 files in 目录.\n</think>\n\nSure — listing.\n\
        <tool_call>\n{\"name\": \"exec\", \"arguments\": {\"command\": \"ls 目录\"}}\n</tool_call>\n\
        <tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"/é\"}}\n</tool_call><|im_end|>";
    let ids = tok.encode(generated, false).unwrap();
    let mut decoder = tok.incremental_decoder(true);
    let mut parser = OutputParser::new(ParserOptions::default());
    let mut streamed = ParsedMessage::default();
    for &id in &ids {
        let delta = decoder.push(id).unwrap();
        for e in parser.push(&delta) {
            streamed.apply(&e);
        }
    }
    for e in parser.push(&decoder.finish().unwrap()) {
        streamed.apply(&e);
    }
    for e in parser.finish() {
        streamed.apply(&e);
    }
    let whole = OutputParser::parse(&tok.decode(&ids, true).unwrap(), ParserOptions::default());
    assert_eq!(
        streamed.reasoning_content,
        "The user wants 😀 files in 目录."
    );
    assert_eq!(streamed.content, "Sure — listing.");
    assert_eq!(streamed.tool_calls.len(), 2);
    assert_eq!(
        streamed.tool_calls[0].arguments,
        r#"{"command": "ls 目录"}"#
    );
    assert_eq!(streamed.content, whole.content);
    assert_eq!(streamed.reasoning_content, whole.reasoning_content);
    assert_eq!(streamed.tool_calls.len(), whole.tool_calls.len());
    assert!(streamed.warnings.is_empty());
}

fn text_strategy() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "Hello",
        " world",
        "\n",
        "\r\n",
        "  ",
        "\t",
        "中文",
        "日本語",
        "😀",
        "👍🏽",
        "👨‍👩‍👧",
        "🇺🇸",
        "e\u{301}",
        "\u{308}",
        "1️⃣",
        "123",
        "<think>",
        "</think>",
        "<tool_call>",
        "<|im_end|>",
        "{\"a\": 1}",
        "ä",
        "\u{200d}",
        "\u{fe0f}",
    ]);
    prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_text_streams_exactly(text in text_strategy(), skip in any::<bool>()) {
        let tok = qwen3();
        let ids = tok.encode(&text, false).unwrap();
        stream(tok, &ids, skip);
    }

    #[test]
    fn arbitrary_id_sequences_stream_exactly(
        ids in prop::collection::vec(0u32..151_669, 0..40)
    ) {
        // Random ids produce invalid UTF-8 fragments; deltas must still add up.
        stream(qwen3(), &ids, false);
    }
}

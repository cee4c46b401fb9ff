//! The output parser gives the same message whatever the chunking of its input.

use openclaw_chat::{OutputParser, ParseEvent, ParsedMessage, ParserOptions};
use proptest::prelude::*;

fn fragments() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "\n",
        "\n\n",
        "Hello",
        " ",
        "{\"name\": \"f\", \"arguments\": {\"a\": 1}}",
        "{\"name\": \"g\"}",
        "{bad json",
        "<",
        "</",
        "<tool",
        "<thi",
        "think>",
        "_call>",
        "é",
        "😀",
        "中文",
        "x<y",
        ">",
    ]);
    prop::collection::vec(pieces, 0..30).prop_map(|v| v.concat())
}

/// Splits `text` at the given char positions (taken modulo its length).
fn chunks(text: &str, cuts: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|c| {
            if chars.is_empty() {
                0
            } else {
                c % (chars.len() + 1)
            }
        })
        .collect();
    points.push(0);
    points.push(chars.len());
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| chars[w[0]..w[1]].iter().collect())
        .collect()
}

/// Feeds chunks one by one; checks the events add up to the final message.
fn feed(parts: &[String], options: ParserOptions) -> ParsedMessage {
    let mut parser = OutputParser::new(options);
    let mut from_events = ParsedMessage::default();
    for part in parts {
        for e in parser.push(part) {
            from_events.apply(&e);
        }
    }
    for e in parser.finish() {
        from_events.apply(&e);
    }
    let message = parser.into_message();
    assert_eq!(from_events, message);
    message
}

/// Tool-call ids are random: compare everything else.
fn without_ids(mut m: ParsedMessage) -> ParsedMessage {
    for c in &mut m.tool_calls {
        c.id.clear();
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn chunking_does_not_change_the_message(
        text in fragments(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
        starts_in_reasoning in any::<bool>(),
        parse_tool_calls in any::<bool>(),
    ) {
        let options = ParserOptions { starts_in_reasoning, parse_tool_calls };
        let whole = without_ids(feed(std::slice::from_ref(&text), options));
        let chunked = without_ids(feed(&chunks(&text, &cuts), options));
        prop_assert_eq!(chunked, whole);
    }

    #[test]
    fn one_char_at_a_time_matches_whole(text in fragments()) {
        let options = ParserOptions::default();
        let whole = without_ids(feed(std::slice::from_ref(&text), options));
        let singles: Vec<String> = text.chars().map(String::from).collect();
        prop_assert_eq!(without_ids(feed(&singles, options)), whole);
    }

    #[test]
    fn text_without_markup_is_content_verbatim(text in "[^<]*") {
        let m = OutputParser::parse(&text, ParserOptions::default());
        prop_assert_eq!(m.content, text.trim_start_matches('\n'));
        prop_assert!(m.warnings.is_empty());
    }
}

#[test]
fn only_a_possible_tag_prefix_is_held() {
    let text = "The answer is 42 <b>bold</b>, a <tool b <thin <thought> </t.";
    let mut p = OutputParser::new(ParserOptions::default());
    let mut pushed = String::new();
    let mut content = String::new();
    for c in text.chars() {
        pushed.push(c);
        for e in p.push(&c.to_string()) {
            if let ParseEvent::ContentDelta(d) = e {
                content.push_str(&d);
            }
        }
        let held = &pushed[content.len()..];
        assert!(
            held.is_empty() || "<think>".starts_with(held) || "<tool_call>".starts_with(held),
            "holding {held:?} after {pushed:?}"
        );
    }
    p.finish();
    assert_eq!(p.message().content, text);
}

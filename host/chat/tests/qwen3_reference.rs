//! openclaw-chat against Python tokenizers and transformers on the real Qwen3 tokenizer.

mod common;

use openclaw_chat::{
    ChatMessage, ChatTemplate, OutputParser, ParserOptions, RenderOptions, Tokenizer,
    CHATML_TEMPLATE,
};
use serde_json::Value;

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn conversations() -> Vec<Value> {
    common::reference()["chat_templates"]
        .as_array()
        .unwrap()
        .clone()
}

fn messages(conv: &Value) -> Vec<ChatMessage> {
    serde_json::from_value(conv["messages"].clone()).expect("fixture messages parse")
}

fn options(conv: &Value) -> RenderOptions {
    RenderOptions {
        add_generation_prompt: conv["add_generation_prompt"].as_bool().unwrap(),
        enable_thinking: conv.get("enable_thinking").and_then(Value::as_bool),
        ..Default::default()
    }
}

fn tools(conv: &Value) -> Option<&Value> {
    conv.get("tools").filter(|t| !t.is_null())
}

#[test]
fn token_ids_match_python() {
    let tok = Tokenizer::from_dir(common::qwen3_dir()).unwrap();
    let reference = common::reference();
    let encodings = reference["encodings"].as_array().unwrap();
    assert!(encodings.len() >= 15);
    for e in encodings {
        let text = e["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text, false).unwrap(),
            ids(&e["ids"]),
            "encode {text:?}"
        );
        assert_eq!(
            tok.encode(text, true).unwrap(),
            ids(&e["ids_with_special_tokens"]),
            "encode with special tokens {text:?}"
        );
        let all = ids(&e["ids"]);
        assert_eq!(
            tok.decode(&all, false).unwrap(),
            e["decoded"].as_str().unwrap()
        );
        assert_eq!(
            tok.decode(&all, true).unwrap(),
            e["decoded_skip_special"].as_str().unwrap()
        );
    }
}

#[test]
fn vocabulary_and_special_tokens() {
    let tok = Tokenizer::from_dir(common::qwen3_dir()).unwrap();
    let reference = common::reference();
    assert_eq!(
        tok.vocab_size() as u64,
        reference["vocab_size_with_added_tokens"].as_u64().unwrap()
    );
    let special = tok.special_tokens();
    let eos = special.eos.as_ref().unwrap();
    assert_eq!(
        eos.text,
        reference["special_tokens"]["eos"].as_str().unwrap()
    );
    assert_eq!(eos.id, Some(151645));
    let pad = special.pad.as_ref().unwrap();
    assert_eq!(pad.text, "<|endoftext|>");
    assert_eq!(pad.id, Some(151643));
    assert!(special.bos.is_none());
    for (token, id) in [
        ("<|im_start|>", 151644),
        ("<|im_end|>", 151645),
        ("<think>", 151667),
        ("</think>", 151668),
        ("<tool_call>", 151657),
        ("</tool_call>", 151658),
    ] {
        assert_eq!(tok.token_to_id(token), Some(id));
        assert_eq!(tok.id_to_token(id).as_deref(), Some(token));
    }
    // Markup tokens are not special: decoding without special tokens keeps them.
    let ids = tok
        .encode("<|im_start|><think>x</think><|im_end|>", false)
        .unwrap();
    assert_eq!(tok.decode(&ids, true).unwrap(), "<think>x</think>");
}

#[test]
fn chat_templates_match_transformers() {
    let dir = common::qwen3_dir();
    let template = ChatTemplate::from_dir(&dir).unwrap();
    let tok = Tokenizer::from_dir(&dir).unwrap();
    let convs = conversations();
    assert!(convs.len() >= 10);
    for conv in &convs {
        let name = conv["name"].as_str().unwrap();
        let rendered = template
            .render(&messages(conv), tools(conv), &options(conv))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            rendered,
            conv["rendered"].as_str().unwrap(),
            "conversation {name}"
        );
        assert_eq!(
            tok.encode(&rendered, false).unwrap(),
            ids(&conv["rendered_ids"]),
            "prompt ids of {name}"
        );
    }
}

#[test]
fn own_chatml_template_renders_like_qwen3() {
    let template = ChatTemplate::from_source("CHATML_TEMPLATE", CHATML_TEMPLATE).unwrap();
    for conv in &conversations() {
        let name = conv["name"].as_str().unwrap();
        let rendered = template
            .render(&messages(conv), tools(conv), &options(conv))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            rendered,
            conv["rendered"].as_str().unwrap(),
            "conversation {name}"
        );
    }
}

/// Rendering a conversation that ends with an assistant turn, then cutting off the prompt,
/// gives the text a model would have generated; parsing it must give the turn back, and
/// rendering the parsed turn must give the same text.
#[test]
fn parse_then_render_round_trips() {
    let template = ChatTemplate::from_dir(common::qwen3_dir()).unwrap();
    let mut checked = 0;
    for conv in &conversations() {
        let msgs = messages(conv);
        let Some(last) = msgs.last().filter(|m| m.role == "assistant") else {
            continue;
        };
        let opts = RenderOptions {
            enable_thinking: options(conv).enable_thinking,
            ..Default::default()
        };
        let prompt_opts = RenderOptions {
            add_generation_prompt: true,
            ..opts.clone()
        };
        let prompt = template
            .render(&msgs[..msgs.len() - 1], tools(conv), &prompt_opts)
            .unwrap();
        let full = template.render(&msgs, tools(conv), &opts).unwrap();
        let generated = full
            .strip_prefix(prompt.as_str())
            .and_then(|g| g.strip_suffix("<|im_end|>\n"))
            .expect("prompt is a prefix of the full render");
        let parsed = OutputParser::parse(generated, ParserOptions::default());
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let expected_reasoning = last.reasoning_content.clone().unwrap_or_else(|| {
            // The template itself takes reasoning out of `<think>` in the content.
            let c = last.text();
            c.split("</think>")
                .next()
                .unwrap()
                .split("<think>")
                .last()
                .unwrap()
                .to_owned()
        });
        assert_eq!(
            parsed.reasoning_content,
            expected_reasoning.trim_matches('\n')
        );
        let reparsed = parsed.to_chat_message();
        let mut again = msgs.clone();
        *again.last_mut().unwrap() = reparsed;
        assert_eq!(
            template.render(&again, tools(conv), &opts).unwrap(),
            full,
            "{}",
            conv["name"]
        );
        checked += 1;
    }
    assert!(checked >= 2);
}

#[test]
fn tool_call_round_trip_with_arguments_as_object_and_string() {
    let dir = common::qwen3_dir();
    let template = ChatTemplate::from_dir(&dir).unwrap();
    let conv = conversations()
        .into_iter()
        .find(|c| c["name"] == "tools_system_and_calls")
        .unwrap();
    let msgs = messages(&conv);
    let assistant = &msgs[2];
    // Render up to and including the assistant turn, as the model would have written it.
    let head = &msgs[..3];
    let prompt = template
        .render(
            &head[..2],
            tools(&conv),
            &RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )
        .unwrap();
    let full = template
        .render(head, tools(&conv), &RenderOptions::default())
        .unwrap();
    let generated = full[prompt.len()..].strip_suffix("<|im_end|>\n").unwrap();
    let parsed = OutputParser::parse(generated, ParserOptions::default());
    assert_eq!(parsed.content, "");
    assert_eq!(parsed.reasoning_content, "I need two tools.");
    let calls = assistant.tool_calls.as_ref().unwrap();
    assert_eq!(parsed.tool_calls.len(), 2);
    for (got, want) in parsed.tool_calls.iter().zip(calls) {
        assert_eq!(got.name, want.function.name);
        let got_args: Value = serde_json::from_str(&got.arguments).unwrap();
        let want_args = match &want.function.arguments {
            Value::String(s) => serde_json::from_str(s).unwrap(),
            v => v.clone(),
        };
        assert_eq!(got_args, want_args);
    }
    assert_eq!(parsed.to_chat_message().content, None);
}

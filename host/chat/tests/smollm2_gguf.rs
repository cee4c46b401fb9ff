//! The tokenizer and chat template built from SmolLM2's GGUF metadata against transformers'
//! own GGUF conversion (fixtures/smollm2_tokens.json, from fixtures/make_smollm2_tokens.py).
//!
//! Needs `.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`, which the test command fetches;
//! without it the tests print why and pass, except under `OPENCLAW_REQUIRE_ASSETS=1` (CI).

mod common;

use std::path::PathBuf;

use openclaw_chat::{
    chat_template_from_gguf, tokenizer_from_gguf, ChatMessage, GgufTokenizerSpec, RenderOptions,
    Tokenizer, ToolsRoute,
};
use openclaw_engine::weights::gguf::GgufFile;
use serde_json::Value;

fn gguf_path() -> Option<PathBuf> {
    common::smollm2()
}

/// The caller's side: copy the GGUF's tokenizer keys into a spec.
fn spec(path: &PathBuf) -> GgufTokenizerSpec {
    let g = GgufFile::open(path).unwrap();
    let strings = |key: &str| -> Vec<String> {
        g.get_str_array(key)
            .unwrap()
            .into_iter()
            .map(str::to_owned)
            .collect()
    };
    GgufTokenizerSpec {
        model: g.get_str("tokenizer.ggml.model").unwrap().to_owned(),
        pre: g.get_str("tokenizer.ggml.pre").ok().map(str::to_owned),
        tokens: strings("tokenizer.ggml.tokens"),
        merges: strings("tokenizer.ggml.merges"),
        token_types: g
            .get_i64_array("tokenizer.ggml.token_type")
            .unwrap()
            .into_iter()
            .map(|t| t as i32)
            .collect(),
        bos: g.get_u32("tokenizer.ggml.bos_token_id").ok(),
        eos: g.get_u32("tokenizer.ggml.eos_token_id").ok(),
        pad: g.get_u32("tokenizer.ggml.padding_token_id").ok(),
        unk: g.get_u32("tokenizer.ggml.unknown_token_id").ok(),
        add_bos: g.get_bool("tokenizer.ggml.add_bos_token").unwrap_or(false),
        chat_template: g.get_str("tokenizer.chat_template").ok().map(str::to_owned),
    }
}

fn reference() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/smollm2_tokens.json");
    let text = std::fs::read_to_string(&path).expect("read smollm2_tokens.json");
    serde_json::from_str(&text).expect("parse smollm2_tokens.json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn smollm2_spec_is_as_expected() {
    let Some(path) = gguf_path() else { return };
    let spec = spec(&path);
    assert_eq!(spec.model, "gpt2");
    assert_eq!(spec.pre.as_deref(), Some("smollm"));
    assert_eq!(spec.tokens.len(), 49_152);
    assert_eq!(spec.merges.len(), 48_900);
    assert_eq!((spec.bos, spec.eos, spec.pad), (Some(1), Some(2), Some(2)));
    assert!(!spec.add_bos);
}

#[test]
fn smollm2_token_ids_match_transformers() {
    let Some(path) = gguf_path() else { return };
    let tok: Tokenizer = tokenizer_from_gguf(&spec(&path)).unwrap();
    let reference = reference();
    assert_eq!(
        tok.vocab_size() as u64,
        reference["vocab_size"].as_u64().unwrap()
    );
    let special = tok.special_tokens();
    for (ours, key) in [
        (&special.bos, "bos_token"),
        (&special.eos, "eos_token"),
        (&special.pad, "pad_token"),
        (&special.unk, "unk_token"),
    ] {
        assert_eq!(
            ours.as_ref().map(|t| t.text.as_str()),
            reference[key].as_str(),
            "{key}"
        );
    }
    let encodings = reference["encodings"].as_array().unwrap();
    assert!(encodings.len() >= 15);
    let mut mismatches = Vec::new();
    for e in encodings {
        let text = e["text"].as_str().unwrap();
        let want = ids(&e["ids"]);
        let got = tok.encode(text, false).unwrap();
        if got != want {
            mismatches.push(format!("encode {text:?}: got {got:?}, want {want:?}"));
        }
        let got = tok.encode(text, true).unwrap();
        if got != ids(&e["ids_with_special_tokens"]) {
            mismatches.push(format!("encode with special tokens {text:?}: got {got:?}"));
        }
        for (skip, key) in [(false, "decoded"), (true, "decoded_skip_special")] {
            let got = tok.decode(&want, skip).unwrap();
            if got != e[key].as_str().unwrap() {
                mismatches.push(format!("{key} of {text:?}: got {got:?}, want {:?}", e[key]));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // The ChatML markers are single tokens.
    assert_eq!(tok.encode("<|im_start|>", false).unwrap(), vec![1]);
    assert_eq!(tok.encode("<|im_end|>", false).unwrap(), vec![2]);
}

#[test]
fn smollm2_chat_template_matches_transformers() {
    let Some(path) = gguf_path() else { return };
    let template = chat_template_from_gguf(&spec(&path)).unwrap().unwrap();
    let reference = reference();
    let chats = reference["chat_templates"].as_array().unwrap();
    assert_eq!(chats.len(), 2);
    for chat in chats {
        let messages: Vec<ChatMessage> = serde_json::from_value(chat["messages"].clone()).unwrap();
        let options = RenderOptions {
            add_generation_prompt: chat["add_generation_prompt"].as_bool().unwrap(),
            ..Default::default()
        };
        let rendered = template.render(&messages, None, &options).unwrap();
        assert_eq!(rendered, chat["rendered"].as_str().unwrap());
    }
}

/// SmolLM2's template writes no tools: they go into the system prompt, where the model sees them.
#[test]
fn smollm2_gets_its_tools_in_the_system_prompt() {
    let Some(path) = gguf_path() else { return };
    let template = chat_template_from_gguf(&spec(&path)).unwrap().unwrap();
    assert_eq!(template.tools_route(), ToolsRoute::SystemPrompt);
    let tools = serde_json::json!([{"type": "function", "function": {"name": "shell_exec",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]);
    let options = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    let messages = [ChatMessage::new("user", "List the files.")];
    let rendered = template.render(&messages, Some(&tools), &options).unwrap();
    assert!(
        rendered.starts_with("<|im_start|>system\n# Tools\n")
            && rendered.contains("\"shell_exec\""),
        "{rendered}"
    );
}

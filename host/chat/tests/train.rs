//! Training the project's own byte-level BPE tokenizer.

use std::path::Path;

use openclaw_chat::{train_bpe, ChatMessage, ChatTemplate, RenderOptions, Tokenizer};

fn corpus(dir: &Path) -> Vec<std::path::PathBuf> {
    let a = dir.join("a.txt");
    let b = dir.join("b.txt");
    let mut text_a = String::new();
    let mut text_b = String::new();
    // Pseudo-random words give enough distinct pairs to fill the vocabulary.
    let mut seed: u64 = 7;
    let mut word = || {
        let mut w = String::new();
        for _ in 0..2 + seed % 7 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            w.push((b'a' + ((seed >> 33) % 26) as u8) as char);
        }
        w
    };
    for i in 0..300 {
        let words: Vec<String> = (0..8).map(|_| word()).collect();
        text_a.push_str(&format!(
            "The quick brown fox {i} jumps over the lazy dog. {}\n",
            words.join(" ")
        ));
        text_b.push_str(&format!(
            "<|im_start|>user\nWhat is {i} + {i}?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n{} 中文 😀<|im_end|>\n",
            2 * i
        ));
    }
    std::fs::write(&a, text_a).unwrap();
    std::fs::write(&b, text_b).unwrap();
    vec![a, b]
}

#[test]
fn trains_deterministically_with_chat_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    let out1 = tmp.path().join("t1");
    let out2 = tmp.path().join("t2");
    let tok = train_bpe(&files, 400, &out1).unwrap();
    train_bpe(&files, 400, &out2).unwrap();
    for name in ["tokenizer.json", "tokenizer_config.json"] {
        assert_eq!(
            std::fs::read(out1.join(name)).unwrap(),
            std::fs::read(out2.join(name)).unwrap(),
            "{name} differs between two runs"
        );
    }

    assert_eq!(tok.vocab_size(), 400);
    for (i, t) in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .iter()
        .enumerate()
    {
        assert_eq!(tok.token_to_id(t), Some(i as u32));
    }
    for (i, t) in [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(tok.token_to_id(t), Some(394 + i as u32), "{t}");
    }
    let special = tok.special_tokens();
    assert_eq!(special.eos.as_ref().unwrap().id, Some(2));
    assert_eq!(special.pad.as_ref().unwrap().id, Some(0));

    // Any text round-trips (byte-level), markup tokens are single ids.
    let text = "<|im_start|>user\nHéllo 😀 wörld\r\n\tcode();<|im_end|>\n<think>x</think>";
    let ids = tok.encode(text, false).unwrap();
    assert_eq!(tok.decode(&ids, false).unwrap(), text);
    assert_eq!(&ids[..1], &[1]);
    assert!(ids.contains(&394) && ids.contains(&395));
    assert_eq!(
        tok.decode(&ids, true).unwrap(),
        "user\nHéllo 😀 wörld\r\n\tcode();\n<think>x</think>"
    );
    // The merges learnt something: common words are shorter than their bytes.
    assert!(tok.encode(" quick brown fox", false).unwrap().len() < 8);

    // The written config carries the chat template.
    let template = ChatTemplate::from_dir(&out1).unwrap();
    let rendered = template
        .render(
            &[ChatMessage::new("user", "hi")],
            None,
            &RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        rendered,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let reloaded = Tokenizer::from_dir(&out1).unwrap();
    assert_eq!(reloaded.encode(text, false).unwrap(), ids);
}

#[test]
fn bad_training_inputs_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let files = corpus(tmp.path());
    let err = train_bpe(&files, 100, tmp.path().join("o")).unwrap_err();
    assert!(err.to_string().contains("vocab_size 100"), "{err}");
    let missing = [tmp.path().join("nope.txt")];
    let err = train_bpe(&missing, 400, tmp.path().join("o")).unwrap_err();
    assert!(err.to_string().contains("nope.txt"), "{err}");
}

#[test]
fn loading_errors_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing/tokenizer.json");
    let err = Tokenizer::from_file(&missing).unwrap_err().to_string();
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!err.contains('\n'));
    let bad = tmp.path().join("tokenizer.json");
    std::fs::write(&bad, "{not json").unwrap();
    let err = Tokenizer::from_file(&bad).unwrap_err().to_string();
    assert!(err.contains(&bad.display().to_string()), "{err}");
    assert!(!err.contains('\n'));
    let err = Tokenizer::from_dir(tmp.path().join("missing"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing"), "{err}");
    // A bad tokenizer_config.json is named too.
    let dir = tempfile::tempdir().unwrap();
    let files = corpus(dir.path());
    let out = dir.path().join("t");
    train_bpe(&files, 300, &out).unwrap();
    std::fs::write(out.join("tokenizer_config.json"), "[").unwrap();
    let err = Tokenizer::from_dir(&out).unwrap_err().to_string();
    assert!(err.contains("tokenizer_config.json"), "{err}");
}

//! SFT: tokenization masks, the loss going down, resumable runs; the training log.

mod common;

use common::*;
use openclaw_chat::{train_bpe, ChatMessage, ChatTemplate, RenderOptions, Tokenizer};
use openclaw_engine::{random_model, ModelConfig};
use openclaw_trainer::log::{human_line, LOG_FILE};
use openclaw_trainer::sft::{load_jsonl, tokenize_conversation};
use openclaw_trainer::{
    resolve_checkpoint, run_sft, LrSchedule, SftExample, SftOptions, StepReport, TrainConfig,
    TrainLog, Trainer,
};

const CORPUS: &str = "The capital of France is Paris.\nTwo plus two is four.\nWhat is the capital of France?\nWhat is two plus two?\nSay hello.\nHello there, friend!\n";

fn chat_tools(dir: &std::path::Path) -> (ChatTemplate, Tokenizer) {
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, CORPUS.repeat(20)).unwrap();
    let out = dir.join("tok");
    train_bpe(&[&corpus], 300, &out).unwrap();
    (
        ChatTemplate::from_dir(&out).unwrap(),
        Tokenizer::from_dir(&out).unwrap(),
    )
}

fn conv(pairs: &[(&str, &str)]) -> Vec<ChatMessage> {
    let mut m = vec![ChatMessage::new("system", "Be brief.")];
    for (u, a) in pairs {
        m.push(ChatMessage::new("user", *u));
        m.push(ChatMessage::new("assistant", *a));
    }
    m
}

#[test]
fn only_assistant_tokens_and_their_end_of_turn_are_trained() {
    let dir = tempfile::tempdir().unwrap();
    let (template, tok) = chat_tools(dir.path());
    let messages = conv(&[
        ("What is two plus two?", "Two plus two is four."),
        ("Say hello.", "Hello there, friend!"),
    ]);
    let ex = tokenize_conversation(&messages, None, &template, &tok, 4096).unwrap();
    assert_eq!(ex.len(), 1, "the turns extend one sequence");
    let e = &ex[0];
    assert_eq!(e.ids.len(), e.mask.len());
    let trained: Vec<u32> = e
        .ids
        .iter()
        .zip(&e.mask)
        .filter(|p| *p.1)
        .map(|p| *p.0)
        .collect();
    assert_eq!(
        tok.decode(&trained, false).unwrap(),
        "Two plus two is four.<|im_end|>Hello there, friend!<|im_end|>"
    );
    // Each answer follows exactly what serving renders as the prompt.
    let opts = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    let prompt = template.render(&messages[..4], None, &opts).unwrap();
    let text = tok.decode(&e.ids, false).unwrap();
    assert!(text.starts_with(&prompt), "{text:?}");
    assert!(text.ends_with("Hello there, friend!<|im_end|>"));
    assert!(!e.mask[0]);

    // Cut to the context: a sequence left with no trained token is dropped.
    let short = tokenize_conversation(&messages, None, &template, &tok, 5).unwrap();
    assert!(short.is_empty());
}

#[test]
fn a_conversation_with_tools_is_trained_after_the_prompt_serving_renders_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let (template, tok) = chat_tools(dir.path());
    let tools = serde_json::json!([{"type": "function", "function": {"name": "add",
        "parameters": {"type": "object", "properties": {}}}}]);
    let messages = conv(&[("What is two plus two?", "Two plus two is four.")]);
    let ex = tokenize_conversation(&messages, Some(&tools), &template, &tok, 4096).unwrap();
    let opts = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    let prompt = template
        .render(&messages[..2], Some(&tools), &opts)
        .unwrap();
    assert!(prompt.contains("<tools>") && prompt.contains("\"add\""));
    assert!(tok.decode(&ex[0].ids, false).unwrap().starts_with(&prompt));

    // A JSONL line's `tools` reach the prompt the same way.
    let path = dir.path().join("sft.jsonl");
    let line = serde_json::json!({"messages": messages, "tools": tools});
    std::fs::write(&path, format!("{line}\n")).unwrap();
    let loaded = load_jsonl(&path, &template, &tok, 4096).unwrap();
    assert_eq!(loaded[0].ids, ex[0].ids);
}

fn dataset(dir: &std::path::Path) -> (Vec<SftExample>, usize) {
    let (template, tok) = chat_tools(dir);
    let pairs = [
        (
            "What is the capital of France?",
            "The capital of France is Paris.",
        ),
        ("What is two plus two?", "Two plus two is four."),
        ("Say hello.", "Hello there, friend!"),
    ];
    let path = dir.join("data.jsonl");
    let mut lines = String::new();
    for (u, a) in pairs.iter().cycle().take(12) {
        let v = serde_json::json!({"messages": [
            {"role": "user", "content": u},
            {"role": "assistant", "content": a},
        ]});
        lines += &format!("{v}\n");
    }
    std::fs::write(&path, lines).unwrap();
    let ex = load_jsonl(&path, &template, &tok, 4096).unwrap();
    assert_eq!(ex.len(), 12);
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, "{\"messages\": []}\nnot json\n").unwrap();
    let e = format!("{:#}", load_jsonl(&bad, &template, &tok, 4096).unwrap_err());
    assert!(e.contains("bad.jsonl:2"), "{e}");
    (ex, tok.vocab_size())
}

fn sft_model(vocab: usize) -> openclaw_engine::Model<AD> {
    random_model::<AD>(
        ModelConfig::qwen3(vocab, 32, 64, 2, 4, 2, 8, true),
        5,
        &device(),
    )
    .unwrap()
}

fn sft_config() -> TrainConfig {
    TrainConfig {
        schedule: LrSchedule::constant(1e-2),
        max_grad_norm: 1.0,
        max_tokens_per_batch: 256,
        ..Default::default()
    }
}

#[test]
fn sft_loss_goes_down() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, vocab) = dataset(dir.path());
    let mut t = Trainer::new(sft_model(vocab), sft_config()).unwrap();
    let first = t.sft_step(&ex).unwrap();
    assert!(first.micro_batches > 1, "the budget splits the batch");
    let mut last = first.clone();
    for _ in 0..20 {
        last = t.sft_step(&ex).unwrap();
    }
    assert!(
        last.loss < 0.5 * first.loss,
        "loss {} -> {}",
        first.loss,
        last.loss
    );
    assert_eq!(last.step, 21);
    assert!(last.trained_tokens > 0 && last.tokens > last.trained_tokens);
    // Initial loss of a near-uniform model is about ln(vocab).
    assert!(
        (first.loss - (vocab as f64).ln()).abs() < 0.5,
        "{}",
        first.loss
    );
}

#[test]
fn an_interrupted_sft_run_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, vocab) = dataset(dir.path());
    let opts = SftOptions {
        epochs: 2,
        batch_size: 5,
        shuffle: true,
    };
    assert_eq!(opts.total_steps(ex.len()), 6);
    let mut straight = Trainer::new(sft_model(vocab), sft_config()).unwrap();
    let mut steps = 0;
    run_sft(&mut straight, &ex, &opts, |_, _| {
        steps += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(steps, 6);
    assert_eq!(straight.state().data_position, 24);

    let save = dir.path().join("ckpt");
    let mut first = Trainer::new(sft_model(vocab), sft_config()).unwrap();
    let stop = run_sft(&mut first, &ex, &opts, |t, r| {
        if r.step == 4 {
            t.save_checkpoint(&save, 2)?;
            anyhow::bail!("stopped");
        }
        Ok(())
    });
    assert!(stop.is_err());
    let at = resolve_checkpoint(&save, "latest").unwrap();
    let mut resumed = Trainer::<AD>::resume(&at, sft_config(), &device()).unwrap();
    assert_eq!(resumed.state().data_position, 17); // 5 + 5 + 2, then 5 of epoch 2
    run_sft(&mut resumed, &ex, &opts, |_, _| Ok(())).unwrap();
    let d = max_diff(&weights(straight.model()), &weights(resumed.model()));
    assert!(d < 1e-6, "weights differ by {d}");
}

#[test]
fn the_training_log_gets_one_json_line_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = TrainLog::open(&dir.path().join("logs")).unwrap().quiet();
    let mut r = StepReport {
        step: 1,
        samples: 4,
        loss: 0.5,
        grad_norm: 1.25,
        lr: 1e-5,
        tokens: 100,
        logprob_diff: Some(0.01),
        staleness: Some(0.5),
        ..Default::default()
    };
    r.metrics.insert("clip_frac".into(), 0.1);
    log.record(&r).unwrap();
    r.step = 2;
    log.record(&r).unwrap();
    let text = std::fs::read_to_string(dir.path().join("logs").join(LOG_FILE)).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["step"], 2);
    for key in [
        "loss",
        "grad_norm",
        "lr",
        "tokens",
        "samples",
        "logprob_diff",
        "staleness",
        "step_time_s",
        "time",
    ] {
        assert!(lines[0].get(key).is_some(), "{key}");
    }
    assert_eq!(lines[0]["metrics"]["clip_frac"], 0.1);
    let h = human_line(&r);
    assert!(h.starts_with("step 2  loss 0.5000  grad 1.250"), "{h}");
    assert!(h.contains("clip_frac 0.1000"), "{h}");
}

#[test]
fn sft_on_two_threads_matches_one() {
    let dir = tempfile::tempdir().unwrap();
    let (ex, vocab) = dataset(dir.path());
    let mut one_cfg = sft_config();
    one_cfg.max_tokens_per_batch = 100_000;
    let mut two_cfg = one_cfg.clone();
    two_cfg.data_parallel = 2;
    let mut one = Trainer::new(sft_model(vocab), one_cfg).unwrap();
    let mut two = Trainer::new(sft_model(vocab), two_cfg).unwrap();
    let (a, b) = (one.sft_step(&ex).unwrap(), two.sft_step(&ex).unwrap());
    assert_eq!((a.micro_batches, b.micro_batches), (1, 2));
    assert!((a.loss - b.loss).abs() < 1e-6);
    assert!((a.grad_norm - b.grad_norm).abs() < 1e-6 * a.grad_norm);
    let d = max_diff(&weights(one.model()), &weights(two.model()));
    assert!(d < 1e-5, "weights differ by {d}");
}

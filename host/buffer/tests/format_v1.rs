//! The disk format is the buffer's own (format 1): records written today read back as they were
//! written, and a record encodes to exactly the bytes format 1 always gave it, whatever happens
//! to the ABI's types. `format/v1.jsonl` was written by format 1 and is never regenerated: a
//! change that breaks this test changes the disk format, which needs a new format number and a
//! reader of the old one.

use abi_stable::std_types::ROption;
use openclaw_buffer::record::{disk, EpisodeEntry, Record};
use openclaw_buffer::Envelope;
use openclaw_plugin_api::host::Generation;
use openclaw_plugin_api::{
    Message, NextState, Score, Task, TopKEntries, TrainingSample, Turn, TurnType,
};

fn message_with_everything() -> Message {
    Message {
        role: "assistant".into(),
        content: "the answer is 4".into(),
        reasoning_content: ROption::RSome("2+2".into()),
        tool_calls_json: ROption::RSome(
            r#"[{"id":"c1","type":"function","function":{"name":"calc","arguments":"{}"}}]"#.into(),
        ),
        tool_call_id: ROption::RSome("c0".into()),
        name: ROption::RSome("helper".into()),
    }
}

fn next_state() -> NextState {
    NextState {
        role: "user".into(),
        content: "thanks".into(),
        messages: vec![Message::new("user", "thanks")].into(),
    }
}

fn topk() -> TopKEntries {
    TopKEntries {
        k: 2,
        token_ids: vec![5, 6, 7, 8].into(),
        logprobs: vec![-0.1, -2.5, -0.2, -1.75].into(),
    }
}

/// One record of every kind, with every optional field set in one and left out in another.
fn every_kind() -> Vec<Envelope> {
    let turn = |next: bool, tools: &str, t: TurnType| Turn {
        session_id: "s1".into(),
        turn_index: 3,
        turn_type: t,
        prompt_messages: vec![
            Message::new("system", "be brief"),
            Message::new("user", "2+2? \"quoted\" \u{e9}"),
        ]
        .into(),
        tools_json: tools.into(),
        response: message_with_everything(),
        prompt_ids: vec![1, 2, 3].into(),
        response_ids: vec![4, 5].into(),
        response_logprobs: vec![-0.5, -0.125].into(),
        weight_version: 7,
        next_state: if next {
            ROption::RSome(next_state())
        } else {
            ROption::RNone
        },
        trainable: next,
    };
    let score = |full: bool| Score {
        value: 1.0,
        trainable: true,
        votes: vec![1.0, 1.0, -1.0].into(),
        invalid_votes: 1,
        hint: if full {
            ROption::RSome("use a tool".into())
        } else {
            ROption::RNone
        },
        judge_text: "\\boxed{1}".into(),
        teacher_logprobs: if full {
            ROption::RSome(vec![-0.25, -0.5].into())
        } else {
            ROption::RNone
        },
        teacher_topk: if full {
            ROption::RSome(topk())
        } else {
            ROption::RNone
        },
        advantages: if full {
            ROption::RSome(vec![0.5, 0.5].into())
        } else {
            ROption::RNone
        },
        metadata_json: if full { r#"{"votes":3}"# } else { "" }.into(),
    };
    let sample = |full: bool| TrainingSample {
        session_id: "s1".into(),
        turn_index: 3,
        group_id: 11,
        prompt_ids: vec![1, 2, 3].into(),
        response_ids: vec![4, 5].into(),
        rollout_logprobs: vec![-0.5, -0.125].into(),
        loss_mask: vec![1.0, 0.0].into(),
        weight_version: 7,
        reward: -1.0,
        advantages: if full {
            ROption::RSome(vec![-1.0, -1.0].into())
        } else {
            ROption::RNone
        },
        teacher_logprobs: if full {
            ROption::RSome(vec![-0.25, -0.5].into())
        } else {
            ROption::RNone
        },
        teacher_topk: if full {
            ROption::RSome(topk())
        } else {
            ROption::RNone
        },
        metadata_json: if full { r#"{"hint":"x"}"# } else { "" }.into(),
    };
    let episode = |full: bool| EpisodeEntry {
        episode_id: "ep-2-1".into(),
        env: "toolcall".into(),
        group: 2,
        group_size: 4,
        sample: 1,
        task: Task {
            id: "gsm8k-17".into(),
            instruction: "Add 2 and 2.".into(),
            data_json: r#"{"answer":"4"}"#.into(),
        },
        conversation: vec![
            Message::new("user", "Add 2 and 2."),
            message_with_everything(),
        ],
        action_at: vec![1],
        tools_json: if full { r#"[{"type":"function"}]"# } else { "" }.into(),
        steps: vec![Generation {
            prompt_ids: vec![1, 2].into(),
            response_ids: vec![3].into(),
            logprobs: vec![-0.75].into(),
            message: Message::new("assistant", "4"),
            finish_reason: "stop".into(),
            weight_version: 7,
        }],
        step_rewards: vec![0.0],
        tool_steps: 1,
        ending: if full { "done" } else { "failed" }.into(),
        failure: if full { "" } else { "the sandbox died" }.into(),
        reward: full.then_some(1.0),
        step_scores: if full { vec![0.5] } else { vec![] },
        outcome: full.then_some(0.75),
        solved: full.then_some(true),
        evaluated: full,
        details_json: r#"{"found":"4"}"#.into(),
    };
    let records = vec![
        Record::Turn {
            turn: Box::new(turn(true, r#"[{"type":"function"}]"#, TurnType::Main)),
            constraint: None,
            adapter: None,
        },
        Record::Turn {
            turn: Box::new(turn(false, "", TurnType::Side)),
            constraint: None,
            adapter: None,
        },
        Record::NextState {
            session_id: "s1".into(),
            turn_index: 3,
            turn_seq: Some(1),
            next_state: next_state(),
        },
        Record::NextState {
            session_id: "s1".into(),
            turn_index: 3,
            turn_seq: None,
            next_state: NextState {
                role: "tool".into(),
                content: "4".into(),
                messages: vec![].into(),
            },
        },
        Record::SessionClosed {
            session_id: "s1".into(),
            reason: "idle".into(),
        },
        Record::Judgement {
            session_id: "s1".into(),
            turn_index: 3,
            turn_seq: Some(1),
            score: Box::new(score(true)),
        },
        Record::Judgement {
            session_id: "s1".into(),
            turn_index: 3,
            turn_seq: None,
            score: Box::new(score(false)),
        },
        Record::Sample {
            sample: Box::new(sample(true)),
            turn_seq: Some(1),
        },
        Record::Sample {
            sample: Box::new(sample(false)),
            turn_seq: None,
        },
        Record::Episode {
            episode: Box::new(episode(true)),
        },
        Record::Episode {
            episode: Box::new(episode(false)),
        },
        // Added to format 1 later, as optional parts and a new kind: the lines above keep
        // their bytes, and these keep theirs.
        Record::Turn {
            turn: Box::new(turn(true, "", TurnType::Main)),
            constraint: Some("json_schema".into()),
            adapter: None,
        },
        Record::Feedback {
            session_id: "s1".into(),
            turn_index: 3,
            turn_seq: Some(1),
            reward: -1.0,
            text: Some("Too long.".into()),
        },
        Record::Feedback {
            session_id: "s1".into(),
            turn_index: 4,
            turn_seq: None,
            reward: 0.5,
            text: None,
        },
    ];
    records
        .into_iter()
        .enumerate()
        .map(|(i, record)| Envelope {
            seq: i as u64 + 1,
            at_ms: 1_790_000_000_000 + i as u64,
            record,
        })
        .collect()
}

fn golden() -> Vec<String> {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/format/v1.jsonl"
    ))
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect()
}

#[test]
fn every_kind_of_record_encodes_to_the_bytes_format_1_gave_it() {
    let golden = golden();
    let records = every_kind();
    assert_eq!(golden.len(), records.len());
    for (e, want) in records.iter().zip(&golden) {
        let got = disk::encode(e.seq, e.at_ms, &e.record).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            *want,
            "{}",
            e.record.kind()
        );
    }
}

#[test]
fn format_1_bytes_decode_to_the_records_they_were_written_from() {
    for (line, want) in golden().iter().zip(every_kind()) {
        assert_eq!(disk::decode(line.as_bytes()).unwrap(), want);
    }
}

#[test]
fn fields_format_1_lets_writers_leave_out_read_as_absent() {
    // Older writers left out optional parts of a message, a turn and a sample.
    let line = r#"{"seq":9,"at_ms":1,"record":{"kind":"turn","turn":{"session_id":"s","turn_index":0,"turn_type":"side","prompt_messages":[{"role":"user","content":"hi"}],"response":{"role":"assistant","content":"yo"},"prompt_ids":[1],"response_ids":[2],"response_logprobs":[-1.0],"weight_version":0,"trainable":false}}}"#;
    let Record::Turn { turn, .. } = disk::decode(line.as_bytes()).unwrap().record else {
        panic!("not a turn")
    };
    assert_eq!(turn.prompt_messages[0].reasoning_content, ROption::RNone);
    assert_eq!(turn.next_state, ROption::RNone);
    assert!(turn.tools_json.is_empty());
    // An unknown kind is an error that names it, not a silent skip.
    let err = disk::decode(br#"{"seq":1,"at_ms":1,"record":{"kind":"vote"}}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("vote"), "{err}");
}

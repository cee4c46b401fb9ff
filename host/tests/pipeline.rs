//! The run as a library, driven in-process: [`Pipeline`] built from a resolved configuration
//! and real plugins built from the workspace, started, observed through its step callback and
//! its handle, stopped, restarted on the same directories, and its checkpoint served by a
//! serving-only pipeline through `checkpoint-latest`.

mod common;

use common::{free_port, workspace};
use openclaw_host::backend::{Cpu, Placement};
use openclaw_host::buffer::{Log, Record};
use openclaw_host::config::ConfigInputs;
use openclaw_host::pipeline::Pipeline;
use openclaw_host::plugin::RunPlugins;
use openclaw_host::simulate::{Scoreboard, SimUsers, SimUsersOptions};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The run settings a user would give as flags, with nothing read from the environment.
fn inputs(flags: &[(&str, String)]) -> ConfigInputs {
    ConfigInputs {
        file: None,
        flags: flags
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.clone(),
                    format!("--{}", k.replace('_', "-")),
                )
            })
            .collect(),
        sets: Vec::new(),
        env: Box::new(|_| None),
    }
}

fn run_flags(dir: &Path, model: &Path, steps: u64) -> Vec<(&'static str, String)> {
    let d = |p: &str| dir.join(p).display().to_string();
    vec![
        (
            "plugin",
            workspace().join("methods/binary-rl").display().to_string(),
        ),
        ("model_path", model.display().to_string()),
        ("port", free_port().to_string()),
        ("rl_buffer_dir", d("rl_buffer")),
        ("save_dir", d("checkpoints")),
        ("log_dir", d("logs")),
        ("max_steps", steps.to_string()),
        ("rollout_batch_size", "4".into()),
        ("default_max_tokens", "24".into()),
        ("save_interval", "1".into()),
        ("batch_timeout", "2".into()),
        ("lr", "1e-4".into()),
    ]
}

/// Runs the four loops with simulated users until `--max-steps`; returns the steps observed.
fn run_until_done(dir: &Path, model: &Path, steps: u64) -> (Vec<u64>, u64, Option<u64>) {
    let plugins = RunPlugins::load(|| inputs(&run_flags(dir, model, steps))).unwrap();
    let cfg = plugins.resolved.config.clone();
    let pipeline =
        Pipeline::<Cpu>::four_loops(&cfg, &plugins, &Placement::all(Default::default())).unwrap();
    let resumed_at = pipeline.resumed.as_ref().map(|r| r.step);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let observer = seen.clone();
    let handle = pipeline
        .start(move |ev| observer.lock().unwrap().push(ev.report.step))
        .unwrap();
    assert!(handle.base_url().starts_with("http://127.0.0.1:"));
    let users = SimUsers::start(
        SimUsersOptions {
            base_url: handle.base_url(),
            api_key: String::new(),
            users: 4,
            seed: 7,
            max_tokens: 24,
            tasks: openclaw_sim::TaskSet::standard().train,
        },
        Arc::new(Scoreboard::default()),
    );
    handle.wait();
    users.stop();
    let metrics = handle.metrics().clone();
    let summary = handle.shutdown().unwrap().expect("the four loops train");
    let steps_metric = metrics.train_steps.get();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(steps_metric as usize, seen.len());
    (seen, summary.step, resumed_at)
}

#[test]
fn the_four_loops_run_in_process_resume_and_their_checkpoint_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_host::default_model::ensure_default_model(&dir.join("home"), false).unwrap();

    // A first life: three steps, observed one by one.
    let (seen, last, resumed) = run_until_done(dir, &model, 3);
    assert_eq!(resumed, None);
    assert_eq!(seen, vec![1, 2, 3]);
    assert_eq!(last, 3);
    let records = Log::read_all(&dir.join("rl_buffer")).unwrap().records;
    let count = |kind: &str| records.iter().filter(|e| e.record.kind() == kind).count();
    assert!(count("turn") >= 12, "{} turns", count("turn"));
    assert!(count("judgement") >= 12 && count("sample") >= 12);
    assert!(records
        .iter()
        .any(|e| matches!(&e.record, Record::NextState { .. })));
    let latest = dir.join("checkpoints/checkpoint-latest");
    assert_eq!(
        std::fs::read_link(&latest).unwrap(),
        Path::new("checkpoint-3")
    );

    // A second life on the same directories continues from the checkpoint.
    let (seen, last, resumed) = run_until_done(dir, &model, 5);
    assert_eq!(resumed, Some(3));
    assert_eq!(seen, vec![4, 5]);
    assert_eq!(last, 5);

    // Serving alone, from `checkpoint-latest` as a path: answers and records the turn.
    let flags = vec![
        ("model_path", latest.display().to_string()),
        ("port", free_port().to_string()),
        (
            "rl_buffer_dir",
            dir.join("serve_buffer").display().to_string(),
        ),
    ];
    let cfg = openclaw_host::config::resolve(&inputs(&flags), &Default::default())
        .unwrap()
        .config;
    let handle = Pipeline::<Cpu>::serving(&cfg, &Placement::all(Default::default()))
        .unwrap()
        .start(|_| {})
        .unwrap();
    let body = serde_json::json!({
        "model": "default",
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "max_tokens": 8,
    });
    let mut res = ureq::post(&format!("{}/chat/completions", handle.base_url()))
        .send_json(&body)
        .unwrap();
    let answer: serde_json::Value = res.body_mut().read_json().unwrap();
    assert_eq!(answer["object"], "chat.completion");
    handle.stop();
    handle.wait();
    assert_eq!(handle.shutdown().unwrap().map(|s| s.step), None);
    let served = Log::read_all(&dir.join("serve_buffer")).unwrap().records;
    assert_eq!(
        served.iter().filter(|e| e.record.kind() == "turn").count(),
        1
    );
}

//! The run as a library, driven in-process: [`Pipeline`] built from a resolved configuration
//! and real plugins built from the workspace, started, observed through its step callback and
//! its handle, stopped, restarted on the same directories, and its checkpoint served by a
//! serving-only pipeline through `checkpoint-latest`.

mod common;

use common::{inputs, start_four_loops, workspace};
use openclaw_buffer::{Log, Record};
use openclaw_config::backend::{Cpu, Placement};
use openclaw_lab::simulate::{Scoreboard, SimUsers, SimUsersOptions};
use openclaw_pipeline::Pipeline;
use openclaw_plugins::RunPlugins;
use std::path::Path;
use std::sync::{Arc, Mutex};

fn run_flags(dir: &Path, model: &Path, steps: u64) -> Vec<(&'static str, String)> {
    let d = |p: &str| dir.join(p).display().to_string();
    vec![
        (
            "plugin",
            workspace().join("methods/binary-rl").display().to_string(),
        ),
        ("model_path", model.display().to_string()),
        ("port", "0".to_string()),
        ("rl_buffer_dir", d("rl_buffer")),
        ("save_dir", d("checkpoints")),
        ("log_dir", d("logs")),
        ("max_steps", steps.to_string()),
        ("rollout_batch_size", "4".into()),
        ("default_max_tokens", "24".into()),
        ("save_interval", "1".into()),
        ("batch_timeout", "2".into()),
        ("lr", "1e-4".into()),
        // The simulated users write what the keyword rules read.
        ("judge", "rule".into()),
    ]
}

/// Runs the four loops with simulated users until `--max-steps`; returns the steps observed.
fn run_until_done(dir: &Path, model: &Path, steps: u64) -> (Vec<u64>, u64, Option<u64>) {
    let (handle, seen, resumed_at) =
        start_four_loops(&run_flags(dir, model, steps), |ev| ev.report.step);
    let base_url = handle.base_url().expect("the run serves");
    assert!(base_url.starts_with("http://127.0.0.1:"));
    let users = SimUsers::start(
        SimUsersOptions {
            base_url: base_url.clone(),
            api_key: String::new(),
            users: 4,
            seed: 7,
            requests: 0.25,
            tasks: openclaw_sim::TaskSet::standard().train,
            preferences: vec![openclaw_sim::Style::Plain],
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
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();

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
    // The checkpoint says which plugins trained it.
    let lock = std::fs::read_to_string(latest.join("openclaw-plugins.lock")).unwrap();
    assert!(lock.contains("name = \"binary-rl\""), "{lock}");
    assert!(lock.contains("library_sha256 = \""), "{lock}");

    // A second life on the same directories continues from the checkpoint.
    let (seen, last, resumed) = run_until_done(dir, &model, 5);
    assert_eq!(resumed, Some(3));
    assert_eq!(seen, vec![4, 5]);
    assert_eq!(last, 5);

    // Serving alone, from `checkpoint-latest` as a path: answers and records the turn.
    let flags = vec![
        ("model_path", latest.display().to_string()),
        ("port", "0".to_string()),
        (
            "rl_buffer_dir",
            dir.join("serve_buffer").display().to_string(),
        ),
    ];
    let cfg = openclaw_config::resolve(&inputs(&flags), &Default::default())
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
    let mut res = ureq::post(&format!("{}/chat/completions", handle.base_url().unwrap()))
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

/// `train`'s pipeline: a scored trajectory file, several passes, nothing served; cut short by
/// `--max-steps` and resumed from its checkpoint, it takes the remaining steps and no more.
#[test]
fn offline_training_is_a_pipeline_that_resumes_after_the_consumed_samples() {
    use openclaw_pipeline::{DataFile, Dataset};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let data = dir.join("rl.jsonl");
    let lines = common::scored_trajectories(5);
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let d = |p: &str| dir.join(p).display().to_string();
    let offline = |extra: &[(&'static str, String)]| {
        let mut flags = vec![
            (
                "plugin",
                workspace().join("methods/binary-rl").display().to_string(),
            ),
            ("model_path", model.display().to_string()),
            ("data_path", data.display().to_string()),
            ("save_dir", d("checkpoints")),
            ("log_dir", d("logs")),
            ("rollout_batch_size", "2".into()),
            ("save_interval", "1".into()),
        ];
        flags.extend_from_slice(extra);
        let plugins = RunPlugins::load(|| inputs(&flags)).unwrap();
        let cfg = plugins.resolved.config.clone();
        let placement = Placement::all(Default::default());
        let dataset = Dataset::load::<Cpu>(&plugins, &cfg, &placement).unwrap();
        let file = DataFile::read(&data, dataset.samples.len() as u64).unwrap();
        Pipeline::<Cpu>::offline(&cfg, &plugins, &placement, dataset.samples, 2, file)
    };
    let life = |extra: &[(&'static str, String)]| {
        // Two passes over five samples in batches of two: five steps.
        let pipeline = offline(extra).unwrap();
        let resumed = pipeline
            .resumed
            .as_ref()
            .map(|r| (r.step, r.consumed_through));
        let last_step = pipeline.last_step;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let observer = seen.clone();
        let handle = pipeline
            .start(move |ev| {
                observer
                    .lock()
                    .unwrap()
                    .push((ev.report.step, ev.sample_seqs.clone()))
            })
            .unwrap();
        assert_eq!(handle.base_url(), None, "nothing serves");
        handle.wait();
        let summary = handle.shutdown().unwrap().expect("it trains");
        let seen = seen.lock().unwrap().clone();
        (resumed, last_step, seen, summary)
    };

    let (resumed, last, seen, summary) = life(&[("max_steps", "3".into())]);
    assert_eq!((resumed, last), (None, Some(3)));
    assert_eq!(
        seen,
        vec![(1, vec![1, 2]), (2, vec![3, 4]), (3, vec![5, 6])],
        "sample positions run on across the passes"
    );
    assert_eq!(summary.step, 3);

    let (resumed, last, seen, summary) = life(&[("resume_from_checkpoint", "latest".into())]);
    assert_eq!((resumed, last), (Some((3, 6)), Some(5)));
    assert_eq!(seen, vec![(4, vec![7, 8]), (5, vec![9, 10])]);
    assert_eq!(summary.step, 5);
    assert_eq!(
        summary.checkpoint.as_deref(),
        Some(dir.join("checkpoints/checkpoint-5").as_path())
    );

    // Resumed again, nothing is left: refused, not "trained 1 steps".
    let err = offline(&[("resume_from_checkpoint", "latest".into())])
        .err()
        .expect("nothing left to train")
        .to_string();
    assert!(
        err.contains(
            "already trained all 10 positions (5 samples x 2 epochs); nothing is left to train"
        ),
        "{err}"
    );

    // The data file changed under a checkpoint: refused, naming both, unless told.
    std::fs::write(&data, lines[..4].join("\n") + "\n").unwrap();
    let at_3 = ("resume_from_checkpoint", d("checkpoints/checkpoint-3"));
    let err = offline(std::slice::from_ref(&at_3))
        .err()
        .expect("changed data refused")
        .to_string();
    assert!(
        err.contains("the data changed since checkpoint")
            && err.contains("5 samples")
            && err.contains("now 4 samples")
            && err.contains("--allow-changed-data"),
        "{err}"
    );
    let pipeline = offline(&[at_3, ("allow_changed_data", "true".into())]).unwrap();
    assert_eq!(pipeline.resumed.map(|r| r.consumed_through), Some(6));
}

/// A four-loop run of one-sample steps for feedback tests: `method` is a workspace plugin,
/// `settings` replace or add to the test flags. Returns its handle and what each step reported.
fn feedback_run(
    dir: &Path,
    method: &str,
    settings: &[(&'static str, &str)],
) -> (
    openclaw_pipeline::PipelineHandle,
    Arc<Mutex<Vec<openclaw_trainer::StepReport>>>,
) {
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let mut flags = run_flags(dir, &model, 1);
    flags.retain(|(k, _)| *k != "rollout_batch_size" && *k != "plugin");
    flags.push(("rollout_batch_size", "1".into()));
    flags.push(("plugin", workspace().join(method).display().to_string()));
    for (k, v) in settings {
        flags.retain(|(f, _)| f != k);
        flags.push((k, v.to_string()));
    }
    let (handle, seen, _) = start_four_loops(&flags, |ev| ev.report.clone());
    (handle, seen)
}

/// Posts `body` to the run's `path` in session `session`: the status and the JSON answer.
fn post_to(
    url: &str,
    session: &str,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut r = agent
        .post(&format!("{url}{path}"))
        .header("X-Session-Id", session)
        .send_json(body)
        .unwrap();
    (r.status().as_u16(), r.body_mut().read_json().unwrap())
}

/// Asks the run one question in `session` and gives `feedback` on the answer: the feedback's
/// answer.
fn answer_then(
    url: &str,
    session: &str,
    question: &str,
    feedback: serde_json::Value,
) -> serde_json::Value {
    let (status, answer) = post_to(
        url,
        session,
        "/chat/completions",
        serde_json::json!({"messages": [{"role": "user", "content": question}]}),
    );
    assert_eq!(status, 200, "{answer}");
    let mut feedback = feedback;
    feedback["completion_id"] = answer["id"].clone();
    let (status, body) = post_to(url, session, "/feedback", feedback);
    assert_eq!(status, 200, "{body}");
    body
}

/// Every verdict the buffer holds, in order.
fn judgements(dir: &Path) -> Vec<openclaw_plugin_api::Score> {
    Log::read_all(&dir.join("rl_buffer"))
        .unwrap()
        .records
        .into_iter()
        .filter_map(|e| match e.record {
            Record::Judgement { score, .. } => Some(*score),
            _ => None,
        })
        .collect()
}

/// `POST /v1/feedback`: a thumbs down on a turn with no next state is its verdict, and the step
/// that trains it pushes its tokens down; feedback on a turn already judged, or on none, is
/// refused by name; the buffer keeps the feedback that judged.
#[test]
fn a_thumbs_down_judges_a_turn_without_a_next_state_and_trains_it_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (handle, seen) = feedback_run(dir, "methods/binary-rl", &[]);
    let url = handle.base_url().expect("the run serves");
    let post = |path: &str, body: serde_json::Value| post_to(&url, "fb", path, body);
    let body = answer_then(
        &url,
        "fb",
        "Explain tides.",
        serde_json::json!({"thumbs": "down", "text": "Too long."}),
    );
    assert_eq!(body["status"], "judged", "{body}");
    assert_eq!(
        (body["session_id"].as_str(), body["turn_index"].as_u64()),
        (Some("fb"), Some(0))
    );
    // Once judged, a turn keeps its verdict.
    let (status, body) = post(
        "/feedback",
        serde_json::json!({"session_id": "fb", "turn_index": 0, "reward": 1.0}),
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "turn_already_judged", "{body}");
    let (status, body) = post(
        "/feedback",
        serde_json::json!({"completion_id": "chatcmpl-nobody", "reward": 0.5}),
    );
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "turn_not_found", "{body}");
    assert_eq!(body["error"]["param"], "completion_id", "{body}");

    handle.wait();
    handle.shutdown().unwrap();
    let steps = seen.lock().unwrap().clone();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].samples, 1);
    let advantage = steps[0].metrics["mean_advantage"];
    assert!(advantage < 0.0, "mean advantage {advantage}");

    let records = Log::read_all(&dir.join("rl_buffer")).unwrap().records;
    let feedback: Vec<(f32, Option<String>)> = records
        .iter()
        .filter_map(|e| match &e.record {
            Record::Feedback { reward, text, .. } => Some((*reward, text.clone())),
            _ => None,
        })
        .collect();
    // The refused one left nothing.
    assert_eq!(feedback, [(-1.0, Some("Too long.".into()))]);
    let judged: Vec<f32> = judgements(dir).iter().map(|s| s.value).collect();
    assert_eq!(judged, [-1.0]);
    assert!(records
        .iter()
        .any(|e| matches!(&e.record, Record::Sample { sample, .. } if sample.reward == -1.0)));
}

/// `--feedback beside`: the judge reads the feedback's text as the turn's next state and votes,
/// and the user's reward counts as many votes as the judge casts. A thumbs up whose text the
/// judge reads as a correction ties (nothing to learn); a thumbs down with a correction wins.
#[test]
fn feedback_beside_the_judge_votes_with_it_on_its_text() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (handle, seen) = feedback_run(dir, "methods/binary-rl", &[("feedback", "beside")]);
    let url = handle.base_url().expect("the run serves");
    let up = serde_json::json!({"thumbs": "up", "text": "Wrong, redo it."});
    assert_eq!(
        answer_then(&url, "a", "Explain tides.", up)["status"],
        "judged"
    );
    let down = serde_json::json!({"thumbs": "down", "text": "That's not what I asked."});
    assert_eq!(
        answer_then(&url, "b", "Name a prime.", down)["status"],
        "judged"
    );
    handle.wait();
    handle.shutdown().unwrap();
    let judged = judgements(dir);
    let verdicts: Vec<(f32, usize, bool)> = judged
        .iter()
        .map(|s| (s.value, s.votes.len(), s.trainable))
        .collect();
    // The rule judge casts 3 votes (`--majority-vote-n`), the user 3 more.
    assert_eq!(verdicts, [(0.0, 6, false), (-1.0, 6, true)], "{judged:?}");
    let meta: serde_json::Value = serde_json::from_str(&judged[1].metadata_json).unwrap();
    assert_eq!(meta["feedback"]["applied"], "beside", "{meta}");
    assert_eq!(meta["judged"]["value"], -1.0, "{meta}");
    let steps = seen_steps(&seen);
    assert_eq!(steps, [1], "only the decided turn trains");
}

/// OPD learns from text: with `--feedback instead` a correction's text still reaches the
/// method, as the turn's next state, so its hint judge takes the instruction as the hint and
/// the teacher scores the response under it; the verdict's value is the user's.
#[test]
fn opd_takes_a_corrections_text_as_its_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (handle, seen) = feedback_run(dir, "methods/opd", &[]);
    let url = handle.base_url().expect("the run serves");
    let down = serde_json::json!({"thumbs": "down", "text": "Please answer in plain text, without markdown."});
    assert_eq!(
        answer_then(&url, "o", "Explain tides.", down)["status"],
        "judged"
    );
    handle.wait();
    handle.shutdown().unwrap();
    let judged = judgements(dir);
    assert_eq!(judged.len(), 1, "{judged:?}");
    let s = &judged[0];
    assert_eq!(s.value, -1.0);
    let hint = s
        .hint
        .as_ref()
        .map(|h| h.to_string())
        .into_option()
        .unwrap_or_default();
    assert!(hint.contains("plain text"), "hint {hint:?}");
    assert!(
        s.teacher_logprobs.is_some(),
        "the teacher scored the response"
    );
    assert_eq!(seen_steps(&seen), [1]);
}

fn seen_steps(seen: &Arc<Mutex<Vec<openclaw_trainer::StepReport>>>) -> Vec<u64> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|r| r.samples as u64)
        .collect()
}

/// One life of `run --adapters per-user` with two groups of simulated users (plain and
/// markdown, each a user by `X-User-Id`): every step's user and samples, and the last step.
fn per_user_life(dir: &Path, model: &Path, steps: u64) -> (Vec<(String, Vec<u64>)>, u64) {
    let mut flags = run_flags(dir, model, steps);
    flags.extend([
        ("adapters", "per-user".to_string()),
        ("adapters_dir", dir.join("adapters").display().to_string()),
        ("max_adapters_in_memory", "1".into()),
        ("use_lora", "true".into()),
        ("lora_rank", "4".into()),
        ("lora_alpha", "8".into()),
    ]);
    let (handle, seen, _) = start_four_loops(&flags, |ev| {
        let user = ev
            .adapter
            .clone()
            .expect("every step trains a user's adapter");
        (user, ev.sample_seqs.clone())
    });
    let users = SimUsers::start(
        SimUsersOptions {
            base_url: handle.base_url().unwrap(),
            api_key: String::new(),
            users: 4,
            seed: 11,
            requests: 0.0,
            tasks: openclaw_sim::TaskSet::standard().train,
            preferences: vec![openclaw_sim::Style::Plain, openclaw_sim::Style::Markdown],
        },
        Arc::new(Scoreboard::default()),
    );
    handle.wait();
    users.stop();
    let summary = handle.shutdown().unwrap().expect("the four loops train");
    let seen = seen.lock().unwrap().clone();
    (seen, summary.step)
}

#[test]
fn each_users_turns_train_their_own_adapter_which_serves_them_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let (first, last) = per_user_life(dir, &model, 4);
    assert_eq!((first.len(), last), (4, 4), "{first:?}");

    // Every sample names the user whose adapter answered its turn, and trains that adapter.
    let records = Log::read_all(&dir.join("rl_buffer")).unwrap().records;
    let mut turn_user = std::collections::HashMap::new();
    for e in &records {
        if let Record::Turn { turn, adapter, .. } = &e.record {
            let user = adapter
                .clone()
                .expect("each group's requests name their user");
            turn_user.insert((turn.session_id.to_string(), turn.turn_index), user);
        }
    }
    let mut sample_user = std::collections::HashMap::new();
    for e in &records {
        if let Record::Sample { sample, .. } = &e.record {
            let meta: serde_json::Value = serde_json::from_str(&sample.metadata_json).unwrap();
            let user = meta["adapter"].as_str().unwrap().to_string();
            let key = (sample.session_id.to_string(), sample.turn_index);
            assert_eq!(turn_user[&key], user, "{key:?}");
            sample_user.insert(e.seq, user);
        }
    }
    for (user, seqs) in &first {
        assert!(seqs.iter().all(|s| &sample_user[s] == user), "{first:?}");
    }
    // Each user's adapter is a checkpoint of its own, linked where serving reads it; one
    // trainer was held at a time (the cap), so the other was saved, evicted and resumed.
    let users: std::collections::BTreeSet<&str> = first.iter().map(|(u, _)| u.as_str()).collect();
    for user in &users {
        let link = dir.join("adapters").join(user);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new(".trained").join(user).join("checkpoint-latest")
        );
        assert!(link.join("adapter_model.safetensors").is_file());
        assert!(link.join("optimizer.safetensors").is_file());
        assert!(
            !link.join("model.safetensors").exists(),
            "the base is not copied"
        );
    }
    // Turns answered after a user's first step come from their adapter's versions.
    let trained_first = first[0].1.iter().max().copied().unwrap();
    assert!(records.iter().any(|e| e.seq > trained_first
        && matches!(&e.record, Record::Turn { turn, adapter: Some(u), .. }
            if *u == first[0].0 && turn.weight_version >= 1)));

    // A second life resumes each adapter: the steps go on and no sample trains twice.
    let (second, last) = per_user_life(dir, &model, 6);
    assert_eq!((second.len(), last), (2, 6), "{second:?}");
    let before: std::collections::HashSet<u64> =
        first.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    assert!(
        second
            .iter()
            .flat_map(|(_, s)| s)
            .all(|s| !before.contains(s)),
        "{first:?} then {second:?}"
    );
    let lines = std::fs::read_to_string(dir.join("logs/training.log")).unwrap();
    let logged: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        logged
            .iter()
            .map(|v| v["step"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
    assert!(logged.iter().all(|v| v["adapter"].is_string()));

    // A run of one shared policy on the same buffer leaves the users' samples there, and
    // trains its own.
    let (shared, last, _) = run_until_done(dir, &model, 1);
    assert_eq!((shared, last), (vec![1], 1));
}

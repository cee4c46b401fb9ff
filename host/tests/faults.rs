//! The four loops survive `kill -9`: clients talk to `openclaw-host run` while it trains; the
//! host is killed mid-traffic and restarted on the same buffer and checkpoint directories.
//! Every answer a client received is in the buffer, training resumes from the last
//! checkpoint, and no sample is trained twice.

mod common;

use common::{free_port, host_command, workspace};
use openclaw_host::buffer::{Log, Record};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn tiny_model(dir: &Path) -> PathBuf {
    let corpus =
        "the owl lives in the forest and eats mice thanks that helps please write plain text\n"
            .repeat(200);
    common::tiny_model(dir, &corpus, 300)
}

struct Host {
    child: Child,
    url: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, extra: &[&str]) -> Host {
    let port = free_port();
    let plugin = workspace().join("methods/binary-rl");
    let child = host_command(dir)
        .arg("run")
        .arg("--plugin")
        .arg(&plugin)
        .args(["--model-path", "model", "--port", &port.to_string()])
        .args([
            "--rollout-batch-size",
            "4",
            "--save-interval",
            "1",
            "--lr",
            "1e-4",
            "--default-max-tokens",
            "12",
            "--max-staleness",
            "1000",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("host-{port}.err"))).unwrap())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/v1");
    let deadline = Instant::now() + Duration::from_secs(120);
    while ureq::get(&format!("http://127.0.0.1:{port}/healthz"))
        .call()
        .is_err()
    {
        assert!(Instant::now() < deadline, "the host did not come up");
        std::thread::sleep(Duration::from_millis(100));
    }
    Host { child, url }
}

/// What a client saw: (session, answer text).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A client that keeps having two-message conversations until `stop`.
fn client(
    url: String,
    id: usize,
    stop: Arc<AtomicBool>,
    seen: Seen,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let mut n = 0;
        while !stop.load(Ordering::SeqCst) {
            n += 1;
            let session = format!("c{id}-{n}-{}", std::process::id());
            let q = json!({"role": "user", "content": "Where does the owl live?"});
            let Ok(mut r) = agent
                .post(&format!("{url}/chat/completions"))
                .header("X-Session-Id", &session)
                .send_json(json!({"messages": [q]}))
            else {
                continue; // the host is down; try again
            };
            let Ok(v) = r.body_mut().read_json::<Value>() else {
                continue;
            };
            let answer = v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            seen.lock().unwrap().push((session.clone(), answer.clone()));
            let feedback = if n % 2 == 0 {
                "Thanks, that helps!"
            } else {
                "Please write plain text, no markdown."
            };
            let _ = agent
                .post(&format!("{url}/chat/completions"))
                .header("X-Session-Id", &session)
                .header("X-Session-Done", "true")
                .send_json(json!({"messages": [q, {"role": "assistant", "content": answer}, {"role": "user", "content": feedback}], "max_tokens": 2}));
        }
    })
}

fn score_lines(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("logs/score.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn latest_step(dir: &Path) -> u64 {
    std::fs::read_link(dir.join("checkpoints/checkpoint-latest"))
        .ok()
        .and_then(|s| s.to_str()?.strip_prefix("checkpoint-")?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn kill_minus_nine_loses_no_answer_and_trains_no_sample_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    tiny_model(dir);
    let seen: Seen = Arc::default();

    // First life: clients talk while it trains; killed once a few checkpoints exist.
    let host = start(dir, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|i| client(host.url.clone(), i, stop.clone(), seen.clone()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(240);
    while latest_step(dir) < 3 {
        assert!(
            Instant::now() < deadline,
            "no third checkpoint; see host-*.err"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut host = host;
    host.child.kill().unwrap(); // SIGKILL
    host.child.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let resumed_step = latest_step(dir);
    let first_life = score_lines(dir);
    drop(host);

    // Second life: same directories; it replays the buffer and trains a few more steps.
    let target = resumed_step + 3;
    let host = start(dir, &["--max-steps", &target.to_string()]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..2)
        .map(|i| client(host.url.clone(), 10 + i, stop.clone(), seen.clone()))
        .collect();
    let mut host = host;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        if let Some(status) = host.child.try_wait().unwrap() {
            assert!(status.success(), "the second life failed; see host-*.err");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second life did not reach its steps"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(latest_step(dir), target);
    let all = score_lines(dir);
    let second_life = &all[first_life.len()..];
    assert!(!second_life.is_empty());
    assert_eq!(second_life[0]["step"].as_u64().unwrap(), resumed_step + 1);

    // Every answer a client received is a recorded turn.
    let replay = Log::read_all(&dir.join("rl_buffer")).unwrap();
    let mut recorded: HashSet<(String, String)> = HashSet::new();
    let mut sample_seqs = BTreeSet::new();
    for e in &replay.records {
        match &e.record {
            Record::Turn { turn } => {
                recorded.insert((
                    turn.session_id.to_string(),
                    turn.response.content.to_string(),
                ));
            }
            Record::Sample { .. } => {
                sample_seqs.insert(e.seq);
            }
            _ => {}
        }
    }
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 10, "only {} answers", seen.len());
    for s in seen.iter() {
        assert!(recorded.contains(s), "answer not in the buffer: {s:?}");
    }

    // The steps whose effect the final weights carry: the first life's up to the checkpoint
    // it resumed from, then the second life's. No sample is in two of them.
    let counted = first_life
        .iter()
        .filter(|l| l["step"].as_u64().unwrap() <= resumed_step)
        .chain(second_life.iter());
    let mut trained = HashSet::new();
    for line in counted {
        for q in line["sample_seqs"].as_array().unwrap() {
            let q = q.as_u64().unwrap();
            assert!(sample_seqs.contains(&q), "#{q} is not a recorded sample");
            assert!(trained.insert(q), "sample #{q} trained twice");
        }
    }
    assert!(
        trained.len() >= 4 * target as usize - 4,
        "{} samples",
        trained.len()
    );
}

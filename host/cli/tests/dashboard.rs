//! The live dashboard in a real browser, and the same run's metrics read back by TensorBoard:
//! a short `run` (the built-in model, simulated users) with an API key and
//! `--tensorboard-dir`, its page loaded in headless Chromium while it trains, and `train`'s
//! dashboard on its own port.

mod common;

use common::browser::{chromium, load_headless};
use common::{assets_required, host_command_home, python, spawn_listening, workspace};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Steps in a training log.
fn steps_logged(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("logs/training.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// The `data-points` count of the chart of `tag` in a dumped DOM.
fn points(dom: &str, tag: &str) -> Option<usize> {
    let at = dom.find(&format!("data-tag=\"{tag}\""))?;
    // The attributes of one element: up to its closing `>`.
    let element = &dom[dom[..at].rfind('<')?..at + dom[at..].find('>')?];
    let rest = &element[element.find("data-points=\"")? + "data-points=\"".len()..];
    rest[..rest.find('"')?].parse().ok()
}

/// Stops `child` as Ctrl-C would (SIGTERM) and waits for it.
fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap()
}

/// Where the test keeps its screenshots (`target/test-artifacts/`), for a person to look at.
fn artifact(name: &str) -> PathBuf {
    let dir = workspace().join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Whether Chromium is here; without it the test fails in CI (`OPENCLAW_REQUIRE_ASSETS=1`) and
/// is skipped elsewhere.
fn have_chromium() -> bool {
    match chromium() {
        Ok(_) => true,
        Err(e) if !assets_required() => {
            eprintln!("SKIPPED: {e:#}");
            false
        }
        Err(e) => panic!("{e:#}"),
    }
}

#[test]
fn a_runs_dashboard_shows_its_curves_in_a_browser_and_tensorboard_reads_its_metrics() {
    if !have_chromium() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (mut child, url) = spawn_listening(
        host_command_home(dir)
            .arg("run")
            .arg("--plugin")
            .arg(workspace().join("methods/combine"))
            .args(["--max-steps", "400", "--port", "0", "--api-key", "sekret"])
            .args(["--tensorboard-dir", "tb"]),
        &dir.join("run.log"),
        Duration::from_secs(300),
    );
    // A few steps in, while it goes on training.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while steps_logged(dir) < 4 {
        assert!(std::time::Instant::now() < deadline, "no steps in 300 s");
        std::thread::sleep(Duration::from_millis(200));
    }

    // The key guards the page and its data.
    let page = format!("{url}/dashboard");
    let refused = ureq::get(&format!("{page}/data")).call();
    assert!(
        matches!(refused, Err(ureq::Error::StatusCode(401))),
        "{refused:?}"
    );
    let data: Value = ureq::get(&format!("{page}/data"))
        .header("Authorization", "Bearer sekret")
        .call()
        .unwrap()
        .into_body()
        .read_json()
        .unwrap();
    assert!(data["series"]["train/loss"].as_array().is_some(), "{data}");

    let before = steps_logged(dir);
    let authed = page.replacen("http://", "http://viewer:sekret@", 1);
    let shot = artifact("dashboard-run.png");
    let loaded = load_headless(&authed, &shot).unwrap();
    let after = steps_logged(dir);
    assert!(
        loaded.console.is_empty(),
        "console lines: {:?}",
        loaded.console
    );
    // The curves hold the run's points: every step logged before the page loaded, and none
    // that were not logged yet.
    for tag in [
        "train/loss",
        "train/reward",
        "train/staleness",
        "train/logprob_diff",
    ] {
        let n = points(&loaded.dom, tag).unwrap_or_else(|| panic!("no chart {tag}"));
        assert!(
            (before..=after).contains(&n),
            "{tag}: {n} points, {before}..{after} steps logged"
        );
    }
    assert!(points(&loaded.dom, "train/kl").is_some_and(|n| n >= before));
    assert!(loaded.dom.contains("Judges") && loaded.dom.contains("Checkpoints"));
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a blank screenshot"
    );

    // Stopped like a user stops it; TensorBoard reads every step it trained.
    assert!(terminate(&mut child).success());
    let trained = steps_logged(dir);
    let o = std::process::Command::new(python())
        .arg(workspace().join("scripts/read-tensorboard.py"))
        .arg(dir.join("tb"))
        .output()
        .unwrap();
    let read = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() && !assets_required() {
        eprintln!(
            "SKIPPED the TensorBoard read-back: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tb: Value = serde_json::from_str(&read).unwrap();
    let log: Vec<Value> = std::fs::read_to_string(dir.join("logs/training.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let loss = tb["train/loss"].as_array().unwrap();
    assert_eq!(loss.len(), trained, "{read}");
    for (point, line) in loss.iter().zip(&log) {
        assert_eq!(point[0], line["step"]);
        let (a, b) = (point[1].as_f64().unwrap(), line["loss"].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
    }
    // Every number of the training log and the scoreboard is there.
    for tag in [
        "train/grad_norm",
        "train/lr",
        "train/staleness",
        "train/metrics/pg_loss",
        "score/preferred",
        "score/vote_pos_share",
    ] {
        assert!(
            tb[tag].as_array().is_some_and(|a| !a.is_empty()),
            "{tag}: {read}"
        );
    }
}

#[test]
fn trains_dashboard_has_a_port_of_its_own() {
    if !have_chromium() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = dir.join("rl.jsonl");
    let lines = common::scored_trajectories(40);
    std::fs::write(&data, lines.join("\n")).unwrap();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let log = dir.join("train.log");
    let mut child = host_command_home(dir)
        .arg("train")
        .arg("--plugin")
        .arg(workspace().join("methods/binary-rl"))
        .arg("--model-path")
        .arg(&model)
        .arg("--data-path")
        .arg(&data)
        .args(["--rollout-batch-size", "1", "--num-epochs", "50"])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let url = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(u) = text.lines().find_map(|l| l.strip_prefix("dashboard: ")) {
            if steps_logged(dir) >= 3 {
                break u.to_string();
            }
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "train ended before its dashboard could be read:\n{text}"
        );
        assert!(std::time::Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let before = steps_logged(dir);
    let loaded = load_headless(&url, &artifact("dashboard-train.png")).unwrap();
    let after = steps_logged(dir);
    assert!(loaded.console.is_empty(), "{:?}", loaded.console);
    let n = points(&loaded.dom, "train/loss").expect("a loss chart");
    assert!(
        (before..=after).contains(&n),
        "{n} points, {before}..{after}"
    );
    terminate(&mut child);
}

//! `judge-agreement` on a buffer a real run recorded: the built-in default talks to its
//! simulated users for a few steps, then the built-in model (a poor judge, which is the point:
//! its votes are often unparseable) re-judges the turns beside the rule-based judge.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn host(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_openclaw-host"))
        .current_dir(dir)
        .args(args)
        .env_remove("MODEL_PATH")
        .env_remove("JUDGE_MODEL_PATH")
        .env_remove("JUDGE_ENDPOINT")
        .env_remove("RL_BUFFER_DIR")
        .env("OPENCLAW_HOME", dir.join("home"))
        .output()
        .unwrap()
}

fn port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string()
}

#[test]
fn a_judge_model_is_compared_with_the_rule_judge_on_recorded_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plugin = workspace().join("methods/binary-rl");
    let plugin = plugin.to_str().unwrap();
    let o = host(
        dir,
        &[
            "run",
            "--plugin",
            plugin,
            "--max-steps",
            "2",
            "--port",
            &port(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = host(dir, &["init-default-model", "--out", "judge"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let args = [
        "judge-agreement",
        "--plugin",
        plugin,
        "--judge-model-path",
        "judge",
        "--limit",
        "6",
        "--majority-vote-n",
        "2",
        "--judge-max-tokens",
        "12",
        "--json",
    ];
    let o = host(dir, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let turns = r["turns"].as_u64().unwrap();
    assert_eq!(turns + r["errors"].as_u64().unwrap(), 6, "{r}");
    let counted: u64 = r["counts"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap())
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counted, turns);
    assert_eq!(r["agreement"]["n"].as_u64().unwrap(), turns);
    // Two votes asked per turn, each valid or counted invalid.
    assert_eq!(r["candidate_votes"].as_u64().unwrap(), 2 * turns, "{r}");
    let disagreements = r["disagreements"].as_array().unwrap().len() as u64;
    assert!(disagreements <= turns - r["agreement"]["count"].as_u64().unwrap());

    // The plain report names the comparison.
    let o = host(dir, &args[..args.len() - 1]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("agreement with the rule-based judge"), "{out}");

    // Without a judge to compare there is nothing to do; an empty buffer has no turns.
    let o = host(dir, &["judge-agreement", "--plugin", plugin]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--judge-model-path"),
        "{err}"
    );
    std::fs::create_dir(dir.join("empty")).unwrap();
    let o = host(
        dir,
        &[
            "judge-agreement",
            "--plugin",
            plugin,
            "--judge-model-path",
            "judge",
            "--rl-buffer-dir",
            "empty",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("holds no main turn"),
        "{err}"
    );
}

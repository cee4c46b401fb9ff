//! `judge-agreement` on a buffer a real run recorded: the built-in default talks to its
//! simulated users for a few steps, then the built-in model (a poor judge, which is the point:
//! its votes are often unparseable) re-judges the turns beside the rule-based judge.

mod common;

fn host(dir: &Path, args: &[&str]) -> Output {
    common::host_command_home(dir).args(args).output().unwrap()
}

use common::workspace;
use serde_json::Value;
use std::path::Path;
use std::process::Output;

#[test]
fn a_judge_model_is_compared_with_the_rule_judge_on_recorded_turns() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let plugin = workspace().join("methods/binary-rl");
    let plugin = plugin.to_str().unwrap();
    let o = host(
        dir,
        &["run", "--plugin", plugin, "--max-steps", "2", "--port", "0"],
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

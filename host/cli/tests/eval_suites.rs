//! `eval --eval-tasks "conversation,coding,tool-use"` and task files: each suite measured for
//! a trained checkpoint and the base its trainer_state.json names, as JSON, a table and a PNG.
//! The coding and tool-use suites run real episodes in the environments' sandboxes.

mod common;

use common::{host_command, host_command_home, ok, workspace};
use serde_json::Value;

/// The JSON report on standard output, after asserting the command succeeded.
fn report(o: std::process::Output) -> Value {
    ok(o.clone());
    serde_json::from_slice(&o.stdout).unwrap()
}

fn row<'a>(report: &'a Value, suite: &str, measure: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["suite"] == suite && r["measure"] == measure)
        .unwrap_or_else(|| panic!("no row {suite}/{measure}: {report}"))
}

#[test]
fn a_task_file_runs_each_suite_it_names_in_its_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = common::qwen3_tiny(dir);
    let tasks = dir.join("tasks.jsonl");
    std::fs::write(
        &tasks,
        [
            r#"{"suite": "conversation", "prompt": "Explain tides.", "must_mention": "tide"}"#,
            r#"{"suite": "conversation", "prompt": "What is 2 plus 3?", "must_mention": "5"}"#,
            r#"{"suite": "tool-use", "question": "What is 6 times 7?", "answer": "42"}"#,
            r#"{"suite": "tool-use", "question": "What is 12 plus 30?", "answer": "42"}"#,
            r#"{"suite": "coding", "task": "count-words"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    // Run from the workspace, where the environments are found by name.
    let o = host_command(&workspace())
        .arg("eval")
        .arg("--model-path")
        .arg(&model)
        .arg("--eval-tasks")
        .arg(&tasks)
        .args(["--max-new-tokens", "12", "--max-episode-steps", "1"])
        .args(["--samples-per-prompt", "1", "--json", "--png"])
        .arg(dir.join("suites.png"))
        .output()
        .unwrap();
    let report = report(o);
    // A model that is not a checkpoint has no base to compare with.
    assert!(report["base_model_path"].is_null(), "{report}");
    let conv = row(&report, "conversation", "preference, no instruction");
    assert_eq!(conv["model"]["n"].as_u64(), Some(2), "{conv}");
    assert!(conv["base"].is_null());
    for (suite, n) in [("tool-use", 2), ("coding", 1)] {
        let r = row(&report, suite, "solved");
        // Every episode ran in its environment and was scored (a random model solves none).
        assert_eq!(r["model"]["n"].as_u64(), Some(n), "{r}");
        assert_eq!(r["note"], "", "no episode failed: {r}");
    }
    let png = std::fs::read(dir.join("suites.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // A line that names no known suite is refused with its place.
    std::fs::write(&tasks, r#"{"suite": "poetry", "prompt": "x"}"#).unwrap();
    let o = host_command(&workspace())
        .arg("eval")
        .arg("--model-path")
        .arg(&model)
        .arg("--eval-tasks")
        .arg(&tasks)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("tasks.jsonl:1") && err.contains("`poetry`"),
        "{err}"
    );
}

/// A suite whose episodes all failed measured nothing: no share, no bar, the reason instead
/// (here the sandbox starts but every command in it fails).
#[test]
fn a_suite_that_could_not_run_has_no_share() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = common::qwen3_tiny(dir);
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let bwrap = bin.join("bwrap");
    // The start check (`bwrap … true`) passes through to the real bubblewrap; nothing else runs.
    std::fs::write(
        &bwrap,
        "#!/bin/sh\nfor last; do :; done\n[ \"$last\" = true ] && exec /usr/bin/bwrap \"$@\"\n\
         echo 'bwrap: out of namespaces' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tasks = dir.join("tasks.jsonl");
    std::fs::write(&tasks, r#"{"suite": "coding", "task": "count-words"}"#).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let o = host_command(&workspace())
        .env("PATH", path)
        .arg("eval")
        .arg("--model-path")
        .arg(&model)
        .arg("--eval-tasks")
        .arg(&tasks)
        .args(["--max-new-tokens", "12", "--max-episode-steps", "1"])
        .args(["--samples-per-prompt", "1", "--json", "--png"])
        .arg(dir.join("suites.png"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        stderr.contains("is not a checkpoint that names its starting model")
            && stderr.contains("--base-model-path"),
        "why there is no base is said: {stderr}"
    );
    let report = report(o);
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    let r = &rows[0];
    assert_eq!(r["suite"], "coding");
    assert!(
        r["model"].is_null(),
        "no share for a suite that did not run: {r}"
    );
    let note = r["note"].as_str().unwrap();
    assert!(
        note.contains("its one episode failed, so nothing was measured")
            && note.contains("out of namespaces"),
        "{note}"
    );
}

/// The slow tier: end-to-end runs that take a minute or more. `scripts/test.sh` runs them;
/// `scripts/test.sh --fast` (which passes `--skip slow::`) leaves them out.
mod slow {
    use super::*;

    #[test]
    fn the_conversation_suite_compares_a_trained_checkpoint_with_its_base() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let o = host_command_home(dir)
            .arg("run")
            .arg("--plugin")
            .arg(workspace().join("methods/combine"))
            .args(["--max-steps", "40", "--port", "0"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = host_command_home(dir)
            .args(["eval", "--model-path", "checkpoints/checkpoint-latest"])
            .args([
                "--eval-tasks",
                "conversation",
                "--tasks-per-suite",
                "40",
                "--json",
            ])
            .output()
            .unwrap();
        let report = report(o);
        assert!(
            report["base_model_path"]
                .as_str()
                .unwrap()
                .contains("default-model"),
            "{report}"
        );
        let preference = row(&report, "conversation", "preference, no instruction");
        let (base, model) = (&preference["base"], &preference["model"]);
        assert_eq!(
            (base["n"].as_u64(), model["n"].as_u64()),
            (Some(80), Some(80))
        );
        assert!(
            model["value"].as_f64().unwrap() >= base["value"].as_f64().unwrap() + 0.25,
            "{preference}"
        );
        let markdown = row(&report, "conversation", "markdown asked for");
        assert!(
            markdown["model"]["value"].as_f64().unwrap() >= 0.7,
            "{markdown}"
        );
        for r in report["rows"].as_array().unwrap() {
            let s = &r["model"];
            assert!(
                s["lo"].as_f64().unwrap() <= s["value"].as_f64().unwrap(),
                "{r}"
            );
            assert!(
                s["value"].as_f64().unwrap() <= s["hi"].as_f64().unwrap(),
                "{r}"
            );
        }
        let png = std::fs::read(dir.join("eval.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}

//! Rollout and generate plugins take effect in `run` (and `train`, the last test): with
//! `--rollout-function-path` the batches trained are the rollout plugin's, and with
//! `--custom-generate-function-path` each prompt of the task file gets a group of the generate
//! plugin's trajectories, normalised within the group. Both example crates are built from the
//! workspace and loaded through the ABI; the test reads what was trained from the durable
//! buffer.

mod common;

use common::{start_four_loops, workspace};
use openclaw_buffer::{Log, Record};
use openclaw_plugin_api::TrainingSample;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn run(dir: &Path, extra: &[(&str, String)]) -> (Vec<u64>, Vec<TrainingSample>) {
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let d = |p: &str| dir.join(p).display().to_string();
    let mut flags: Vec<(&str, String)> = vec![
        (
            "plugin",
            workspace().join("methods/binary-rl").display().to_string(),
        ),
        ("model_path", model.display().to_string()),
        ("port", "0".to_string()),
        ("rl_buffer_dir", d("rl_buffer")),
        ("save_dir", d("checkpoints")),
        ("log_dir", d("logs")),
        ("max_steps", "2".into()),
        ("rollout_batch_size", "8".into()),
        ("default_max_tokens", "16".into()),
        ("batch_timeout", "30".into()),
        ("max_staleness", "100".into()),
        ("judge", "rule".into()),
    ];
    flags.extend(extra.iter().cloned());
    let (handle, seen, _) = start_four_loops(&flags, |ev| ev.report.step);
    handle.wait();
    handle.shutdown().unwrap().expect("it trains");
    let samples = Log::read_all(&dir.join("rl_buffer"))
        .unwrap()
        .records
        .into_iter()
        .filter_map(|e| match e.record {
            Record::Sample { sample, .. } => Some(*sample),
            _ => None,
        })
        .collect();
    let seen = seen.lock().unwrap().clone();
    (seen, samples)
}

fn meta(s: &TrainingSample) -> Value {
    serde_json::from_str(&s.metadata_json).unwrap()
}

#[test]
fn the_rollout_plugin_makes_the_batches_that_train() {
    let tmp = tempfile::tempdir().unwrap();
    let (steps, samples) = run(
        tmp.path(),
        &[
            (
                "rollout_function_path",
                workspace()
                    .join("examples/my-rollout")
                    .display()
                    .to_string(),
            ),
            ("num_rollouts_per_prompt", "1".into()),
        ],
    );
    assert_eq!(steps, vec![1, 2]);
    assert!(samples.len() >= 16, "{} samples", samples.len());
    let mut ids = std::collections::BTreeSet::new();
    for s in &samples {
        let m = meta(s);
        assert_eq!(
            m["made_by"], "my-rollout",
            "every trained sample is the plugin's"
        );
        ids.insert(m["rollout_id"].as_u64().unwrap());
        assert_eq!(s.reward, if m["right"] == true { 1.0 } else { -1.0 });
    }
    assert!(
        ids.len() >= 2 && ids.contains(&0) && ids.contains(&1),
        "{ids:?}"
    );
}

#[test]
fn the_generate_plugin_makes_groups_for_each_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let prompts = tmp.path().join("prompts.jsonl");
    std::fs::write(
        &prompts,
        "{\"prompt\": \"Describe the shark.\"}\n{\"prompt\": \"Give two tips for sleep.\"}\n",
    )
    .unwrap();
    let (steps, samples) = run(
        tmp.path(),
        &[
            (
                "custom_generate_function_path",
                workspace()
                    .join("examples/my-generate")
                    .display()
                    .to_string(),
            ),
            ("data_path", prompts.display().to_string()),
            ("num_rollouts_per_prompt", "4".into()),
        ],
    );
    assert_eq!(steps, vec![1, 2]);
    let mut groups: BTreeMap<String, Vec<&TrainingSample>> = BTreeMap::new();
    for s in &samples {
        assert_eq!(meta(s)["made_by"], "my-generate");
        let group = s.session_id.split('-').nth(1).unwrap().to_string();
        assert!(s.session_id.starts_with("gen-"), "{}", s.session_id);
        groups.entry(group).or_default().push(s);
    }
    assert!(groups.len() >= 4, "{} groups", groups.len());
    for (g, members) in &groups {
        assert_eq!(
            members.len(),
            4,
            "group {g}: one sample per trajectory, four trajectories"
        );
        // Rewards normalised within the group: advantages sum to zero.
        let adv: Vec<f32> = members
            .iter()
            .map(|s| s.advantages.as_ref().unwrap()[0])
            .collect();
        assert!(adv.iter().sum::<f32>().abs() < 1e-3, "{adv:?}");
        for s in members {
            let words = meta(s)["words"].as_u64().unwrap();
            assert_eq!(s.reward, if words <= 12 { 1.0 } else { -1.0 });
        }
    }
}

/// `train` with a rollout plugin: the plugin makes every sample trained, with the policy served
/// on loopback for it; without `--max-steps` it is refused, as it would never end.
#[test]
fn train_takes_its_samples_from_the_rollout_plugin_too() {
    let tmp = tempfile::tempdir().unwrap();
    let model =
        openclaw_lab::default_model::ensure_default_model(&tmp.path().join("home"), false).unwrap();
    let base = |cmd: &mut std::process::Command| {
        cmd.args(["train", "--plugin", "methods/binary-rl"])
            .args(["--rollout-function-path", "examples/my-rollout"])
            .arg("--model-path")
            .arg(&model)
            .args(["--rollout-batch-size", "8", "--default-max-tokens", "16"])
            .args(["--num-rollouts-per-prompt", "1", "--max-staleness", "100"])
            .arg("--rl-buffer-dir")
            .arg(tmp.path().join("rl_buffer"))
            .arg("--save-dir")
            .arg(tmp.path().join("checkpoints"))
            .arg("--log-dir")
            .arg(tmp.path().join("logs"));
    };
    let mut cmd = common::host_command(&workspace());
    base(&mut cmd);
    let o = cmd.output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give --max-steps"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut cmd = common::host_command(&workspace());
    base(&mut cmd);
    let said = common::ok(cmd.args(["--max-steps", "2"]).output().unwrap());
    assert!(
        said.contains("train: the rollout plugin `my-rollout` makes the samples"),
        "{said}"
    );
    let samples: Vec<TrainingSample> = Log::read_all(&tmp.path().join("rl_buffer"))
        .unwrap()
        .records
        .into_iter()
        .filter_map(|e| match e.record {
            Record::Sample { sample, .. } => Some(*sample),
            _ => None,
        })
        .collect();
    assert!(samples.len() >= 16, "{} samples", samples.len());
    assert!(samples.iter().all(|s| meta(s)["made_by"] == "my-rollout"));
    assert!(tmp
        .path()
        .join("checkpoints")
        .read_dir()
        .unwrap()
        .next()
        .is_some());
}

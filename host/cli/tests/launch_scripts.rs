//! The launch scripts users of the original type (`methods/*/run_qwen3_7b*.sh`,
//! `envs/*/run_*_rl.sh`) pass every flag group in every mode: run with a stand-in binary that
//! prints its arguments, each script hands the host its checkpoint, rollout, optimizer and LoRA
//! groups, live and with `DATA_PATH`, and a group set in the environment replaces its default.

mod common;

use common::workspace;
use std::path::Path;
use std::process::Command;

/// Runs `script` with a stand-in binary that prints its arguments, one a line.
fn args_of(script: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("openclaw-host");
    std::fs::write(&bin, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .current_dir(tmp.path())
        .env("OPENCLAW_HOST_BIN", &bin)
        .env("MODEL_PATH", "/models/qwen3-7b")
        .env("CKPT_SAVE_DIR", tmp.path().join("ckpt"));
    for var in [
        "DATA_PATH",
        "CKPT_ARGS",
        "ROLLOUT_ARGS",
        "OPTIMIZER_ARGS",
        "LORA_ARGS",
        "EVAL_ARGS",
        "JUDGE_ENDPOINT",
        "MAX_STEPS",
        "ENV_TYPE",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn has(args: &[String], flag: &str, value: &str) -> bool {
    args.windows(2).any(|w| w[0] == flag && w[1] == value)
}

#[test]
fn method_scripts_pass_every_group_live_and_offline() {
    for method in ["binary-rl", "opd", "combine"] {
        for (name, lora) in [("run_qwen3_7b.sh", false), ("run_qwen3_7b_lora.sh", true)] {
            let script = workspace().join("methods").join(method).join(name);
            let live = args_of(&script, &[]);
            let offline = args_of(&script, &[("DATA_PATH", "/data/traj.jsonl")]);
            assert_eq!(live[0], "run", "{script:?}: {live:?}");
            assert_eq!(offline[0], "train", "{script:?}: {offline:?}");
            assert!(
                has(&offline, "--data-path", "/data/traj.jsonl"),
                "{offline:?}"
            );
            for args in [&live, &offline] {
                assert!(
                    has(args, "--resume-from-checkpoint", "latest"),
                    "{script:?}: {args:?}"
                );
                assert!(
                    has(args, "--rollout-batch-size", "16"),
                    "{script:?}: {args:?}"
                );
                assert!(has(args, "--max-grad-norm", "1.0"), "{script:?}: {args:?}");
                assert_eq!(
                    args.contains(&"--use-lora".to_string()),
                    lora,
                    "{script:?}: {args:?}"
                );
                assert_eq!(has(args, "--lora-rank", "16"), lora, "{script:?}: {args:?}");
            }
            // A group from the environment replaces its default whole, in both modes.
            for data in [None, Some("/data/traj.jsonl")] {
                let mut env = vec![("ROLLOUT_ARGS", "--rollout-batch-size 4")];
                env.extend(data.map(|d| ("DATA_PATH", d)));
                let args = args_of(&script, &env);
                assert!(
                    has(&args, "--rollout-batch-size", "4"),
                    "{script:?}: {args:?}"
                );
                assert!(
                    !has(&args, "--rollout-batch-size", "16"),
                    "{script:?}: {args:?}"
                );
            }
        }
    }
}

#[test]
fn environment_scripts_pass_every_group() {
    for (env, script) in [
        ("toolcall", "envs/toolcall/run_toolcall_rl.sh"),
        ("terminal", "envs/terminal/run_terminal_rl.sh"),
    ] {
        let script = workspace().join(script);
        let args = args_of(&script, &[("LORA_ARGS", "--use-lora --lora-rank 8")]);
        assert_eq!(args[0], "run", "{args:?}");
        for flag in [
            "--save-interval",
            "--rollout-batch-size",
            "--num-rollouts-per-prompt",
            "--lr",
            "--env-eval-interval",
        ] {
            assert!(
                args.contains(&flag.to_string()),
                "{env}: {flag} missing: {args:?}"
            );
        }
        assert!(has(&args, "--lora-rank", "8"), "{env}: {args:?}");
    }
}

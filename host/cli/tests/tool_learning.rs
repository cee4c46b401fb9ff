//! The learning demonstration's short form (`envs/toolcall/learn_tool_use.sh`, as the README
//! runs it, with fewer SFT and GRPO steps and held-out problems): a tiny model that mostly guesses
//! learns by GRPO on the tool-call environment to use the interpreter, and its greedy held-out
//! solve rate rises from below 0.3 to at least 0.6 (the README's full run: above 0.8). Real
//! sandboxed Python, real training, nothing downloaded; about 5 minutes on 2 cores.

mod common;

use common::workspace;
use serde_json::Value;

/// The slow tier: end-to-end runs that take a minute or more. `scripts/test.sh` runs them;
/// `scripts/test.sh --fast` (which passes `--skip slow::`) leaves them out.
mod slow {
    use super::*;

    #[test]
    fn grpo_teaches_the_tiny_model_to_use_the_interpreter() {
        let out = tempfile::tempdir().unwrap();
        let mut cmd = std::process::Command::new("bash");
        // None of the caller's settings reach the script or the binary.
        for k in openclaw_config::keys::KEYS {
            for var in k.env {
                cmd.env_remove(var);
            }
        }
        for var in [
            "SEED",
            "SFT_STEPS",
            "MIX_STEPS",
            "OPENCLAW_HOME",
            "RAYON_NUM_THREADS",
            "ENV_TYPE",
            "ENV_CONFIG",
            "PARALLEL_ENVS",
            "MAX_STEPS",
        ] {
            cmd.env_remove(var);
        }
        let o = cmd
            .arg(workspace().join("envs/toolcall/learn_tool_use.sh"))
            .current_dir(out.path())
            .env("OUT", out.path().join("demo"))
            .env("OPENCLAW_HOST_BIN", common::bin())
            // A shorter cold start than the README's (600 and 100 steps): it still starts at
            // 0.00 held-out and reached 0.93 by GRPO step 5 in 293 s on 2 cores.
            .env("SFT_STEPS", "350")
            .env("MIX_STEPS", "60")
            .env("RL_STEPS", "10")
            .env("EVAL_EVERY", "5")
            .env("EVAL_TASKS", "40")
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let said = format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{said}");
        let evals: Vec<(u64, f64)> =
            std::fs::read_to_string(out.path().join("demo/rl/logs/score.log"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter_map(|v| Some((v["step"].as_u64()?, v["eval_solve_rate"].as_f64()?)))
                .collect();
        assert!(evals.len() >= 3, "{evals:?}\n{said}");
        assert_eq!(evals[0].0, 0);
        assert!(evals[0].1 < 0.3, "it starts solving already: {evals:?}");
        // The best of the last two evaluations: one 40-problem evaluation of a run that is not
        // bit-for-bit repeatable (episodes run in parallel) is noisy.
        let late = evals[evals.len() - 2..]
            .iter()
            .map(|e| e.1)
            .fold(0.0, f64::max);
        assert!(
            late >= 0.6,
            "the held-out solve rate did not rise: {evals:?}\n{said}"
        );
        assert!(out.path().join("demo/rl/logs/learning_curve.png").is_file());
    }
}

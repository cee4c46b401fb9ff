//! Episodes of real environment plugins, built from the workspace and loaded through the ABI:
//! the tool-call environment with a scripted agent in the real sandbox, and a fixture whose
//! calls error, panic or hang, which must fail that episode only.

mod common;

use common::workspace;
use std::time::{Duration, Instant};

use anyhow::Result;
use openclaw_episodes::{Agent, Ending, EpisodeOptions, TimedEnv};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{Action, HostServices, Message};
use openclaw_plugins::{EnvHandle, LoadedPlugin};

fn env(dir: &str, config: &str) -> TimedEnv {
    let plugin = LoadedPlugin::open(&workspace().join(dir)).unwrap();
    TimedEnv::new(EnvHandle::new(&plugin, config, HostServices::standalone()).unwrap())
}

/// Multiplies the two numbers of the problem in the interpreter, then answers with its output.
struct Multiplier;

impl Agent for Multiplier {
    fn act(&mut self, conversation: &[Message], tools_json: &str) -> Result<Action> {
        assert!(tools_json.contains("code_interpreter"));
        let last = conversation.last().unwrap();
        let mut m = Message::new("assistant", "");
        if last.role.as_str() == "tool" {
            let value = last
                .content
                .trim_start_matches("<interpreter>")
                .trim_end_matches("</interpreter>")
                .trim();
            m.content = format!("Answer: \\boxed{{{value}}}").into();
        } else {
            let nums: Vec<&str> = last
                .content
                .rsplit("Problem:")
                .next()
                .unwrap()
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .collect();
            let args = serde_json::json!({"code": format!("print({} * {})", nums[0], nums[1])});
            m.tool_calls_json = ROption::RSome(
                serde_json::json!([{"id": "c1", "type": "function",
                    "function": {"name": "code_interpreter", "arguments": args.to_string()}}])
                .to_string()
                .into(),
            );
        }
        Ok(Action { message: m })
    }
}

/// Says "go" every step.
struct Go;

impl Agent for Go {
    fn act(&mut self, _: &[Message], _: &str) -> Result<Action> {
        Ok(Action {
            message: Message::new("assistant", "go"),
        })
    }
}

#[test]
fn a_toolcall_episode_runs_in_the_sandbox_and_is_scored_after_its_loop() {
    let env = env("envs/toolcall", "");
    let tasks = env.tasks("eval", Duration::from_secs(30)).unwrap();
    let opts = EpisodeOptions::default();
    for (seed, task) in tasks.iter().take(2).enumerate() {
        let ep = env.episode(task, seed as u64, &mut Multiplier, &opts);
        assert_eq!(ep.ending, Ending::Done, "{:?}", ep.conversation);
        let roles: Vec<&str> = ep.conversation.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
        assert_eq!(ep.tool_steps, 1);
        let outcome = ep.outcome.unwrap();
        assert!(outcome.evaluated);
        assert_eq!((outcome.reward, outcome.solved), (1.0, Some(true)));
    }
}

#[test]
fn a_failing_or_hanging_environment_fails_that_episode_only() {
    let opts = EpisodeOptions {
        max_steps: 10,
        call_timeout: Duration::from_secs(1),
        evaluate_timeout: Duration::from_secs(1),
        full_wait: Duration::from_secs(1),
        env_retries: 0,
    };
    let run = |fault: &str| {
        let e = env(
            "tests/fixtures/env-faults",
            &format!("[env]\nfault = \"{fault}\""),
        );
        let task = e.tasks("train", Duration::from_secs(5)).unwrap().remove(0);
        let started = Instant::now();
        let ep = e.episode(&task, 7, &mut Go, &opts);
        assert!(started.elapsed() < Duration::from_secs(5), "{fault}");
        // The environment still answers after what happened.
        assert_eq!(e.tasks("train", Duration::from_secs(5)).unwrap().len(), 1);
        ep
    };
    let failed = |fault: &str, says: &str| {
        let ep = run(fault);
        match &ep.ending {
            Ending::Failed(why) => assert!(why.contains(says), "{fault}: {why}"),
            other => panic!("{fault}: {other:?}"),
        }
        assert!(ep.outcome.is_none(), "a failed episode is not scored");
        assert_eq!(ep.step_rewards, [0.5], "{fault}");
    };
    failed("error_step", "the second step fails on purpose");
    failed("panic_step", "the second step panics on purpose");
    failed("hang_step", "step did not return within 1.0 s");
    let ep = run("hang_evaluate");
    assert!(
        matches!(&ep.ending, Ending::Failed(why) if why.contains("evaluate did not return")),
        "{:?}",
        ep.ending
    );

    let ep = run("none");
    assert_eq!(ep.ending, Ending::Done);
    let o = ep.outcome.unwrap();
    assert_eq!((o.reward, o.evaluated, o.solved), (3.0, true, Some(true)));
    // Without its own evaluate, the step rewards are the score.
    let o = run("no_evaluate").outcome.unwrap();
    assert_eq!((o.reward, o.evaluated, o.solved), (1.5, false, None));
}

#[test]
fn an_episode_cut_off_by_the_host_is_still_evaluated() {
    let e = env("tests/fixtures/env-faults", "[env]\nfault = \"none\"");
    let task = e.tasks("train", Duration::from_secs(5)).unwrap().remove(0);
    let ep = e.episode(
        &task,
        1,
        &mut Go,
        &EpisodeOptions {
            max_steps: 2,
            ..EpisodeOptions::default()
        },
    );
    assert_eq!(ep.ending, Ending::MaxSteps);
    assert_eq!(ep.outcome.unwrap().reward, 2.0);
}

/// `eval --env toolcall` with a random tiny Qwen3 (the real Qwen3 tokenizer and template, tools
/// included): every episode runs and is scored, and each step's record holds the exact tokens
/// the policy saw and sampled with one logprob per sampled token.
#[test]
fn eval_runs_the_policys_episodes_and_writes_their_exact_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(dir.path());
    let out = dir.path().join("episodes.jsonl");
    let o = common::host_command(&workspace())
        .args(["eval", "--env", "toolcall", "--model-path"])
        .arg(&model)
        .args(["--eval-tasks", "3", "--samples-per-prompt", "2"])
        .args(["--max-new-tokens", "12", "--max-episode-steps", "2"])
        .args(["--episodes-out"])
        .arg(&out)
        .env("PARALLEL_ENVS", "3")
        .output()
        .unwrap();
    common::ok(o.clone());
    // The first line says how the tools reach the model: Qwen3's template writes them itself.
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.lines().next(),
        Some("tools: the chat template's own tools section"),
        "{err}"
    );
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("on environment `toolcall` (3 tasks of `eval`, 2 episodes each, 3 at once)"),
        "{said}"
    );
    assert!(said.contains("failed 0"), "{said}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    for ep in &lines {
        assert_ne!(ep["ending"], "failed", "{ep}");
        // A random model neither answers nor calls the tool: -1, evaluated by the env.
        assert_eq!(ep["reward"], -1.0, "{ep}");
        assert_eq!(ep["evaluated"], true);
        let steps = ep["steps"].as_array().unwrap();
        assert!(!steps.is_empty() && steps.len() <= 2);
        for s in steps {
            let (p, r, l) = (
                s["prompt_ids"].as_array().unwrap(),
                s["response_ids"].as_array().unwrap(),
                s["logprobs"].as_array().unwrap(),
            );
            assert!(p.len() > 100, "the prompt with the tool schema");
            assert!(!r.is_empty() && r.len() <= 12);
            assert_eq!(r.len(), l.len());
            assert!(l.iter().all(|x| x.as_f64().unwrap() <= 0.0));
        }
        // The first step's prompt is the instruction as the env gave it.
        assert!(ep["conversation"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Problem: What is"));
    }
    // Groups (written as they finish): both episodes of each task, sampled differently.
    let mut groups: std::collections::BTreeMap<String, Vec<&serde_json::Value>> =
        Default::default();
    for ep in &lines {
        groups
            .entry(ep["task"]["id"].as_str().unwrap().to_string())
            .or_default()
            .push(ep);
    }
    assert_eq!(groups.len(), 3);
    for group in groups.values() {
        assert_eq!(group.len(), 2);
        assert_ne!(group[0]["sample"], group[1]["sample"]);
        assert_ne!(
            group[0]["steps"][0]["response_ids"],
            group[1]["steps"][0]["response_ids"]
        );
    }

    let o = common::host_command(&workspace())
        .args(["eval", "--env", "no-such-env", "--model-path"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("environment `no-such-env`"));
}

/// `eval` of an environment that fails an episode's first reset: the episode is run again and
/// counts, and one that fails every time says so after its attempts.
#[test]
fn an_episode_the_environment_failed_is_run_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    common::tiny_model(dir, &"say go again and again\n".repeat(100), 280);
    let eval = |fault: &str| {
        std::fs::write(
            dir.join("env.toml"),
            format!("[env]\nfault = \"{fault}\"\n"),
        )
        .unwrap();
        let out = dir.join(format!("{fault}.jsonl"));
        let o = common::host_command(dir)
            .args(["eval", "--env"])
            .arg(workspace().join("tests/fixtures/env-faults"))
            .args(["--env-config", "env.toml", "--model-path", "model"])
            .args([
                "--eval-tasks",
                "1",
                "--samples-per-prompt",
                "2",
                "--max-new-tokens",
                "4",
            ])
            .arg("--episodes-out")
            .arg(&out)
            .output()
            .unwrap();
        let said = common::ok(o.clone()) + &String::from_utf8_lossy(&o.stdout);
        let eps: Vec<serde_json::Value> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (said, eps)
    };
    let (said, eps) = eval("error_first_reset");
    assert!(said.contains("failed 0"), "{said}");
    assert!(said.contains("the first reset fails on purpose"), "{said}");
    assert_eq!(eps.len(), 2);
    let (said, eps) = eval("error_step");
    assert!(said.contains("failed 2"), "{said}");
    for e in &eps {
        let why = e.to_string();
        assert!(
            why.contains("the second step fails on purpose")
                && why.contains("the environment failed all 3 attempts"),
            "{why}"
        );
    }
}

/// `env check` on a task set with a good task, a task whose reference solution is wrong and a
/// task whose task.yaml does not parse: the table names each, the broken one is skipped, the
/// exit code says the set has problems; an unknown environment lists the ones that exist.
#[test]
fn env_check_reports_each_task_and_skips_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("tasks");
    let builtin = workspace().join("envs/terminal/tasks");
    std::fs::create_dir_all(&set).unwrap();
    for (from, to) in [("create-hello", "good"), ("count-words", "wrong-solution")] {
        assert!(std::process::Command::new("cp")
            .arg("-r")
            .arg(builtin.join(from))
            .arg(set.join(to))
            .status()
            .unwrap()
            .success());
    }
    std::fs::write(
        set.join("wrong-solution/solution.sh"),
        "echo nothing useful\n",
    )
    .unwrap();
    std::fs::create_dir_all(set.join("broken-yaml")).unwrap();
    std::fs::write(
        set.join("broken-yaml/task.yaml"),
        "instruction: [unclosed\n",
    )
    .unwrap();
    let config = dir.path().join("env.toml");
    std::fs::write(
        &config,
        format!("[env]\ntasks_dir = {:?}\n", set.display().to_string()),
    )
    .unwrap();
    let out = common::run_host(
        dir.path(),
        &[
            "env",
            "check",
            "terminal",
            "--env-config",
            config.to_str().unwrap(),
        ],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row = |id: &str| {
        said.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}: {said}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("good"),
        ["good", "1.00", "solved", "0.00", "ok", row("good")[5]]
    );
    assert!(row("wrong-solution").contains(&"FAILED"), "{said}");
    assert!(
        said.contains("FAILED wrong-solution: the reference did not solve it"),
        "{said}"
    );
    assert!(
        said.contains("NOT LOADED task `broken-yaml`: task.yaml"),
        "{said}"
    );
    assert!(
        said.contains("1 ok, 1 failed, 0 without a reference solution, 1 not loaded"),
        "{said}"
    );

    let out = common::run_host(dir.path(), &["env", "check", "no-such-env"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("environments there: ") && err.contains("swe") && err.contains("terminal"),
        "{err}"
    );
}

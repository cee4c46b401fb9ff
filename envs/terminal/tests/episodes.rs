//! Real episodes of the terminal environment against the real sandbox: every built-in task's
//! reference solution, run through `shell_exec` as a scripted policy would, scores 1.0 and
//! doing nothing scores 0; the tools and the limits behave as the schema says.

use std::time::{Duration, Instant};

use openclaw_env_terminal::TerminalEnv;
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::serde_json::{self, json, Value};
use openclaw_plugin_api::{Action, Env, HostServices, Message, Task};

fn env(extra: &str) -> TerminalEnv {
    TerminalEnv::new(&format!("[env]\n{extra}"), HostServices::standalone())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn say(text: &str) -> Action {
    Action {
        message: Message::new("assistant", text),
    }
}

/// One message with OpenAI tool calls `(name, arguments)`.
fn calls(list: &[(&str, Value)]) -> Action {
    let mut m = Message::new("assistant", "");
    let items: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    m.tool_calls_json = ROption::RSome(Value::Array(items).to_string().into());
    Action { message: m }
}

fn exec(command: &str) -> Action {
    calls(&[("shell_exec", json!({"id": "main", "command": command}))])
}

fn task(env: &TerminalEnv, name: &str) -> Task {
    env.tasks("all")
        .unwrap()
        .into_iter()
        .find(|t| t.id.as_str() == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

fn details(e: &openclaw_plugin_api::Evaluation) -> Value {
    serde_json::from_str(&e.details_json).unwrap()
}

#[test]
fn a_partial_solution_scores_the_share_of_tests_passed() {
    let env = env("");
    let t = task(&env, "create-hello");
    let (id, _) = env.reset(&t, 0).unwrap();
    // The file, but not its contents: one test of two.
    env.step(id, &exec("echo hello > hello.txt")).unwrap();
    let e = env.evaluate(id).unwrap();
    let d = details(&e);
    assert_eq!(
        (e.reward, d["passed"].as_u64(), d["total"].as_u64()),
        (0.5, Some(1), Some(2)),
        "{d}"
    );
    assert!(!e.solved);
}

#[test]
fn sessions_keep_their_directory_and_files_stay_but_processes_do_not() {
    let env = env("");
    let t = task(&env, "create-hello");
    let (id, _) = env.reset(&t, 0).unwrap();
    let out = env
        .step(
            id,
            &calls(&[
                (
                    "shell_exec",
                    json!({"id": "a", "command": "mkdir -p sub && cd sub && export X=1 && pwd"}),
                ),
                (
                    "shell_exec",
                    json!({"id": "a", "command": "pwd; echo \"X=$X\""}),
                ),
                ("shell_exec", json!({"id": "b", "command": "pwd"})),
                (
                    "shell_write_content_to_file",
                    json!({"content": "print(6 * 7)\n", "file_path": "sub/p.py"}),
                ),
                (
                    "shell_exec",
                    json!({"id": "a", "command": "python3 p.py; false"}),
                ),
                ("shell_view", json!({"id": "a"})),
            ]),
        )
        .unwrap();
    let said: Vec<String> = out
        .observation
        .messages
        .iter()
        .map(|m| m.content.to_string())
        .collect();
    assert_eq!(said[0], "/app/sub\n");
    assert_eq!(said[1], "/app/sub\nX=\n");
    assert_eq!(said[2], "/app\n");
    assert_eq!(said[3], "Content successfully written to file: sub/p.py");
    assert_eq!(said[4], "42\n\n[exit code 1]");
    assert_eq!(
        said[5], said[4],
        "shell_view without a process shows the last output"
    );
    assert_eq!(out.observation.messages[0].role.as_str(), "tool");
    assert_eq!(
        out.observation.messages[0]
            .tool_call_id
            .as_ref()
            .into_option()
            .map(|s| s.as_str()),
        Some("call_0")
    );
}

#[test]
fn a_background_process_is_read_fed_and_killed_with_its_episode() {
    let env = env("");
    let t = task(&env, "create-hello");
    let (id, _) = env.reset(&t, 0).unwrap();
    let out = env
        .step(
            id,
            &calls(&[(
                "shell_exec",
                json!({"id": "py", "block": false,
                       "command": "python3 -u -c 'import sys\nprint(\"ready\")\nfor l in sys.stdin: print(l.strip().upper())'"}),
            )]),
        )
        .unwrap();
    let first = out.observation.messages[0].content.to_string();
    assert!(
        first.starts_with("[started in the background in session `py`]"),
        "{first}"
    );
    let out = env
        .step(
            id,
            &calls(&[(
                "shell_write_to_process",
                json!({"id": "py", "command": "hello"}),
            )]),
        )
        .unwrap();
    let answer = out.observation.messages[0].content.to_string();
    let answer = if answer.contains("HELLO") {
        answer
    } else {
        // It printed after the second the tool waits: shell_view shows it.
        std::thread::sleep(Duration::from_millis(500));
        let out = env
            .step(id, &calls(&[("shell_view", json!({"id": "py"}))]))
            .unwrap();
        format!("{answer}{}", out.observation.messages[0].content)
    };
    assert!(answer.contains("HELLO"), "{answer}");
    let out = env
        .step(
            id,
            &calls(&[(
                "shell_exec",
                json!({"id": "py", "block": false, "command": "sleep 1"}),
            )]),
        )
        .unwrap();
    assert!(out.observation.messages[0]
        .content
        .contains("[TOOL_ERROR] session `py` already runs a process"));
    let out = env
        .step(
            id,
            &calls(&[(
                "shell_write_to_process",
                json!({"id": "nope", "command": "x"}),
            )]),
        )
        .unwrap();
    assert!(out.observation.messages[0]
        .content
        .contains("no session `nope`"));
    env.close(id).unwrap();
    // Closing the episode killed the interpreter (no host process reads that program anymore).
    let end = Instant::now() + Duration::from_secs(5);
    while python_readers() > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(python_readers(), 0);
}

/// Host processes running the background test's program.
fn python_readers() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains("l.strip().upper()"))
                .unwrap_or(false)
        })
        .count()
}

#[test]
fn a_hung_command_is_killed_at_its_timeout_and_bad_calls_end_the_episode() {
    let env = env("");
    let t = task(&env, "create-hello");
    let (id, _) = env.reset(&t, 0).unwrap();
    let started = Instant::now();
    let out = env
        .step(
            id,
            &calls(&[(
                "shell_exec",
                json!({"id": "a", "command": "sleep 600", "timeout": 1}),
            )]),
        )
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        out.observation.messages[0]
            .content
            .contains("[timed out after 1 s"),
        "{:?}",
        out.observation.messages[0].content
    );
    // Three unreadable calls end it (the original's limit).
    let out = env
        .step(
            id,
            &say("<tool_call>{nope</tool_call><tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>"),
        )
        .unwrap();
    assert!(!out.done);
    let said: Vec<String> = out
        .observation
        .messages
        .iter()
        .map(|m| m.content.to_string())
        .collect();
    assert!(
        said[0].starts_with("[TOOL_ERROR] json_parse_error"),
        "{said:?}"
    );
    assert!(said[1].contains("unknown tool `rm_rf`"), "{said:?}");
    let out = env
        .step(id, &calls(&[("shell_exec", json!({"id": "a"}))]))
        .unwrap();
    assert!(out.done, "{:?}", out.info.metadata_json);
    let meta: Value = serde_json::from_str(&out.info.metadata_json).unwrap();
    assert_eq!(meta["ended"], "parse_errors");
    assert!(!out.info.truncated);
    // Scored after the loop all the same.
    assert_eq!(env.evaluate(id).unwrap().reward, 0.0);
}

#[test]
fn max_turns_cut_an_episode_off_and_the_tests_never_show_during_it() {
    let env = env("max_turns = 2");
    let t = task(&env, "create-hello");
    let (id, _) = env.reset(&t, 0).unwrap();
    let out = env
        .step(id, &exec("ls -a /app /tests 2>&1; ls / "))
        .unwrap();
    let said = out.observation.messages[0].content.to_string();
    assert!(said.contains("/tests': No such file"), "{said}");
    assert!(!said.contains("test_outputs"), "{said}");
    let out = env.step(id, &exec("true")).unwrap();
    assert!(out.done && out.info.truncated);
    assert!(env.step(id, &exec("true")).is_err());
}

#[test]
fn tools_config_limits_the_tools_offered_and_bad_settings_are_named() {
    let env = TerminalEnv::new(
        "[env]\n[tools.shell_exec]\noutput_chars = 64\n",
        HostServices::standalone(),
    )
    .unwrap();
    let t = task(&env, "create-hello");
    let (id, first) = env.reset(&t, 0).unwrap();
    let tools: Value = serde_json::from_str(&first.tools_json).unwrap();
    assert_eq!(tools.as_array().unwrap().len(), 1);
    let out = env.step(id, &exec("seq 1 1000")).unwrap();
    let said = out.observation.messages[0].content.to_string();
    assert!(
        said.contains("[OMITTED MIDDLE]") && said.ends_with("999\n1000\n"),
        "{said}"
    );
    let out = env
        .step(id, &calls(&[("shell_view", json!({"id": "main"}))]))
        .unwrap();
    assert!(out.observation.messages[0]
        .content
        .contains("unknown tool `shell_view`"));

    let err = |cfg: &str| {
        TerminalEnv::new(cfg, HostServices::standalone())
            .err()
            .expect("refused")
    };
    assert!(err("[tools.browser]\n").contains("`browser`"));
    assert!(err("[tools.shell_view]\n").contains("must offer `shell_exec`"));
    assert!(err("[env]\nmax_turn = 3\n").contains("max_turn"));
    assert!(err("[env]\ntasks_dir = \"/nonexistent\"\n").contains("/nonexistent"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("broken")).unwrap();
    std::fs::write(dir.path().join("broken/task.yaml"), "instruction: x\n").unwrap();
    let e = err(&format!("[env]\ntasks_dir = {:?}\n", dir.path()));
    assert!(
        e.contains("task `broken`") && e.contains("run-tests.sh"),
        "{e}"
    );
}

#[test]
fn the_originals_task_rows_name_tasks_by_path_and_setup_failures_fail_the_reset() {
    let env = env("");
    let spec = env.task_specs()[0].clone();
    let row = Task {
        id: "row-1".into(),
        instruction: "x".into(),
        data_json:
            json!({"task": {"task_name": "whatever", "task_path": spec.dir, "instruction": "x"}})
                .to_string()
                .into(),
    };
    let (id, first) = env.reset(&row, 0).unwrap();
    assert!(first.messages[0]
        .content
        .starts_with(&format!("Task name:{}", spec.name)));
    env.close(id).unwrap();
    let missing = Task {
        id: "row-2".into(),
        instruction: "x".into(),
        data_json: json!({"task": {"task_name": "no-such-task"}})
            .to_string()
            .into(),
    };
    assert!(env
        .reset(&missing, 0)
        .unwrap_err()
        .contains("no task `no-such-task`"));

    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("bad-setup");
    std::fs::create_dir_all(t.join("tests")).unwrap();
    std::fs::write(t.join("task.yaml"), "instruction: x\n").unwrap();
    std::fs::write(t.join("run-tests.sh"), "true\n").unwrap();
    std::fs::write(t.join("setup.sh"), "echo broken >&2; exit 3\n").unwrap();
    let env = TerminalEnv::new(
        &format!("[env]\ntasks_dir = {:?}\n", dir.path()),
        HostServices::standalone(),
    )
    .unwrap();
    let e = env.reset(&env.tasks("all").unwrap()[0], 0).unwrap_err();
    assert!(e.contains("setup.sh failed") && e.contains("broken"), "{e}");
}

/// A task folder in `root`: `task.yaml`, a passing `run-tests.sh` and an empty `tests/`.
fn plain_task(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    let t = root.join(name);
    std::fs::create_dir_all(t.join("tests")).unwrap();
    std::fs::write(t.join("task.yaml"), "instruction: x\n").unwrap();
    std::fs::write(t.join("run-tests.sh"), "echo '1 passed in 0.01s'\n").unwrap();
    t
}

#[test]
fn a_task_runs_only_from_its_own_set_and_no_link_leads_out_of_it() {
    // A secret outside the task set, and tasks whose files link to it.
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET-LINE\n").unwrap();
    std::fs::create_dir(outside.path().join("tests")).unwrap();
    std::fs::write(outside.path().join("tests/leak.txt"), "TOP-SECRET-LINE\n").unwrap();

    for (name, file, target) in [
        ("setup-link", "setup.sh", secret.clone()),
        ("tests-link", "tests", outside.path().join("tests")),
        ("script-link", "run-tests.sh", secret.clone()),
        ("yaml-link", "task.yaml", secret.clone()),
    ] {
        let set = tempfile::tempdir().unwrap();
        let t = plain_task(set.path(), name);
        let path = t.join(file);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else if path.exists() {
            std::fs::remove_file(&path).unwrap();
        }
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let e = TerminalEnv::new(
            &format!("[env]\ntasks_dir = {:?}\n", set.path()),
            HostServices::standalone(),
        )
        .err()
        .unwrap_or_else(|| panic!("{name}: a task set with a link out of it was accepted"));
        assert!(e.contains("outside the task set"), "{name}: {e}");
        assert!(!e.contains("TOP-SECRET"), "{name}: {e}");
    }

    // A link planted after the set was read is refused when it is used.
    let set = tempfile::tempdir().unwrap();
    let t = plain_task(set.path(), "later");
    let env = TerminalEnv::new(
        &format!("[env]\ntasks_dir = {:?}\n", set.path()),
        HostServices::standalone(),
    )
    .unwrap();
    let task = env.tasks("all").unwrap().remove(0);
    let (id, _) = env.reset(&task, 0).unwrap();
    std::fs::remove_dir_all(t.join("tests")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("tests"), t.join("tests")).unwrap();
    let e = env.evaluate(id).expect_err("a linked tests/ was staged");
    assert!(e.contains("outside the task set"), "{e}");
    env.close(id).unwrap();
    std::fs::remove_file(t.join("tests")).unwrap();
    std::fs::create_dir(t.join("tests")).unwrap();
    std::os::unix::fs::symlink(&secret, t.join("setup.sh")).unwrap();
    let e = env.reset(&task, 0).expect_err("a linked setup.sh was run");
    assert!(
        e.contains("outside the task set") && !e.contains("TOP-SECRET"),
        "{e}"
    );

    // A path the client names: absolute, relative, or a folder it made itself.
    let mine = plain_task(outside.path(), "mine");
    std::fs::write(mine.join("setup.sh"), "cat /etc/hostname\n").unwrap();
    for path in [
        mine.display().to_string(),
        "../".to_string() + &mine.display().to_string(),
        "/etc".to_string(),
    ] {
        let row = Task {
            id: "row".into(),
            instruction: "x".into(),
            data_json: json!({"task": {"task_name": "nothing-here", "task_path": path}})
                .to_string()
                .into(),
        };
        let e = env.reset(&row, 0).expect_err("a foreign task_path was run");
        assert!(e.contains("runs only its own tasks"), "{path}: {e}");
        assert!(
            !e.contains(&set.path().display().to_string()),
            "the error shows the host's folder: {e}"
        );
    }
}

/// A task with a Dockerfile: its image is built (once, then cached) and the task, its reference
/// solution and its tests run on it; the module its solution imports exists only there.
#[test]
fn a_task_with_a_dockerfile_runs_on_its_image() {
    let mmdebstrap = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mmdebstrap").is_file()));
    if !mmdebstrap {
        assert!(
            std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
            "mmdebstrap is not installed and OPENCLAW_REQUIRE_ASSETS=1: apt-get install mmdebstrap"
        );
        eprintln!("SKIPPED: mmdebstrap is not installed (apt-get install mmdebstrap)");
        return;
    }
    let set = tempfile::tempdir().unwrap();
    let t = set.path().join("greet-from-image");
    std::fs::create_dir_all(t.join("tests")).unwrap();
    // The same image as envs/images/tests/build.rs builds, so a CI run builds it once.
    std::fs::write(
        t.join("Dockerfile"),
        "FROM python:3.11-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git python3-pytest\nRUN pip install --no-cache-dir six==1.16.0\nCOPY hello.py /opt/hello/\nENV PYTHONPATH=/opt/hello\n",
    )
    .unwrap();
    std::fs::write(t.join("hello.py"), "GREETING = 'hi'\n").unwrap();
    std::fs::write(
        t.join("task.yaml"),
        "instruction: Write six's version and hello.GREETING, separated by a space, to /app/answer.txt.\ncategory: scripting\n",
    )
    .unwrap();
    std::fs::write(
        t.join("solution.sh"),
        "python3 -c \"import six, hello; open('/app/answer.txt', 'w').write(six.__version__ + ' ' + hello.GREETING)\"\n",
    )
    .unwrap();
    std::fs::write(
        t.join("run-tests.sh"),
        "cd /app && python3 -m pytest -rA $TEST_DIR/test_outputs.py\n",
    )
    .unwrap();
    std::fs::write(
        t.join("tests/test_outputs.py"),
        "def test_answer():\n    assert open('/app/answer.txt').read().strip() == '1.16.0 hi'\n",
    )
    .unwrap();
    let env = env(&format!(
        "tasks_dir = {:?}\nexec_seconds = 30",
        set.path().display().to_string()
    ));
    assert!(env.task_specs()[0].image.is_some());
    let task = task(&env, "greet-from-image");
    let reference = env.reference(&task).unwrap();
    let (id, _) = env.reset(&task, 0).unwrap();
    for a in &reference {
        if env.step(id, a).unwrap().done {
            break;
        }
    }
    let e = env.evaluate(id).unwrap();
    assert!(e.solved && e.reward == 1.0, "{}", e.details_json);
    env.close(id).unwrap();
    // The host's Python has no `hello` module: the episode's commands see the image.
    let (id, _) = env.reset(&task, 0).unwrap();
    let out = env
        .step(
            id,
            &exec("python3 -c 'import hello' && cat /etc/debian_version && ls /usr/bin/mmdebstrap"),
        )
        .unwrap();
    let said = out.observation.messages[0].content.to_string();
    assert!(
        said.contains("No such file") && !said.contains("ModuleNotFoundError"),
        "{said}"
    );
    env.close(id).unwrap();
    // Images off: the task runs on the host, where its solution fails.
    let env = crate::env(&format!(
        "tasks_dir = {:?}\nimages = \"host\"",
        set.path().display().to_string()
    ));
    let task = crate::task(&env, "greet-from-image");
    let (id, _) = env.reset(&task, 0).unwrap();
    for a in &env.reference(&task).unwrap() {
        if env.step(id, a).unwrap().done {
            break;
        }
    }
    assert!(!env.evaluate(id).unwrap().solved);
    env.close(id).unwrap();
}

/// The slow tier: end-to-end runs that take a minute or more. `scripts/test.sh` runs them;
/// `scripts/test.sh --fast` (which passes `--skip slow::`) leaves them out.
mod slow {
    use super::*;

    #[test]
    fn every_reference_solution_scores_one_and_doing_nothing_scores_zero() {
        let env = env("");
        let specs = env.task_specs().to_vec();
        assert!(specs.len() >= 30, "{} tasks", specs.len());
        let mut categories = std::collections::BTreeSet::new();
        for spec in &specs {
            categories.insert(spec.yaml.category.clone());
            let t = task(&env, &spec.name);
            assert!(t
                .instruction
                .starts_with(&format!("Task name:{}\nTask instruction: ", spec.name)));

            let (id, first) = env
                .reset(&t, 0)
                .unwrap_or_else(|e| panic!("{}: {e}", spec.name));
            assert_eq!(first.messages[0].content.as_str(), t.instruction.as_str());
            let solution =
                std::fs::read_to_string(spec.solution().unwrap().expect("a reference solution"))
                    .unwrap();
            let out = env.step(id, &exec(&solution)).unwrap();
            assert!(!out.done);
            let said = out.observation.messages[0].content.to_string();
            assert!(
                !said.contains("[exit code"),
                "{}: the solution failed: {said}",
                spec.name
            );
            assert!(env.step(id, &say("Done.")).unwrap().done);
            let e = env.evaluate(id).unwrap();
            let d = details(&e);
            assert!(
                e.reward == 1.0 && e.solved && d["total"].as_u64().unwrap() >= 1,
                "{}: the reference solution scored {}: {d}",
                spec.name,
                e.reward
            );
            env.close(id).unwrap();

            let (id, _) = env.reset(&t, 0).unwrap();
            assert!(env.step(id, &say("I will not do anything.")).unwrap().done);
            let e = env.evaluate(id).unwrap();
            assert!(
                e.reward == 0.0 && !e.solved,
                "{}: doing nothing scored {}: {}",
                spec.name,
                e.reward,
                details(&e)
            );
            env.close(id).unwrap();
        }
        for kind in [
            "file-operations",
            "text-processing",
            "git",
            "scripting",
            "services",
        ] {
            assert!(
                categories.contains(kind),
                "no {kind} task in {categories:?}"
            );
        }
    }
}

//! Real episodes of the SWE environment against the real sandbox, git and pytest: scripted
//! replies as a policy would send them, scored as SWE-bench scores them.

use std::path::Path;
use std::process::Command;

use openclaw_env_swe::{protocol, SweEnv};
use openclaw_plugin_api::serde_json::{self, json, Value};
use openclaw_plugin_api::{Action, Env, Evaluation, HostServices, Message, Task};

fn env(extra: &str) -> SweEnv {
    SweEnv::new(&format!("[env]\n{extra}"), HostServices::standalone())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn say(text: &str) -> Action {
    Action {
        message: Message::new("assistant", text),
    }
}

fn bash(command: &str) -> Action {
    say(&protocol::reply("run it", command))
}

fn task(env: &SweEnv, id: &str) -> Task {
    env.tasks("all")
        .unwrap()
        .into_iter()
        .find(|t| t.id.as_str() == id)
        .unwrap_or_else(|| panic!("no instance {id}"))
}

fn details(e: &Evaluation) -> Value {
    serde_json::from_str(&e.details_json).unwrap()
}

/// Runs `actions` from a reset of `id` and scores the episode.
fn episode(env: &SweEnv, id: &str, actions: &[Action]) -> (Evaluation, Vec<String>) {
    let (ep, first) = env.reset(&task(env, id), 0).unwrap();
    assert!(first.messages[0].content.contains("<pr_description>"));
    let mut said = Vec::new();
    for a in actions {
        let out = env.step(ep, a).unwrap();
        said.push(out.observation.messages[0].content.to_string());
        if out.done {
            break;
        }
    }
    let e = env.evaluate(ep).unwrap();
    env.close(ep).unwrap();
    (e, said)
}

fn tasks_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tasks"))
}

#[test]
fn a_reply_runs_its_one_block_in_testbed_and_submits_with_the_marker() {
    let env = env("");
    let id = "openclaw__romanum-1";
    let (ep, _) = env.reset(&task(&env, id), 0).unwrap();
    let out = env
        .step(ep, &bash("pwd && git log --oneline --all | wc -l"))
        .unwrap();
    let said = out.observation.messages[0].content.to_string();
    assert_eq!(
        said,
        "<returncode>0</returncode>\n<output>\n/testbed\n1\n</output>"
    );
    assert!(!out.done);
    // No block, then two: the reminder, and nothing runs.
    let out = env
        .step(ep, &say("I think the bug is in the parser."))
        .unwrap();
    assert!(out.observation.messages[0]
        .content
        .contains("EXACTLY ONE action"));
    let two = "```bash\ntouch a\n```\n```bash\ntouch b\n```";
    let out = env.step(ep, &say(two)).unwrap();
    assert!(out.observation.messages[0]
        .content
        .contains("found 2 actions"));
    let out = env.step(ep, &bash("ls a b; exit 3")).unwrap();
    assert!(out.observation.messages[0]
        .content
        .starts_with("<returncode>3</returncode>"));
    let out = env.step(ep, &bash(&protocol::submit_command())).unwrap();
    assert!(out.done && !out.info.truncated);
    let meta: Value = serde_json::from_str(&out.info.metadata_json).unwrap();
    assert_eq!(meta["ended"], "submitted");
    let e = env.evaluate(ep).unwrap();
    assert!(!e.solved && e.reward == 0.0, "{}", e.details_json);
    env.close(ep).unwrap();
    // Three format errors end an episode.
    let (ep, _) = env.reset(&task(&env, id), 0).unwrap();
    for n in 1..=3 {
        let out = env.step(ep, &say("thinking")).unwrap();
        assert_eq!(out.done, n == 3);
    }
    assert!(env.step(ep, &say("more")).is_err(), "a step after the end");
    env.close(ep).unwrap();
}

#[test]
fn the_reference_solution_resolves_and_a_planted_conftest_does_not() {
    let env = env("");
    let id = "openclaw__wordwrap-1";
    let reference = env.reference(&task(&env, id)).unwrap();
    let (e, said) = episode(&env, id, &reference);
    assert!(
        said[0].starts_with("<returncode>0</returncode>"),
        "{said:?}"
    );
    assert!(e.solved && e.reward == 1.0, "{}", e.details_json);
    let d = details(&e);
    assert_eq!(d["passed"], d["total"]);
    assert_eq!(d["ended"], "submitted");
    // The whole diff comes with the score (a pool's `/diff` answers with it).
    let patch = d["patch"].as_str().unwrap();
    assert!(patch.starts_with("diff --git"), "{patch}");

    // A conftest.py that passes every test, and a rewritten test: both left out, so the
    // unfixed code is scored by the instance's own tests.
    let cheat = "cat > conftest.py <<'EOF'\nimport pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    out = yield\n    out.get_result().outcome = 'passed'\nEOF\nfor f in tests/*.py; do echo 'def test_x(): pass' > $f; done";
    let (e, _) = episode(&env, id, &[bash(cheat), bash(&protocol::submit_command())]);
    let d = details(&e);
    assert!(!e.solved, "{d}");
    let dropped: Vec<&str> = d["dropped_test_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        dropped.contains(&"conftest.py") && dropped.len() >= 2,
        "{d}"
    );
    // Nor does a diff program of the repository's own configuration, which would print a
    // "diff" of the agent's choosing: the gold patch, never applied to the files.
    let gold = std::fs::read_to_string(tasks_dir().join(id).join("gold.patch")).unwrap();
    let fake = format!(
        "cat > /tmp/gold.patch <<'OPENCLAW_GOLD'\n{gold}OPENCLAW_GOLD\nprintf '#!/bin/sh\\ncat /testbed/.git/gold.patch\\n' > .git/diff.sh && chmod +x .git/diff.sh && cp /tmp/gold.patch .git/ && git config diff.external /testbed/.git/diff.sh && echo x >> README.md"
    );
    let (e, _) = episode(&env, id, &[bash(&fake), bash(&protocol::submit_command())]);
    assert!(!e.solved, "{}", e.details_json);
    // A planted `pytest.py` at the root does not replace pytest either.
    let fake = "printf 'import sys\\nprint(\"PASSED\")\\nsys.exit(0)\\n' > pytest.py";
    let (e, _) = episode(&env, id, &[bash(fake), bash(&protocol::submit_command())]);
    assert!(!e.solved, "{}", e.details_json);
}

#[test]
fn a_cut_off_episode_is_scored_and_an_unknown_instance_is_refused() {
    let env = env("max_turns = 2");
    let id = "openclaw__slugkit-1";
    let patch = std::fs::read_to_string(tasks_dir().join(id).join("gold.patch")).unwrap();
    let (ep, _) = env.reset(&task(&env, id), 0).unwrap();
    assert!(
        !env.step(ep, &bash(&protocol::apply_command(&patch)))
            .unwrap()
            .done
    );
    let out = env.step(ep, &bash("git status --short")).unwrap();
    assert!(out.done && out.info.truncated);
    // Never submitted, yet the fix is in the repository: scored as it stands.
    let e = env.evaluate(ep).unwrap();
    assert!(e.solved, "{}", e.details_json);
    assert_eq!(details(&e)["ended"], "max_turns");
    env.close(ep).unwrap();

    for data in [
        json!({"instance_id": "nothing-here"}),
        json!({"instance_id": "../../etc/passwd"}),
    ] {
        let t = Task {
            id: "x".into(),
            instruction: "x".into(),
            data_json: data.to_string().into(),
        };
        let e = env.reset(&t, 0).unwrap_err();
        assert!(
            e.contains("no instance") && e.contains("built-in set"),
            "{e}"
        );
        assert!(!e.contains("/tmp"), "a host path in {e}");
    }
    assert!(env.tasks("validation").is_err());
    let test: Vec<Task> = env.tasks("test").unwrap();
    let train: Vec<Task> = env.tasks("train").unwrap();
    assert!(test.len() >= 5 && train.len() >= 15);
    assert!(test.iter().all(|t| !train.iter().any(|u| u.id == t.id)));
}

/// Makes a repository with a base commit and a later "fix" commit; returns both hashes.
fn history(dir: &Path) -> (String, String) {
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    std::fs::create_dir_all(dir.join("calc")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(
        dir.join("calc/__init__.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("pyproject.toml"),
        "[tool.pytest.ini_options]\npythonpath = [\".\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("tests/test_keep.py"),
        "from calc import add\n\ndef test_zero():\n    assert add(0, 0) == 0\n",
    )
    .unwrap();
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    std::fs::write(
        dir.join("calc/__init__.py"),
        "def add(a, b):\n    return a + b  # THE-FIX\n",
    )
    .unwrap();
    git(&["commit", "-q", "-am", "the fix"]);
    let fix = git(&["rev-parse", "HEAD"]);
    (base, fix)
}

#[test]
fn a_swe_bench_file_with_its_repositories_loads_and_hides_later_commits() {
    let dir = tempfile::tempdir().unwrap();
    let repos = dir.path().join("repos");
    let repo = repos.join("acme__calc");
    std::fs::create_dir_all(&repo).unwrap();
    let (base, fix) = history(&repo);
    let test_patch = "diff --git a/tests/test_add.py b/tests/test_add.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_add.py\n@@ -0,0 +1,4 @@\n+from calc import add\n+\n+def test_add():\n+    assert add(2, 3) == 5\n";
    let patch = "diff --git a/calc/__init__.py b/calc/__init__.py\n--- a/calc/__init__.py\n+++ b/calc/__init__.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";
    // The official rows' form: the test lists as JSON strings.
    let row = json!({
        "instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base,
        "problem_statement": "add() subtracts", "patch": patch, "test_patch": test_patch,
        "FAIL_TO_PASS": "[\"tests/test_add.py::test_add\"]",
        "PASS_TO_PASS": "[\"tests/test_keep.py::test_zero\"]",
        "hints_text": "", "created_at": "2024-01-01", "version": "1.0",
        "environment_setup_commit": base,
    });
    let broken = json!({
        "instance_id": "acme__calc-2", "repo": "acme/calc", "base_commit": base,
        "problem_statement": "x", "test_patch": "", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]",
    });
    let file = dir.path().join("swe.jsonl");
    std::fs::write(&file, format!("{row}\n{broken}\n")).unwrap();
    let env = env(&format!(
        "instances = {:?}\nrepos = {:?}",
        file.display().to_string(),
        repos.display().to_string()
    ));
    assert_eq!(env.instances().len(), 1);
    let problems = env.problems();
    assert!(
        problems.len() == 1
            && problems[0].contains("acme__calc-2")
            && problems[0].contains("both empty"),
        "{problems:?}"
    );
    let id = "acme__calc-1";
    // Neither the fix commit nor the source repository is reachable from the sandbox.
    let look = format!("git log --all --oneline | wc -l; git cat-file -t {fix}; grep -rc THE-FIX . | grep -v ':0' ; ls /src");
    let (e, said) = episode(&env, id, &[bash(&look)]);
    assert!(said[0].contains("<output>\n1\n"), "{said:?}");
    assert!(
        !said[0].contains("commit\n") && !said[0].contains("THE-FIX"),
        "{said:?}"
    );
    assert!(said[0].contains("No such file"), "{said:?}");
    assert!(!e.solved);
    let tests = &details(&e)["tests"];
    assert_eq!(tests[0]["status"], "FAILED", "{tests}");
    assert_eq!(tests[1]["status"], "PASSED", "{tests}");
    let reference = env.reference(&task(&env, id)).unwrap();
    let (e, _) = episode(&env, id, &reference);
    assert!(e.solved, "{}", e.details_json);
}

/// A row that names its image runs on it: its commands and its tests see the image's system.
#[test]
fn an_instance_with_an_image_runs_on_it() {
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
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repos/acme__calc");
    std::fs::create_dir_all(&repo).unwrap();
    let (base, _) = history(&repo);
    // The same image as envs/images/tests/build.rs builds, so a CI run builds it once.
    std::fs::write(
        dir.path().join("Dockerfile"),
        "FROM python:3.11-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git python3-pytest\nRUN pip install --no-cache-dir six==1.16.0\nCOPY hello.py /opt/hello/\nENV PYTHONPATH=/opt/hello\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("hello.py"), "GREETING = 'hi'\n").unwrap();
    let row = json!({
        "instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base,
        "problem_statement": "add() subtracts", "test_patch": "",
        "FAIL_TO_PASS": [], "PASS_TO_PASS": ["tests/test_keep.py::test_zero"],
        "repo_dir": "repos/acme__calc", "image": "Dockerfile",
    });
    let file = dir.path().join("swe.jsonl");
    std::fs::write(&file, format!("{row}\n")).unwrap();
    let env = env(&format!("instances = {:?}", file.display().to_string()));
    let (e, said) = episode(
        &env,
        "acme__calc-1",
        &[bash(
            "python3 -c 'import hello; print(hello.GREETING)'; ls /usr/bin/mmdebstrap",
        )],
    );
    assert!(
        said[0].contains("hi\n") && said[0].contains("No such file"),
        "{said:?}"
    );
    assert!(e.solved, "{}", e.details_json);
}

#[test]
fn commands_cannot_leave_the_sandbox() {
    let env = env("exec_seconds = 5");
    let id = "openclaw__semver-1";
    let (ep, _) = env.reset(&task(&env, id), 0).unwrap();
    let run = |cmd: &str| {
        env.step(ep, &bash(cmd)).unwrap().observation.messages[0]
            .content
            .to_string()
    };
    // Host files, the host's home and the project are not there; /usr is read-only.
    let said = run("cat /etc/shadow; ls /root /home; ls / ; touch /usr/evil; echo done");
    assert!(!said.contains("root:"), "{said}");
    assert!(
        said.contains("Read-only file system") || said.contains("Permission denied"),
        "{said}"
    );
    assert!(!Path::new("/usr/evil").exists());
    assert!(!said.contains("Cargo.toml"), "{said}");
    // No network, not even to the host's loopback.
    let said = run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\" 2>&1 | tail -1; python3 -c \"import socket; socket.create_connection(('127.0.0.1', 22), 2)\" 2>&1 | tail -1");
    assert!(
        said.contains("Error") && !said.contains("<returncode>0</returncode>\n<output>\n</output>"),
        "{said}"
    );
    // The host's environment does not reach it.
    let said = run("env");
    assert!(!said.contains("CARGO"), "{said}");
    // A command that does not end is killed at its limit, and the episode goes on.
    let said = run("sleep 60");
    assert!(said.contains("timed out after 5 s"), "{said}");
    let said = run("echo alive");
    assert!(said.contains("alive"), "{said}");
    env.close(ep).unwrap();
}

/// The slow tier: `scripts/test.sh` runs it; `--fast` leaves it out.
mod slow {
    use super::*;

    /// Every built-in instance: the gold patch resolves it, no change does not, and the gold
    /// patch with one function broken (`broken.patch`, written by `check.py --write-broken`)
    /// does not, the PASS_TO_PASS test it broke failing.
    #[test]
    fn every_instance_is_resolved_by_its_gold_patch_only() {
        let env = env("");
        assert!(env.instances().len() >= 20);
        for inst in env.instances() {
            let id = inst.id.as_str();
            let reference = env.reference(&task(&env, id)).unwrap();
            let (e, _) = episode(&env, id, &reference);
            assert!(
                e.solved && e.reward == 1.0,
                "{id}: gold: {}",
                e.details_json
            );

            let (e, _) = episode(&env, id, &[]);
            assert!(!e.solved, "{id}: no change resolved it");

            let folder = tasks_dir().join(id);
            let broken = std::fs::read_to_string(folder.join("broken.patch")).unwrap_or_else(|e| {
                panic!("{id}: broken.patch ({e}); run check.py --write-broken")
            });
            let which: Value =
                serde_json::from_str(&std::fs::read_to_string(folder.join("broken.json")).unwrap())
                    .unwrap();
            let (e, _) = episode(
                &env,
                id,
                &[
                    bash(&protocol::apply_command(&broken)),
                    bash(&protocol::submit_command()),
                ],
            );
            let d = details(&e);
            assert!(!e.solved, "{id}: broken resolved it: {d}");
            let hit = d["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["test"] == which["test"])
                .unwrap_or_else(|| panic!("{id}: {which} not run: {d}"));
            assert_eq!(hit["status"], "FAILED", "{id}: {hit} with {which}");
        }
    }
}

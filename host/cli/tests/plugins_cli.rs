//! The `openclaw-host plugins` and `config` commands, run as a user runs them: the real binary,
//! real plugin crates built with cargo, real files.

mod common;

use common::{host_command, workspace};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// Plugin crates created by tests build in one shared target folder, so their dependencies
/// compile once per test run rather than once per crate.
fn scratch_target() -> PathBuf {
    workspace().join("target").join("test-plugins")
}

fn host(args: &[&str]) -> Output {
    host_in(&workspace(), args, &[])
}

fn host_in(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = host_command(dir);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run openclaw-host")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last line of stderr: the error, after cargo's build progress.
fn error_line(o: &Output) -> String {
    stderr(o)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

fn assert_one_line_error(o: &Output, expect: &str) {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        stdout(o),
        stderr(o)
    );
    let line = error_line(o);
    assert!(line.starts_with("error: "), "{}", stderr(o));
    assert!(line.contains(expect), "expected `{expect}` in: {line}");
    let err = stderr(o);
    assert!(!err.contains("stack backtrace"), "{err}");
    assert!(!err.contains("panicked at"), "{err}");
}

#[test]
fn list_shows_the_methods_and_the_example_with_their_kinds() {
    let o = host(&["plugins", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("NAME"), "{out}");
    for name in ["binary-rl", "opd", "combine", "my-method"] {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name} in\n{out}"));
        assert!(row.contains("loss"), "{row}");
    }
}

#[test]
fn every_shipped_loss_passes_the_contract() {
    for dir in [
        "methods/binary-rl",
        "methods/opd",
        "methods/combine",
        "examples/my-method",
    ] {
        let o = host(&["plugins", "test", dir]);
        let out = stdout(&o);
        assert!(o.status.success(), "{dir}:\n{out}\n{}", stderr(&o));
        assert!(out.contains("gradient matches finite differences"), "{out}");
        assert!(out.contains(" 0 failed"), "{out}");
        assert!(!out.contains("FAIL"), "{out}");
    }
}

#[test]
fn the_toolcall_environment_loads_and_scores_an_episode_across_the_abi() {
    // The harness's stand-in agent says "I am done.": no call, no boxed answer, so the
    // episode ends at once and `evaluate` (API 1.2) scores it -1.
    let o = host(&["plugins", "test", "envs/toolcall"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(out.contains("lists its train tasks (160 tasks)"), "{out}");
    assert!(
        out.contains("episode ended after 1 steps, evaluated -1"),
        "{out}"
    );
}

#[test]
fn info_prints_the_manifest_and_default_config() {
    let o = host(&["plugins", "info", "combine"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("name:        combine"), "{out}");
    assert!(out.contains("kinds:       loss"), "{out}");
    assert!(out.contains("w_opd"), "{out}");
}

#[test]
fn a_panicking_plugin_fails_its_checks_and_the_host_keeps_going() {
    let o = host(&["plugins", "test", "tests/fixtures/panicky"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    // The loss panicked, yet the harness went on to check the reward kind in the same process.
    assert!(
        out.contains("loss.compute panicked at tests/fixtures/panicky/src/lib.rs"),
        "{out}"
    );
    assert!(out.contains("this loss panics on purpose"), "{out}");
    assert!(out.contains("reward constructor panicked"), "{out}");
    assert!(out.contains("3 failed"), "{out}");
    assert!(!stderr(&o).contains("stack backtrace"), "{}", stderr(&o));
}

#[test]
fn a_library_built_against_another_api_is_refused_in_one_line() {
    let o = host(&["plugins", "info", "tests/fixtures/abi-old"]);
    assert_one_line_error(
        &o,
        &format!(
            "was built against plugin API 0.9.0, which this host (plugin API {}) cannot load",
            openclaw_plugin_api::API_VERSION
        ),
    );
    let o = host(&["plugins", "info", "tests/fixtures/abi-layout"]);
    assert_one_line_error(&o, "ABI layout incompatible");
    assert!(stderr(&o).lines().count() < 30, "{}", stderr(&o));
}

#[test]
fn a_kind_the_library_does_not_provide_is_refused() {
    let o = host(&["plugins", "info", "tests/fixtures/kind-liar"]);
    assert_one_line_error(
        &o,
        "plugin.toml claims kind `env` but the library `kind-liar` does not provide it",
    );
}

#[test]
fn bad_paths_and_manifests_get_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let o = host(&["plugins", "info", "/no/such/plugin/dir"]);
    assert_one_line_error(&o, "plugin directory /no/such/plugin/dir does not exist");

    let o = host(&["plugins", "info", "no-such-plugin"]);
    assert_one_line_error(&o, "no plugin named `no-such-plugin`");
    // The refusal lists the plugins there are.
    assert!(
        error_line(&o).contains("found binary-rl, combine,"),
        "{}",
        stderr(&o)
    );

    // Plugins and environments are found by name from outside the checkout too: beside the
    // binary that runs.
    let o = host_in(tmp.path(), &["plugins", "info", "combine"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("combine"), "{}", stdout(&o));
    let o = host_in(
        tmp.path(),
        &["env-pool", "serve", "--env", "no-such-env", "--port", "0"],
        &[],
    );
    assert_one_line_error(&o, "environment `no-such-env`");
    assert!(
        error_line(&o).contains("(environments there: gui, swe, terminal, toolcall)"),
        "{}",
        stderr(&o)
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = host(&["plugins", "info", empty.to_str().unwrap()]);
    assert_one_line_error(&o, "has no plugin.toml");

    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("plugin.toml"),
        "[plugin]\nname = \"bad\"\nkinds = [\"loss\"]\n",
    )
    .unwrap();
    let o = host(&["plugins", "info", bad.to_str().unwrap()]);
    assert_one_line_error(&o, "missing field `version`");

    std::fs::write(
        bad.join("plugin.toml"),
        "[plugin]\nname = \"bad\"\nversion = \"0.1.0\"\nkinds = [\"loss\"]\n",
    )
    .unwrap();
    let o = host(&["plugins", "info", bad.to_str().unwrap()]);
    assert_one_line_error(&o, "has a plugin.toml but no readable Cargo.toml");

    let not_a_plugin = workspace().join("target/debug/libopenclaw_plugin_api.so");
    let lib = tmp.path().join("libnot_a_plugin.so");
    if not_a_plugin.exists() {
        std::fs::copy(&not_a_plugin, &lib).unwrap();
    } else {
        std::fs::write(&lib, b"not an ELF file").unwrap();
    }
    let o = host(&["plugins", "info", lib.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(error_line(&o).starts_with("error: "), "{}", stderr(&o));
}

fn scaffold(dir: &Path, name: &str, kinds: &str) -> PathBuf {
    let o = host_in(dir, &["plugins", "new", name, "--kind", kinds], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join(name)
}

#[test]
fn a_new_plugin_builds_loads_and_passes_its_checks_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = scaffold(tmp.path(), "foo", "loss,reward,env,rollout,generate");
    assert!(root.join("plugin.toml").is_file());
    let target = scratch_target();
    let o = host_in(
        tmp.path(),
        &["plugins", "test", "./foo"],
        &[("CARGO_TARGET_DIR", target.to_str().unwrap())],
    );
    let out = stdout(&o);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    for kind in ["loss", "reward", "env", "rollout", "generate"] {
        assert!(out.contains(&format!("ok    {kind}: constructs")), "{out}");
    }
    assert!(out.contains(" 0 failed"), "{out}");
    // The env's score after the loop crossed the boundary (API 1.2's `evaluate`): the
    // scaffold's agent stand-in never says the next number, so it counted none of 5.
    assert!(
        out.contains("episode ended after 5 steps, evaluated 0"),
        "{out}"
    );

    // And its name is found from its parent folder through the plugin search path.
    let o = host_in(
        tmp.path(),
        &["plugins", "info", "foo"],
        &[
            ("CARGO_TARGET_DIR", target.to_str().unwrap()),
            ("OPENCLAW_PLUGIN_PATH", tmp.path().to_str().unwrap()),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("kinds:       loss, reward, env, rollout, generate"),
        "{}",
        stdout(&o)
    );

    let o = host_in(
        tmp.path(),
        &["plugins", "new", "foo", "--kind", "loss"],
        &[],
    );
    assert_one_line_error(&o, "already exists");
    let o = host_in(
        tmp.path(),
        &["plugins", "new", "Bad Name", "--kind", "loss"],
        &[],
    );
    assert_one_line_error(&o, "invalid plugin name `Bad Name`");
    let o = host_in(
        tmp.path(),
        &["plugins", "new", "x", "--kind", "telepathy"],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "clap rejects the kind: {}",
        stderr(&o)
    );
}

#[test]
fn a_build_failure_reports_cargos_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = scaffold(tmp.path(), "broken", "loss");
    let lib = root.join("src/loss.rs");
    let text = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(
        &lib,
        text.replace("Ok(MyLoss { cfg })", "Ok(MyLoss { cfg, oops: 1 })"),
    )
    .unwrap();
    let target = scratch_target();
    let o = host_in(
        tmp.path(),
        &["plugins", "test", "broken"],
        &[
            ("CARGO_TARGET_DIR", target.to_str().unwrap()),
            ("OPENCLAW_PLUGIN_PATH", tmp.path().to_str().unwrap()),
        ],
    );
    assert_one_line_error(&o, "building plugin crate");
    let line = error_line(&o);
    assert!(line.contains("has no field named `oops`"), "{line}");
}

#[test]
fn two_plugins_with_one_name_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    scaffold(tmp.path(), "opd", "loss");
    let target = scratch_target();
    let copy = tmp.path().join("opd");
    let o = host_in(
        &workspace(),
        &[
            "config",
            "--plugin",
            "methods/opd",
            "--custom-loss-function-path",
            copy.to_str().unwrap(),
        ],
        &[("CARGO_TARGET_DIR", target.to_str().unwrap())],
    );
    assert_one_line_error(&o, "two plugins are named `opd`");
}

#[test]
fn config_prints_every_value_with_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("run.toml");
    std::fs::write(&file, "rollout_batch_size = 4\n[method]\nw_rl = 0.5\n").unwrap();
    let o = host_in(
        &workspace(),
        &[
            "config",
            "--plugin",
            "methods/combine",
            "--config",
            file.to_str().unwrap(),
            "--lr",
            "3e-4",
            "--use-lora",
            "--set",
            "method.w_opd=2.0",
        ],
        &[
            ("MODEL_PATH", "/models/qwen3"),
            ("OPENCLAW_API_KEY", "sk-test"),
        ],
    );
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = |key: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in\n{out}"))
            .to_string()
    };
    assert!(
        line("lr").ends_with("# flag --lr") && line("lr").contains("0.0003"),
        "{}",
        line("lr")
    );
    assert!(line("use_lora").contains("true") && line("use_lora").ends_with("# flag --use-lora"));
    assert!(
        line("rollout_batch_size").contains("# file "),
        "{}",
        line("rollout_batch_size")
    );
    assert!(
        line("model_path").contains("\"/models/qwen3\"")
            && line("model_path").ends_with("# env MODEL_PATH")
    );
    assert!(line("api_key").contains("\"***\""), "{}", line("api_key"));
    assert!(!out.contains("sk-test"));
    assert!(line("weight_decay").ends_with("# default"));
    assert!(
        out.contains("[method] # configuration of plugin combine"),
        "{out}"
    );
    assert!(
        line("w_rl").contains("0.5") && line("w_rl").contains("# file "),
        "{}",
        line("w_rl")
    );
    assert!(
        line("w_opd").contains("2.0") && line("w_opd").contains("--set method.w_opd"),
        "{}",
        line("w_opd")
    );
    assert!(out.contains("loss     combine"), "{out}");
    // The printout is TOML that --config reads back.
    let again = tmp.path().join("again.toml");
    let text: String = out
        .lines()
        .filter(|l| !l.starts_with("api_key"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&again, text).unwrap();
    let o = host_in(
        &workspace(),
        &["config", "--config", again.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("lr = 0.0003"));

    let o = host(&["config", "--lr", "-1"]);
    assert_one_line_error(
        &o,
        "invalid value for `lr` = -1.0 (from flag --lr): must be > 0",
    );
    let o = host_in(&workspace(), &["config"], &[("MAJORITY_VOTE_N", "lots")]);
    assert_one_line_error(
        &o,
        "`majority_vote_n` = `lots` (from env MAJORITY_VOTE_N): expected a whole number",
    );
    let o = host(&[
        "config",
        "--plugin",
        "methods/opd",
        "--rollout-function-path",
        "examples/my-method",
    ]);
    assert_one_line_error(
        &o,
        "--rollout-function-path examples/my-method: plugin `my-method` does not provide kind `rollout`",
    );
    // A replacement that provides the kind takes it over.
    let o = host(&[
        "config",
        "--plugin",
        "methods/opd",
        "--custom-rm-path",
        "methods/binary-rl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("reward   binary-rl 0.1.0 (methods/binary-rl, via --custom-rm-path)"),
        "{out}"
    );
}

static BUILT: OnceLock<()> = OnceLock::new();

/// Builds the fixtures once so that library-level tests below can load them.
fn fixture_library(name: &str) -> PathBuf {
    BUILT.get_or_init(|| {
        let o = host(&["plugins", "info", "tests/fixtures/panicky"]);
        assert!(o.status.success(), "{}", stderr(&o));
    });
    workspace()
        .join("target/debug")
        .join(format!("lib{name}.so"))
}

#[test]
fn plugin_errors_and_panics_fail_one_call_and_the_plugin_stays_usable() {
    use openclaw_plugin_api::{HostServices, LossBatch};
    use openclaw_plugins::{LoadedPlugin, LossHandle};
    let lib = fixture_library("fixture_panicky");
    let plugin = LoadedPlugin::load_library(&lib, None).unwrap();
    let loss = LossHandle::new(&plugin, "", HostServices::standalone()).unwrap();
    let mut batch = LossBatch {
        sample_offsets: vec![0, 2].into(),
        logp: vec![-1.0; 2].into(),
        old_logp: vec![-1.0; 2].into(),
        rollout_logp: vec![-1.0; 2].into(),
        loss_mask: vec![1.0; 2].into(),
        rewards: vec![1.0].into(),
        group_ids: vec![0].into(),
        step_samples: 7,
        ..Default::default()
    };
    let e = loss.compute(&batch).unwrap_err().to_string();
    assert_eq!(
        e,
        "plugin `panicky` (loss) failed: step_samples 7 is unlucky"
    );
    batch.step_samples = 1;
    let e = loss.compute(&batch).unwrap_err().to_string();
    assert!(
        e.contains("loss.compute panicked at") && e.contains("on purpose (2 tokens)"),
        "{e}"
    );
    let empty = LossBatch {
        sample_offsets: vec![0].into(),
        step_samples: 1,
        ..Default::default()
    };
    assert!(loss.compute(&empty).is_ok(), "still usable after a panic");
}

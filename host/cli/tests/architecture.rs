//! The invariants of ARCHITECTURE.md that are about structure, checked on the manifests (the
//! dependency graph `cargo metadata` reports) and on whole source files, in the manner of
//! rust-analyzer's tidy tests: which crate may depend on which, and what the code map says.

mod common;

use common::workspace;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors of the house, lowest first: a crate under `host/` depends only on crates of
/// lower floors (and on the ABI crate, which is below them all). ARCHITECTURE.md lists the same.
const FLOORS: [&[&str]; 7] = [
    &[
        "openclaw-engine",
        "openclaw-chat",
        "openclaw-sim",
        "openclaw-metrics",
    ],
    &[
        "openclaw-model-store",
        "openclaw-buffer",
        "openclaw-config",
        "openclaw-grammar",
    ],
    &[
        "openclaw-trainer",
        "openclaw-plugins",
        "openclaw-policy",
        "openclaw-collect",
    ],
    &[
        "openclaw-server",
        "openclaw-judge",
        "openclaw-episodes",
        "openclaw-marketplace",
    ],
    &["openclaw-pipeline", "openclaw-eval"],
    &["openclaw-lab"],
    &["openclaw-host"],
];

/// What answers requests, records them and loads models: none of it may reach the trainer.
const SERVING: [&str; 13] = [
    "openclaw-server",
    "openclaw-grammar",
    "openclaw-policy",
    "openclaw-collect",
    "openclaw-buffer",
    "openclaw-judge",
    "openclaw-episodes",
    "openclaw-plugins",
    "openclaw-config",
    "openclaw-metrics",
    "openclaw-model-store",
    "openclaw-engine",
    "openclaw-chat",
];

/// The engine and what it reads: models, tokens and weights, nothing of reinforcement learning.
const ENGINE: [&str; 3] = ["openclaw-engine", "openclaw-chat", "openclaw-model-store"];

/// The workspace crates a plugin may link: the ABI, the judge helpers and the environments'
/// kit built on it alone, and the environments' sandbox.
const PLUGIN_DEPENDENCIES: [&str; 5] = [
    "openclaw-plugin-api",
    "openclaw-judging",
    "openclaw-env-kit",
    "openclaw-sandbox",
    "openclaw-env-images",
];

/// One workspace package as `cargo metadata` describes it.
struct Package {
    /// Its folder, relative to the workspace root.
    dir: PathBuf,
    /// Workspace packages it depends on (normal dependencies, any target).
    deps: BTreeSet<String>,
    /// Every package it depends on by name, normal or not, workspace or registry.
    all_normal: BTreeSet<String>,
}

/// The workspace's packages by name, from `cargo metadata --no-deps` (the manifests as cargo
/// reads them, workspace inheritance and renames resolved).
fn packages() -> BTreeMap<String, Package> {
    let root = workspace();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let mut by_name = BTreeMap::new();
    for p in meta["packages"].as_array().unwrap() {
        let manifest = Path::new(p["manifest_path"].as_str().unwrap());
        let dir = manifest
            .parent()
            .unwrap()
            .strip_prefix(root.canonicalize().unwrap())
            .or_else(|_| manifest.parent().unwrap().strip_prefix(&root))
            .unwrap()
            .to_path_buf();
        let normal: BTreeSet<String> = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        by_name.insert(
            p["name"].as_str().unwrap().to_string(),
            Package {
                dir,
                deps: normal
                    .iter()
                    .filter(|d| names.contains(*d))
                    .cloned()
                    .collect(),
                all_normal: normal,
            },
        );
    }
    by_name
}

/// Every workspace package `name` reaches through normal dependencies, itself excluded.
fn reach(packages: &BTreeMap<String, Package>, name: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![name.to_string()];
    while let Some(n) = stack.pop() {
        for d in &packages[&n].deps {
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    seen
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The files of a crate folder (sources, tests, examples, benches) whose whole text, test
/// modules and all, contains `needle`.
fn files_naming(dir: &Path, needle: &str) -> Vec<String> {
    rust_files(dir)
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains(needle))
        .map(|p| p.display().to_string())
        .collect()
}

fn floor_of(name: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&name))
}

/// The layering rule: every host crate has a floor and depends only on lower floors.
fn floor_violations(packages: &BTreeMap<String, Package>) -> Vec<String> {
    let mut bad = Vec::new();
    let root = workspace();
    for (name, p) in packages {
        // Plugins (the scaffold's templates among them) stand beside the house, on the ABI.
        if !p.dir.starts_with("host") || root.join(&p.dir).join("plugin.toml").is_file() {
            continue;
        }
        let Some(floor) = floor_of(name) else {
            bad.push(format!("{name} ({}) has no floor", p.dir.display()));
            continue;
        };
        for d in &p.deps {
            match floor_of(d) {
                Some(f) if f < floor => {}
                Some(f) => bad.push(format!(
                    "{name} (floor {floor}) depends on {d} (floor {f}): arrows point down"
                )),
                None if d == "openclaw-plugin-api" => {}
                None => bad.push(format!("{name} depends on {d}, which is not a host crate")),
            }
        }
    }
    bad
}

/// Serving crates that reach the trainer, with the path of names that does it.
fn serving_reaching_the_trainer(packages: &BTreeMap<String, Package>) -> Vec<String> {
    SERVING
        .iter()
        .filter(|s| reach(packages, s).contains("openclaw-trainer"))
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn ls_host_reads_as_the_architecture() {
    let root = workspace();
    let packages = packages();
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut folders = Vec::new();
    for e in std::fs::read_dir(root.join("host")).unwrap() {
        let p = e.unwrap().path();
        assert!(
            p.is_dir(),
            "{}: host/ holds crate folders only",
            p.display()
        );
        let rel = p.strip_prefix(&root).unwrap().to_path_buf();
        assert!(
            packages.values().any(|k| k.dir == rel),
            "{} is not a workspace crate",
            rel.display()
        );
        assert!(
            map.contains(&format!("`{}`", rel.display())),
            "ARCHITECTURE.md's code map does not name `{}`",
            rel.display()
        );
        folders.push(rel);
    }
    // And the code map names no folder that is gone.
    for word in map.split('`').skip(1).step_by(2) {
        if let Some(rest) = word.strip_prefix("host/") {
            if !rest.is_empty() && !rest.contains('/') && !rest.contains(' ') {
                assert!(
                    folders.iter().any(|f| f.ends_with(rest)),
                    "ARCHITECTURE.md names `{word}`, which is not a folder"
                );
            }
        }
    }
    assert!(folders.len() >= 10, "{folders:?}");
}

#[test]
fn arrows_point_down() {
    let bad = floor_violations(&packages());
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn serving_never_reaches_the_trainer() {
    let packages = packages();
    let bad = serving_reaching_the_trainer(&packages);
    assert!(
        bad.is_empty(),
        "serving crates reach openclaw-trainer: {bad:?}"
    );
    // Not in their tests either: whole files, test modules included.
    let root = workspace();
    for s in SERVING {
        let naming = files_naming(&root.join(&packages[s].dir), "openclaw_trainer");
        assert!(naming.is_empty(), "{s} names the trainer: {naming:?}");
    }
}

#[test]
fn the_check_catches_a_serving_crate_that_gains_the_trainer() {
    // The rule run on a graph where the collection crate depends on the trainer: the server,
    // the pipeline's serving half, reaches it through collection and is named too.
    let mut packages = packages();
    packages
        .get_mut("openclaw-collect")
        .unwrap()
        .deps
        .insert("openclaw-trainer".into());
    assert_eq!(
        serving_reaching_the_trainer(&packages),
        ["openclaw-server", "openclaw-collect"]
    );
}

#[test]
fn the_engine_knows_nothing_of_rl() {
    let packages = packages();
    let root = workspace();
    for e in ENGINE {
        let reached = reach(&packages, e);
        for forbidden in ["openclaw-plugin-api", "openclaw-trainer", "openclaw-sim"] {
            assert!(!reached.contains(forbidden), "{e} reaches {forbidden}");
        }
        let naming = files_naming(&root.join(&packages[e].dir), "openclaw_plugin_api");
        assert!(naming.is_empty(), "{naming:?}");
    }
}

#[test]
fn the_lab_is_below_nothing_but_the_command_line() {
    let packages = packages();
    let root = workspace();
    for (name, p) in &packages {
        if name == "openclaw-host" || name == "openclaw-lab" {
            continue;
        }
        assert!(
            !reach(&packages, name).contains("openclaw-lab"),
            "{name} reaches openclaw-lab"
        );
        if p.dir.starts_with("host") {
            let naming = files_naming(&root.join(&p.dir), "openclaw_lab");
            assert!(naming.is_empty(), "{name} names the lab: {naming:?}");
        }
    }
    // The built-in world's tasks are for evaluation and the lab, not for serving or training.
    for s in SERVING.iter().chain(&["openclaw-pipeline"]) {
        assert!(
            !reach(&packages, s).contains("openclaw-sim"),
            "{s} reaches openclaw-sim"
        );
    }
}

#[test]
fn plugins_depend_only_on_the_abi_crate() {
    let packages = packages();
    // The judge helpers are plain Rust over the ABI types: nothing of the host reaches a plugin
    // through them.
    for helper in ["openclaw-judging", "openclaw-env-kit"] {
        let deps = &packages[helper].all_normal;
        assert_eq!(
            deps.iter().collect::<Vec<_>>(),
            ["openclaw-plugin-api"],
            "{helper}"
        );
    }
    // The environments' sandbox is std, libc, temporary directories and the seccomp compiler:
    // no host crate.
    let sandbox = &packages["openclaw-sandbox"].all_normal;
    assert!(
        sandbox
            .iter()
            .all(|d| d == "libc" || d == "tempfile" || d == "seccompiler"),
        "{sandbox:?}"
    );
    let root = workspace();
    let plugins: Vec<(&String, &Package)> = packages
        .iter()
        .filter(|(_, p)| root.join(&p.dir).join("plugin.toml").is_file())
        .collect();
    assert!(plugins.len() >= 4, "{:?}", plugins.len());
    for (name, p) in plugins {
        let others: Vec<&String> = p
            .deps
            .iter()
            .filter(|d| !PLUGIN_DEPENDENCIES.contains(&d.as_str()))
            .collect();
        assert!(
            others.is_empty(),
            "{name} depends on {others:?}: a plugin depends only on the ABI crate (and its judge helpers, the sandbox and its images)"
        );
        for heavy in ["burn", "tokio", "openclaw-engine"] {
            // The GUI environment's WebDriver client (fantoccini) is async: the plugin owns a
            // runtime of its own and blocks on it inside each call, so no future and no
            // runtime of the host's crosses the boundary (only plain data does, as below).
            if heavy == "tokio" && name == "openclaw-env-gui" {
                continue;
            }
            assert!(!p.all_normal.contains(heavy), "{name} uses {heavy}");
        }
    }
}

#[test]
fn only_plain_data_crosses_the_abi() {
    // The ABI crate carries no tensor library, runtime or host crate, so nothing of theirs can
    // appear in a plugin signature.
    for d in &packages()["openclaw-plugin-api"].all_normal {
        assert!(
            ["abi_stable", "serde", "serde_json", "toml", "rand"].contains(&d.as_str()),
            "plugin-api depends on {d}"
        );
    }
}

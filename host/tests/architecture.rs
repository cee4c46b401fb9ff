//! The invariants of ARCHITECTURE.md that are about structure, checked on the sources and
//! manifests themselves (in the manner of rust-analyzer's tidy tests): which crate may depend
//! on which, and which modules may name the trainer.

mod common;

use common::workspace;
use std::path::{Path, PathBuf};

/// The names in a manifest's `[dependencies]` (not dev or build dependencies).
fn dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let t: toml::Table = text.parse().unwrap();
    t.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default()
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

/// A source file without its `#[cfg(test)]` module (tests may use anything).
fn non_test_code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn files_naming(dirs: &[PathBuf], needle: &str) -> Vec<String> {
    dirs.iter()
        .flat_map(|d| rust_files(d))
        .filter(|p| non_test_code(p).contains(needle))
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn the_engine_knows_nothing_of_rl() {
    let root = workspace();
    for krate in ["host/engine", "host/chat", "host/models"] {
        let deps = dependencies(&root.join(krate).join("Cargo.toml"));
        for forbidden in [
            "openclaw-plugin-api",
            "openclaw-train",
            "openclaw-host",
            "openclaw-sim",
        ] {
            assert!(
                !deps.iter().any(|d| d == forbidden),
                "{krate} depends on {forbidden}"
            );
        }
    }
    let rl = files_naming(&[root.join("host/engine/src")], "openclaw_plugin_api");
    assert!(rl.is_empty(), "{rl:?}");
}

#[test]
fn serving_never_imports_the_trainer() {
    let root = workspace();
    // What answers requests and loads models: the server, the served policy, collection, the
    // judges, evaluation, the buffer, and the crates under them.
    let serving: Vec<PathBuf> = [
        "host/src/serve",
        "host/src/policy",
        "host/src/collect",
        "host/src/judge",
        "host/src/eval",
        "host/src/buffer",
        "host/models/src",
        "host/engine/src",
        "host/chat/src",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    let naming = files_naming(&serving, "openclaw_train");
    assert!(
        naming.is_empty(),
        "serving code names the trainer crate: {naming:?}"
    );
    let deps = dependencies(&root.join("host/models/Cargo.toml"));
    assert!(!deps.iter().any(|d| d == "openclaw-train"));
}

/// The workspace crates a plugin may link: the ABI, and the judge helpers built on it alone.
const PLUGIN_DEPENDENCIES: [&str; 3] = [
    "openclaw-plugin-api",
    "openclaw-judging",
    "openclaw-sandbox",
];

#[test]
fn plugins_depend_only_on_the_abi_crate() {
    let root = workspace();
    // The judge helpers are plain Rust over the ABI types: nothing of the host reaches a plugin
    // through them.
    let judging = dependencies(&root.join("methods/judging/Cargo.toml"));
    assert_eq!(judging, vec!["openclaw-plugin-api".to_string()]);
    // The environments' sandbox is std, libc, temporary directories and the seccomp compiler:
    // no host crate.
    let sandbox = dependencies(&root.join("envs/sandbox/Cargo.toml"));
    assert!(
        sandbox
            .iter()
            .all(|d| d == "libc" || d == "tempfile" || d == "seccompiler"),
        "{sandbox:?}"
    );
    let mut crates = Vec::new();
    for folder in ["methods", "examples", "envs"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.join("plugin.toml").is_file() {
                crates.push(p);
            }
        }
    }
    assert!(crates.len() >= 4, "{crates:?}");
    for c in crates {
        let deps = dependencies(&c.join("Cargo.toml"));
        let others: Vec<&String> = deps
            .iter()
            .filter(|d| d.starts_with("openclaw-") && !PLUGIN_DEPENDENCIES.contains(&d.as_str()))
            .collect();
        assert!(
            others.is_empty(),
            "{} depends on {others:?}: a plugin depends only on the ABI crate (and its judge helpers and the sandbox)",
            c.display()
        );
        for heavy in ["burn", "tokio", "openclaw-engine"] {
            assert!(
                !deps.iter().any(|d| d == heavy),
                "{} uses {heavy}",
                c.display()
            );
        }
    }
}

#[test]
fn only_plain_data_crosses_the_abi() {
    // The ABI crate carries no tensor library, runtime or host crate, so nothing of theirs can
    // appear in a plugin signature.
    let deps = dependencies(&workspace().join("plugin-api/Cargo.toml"));
    for d in &deps {
        assert!(
            ["abi_stable", "serde", "serde_json", "toml", "rand"].contains(&d.as_str()),
            "plugin-api depends on {d}"
        );
    }
}

//! Passes the target triple to the crate (installed plugin libraries record what they were
//! built for), and carries the plugin API's sources into the binary: a plugin crate that
//! depends on `openclaw-plugin-api` by version builds against them wherever the host runs,
//! with no checkout of this repository (the crate is not on crates.io).

use std::fmt::Write;
use std::path::Path;

fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=OPENCLAW_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let root = Path::new(&manifest_dir).join("../..");
    let api = root.join("plugin-api");
    println!("cargo:rerun-if-changed={}", api.display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    let out = std::env::var("OUT_DIR").unwrap();
    let manifest = standalone_manifest(&api.join("Cargo.toml"), &root.join("Cargo.toml"));
    let manifest_path = Path::new(&out).join("plugin-api-Cargo.toml");
    std::fs::write(&manifest_path, manifest).unwrap();

    let mut sources: Vec<_> = std::fs::read_dir(api.join("src"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    sources.sort();
    let mut code = String::from(
        "/// The plugin API crate's files: (path in the crate, contents).\npub const FILES: &[(&str, &str)] = &[\n",
    );
    writeln!(
        code,
        "    (\"Cargo.toml\", include_str!({:?})),",
        manifest_path.display().to_string()
    )
    .unwrap();
    for p in sources {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let abs = p.canonicalize().unwrap();
        writeln!(
            code,
            "    (\"src/{name}\", include_str!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    code.push_str("];\n");
    std::fs::write(Path::new(&out).join("api_files.rs"), code).unwrap();
}

/// plugin-api's Cargo.toml with what it takes from the workspace written in, so that it
/// builds on its own.
fn standalone_manifest(api: &Path, workspace: &Path) -> String {
    let text = std::fs::read_to_string(api).unwrap();
    let ws: toml::Table = toml::from_str(&std::fs::read_to_string(workspace).unwrap()).unwrap();
    let package = ws["workspace"]["package"].as_table().unwrap();
    let deps = ws["workspace"]["dependencies"].as_table().unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(key) = trimmed.strip_suffix(".workspace = true") {
            let value = package
                .get(key)
                .or_else(|| deps.get(key))
                .unwrap_or_else(|| panic!("workspace has no `{key}`"));
            writeln!(out, "{key} = {value}").unwrap();
        } else if let Some((key, rest)) = trimmed.split_once(" = { workspace = true") {
            // `rand = { workspace = true, optional = true }`
            let mut table = match &deps[key] {
                toml::Value::Table(t) => t.clone(),
                v => {
                    let mut t = toml::Table::new();
                    t.insert("version".into(), v.clone());
                    t
                }
            };
            if rest.contains("optional = true") {
                table.insert("optional".into(), true.into());
            }
            writeln!(out, "{key} = {}", toml::Value::Table(table)).unwrap();
        } else {
            writeln!(out, "{line}").unwrap();
        }
    }
    out.push_str("\n# Built on its own, outside any workspace.\n[workspace]\n");
    out
}

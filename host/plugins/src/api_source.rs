//! The plugin API's sources, carried in the binary (see `build.rs`). A plugin crate that
//! depends on `openclaw-plugin-api` by version (`"1.4"`), as a crate shared with others does,
//! is built with cargo's `[patch.crates-io]` pointing at a copy of them written into the
//! installed-plugins directory: the crate is not on crates.io, and the user may have no
//! checkout of this repository.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/api_files.rs"));

/// Writes the API's sources under `root` (once per API version and contents) and returns the
/// crate folder.
pub fn materialise(root: &Path) -> Result<PathBuf> {
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    for (name, text) in FILES {
        sha2::Digest::update(&mut hasher, name.as_bytes());
        sha2::Digest::update(&mut hasher, text.as_bytes());
    }
    let sum = format!("{:x}", sha2::Digest::finalize(hasher));
    let dir = root.join(".api").join(format!(
        "openclaw-plugin-api-{}-{}",
        openclaw_plugin_api::API_VERSION,
        &sum[..12]
    ));
    if dir.join("Cargo.toml").is_file() {
        return Ok(dir);
    }
    let staging = root
        .join(".api")
        .join(format!(".writing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("src"))
        .with_context(|| format!("cannot create {}", staging.display()))?;
    for (name, text) in FILES {
        std::fs::write(staging.join(name), text)
            .with_context(|| format!("cannot write {}", staging.join(name).display()))?;
    }
    match std::fs::rename(&staging, &dir) {
        Ok(()) => Ok(dir),
        // Another process wrote the same copy first.
        Err(_) if dir.join("Cargo.toml").is_file() => {
            let _ = std::fs::remove_dir_all(&staging);
            Ok(dir)
        }
        Err(e) => {
            Err(e).with_context(|| format!("cannot move the API sources to {}", dir.display()))
        }
    }
}

/// Whether the crate whose manifest is `doc` takes `openclaw-plugin-api` by version (from a
/// registry) rather than by path, from git or from its workspace, in any of its dependency
/// tables, under its own name or renamed. A version this host's API does not meet is an error:
/// cargo would otherwise look for it on crates.io, where the name is not this project's.
pub fn wants_patch(doc: &toml::Table) -> Result<bool> {
    let mut tables: Vec<&toml::Table> = Vec::new();
    for key in ["dependencies", "build-dependencies"] {
        tables.extend(doc.get(key).and_then(|t| t.as_table()));
    }
    if let Some(targets) = doc.get("target").and_then(|t| t.as_table()) {
        for t in targets.values().filter_map(|t| t.as_table()) {
            for key in ["dependencies", "build-dependencies"] {
                tables.extend(t.get(key).and_then(|t| t.as_table()));
            }
        }
    }
    let mut wants = false;
    for table in tables {
        for (name, dep) in table {
            let package = dep.get("package").and_then(|p| p.as_str()).unwrap_or(name);
            if package != "openclaw-plugin-api" {
                continue;
            }
            let version = match dep {
                toml::Value::String(v) => v.as_str(),
                toml::Value::Table(t)
                    if !t.contains_key("path")
                        && !t.contains_key("workspace")
                        && !t.contains_key("git") =>
                {
                    t.get("version").and_then(|v| v.as_str()).unwrap_or("*")
                }
                _ => continue,
            };
            let req = semver::VersionReq::parse(version)
                .with_context(|| format!("openclaw-plugin-api = \"{version}\""))?;
            let api = semver::Version::parse(openclaw_plugin_api::API_VERSION)?;
            if !req.matches(&api) {
                anyhow::bail!(
                    "the crate asks for openclaw-plugin-api {version}, and this host carries plugin API {api}"
                );
            }
            wants = true;
        }
    }
    Ok(wants)
}

/// The `--config` argument that points `openclaw-plugin-api` from crates.io at `dir`.
pub fn patch_arg(dir: &Path) -> String {
    format!(
        "patch.crates-io.openclaw-plugin-api.path={:?}",
        dir.display().to_string()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_carried_sources_are_the_api_and_are_written_once() {
        assert!(FILES.iter().any(|(n, _)| *n == "src/lib.rs"));
        let manifest = FILES.iter().find(|(n, _)| *n == "Cargo.toml").unwrap().1;
        let doc: toml::Table = toml::from_str(manifest).unwrap();
        assert_eq!(
            doc["package"]["version"].as_str(),
            Some(openclaw_plugin_api::API_VERSION)
        );
        assert!(!manifest.contains(".workspace = true"), "{manifest}");
        let d = tempfile::tempdir().unwrap();
        let a = materialise(d.path()).unwrap();
        let b = materialise(d.path()).unwrap();
        assert_eq!(a, b);
        assert!(a.join("src/export.rs").is_file());
        let api = semver::Version::parse(openclaw_plugin_api::API_VERSION).unwrap();
        let by_version: toml::Table = toml::from_str(&format!(
            "[dependencies]\nopenclaw-plugin-api = \"{}.{}\"\n",
            api.major, api.minor
        ))
        .unwrap();
        assert!(wants_patch(&by_version).unwrap());
        let renamed: toml::Table = toml::from_str(&format!(
            "[target.'cfg(unix)'.dependencies]\napi = {{ package = \"openclaw-plugin-api\", version = \"{}\" }}\n",
            api.major
        ))
        .unwrap();
        assert!(wants_patch(&renamed).unwrap());
        let newer: toml::Table = toml::from_str(&format!(
            "[dependencies]\nopenclaw-plugin-api = \"{}.{}\"\n",
            api.major,
            api.minor + 1
        ))
        .unwrap();
        let e = wants_patch(&newer).unwrap_err();
        assert!(
            format!("{e}").contains("this host carries plugin API"),
            "{e}"
        );
        let by_path: toml::Table =
            toml::from_str("[dependencies]\nopenclaw-plugin-api = { path = \"../api\" }\n")
                .unwrap();
        assert!(!wants_patch(&by_path).unwrap());
        let ws: toml::Table =
            toml::from_str("[dependencies]\nopenclaw-plugin-api.workspace = true\n").unwrap();
        assert!(!wants_patch(&ws).unwrap());
    }
}

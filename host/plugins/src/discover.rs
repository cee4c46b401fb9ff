//! Finding plugin crates on disk: by directory, or by name in the plugin search path.

use super::manifest_file::PluginToml;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// The folders under the project root that hold plugin crates.
pub const PLUGIN_FOLDERS: [&str; 3] = ["methods", "examples", "envs"];

/// The folders searched for plugins by name: `OPENCLAW_PLUGIN_PATH` (separated like `PATH`),
/// then `methods/`, `examples/` and `envs/` of the project root (the current directory or the
/// nearest ancestor that has a `methods/` folder) and of the install root (the nearest
/// ancestor of the running binary with one), so a built binary finds its plugins from any
/// directory.
pub fn search_path() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(extra) = std::env::var_os("OPENCLAW_PLUGIN_PATH") {
        out.extend(std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()));
    }
    for folder in roots()
        .into_iter()
        .flat_map(|root| PLUGIN_FOLDERS.map(|f| root.join(f)))
    {
        if !out.contains(&folder) {
            out.push(folder);
        }
    }
    out
}

/// The project root, then the install root when it is another folder.
pub fn roots() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = project_root().into_iter().collect();
    if let Some(install) = install_root() {
        let same = out
            .iter()
            .any(|r| r.canonicalize().ok() == install.canonicalize().ok());
        if !same {
            out.push(install);
        }
    }
    out
}

/// The current directory, or its nearest ancestor with a `methods/` folder.
pub fn project_root() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .find(|d| d.join("methods").is_dir())
        .map(Path::to_path_buf)
        .or(Some(cwd))
}

/// The nearest ancestor of the running binary with a `methods/` folder (a binary built in a
/// checkout, `target/release/openclaw-host`, or installed beside one).
pub fn install_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?.canonicalize().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("methods").is_dir())
        .map(Path::to_path_buf)
}

/// The plugin crates in `dir`: `dir` itself when it has a `plugin.toml`, else each
/// subdirectory that has one, sorted by path.
pub fn crates_in(dir: &Path) -> Vec<PathBuf> {
    if dir.join("plugin.toml").is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("plugin.toml").is_file())
        .collect();
    out.sort();
    out
}

/// Of plugins found by one name, those outside the install root when there are any: the
/// project a user works in wins over the checkout the binary came from (two checkouts of this
/// repository have a plugin of every name each).
fn prefer_project(found: Vec<PathBuf>, install: Option<&Path>) -> Vec<PathBuf> {
    let Some(install) = install else {
        return found;
    };
    let outside: Vec<PathBuf> = found
        .iter()
        .filter(|d| !d.starts_with(install))
        .cloned()
        .collect();
    if outside.is_empty() || outside.len() == found.len() {
        found
    } else {
        outside
    }
}

/// Resolves `NAME|DIR|LIBRARY` to a path: an existing path is taken as it is; otherwise the
/// plugin crates of the search path are searched for a `plugin.toml` with that name.
pub fn resolve(spec: &str) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.exists() || spec.contains('/') || super::load::is_library_file(path) {
        return Ok(path.to_path_buf());
    }
    let roots = search_path();
    let mut found: Vec<PathBuf> = Vec::new();
    for root in &roots {
        for dir in crates_in(root) {
            if let Ok(t) = PluginToml::read(&dir) {
                if t.name == spec {
                    found.push(dir);
                }
            }
        }
    }
    let mut found = prefer_project(found, install_root().as_deref());
    match found.len() {
        1 => Ok(found.pop().unwrap()),
        0 => {
            let mut names: Vec<String> = roots
                .iter()
                .flat_map(|r| crates_in(r))
                .filter_map(|d| PluginToml::read(&d).ok().map(|t| t.name))
                .collect();
            names.sort();
            names.dedup();
            bail!(
                "no plugin named `{spec}` (searched {}; found {}; give a crate directory or a library path instead)",
                roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )
        }
        _ => bail!(
            "two plugins are named `{spec}`: {} (give a directory instead)",
            found
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_wins_over_the_binary_checkout_and_a_tie_stays_one() {
        let p = |s: &str| PathBuf::from(s);
        let install = p("/opt/oc");
        let both = vec![
            p("/home/u/proj/methods/binary-rl"),
            p("/opt/oc/methods/binary-rl"),
        ];
        assert_eq!(
            prefer_project(both, Some(&install)),
            vec![p("/home/u/proj/methods/binary-rl")]
        );
        // Two in the project itself stay ambiguous.
        let two = vec![
            p("/w/methods/x"),
            p("/w/examples/x"),
            p("/opt/oc/methods/x"),
        ];
        assert_eq!(prefer_project(two, Some(&install)).len(), 2);
        // Only the binary's: kept.
        let only = vec![p("/opt/oc/methods/x")];
        assert_eq!(prefer_project(only.clone(), Some(&install)), only);
    }
}

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

/// Resolves `NAME|NAME@VERSION|DIR|LIBRARY` to a path. An existing path is taken as it is; a
/// relative one that does not exist here (`methods/combine`) is looked for under the project
/// root and the install root. A name is looked for in three places, the first that has it
/// winning: the plugin crates of the project (`OPENCLAW_PLUGIN_PATH`, then the project's
/// `methods/`, `examples/`, `envs/`), the installed plugins (the newest version), then the
/// crates beside the running binary. `NAME@VERSION` names an installed version (or a semver
/// requirement such as `^0.2`).
pub fn resolve(spec: &str) -> Result<PathBuf> {
    let root = super::installed::plugin_dir();
    if let Some((name, version)) = super::installed::split_pinned(spec) {
        return Ok(super::installed::find(&root, name, Some(version))?
            .expect("find errs when none matches")
            .dir);
    }
    let path = Path::new(spec);
    if path.exists() || super::load::is_library_file(path) {
        return Ok(path.to_path_buf());
    }
    if spec.contains('/') {
        return Ok(elsewhere(spec, &root));
    }
    if let Some(dir) = find_crate(spec)? {
        return Ok(dir);
    }
    if let Some(i) = super::installed::find(&root, spec, None)? {
        return Ok(i.dir);
    }
    if let Some(dir) = find_in(spec, &install_root_folders())? {
        return Ok(dir);
    }
    let roots = search_path();
    let mut names: Vec<String> = roots
        .iter()
        .flat_map(|r| crates_in(r))
        .filter_map(|d| PluginToml::read(&d).ok().map(|t| t.name))
        .chain(
            super::installed::list(&root)
                .into_iter()
                .map(|i| i.record.name),
        )
        .collect();
    names.sort();
    names.dedup();
    bail!(
        "no plugin named `{spec}` (searched {} and the installed plugins in {}; found {}; install one with `openclaw-host plugins install`, or give a crate directory or a library path)",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        root.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

/// A relative path that does not exist here, such as the README's `methods/combine` typed
/// outside a checkout: the same path under the project root or the install root, else the
/// installed plugin named by its last component, else the path as given (whose loading then
/// says it does not exist).
fn elsewhere(spec: &str, installed_root: &Path) -> PathBuf {
    let path = Path::new(spec);
    if path.is_relative() {
        if let Some(found) = roots()
            .into_iter()
            .map(|r| r.join(path))
            .find(|p| p.join("plugin.toml").is_file())
        {
            return found;
        }
        let in_plugin_folder = path.components().count() == 2
            && path
                .components()
                .next()
                .is_some_and(|c| PLUGIN_FOLDERS.iter().any(|f| c.as_os_str() == *f));
        if in_plugin_folder {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Ok(Some(i)) = super::installed::find(installed_root, name, None) {
                return i.dir;
            }
        }
    }
    path.to_path_buf()
}

/// `methods/`, `examples/` and `envs/` of the install root.
fn install_root_folders() -> Vec<PathBuf> {
    install_root()
        .map(|r| PLUGIN_FOLDERS.map(|f| r.join(f)).to_vec())
        .unwrap_or_default()
}

/// The plugin crate named `name` in the project: `OPENCLAW_PLUGIN_PATH` and the project root's
/// plugin folders (the install root's are left out when it is another folder). Two crates of
/// that name are an error naming both.
pub fn find_crate(name: &str) -> Result<Option<PathBuf>> {
    let install = install_root_folders();
    let folders: Vec<PathBuf> = search_path()
        .into_iter()
        .filter(|f| !install.contains(f) || is_project_folder(f))
        .collect();
    find_in(name, &folders)
}

/// Whether `folder` is one of the project root's plugin folders (the project may be the
/// install root itself, in a checkout).
fn is_project_folder(folder: &Path) -> bool {
    project_root().is_some_and(|r| PLUGIN_FOLDERS.iter().any(|f| r.join(f) == folder))
}

/// The crate named `name` among the plugin crates of `folders`.
fn find_in(name: &str, folders: &[PathBuf]) -> Result<Option<PathBuf>> {
    let mut found: Vec<PathBuf> = Vec::new();
    for folder in folders {
        for dir in crates_in(folder) {
            if let Ok(t) = PluginToml::read(&dir) {
                if t.name == name && !found.contains(&dir) {
                    found.push(dir);
                }
            }
        }
    }
    let mut found = prefer_project(found, install_root().as_deref());
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => bail!(
            "two plugins are named `{name}`: {} (give a directory instead)",
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

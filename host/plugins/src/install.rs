//! Installing a plugin into the installed-plugins directory from a crate directory, a git
//! repository or a built library, and updating it from where it came from.

use super::build::CrateLibrary;
use super::discover;
use super::installed::{self, Installed, Provenance, Source};
use super::load::{is_library_file, LoadedPlugin};
use super::manifest_file::PluginToml;
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What `plugins install` was given.
#[derive(Clone, Debug, PartialEq)]
pub enum InstallFrom {
    /// A plugin crate directory, built here.
    Crate(PathBuf),
    /// A git repository holding a plugin crate, cloned and built here.
    Git {
        /// Its URL (`https://`, `http://`, `ssh://`, `git://`, `file://`, `git@host:path`, or
        /// any of these after `git+`).
        url: String,
        /// The branch, tag or commit (empty: the default branch).
        reference: String,
        /// The crate's folder in the repository (empty: found by its `plugin.toml`).
        subdir: String,
    },
    /// A built library, installed as it is.
    Library(PathBuf),
}

/// How to install.
#[derive(Clone, Debug, Default)]
pub struct InstallOptions {
    /// Replace a version that is already installed.
    pub force: bool,
    /// For a git source: the branch, tag or commit.
    pub reference: String,
    /// For a git source: the crate's folder in the repository.
    pub subdir: String,
    /// The SHA-256 the crate's source tree must have ([`installed::tree_sha256`]), checked
    /// before anything is built (a build script runs code): an index's checksum.
    pub expect_source_sha256: String,
    /// The index that listed it, recorded with the installed version.
    pub index: String,
    /// The trusted key that verified the index record, recorded with the installed version.
    pub signed_by: String,
    /// The name and version an index record says it is: a crate or library that says
    /// otherwise is refused before it is built or written.
    pub expect: Option<(String, String)>,
}

/// Reads what `plugins install` was given: a `.so` file, a git URL, a crate directory, or the
/// name of a plugin crate on the plugin search path (`methods/`, `examples/`, `envs/`).
pub fn parse_source(spec: &str, opts: &InstallOptions) -> Result<InstallFrom> {
    let path = Path::new(spec);
    if is_library_file(path) {
        if !path.is_file() {
            bail!("plugin library {spec} does not exist");
        }
        return Ok(InstallFrom::Library(absolute(path)?));
    }
    if let Some(url) = git_url(spec) {
        return Ok(InstallFrom::Git {
            url,
            reference: opts.reference.clone(),
            subdir: opts.subdir.clone(),
        });
    }
    if !opts.reference.is_empty() || !opts.subdir.is_empty() {
        bail!("--rev and --subdir choose what to build from a git repository; `{spec}` is not a git URL");
    }
    if path.is_dir() {
        return Ok(InstallFrom::Crate(absolute(path)?));
    }
    if spec.contains('/') {
        bail!("{spec} does not exist (expected a plugin crate directory, a git URL, a .{} library or a plugin name)", std::env::consts::DLL_EXTENSION);
    }
    let (name, _) = installed::name_and_version(spec);
    match discover::find_crate(name)? {
        Some(dir) => Ok(InstallFrom::Crate(absolute(&dir)?)),
        None => bail!(
            "no plugin crate named `{name}` on the plugin search path ({}); give a crate directory, a git URL or a .{} library",
            discover::search_path()
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            std::env::consts::DLL_EXTENSION
        ),
    }
}

/// The git URL `spec` names, if it names one.
fn git_url(spec: &str) -> Option<String> {
    let spec = spec.strip_prefix("git+").unwrap_or(spec);
    let schemes = ["https://", "http://", "ssh://", "git://", "file://"];
    if schemes.iter().any(|s| spec.starts_with(s)) {
        return Some(spec.to_string());
    }
    // scp-like `git@host:owner/repo.git`.
    if spec.starts_with("git@") && spec.contains(':') {
        return Some(spec.to_string());
    }
    // A local bare repository.
    let path = Path::new(spec);
    if spec.ends_with(".git") && path.join("HEAD").is_file() {
        return absolute(path).ok().map(|p| p.display().to_string());
    }
    None
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make {} absolute", path.display()))
}

/// Installs a plugin into `root`.
pub fn install(root: &Path, from: &InstallFrom, opts: &InstallOptions) -> Result<Installed> {
    match from {
        InstallFrom::Library(lib) => {
            let api = installed::built_against(lib)?;
            tracing::debug!("{} was built against plugin API {api}", lib.display());
            installed::install_library(
                root,
                lib,
                Provenance {
                    source: Source::Library {
                        path: lib.display().to_string(),
                    },
                    source_sha256: String::new(),
                    toolchain: String::new(),
                    plugin_toml: None,
                    index: opts.index.clone(),
                    signed_by: opts.signed_by.clone(),
                    expect: opts.expect.clone(),
                },
                opts.force,
            )
        }
        InstallFrom::Crate(dir) => {
            let source = Source::Crate {
                path: dir.display().to_string(),
            };
            install_crate(root, dir, source, opts)
        }
        InstallFrom::Git {
            url,
            reference,
            subdir,
        } => {
            let (_checkout, dir, source) = checkout_crate(url, reference, subdir, root)?;
            install_crate(root, &dir, source, opts)
        }
    }
}

/// Builds the crate in `dir` with the host's profile and installs its library, recording
/// `source` as where it came from.
pub fn install_crate(
    root: &Path,
    dir: &Path,
    source: Source,
    opts: &InstallOptions,
) -> Result<Installed> {
    let force = opts.force;
    let toolchain = toolchain()?;
    let toml = PluginToml::read(dir)?;
    if let Some((n, v)) = &opts.expect {
        if (n, v) != (&toml.name, &toml.version) {
            bail!(
                "the index lists {n}@{v}, and its source holds {}@{}; nothing was built or installed",
                toml.name,
                toml.version
            );
        }
    }
    installed::check_component("name", &toml.name)?;
    installed::check_component("version", &toml.version)?;
    let dest = root.join(&toml.name).join(&toml.version);
    if dest.exists() && !force {
        bail!(
            "{}@{} is already installed in {} (`plugins remove {}@{}` first, or install with --force)",
            toml.name,
            toml.version,
            dest.display(),
            toml.name,
            toml.version
        );
    }
    let source_sha256 = installed::tree_sha256(dir)?;
    if !opts.expect_source_sha256.is_empty() && source_sha256 != opts.expect_source_sha256 {
        bail!(
            "{}@{}: its sources have SHA-256 {} where the index says {}; nothing was built or installed",
            toml.name,
            toml.version,
            installed::short(&source_sha256),
            installed::short(&opts.expect_source_sha256)
        );
    }
    let krate = CrateLibrary::locate(dir)?;
    // Always built, not taken as it lies: the library installed is the one these sources make.
    let library = krate.build()?;
    // The library just built, checked against its plugin.toml (name, version, kinds).
    LoadedPlugin::load_library(&library, Some(dir.to_path_buf()))?.check_against(&toml)?;
    installed::install_library(
        root,
        &library,
        Provenance {
            source,
            source_sha256,
            toolchain,
            plugin_toml: Some(dir.join("plugin.toml")),
            index: opts.index.clone(),
            signed_by: opts.signed_by.clone(),
            expect: opts.expect.clone(),
        },
        force,
    )
}

/// `rustc --version`, after checking that cargo and rustc are there and build for the host's
/// own target.
pub fn toolchain() -> Result<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(&rustc)
        .arg("-vV")
        .stderr(Stdio::null())
        .output()
        .map_err(|_| anyhow!("building a plugin needs the Rust toolchain (cargo and rustc on PATH, from https://rustup.rs); or install a built library (.{})", std::env::consts::DLL_EXTENSION))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let host = text
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap_or("")
        .trim();
    if host != installed::TARGET {
        bail!(
            "the Rust toolchain on PATH builds for {host}, and this host runs on {}; a plugin must be built for the host's target",
            installed::TARGET
        );
    }
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// A private folder for work in progress under the installed-plugins directory `root`:
/// not the shared temporary folder, where cargo, looking upward for a workspace, could read
/// another user's `Cargo.toml`.
pub fn scratch(root: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    let parent = root.join(".build");
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .with_context(|| format!("cannot make a folder in {}", parent.display()))
}

/// Whether `s` is a full commit id (40 hex digits).
pub fn is_commit_id(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A clone of a git repository at `reference` (the default branch when empty; a full commit
/// id is that commit and nothing else), in a private folder under `root`.
pub fn clone(url: &str, reference: &str, root: &Path) -> Result<tempfile::TempDir> {
    let tmp = scratch(root, "src-")?;
    let status = Command::new("git")
        .args(["clone", "--quiet", "--no-checkout", "--", url])
        .arg(tmp.path())
        // Never ask for a password on the terminal: a private repository fails instead.
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("installing from a git repository needs git on PATH")?;
    if !status.status.success() {
        bail!(
            "git cannot clone {url}: {}",
            first_line(&String::from_utf8_lossy(&status.stderr))
        );
    }
    let target = if reference.is_empty() {
        "HEAD".to_string()
    } else {
        reference.to_string()
    };
    if target.starts_with('-') {
        bail!("--rev `{reference}` is not a branch, tag or commit");
    }
    // A full commit id is that commit; else a branch by its remote name, a tag or a commit.
    let candidates = if is_commit_id(&target) {
        vec![target.clone()]
    } else {
        vec![format!("origin/{target}"), target.clone()]
    };
    let found = candidates.iter().find(|c| {
        Command::new("git")
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{c}^{{commit}}"))
            .current_dir(tmp.path())
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let Some(found) = found else {
        bail!("{url} has no branch, tag or commit `{target}`");
    };
    let out = Command::new("git")
        .args(["checkout", "--quiet", "--detach"])
        .arg(found)
        .current_dir(tmp.path())
        .stderr(Stdio::piped())
        .output()
        .context("running git checkout")?;
    if !out.status.success() {
        bail!(
            "git cannot check out `{target}` of {url}: {}",
            first_line(&String::from_utf8_lossy(&out.stderr))
        );
    }
    if is_commit_id(&target) && git_output(tmp.path(), &["rev-parse", "HEAD"])? != target {
        bail!("{url}: the checkout is not commit {target}");
    }
    Ok(tmp)
}

/// A clone of `url` at `reference`, the plugin crate in it ([`crate_in_repository`]), and the
/// source an installed version records: the commit checked out and the crate's folder.
fn checkout_crate(
    url: &str,
    reference: &str,
    subdir: &str,
    root: &Path,
) -> Result<(tempfile::TempDir, PathBuf, Source)> {
    let checkout = clone(url, reference, root)?;
    let dir = crate_in_repository(checkout.path(), subdir, url)?;
    let source = Source::Git {
        url: url.to_string(),
        reference: reference.to_string(),
        commit: git_output(checkout.path(), &["rev-parse", "HEAD"])?,
        subdir: dir
            .strip_prefix(checkout.path())
            .unwrap_or(Path::new(""))
            .display()
            .to_string(),
    };
    Ok((checkout, dir, source))
}

/// SHA-256 ([`installed::tree_sha256`]) of `subdir` of the repository `repo` at commit `rev`, as
/// a clone of that commit holds it.
pub fn committed_tree_sha256(repo: &Path, rev: &str, subdir: &str, root: &Path) -> Result<String> {
    let checkout = clone(&repo.display().to_string(), rev, root)?;
    let dir = checkout.path().join(subdir);
    if !dir.join("plugin.toml").is_file() {
        bail!("{rev} has no {subdir}/plugin.toml: commit the crate first");
    }
    installed::tree_sha256(&dir)
}

fn git_output(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            first_line(&String::from_utf8_lossy(&out.stderr))
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message")
        .trim()
        .to_string()
}

/// The plugin crate in a checked-out repository or an unpacked archive: `subdir` when given,
/// else the root when it has a `plugin.toml`, else the one plugin crate in `methods/`,
/// `examples/`, `envs/` or a top-level folder.
pub fn crate_in_repository(checkout: &Path, subdir: &str, url: &str) -> Result<PathBuf> {
    if !subdir.is_empty() {
        let rel = Path::new(subdir);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            bail!("--subdir `{subdir}` must be a folder inside the repository");
        }
        let dir = checkout.join(rel);
        if !dir.join("plugin.toml").is_file() {
            bail!("{url} has no plugin crate at {subdir} (no {subdir}/plugin.toml)");
        }
        return Ok(dir);
    }
    if checkout.join("plugin.toml").is_file() {
        return Ok(checkout.to_path_buf());
    }
    let mut found: Vec<PathBuf> = discover::PLUGIN_FOLDERS
        .iter()
        .flat_map(|f| discover::crates_in(&checkout.join(f)))
        .collect();
    if found.is_empty() {
        found = discover::crates_in(checkout);
    }
    match found.len() {
        1 => Ok(found.pop().unwrap()),
        0 => bail!("{url} holds no plugin crate (no plugin.toml at its root, in a top-level folder, or in methods/, examples/ or envs/)"),
        _ => bail!(
            "{url} holds {} plugin crates; choose one with --subdir ({})",
            found.len(),
            found
                .iter()
                .filter_map(|d| d.strip_prefix(checkout).ok())
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What `plugins update` did for one plugin.
#[derive(Debug)]
pub enum Updated {
    /// A new version was installed beside the old.
    New {
        /// The version installed before.
        from: String,
        /// The one installed now.
        to: Installed,
    },
    /// The source still holds the installed version.
    Current(Installed),
    /// Installed from a library file or an archive: nothing to update from but an index.
    Fixed(Installed),
}

/// Updates the newest installed version of `name` from the source it was installed from: a
/// crate directory is built again, a git repository fetched again at the same branch or tag.
/// A new version is installed beside the old one (which `name@version` still picks); the
/// same version is left alone, since a version once installed is not changed under a run
/// that pinned it.
pub fn update(root: &Path, name: &str) -> Result<Updated> {
    let Some(current) = installed::find(root, name, None)? else {
        bail!(
            "no plugin named `{name}` is installed in {}",
            root.display()
        );
    };
    let (dir, checkout, source) = match &current.record.source {
        Source::Library { .. } | Source::Archive { .. } => return Ok(Updated::Fixed(current)),
        Source::Crate { path } => (PathBuf::from(path), None, current.record.source.clone()),
        Source::Git {
            url,
            reference,
            subdir,
            ..
        } => {
            let (checkout, dir, source) = checkout_crate(url, reference, subdir, root)?;
            (dir, Some(checkout), source)
        }
    };
    let toml = PluginToml::read(&dir).with_context(|| format!("updating {}", current.id()))?;
    if toml.name != name {
        bail!(
            "updating {}: its source {} now holds plugin `{}`",
            current.id(),
            current.record.source.describe(),
            toml.name
        );
    }
    if installed::compare_versions(&toml.version, &current.record.version)
        != std::cmp::Ordering::Greater
    {
        return Ok(Updated::Current(current));
    }
    let to = install_crate(root, &dir, source, &InstallOptions::default())?;
    drop(checkout);
    Ok(Updated::New {
        from: current.record.version,
        to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_told_apart() {
        let opts = InstallOptions::default();
        for url in [
            "https://example.org/p.git",
            "git+https://example.org/p",
            "ssh://git@example.org/p.git",
            "git@example.org:owner/p.git",
            "file:///srv/p.git",
        ] {
            assert!(
                matches!(parse_source(url, &opts).unwrap(), InstallFrom::Git { .. }),
                "{url}"
            );
        }
        let e = parse_source("/nowhere/libx.so", &opts).unwrap_err();
        assert!(format!("{e}").contains("does not exist"), "{e}");
        let e = parse_source("./nowhere/x", &opts).unwrap_err();
        assert!(format!("{e}").contains("does not exist"), "{e}");
        let with_rev = InstallOptions {
            reference: "v1".into(),
            ..Default::default()
        };
        let d = tempfile::tempdir().unwrap();
        let e = parse_source(&d.path().display().to_string(), &with_rev).unwrap_err();
        assert!(format!("{e}").contains("not a git URL"), "{e}");
    }

    #[test]
    fn a_subdir_cannot_leave_the_repository() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["../x", "/etc", "a/../../b"] {
            let e = crate_in_repository(d.path(), bad, "u").unwrap_err();
            assert!(
                format!("{e}").contains("inside the repository"),
                "{bad}: {e}"
            );
        }
        let e = crate_in_repository(d.path(), "", "u").unwrap_err();
        assert!(format!("{e}").contains("holds no plugin crate"), "{e}");
    }
}

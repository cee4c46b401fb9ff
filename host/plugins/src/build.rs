//! Finding a plugin crate's built library, and building it with cargo when it is missing or
//! older than its sources.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// The cargo profile plugins are built with: the host's own, so a debug host loads debug
/// plugins and a release host release ones.
pub fn current_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Where a plugin crate's library is (or will be) built.
#[derive(Clone, Debug)]
pub struct CrateLibrary {
    /// The crate directory.
    pub dir: PathBuf,
    /// The cargo package name.
    pub package: String,
    /// The expected path of the built dynamic library for the current profile.
    pub artifact: PathBuf,
    /// Directories of the crate's path dependencies (the plugin API, say): a change there
    /// also makes the library stale.
    pub path_deps: Vec<PathBuf>,
    /// The crate takes the plugin API by version: it builds against the sources the host
    /// carries ([`super::api_source`]).
    pub api_patch: Option<PathBuf>,
}

/// Whether a built library is up to date with its sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// Not built for this profile.
    Missing,
    /// Built, but a source file is newer.
    Stale,
    /// Built and newer than every source file.
    Fresh,
}

impl CrateLibrary {
    /// Works out the package name and the artifact path of the crate in `dir`.
    pub fn locate(dir: &Path) -> Result<CrateLibrary> {
        let manifest = dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).with_context(|| {
            format!(
                "{} has a plugin.toml but no readable Cargo.toml (expected a cargo crate)",
                dir.display()
            )
        })?;
        let doc: toml::Table = toml::from_str(&text)
            .map_err(|e| anyhow!("invalid {}: {}", manifest.display(), e.message().trim()))?;
        let package = doc
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            .ok_or_else(|| anyhow!("{} has no [package] name", manifest.display()))?
            .to_string();
        let lib_name = doc
            .get("lib")
            .and_then(|l| l.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| package.replace('-', "_"));
        let crate_types: Vec<String> = doc
            .get("lib")
            .and_then(|l| l.get("crate-type"))
            .and_then(|c| c.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if !crate_types.iter().any(|t| t == "cdylib") {
            bail!(
                "{} does not build a dynamic library: add `[lib] crate-type = [\"cdylib\", \"rlib\"]`",
                manifest.display()
            );
        }
        let api_patch = if super::api_source::wants_patch(&doc)
            .with_context(|| format!("{}", manifest.display()))?
        {
            Some(super::api_source::materialise(
                &super::installed::plugin_dir(),
            )?)
        } else {
            None
        };
        let meta = cargo_metadata(&manifest)?;
        let target_dir = meta["target_directory"]
            .as_str()
            .map(PathBuf::from)
            .ok_or_else(|| anyhow!("cargo metadata did not name a target directory"))?;
        let path_deps = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["name"] == package.as_str())
            .flat_map(|p| p["dependencies"].as_array().cloned().unwrap_or_default())
            .filter_map(|d| d["path"].as_str().map(PathBuf::from))
            .collect();
        let artifact = target_dir.join(current_profile()).join(format!(
            "{}{}{}",
            std::env::consts::DLL_PREFIX,
            lib_name,
            std::env::consts::DLL_SUFFIX
        ));
        Ok(CrateLibrary {
            dir: dir.to_path_buf(),
            package,
            artifact,
            path_deps,
            api_patch,
        })
    }

    /// Compares the artifact's modification time with the crate's sources.
    pub fn freshness(&self) -> Freshness {
        let Ok(built) = std::fs::metadata(&self.artifact).and_then(|m| m.modified()) else {
            return Freshness::Missing;
        };
        let newest = std::iter::once(&self.dir)
            .chain(&self.path_deps)
            .filter_map(|d| newest_source(d))
            .max();
        match newest {
            Some(src) if src > built => Freshness::Stale,
            _ => Freshness::Fresh,
        }
    }

    /// Builds the library with cargo, showing cargo's progress on standard error, and returns
    /// the path of the built library. A failed build is an error carrying cargo's messages.
    pub fn build(&self) -> Result<PathBuf> {
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.arg("build")
            .arg("--lib")
            .arg("--manifest-path")
            .arg(self.dir.join("Cargo.toml"))
            .arg("--message-format=json-render-diagnostics");
        if let Some(api) = &self.api_patch {
            cmd.arg("--config").arg(super::api_source::patch_arg(api));
        }
        if current_profile() == "release" {
            cmd.arg("--release");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .context("cannot run cargo to build the plugin (is cargo on PATH?)")?;
        // Echo cargo's progress live while keeping its error lines for the error message.
        let stderr = child.stderr.take().expect("piped");
        let echo = std::thread::spawn(move || {
            let mut errors = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                eprintln!("{line}");
                if line.starts_with("error") && errors.len() < 8 {
                    errors.push(line);
                }
            }
            errors
        });
        let mut built = None;
        let stdout = child.stdout.take().expect("piped");
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let is_cdylib = msg["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|v| v == "cdylib"));
            if !is_cdylib {
                continue;
            }
            if let Some(files) = msg["filenames"].as_array() {
                for f in files.iter().filter_map(|f| f.as_str()) {
                    if f.ends_with(std::env::consts::DLL_SUFFIX) {
                        built = Some(PathBuf::from(f));
                    }
                }
            }
        }
        let status = child.wait().context("waiting for cargo")?;
        let errors = echo.join().unwrap_or_default();
        if !status.success() {
            let detail = if errors.is_empty() {
                String::new()
            } else {
                format!(": {}", errors.join("; "))
            };
            bail!(
                "building plugin crate {} failed (cargo {}){detail}",
                self.dir.display(),
                status
            );
        }
        let path = built.unwrap_or_else(|| self.artifact.clone());
        if !path.exists() {
            bail!(
                "cargo built {} but no library appeared at {}",
                self.dir.display(),
                path.display()
            );
        }
        Ok(path)
    }

    /// The library, built first when it is missing or stale.
    pub fn ensure_built(&self) -> Result<PathBuf> {
        match self.freshness() {
            Freshness::Fresh => Ok(self.artifact.clone()),
            Freshness::Missing | Freshness::Stale => self.build(),
        }
    }
}

/// `cargo metadata --no-deps` of the crate whose manifest is `manifest`, with the cargo that
/// runs this build when there is one.
pub(crate) fn metadata_command(manifest: &Path) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.args([
        "metadata",
        "--no-deps",
        "--format-version",
        "1",
        "--manifest-path",
    ])
    .arg(manifest);
    c
}

/// `cargo metadata --no-deps` for the crate: its target directory (its workspace's, or its
/// own) and its packages with their path dependencies.
fn cargo_metadata(manifest: &Path) -> Result<serde_json::Value> {
    let out = metadata_command(manifest)
        .stderr(Stdio::piped())
        .output()
        .context("cannot run `cargo metadata` (is cargo on PATH?)")?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr);
        let first = msg
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        bail!("cargo cannot read {}: {}", manifest.display(), first.trim());
    }
    serde_json::from_slice(&out.stdout).context("cargo metadata printed invalid JSON")
}

/// The newest modification time among the crate's own files (its target folder excluded).
fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if let Ok(m) = meta.modified() {
                newest = newest.max(Some(m));
            }
        }
    }
    newest
}

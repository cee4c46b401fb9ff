//! `plugins package DIR`: the index record of a plugin crate (its checksum, the plugin API
//! range it loads under, its kinds and declared permissions, the contract checks' result),
//! signed when given a key, written into an index file.

use super::archive;
use super::index::{Index, Record, RecordSource};
use super::sign;
use anyhow::{anyhow, bail, Context, Result};
use openclaw_plugins::{harness, installed, LoadedPlugin, PluginToml};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the record says the plugin is.
#[derive(Clone, Debug)]
pub enum PackageSource {
    /// The crate's git repository at a commit (empty: its `origin` remote and `HEAD`).
    Git {
        /// The repository's URL.
        url: String,
        /// The commit.
        rev: String,
    },
    /// A `.tar.gz` of the crate's sources, written beside the index file.
    Archive,
}

/// How to package.
#[derive(Clone, Debug)]
pub struct PackageOptions {
    /// Where the record points.
    pub source: PackageSource,
    /// A minisign secret key to sign the record with.
    pub key: Option<PathBuf>,
    /// The index file to add the record to (created when missing).
    pub index_file: Option<PathBuf>,
}

/// Builds, checks and describes the crate in `dir`; returns its record (also written into
/// the index file when one is given).
pub fn package(dir: &Path, opts: &PackageOptions) -> Result<Record> {
    let toml = PluginToml::read(dir)?;
    let plugin = LoadedPlugin::open(dir)?;
    let checks = harness::run(&plugin, None);
    let failed: Vec<_> = checks.iter().filter(|c| !c.passed).collect();
    if let Some(first) = failed.first() {
        bail!(
            "{} of {} contract checks fail (`plugins test {}`); the first: {}: {} {}",
            failed.len(),
            checks.len(),
            dir.display(),
            first.kind,
            first.what,
            first.detail
        );
    }
    let api = semver::Version::parse(&installed::built_against(&plugin.library)?)?;
    let mut record = Record {
        name: toml.name.clone(),
        version: toml.version.clone(),
        description: toml.description.clone(),
        kinds: toml.kinds.iter().map(|k| k.as_str().to_string()).collect(),
        plugin_api: format!(">={}.{}, <{}", api.major, api.minor, api.major + 1),
        permissions: toml.permissions.clone(),
        checksum: String::new(),
        yanked: false,
        target: String::new(),
        smoke: format!(
            "plugins test: {} checks passed (plugin API {api})",
            checks.len()
        ),
        source: RecordSource::default(),
        signature: String::new(),
    };
    match &opts.source {
        PackageSource::Git { url, rev } => {
            let git = |args: &[&str]| git_in(dir, args);
            let url = if url.is_empty() {
                git(&["remote", "get-url", "origin"]).map_err(|_| {
                    anyhow!("{} has no `origin` remote: give --git URL", dir.display())
                })?
            } else {
                url.clone()
            };
            let asked = if rev.is_empty() { "HEAD" } else { rev.as_str() };
            // The record pins a commit: a branch or tag can move.
            let rev = git(&["rev-parse", "--verify", &format!("{asked}^{{commit}}")])
                .map_err(|_| anyhow!("{} has no commit `{asked}`", dir.display()))?;
            // The checks ran on the working tree: it must hold what the commit holds.
            let same = Command::new("git")
                .args(["diff", "--quiet", &rev, "--", "."])
                .current_dir(dir)
                .status()
                .context("running git diff")?;
            if !same.success() {
                bail!(
                    "{} differs from commit {}: commit the changes (the record names that commit's files), or check out the commit",
                    dir.display(),
                    &rev[..12]
                );
            }
            let subdir = git(&["rev-parse", "--show-prefix"])?
                .trim_end_matches('/')
                .to_string();
            let top = git(&["rev-parse", "--show-toplevel"])?;
            // The sum of the folder as a clone of the commit holds it, which is what an
            // installer sums.
            let scratch = openclaw_plugins::installed::plugin_dir();
            record.checksum = openclaw_plugins::install::committed_tree_sha256(
                Path::new(&top),
                &rev,
                &subdir,
                &scratch,
            )?;
            record.source = RecordSource {
                git: url,
                rev,
                subdir,
                ..Default::default()
            };
        }
        PackageSource::Archive => {
            let Some(index_file) = &opts.index_file else {
                bail!("--archive writes the archive beside the index: give --index-file FILE");
            };
            let folder = format!("{}-{}", toml.name, toml.version);
            let file_name = format!("{folder}.tar.gz");
            let out = index_file
                .parent()
                .unwrap_or(Path::new("."))
                .join(&file_name);
            archive::pack(dir, &folder, &out)?;
            record.checksum = installed::file_sha256(&out)?;
            record.source = RecordSource {
                archive: file_name,
                subdir: folder,
                ..Default::default()
            };
        }
    }
    record.check()?;
    if let Some(key) = &opts.key {
        sign::sign(&mut record, &sign::read_secret_key(key)?)?;
    }
    if let Some(path) = &opts.index_file {
        let mut index = match std::fs::read_to_string(path) {
            Ok(text) => Index::parse(&text, &path.display().to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Index::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        index.put(record.clone());
        std::fs::write(path, index.to_toml())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(record)
}

fn git_in(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .context("packaging from git needs git on PATH")?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Marks `name@version` in the index file yanked (or not, with `yanked` false), signing the
/// record again with `key`. A signed record cannot change without its key: its old signature
/// would no longer verify.
pub fn yank(
    index_file: &Path,
    name: &str,
    version: &str,
    yanked: bool,
    key: Option<&Path>,
) -> Result<Record> {
    let text = std::fs::read_to_string(index_file)
        .with_context(|| format!("cannot read {}", index_file.display()))?;
    let mut index = Index::parse(&text, &index_file.display().to_string())?;
    let Some(record) = index
        .records
        .iter_mut()
        .find(|r| r.name == name && r.version == version)
    else {
        bail!("{} does not list {name}@{version}", index_file.display());
    };
    if !record.signature.is_empty() && key.is_none() {
        bail!(
            "{name}@{version} is signed: give --key to sign it again (its signature would no longer verify)"
        );
    }
    record.yanked = yanked;
    if let Some(key) = key {
        sign::sign(record, &sign::read_secret_key(key)?)?;
    }
    let out = record.clone();
    std::fs::write(index_file, index.to_toml())
        .with_context(|| format!("cannot write {}", index_file.display()))?;
    Ok(out)
}

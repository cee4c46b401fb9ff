//! The installed-plugins directory: built plugin libraries kept by name and version, each with
//! a record of where it came from and the checksums that pin it.
//!
//! The layout is `DIR/<name>/<version>/{install.toml, plugin.toml, <library>}`, so two versions
//! of one plugin sit side by side and `name@version` picks one. A version directory appears
//! whole or not at all: it is written under a temporary name and renamed into place.

use super::load::LoadedPlugin;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The record of an installed version, in its directory.
pub const RECORD_FILE: &str = "install.toml";

/// The installed-plugins directory: `OPENCLAW_PLUGIN_DIR`, else `$OPENCLAW_HOME/plugins`, else
/// `$XDG_DATA_HOME/openclaw-host/plugins`, else `~/.local/share/openclaw-host/plugins`.
pub fn plugin_dir() -> PathBuf {
    plugin_dir_from(|k| std::env::var_os(k))
}

/// [`plugin_dir`] with the environment given as a function (testable without touching the
/// process environment, which other threads may read).
fn plugin_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let var = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("OPENCLAW_PLUGIN_DIR") {
        return dir;
    }
    if let Some(home) = var("OPENCLAW_HOME") {
        return home.join("plugins");
    }
    if let Some(data) = var("XDG_DATA_HOME") {
        return data.join("openclaw-host").join("plugins");
    }
    if let Some(home) = var("HOME") {
        return home
            .join(".local")
            .join("share")
            .join("openclaw-host")
            .join("plugins");
    }
    PathBuf::from(".openclaw").join("plugins")
}

/// Where an installed version came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// Built from a plugin crate directory.
    Crate {
        /// The crate directory, absolute.
        path: String,
    },
    /// Built from a crate in a git repository.
    Git {
        /// The repository's URL.
        url: String,
        /// The branch, tag or commit asked for (empty: the default branch).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reference: String,
        /// The commit that was built.
        commit: String,
        /// The crate's folder in the repository (empty: its root).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        subdir: String,
    },
    /// A library file installed as it was, not built here.
    Library {
        /// The file, absolute, or the URL it was fetched from.
        path: String,
    },
    /// Built from a source archive (`.tar.gz`) an index named.
    Archive {
        /// Where it was fetched from.
        url: String,
        /// The crate's folder in it (empty: its root).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        subdir: String,
    },
}

impl Source {
    /// One line for tables and messages.
    pub fn describe(&self) -> String {
        match self {
            Source::Crate { path } => path.clone(),
            Source::Git {
                url,
                commit,
                subdir,
                ..
            } => {
                let short = &commit[..commit.len().min(12)];
                if subdir.is_empty() {
                    format!("{url}@{short}")
                } else {
                    format!("{url}@{short}:{subdir}")
                }
            }
            Source::Library { path } => path.clone(),
            Source::Archive { url, subdir } if subdir.is_empty() => url.clone(),
            Source::Archive { url, subdir } => format!("{url}:{subdir}"),
        }
    }
}

/// What `install.toml` says about an installed version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRecord {
    /// The plugin's name, as its library says.
    pub name: String,
    /// Its version, as its library says.
    pub version: String,
    /// One line about it.
    #[serde(default)]
    pub description: String,
    /// The kinds it provides.
    pub kinds: Vec<String>,
    /// The library's file name in the version directory.
    pub library: String,
    /// SHA-256 of the library file, checked each time it is loaded.
    pub library_sha256: String,
    /// SHA-256 of the crate's source tree it was built from ([`tree_sha256`]); empty for a
    /// library installed as it was.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_sha256: String,
    /// The plugin API version the library was built against.
    pub plugin_api: String,
    /// The target triple it was built for.
    pub target: String,
    /// The cargo profile it was built with (`debug` or `release`).
    pub profile: String,
    /// `rustc --version` of the toolchain that built it; empty when not built here.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub toolchain: String,
    /// When it was installed, in seconds since the Unix epoch.
    pub installed_at: u64,
    /// Where it came from.
    pub source: Source,
    /// The index that listed it, when installed by name from one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub index: String,
    /// The trusted key that verified the index record's signature; an update must be signed
    /// by it too.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signed_by: String,
}

/// One installed version: its directory and its record.
#[derive(Clone, Debug, PartialEq)]
pub struct Installed {
    /// `DIR/<name>/<version>`.
    pub dir: PathBuf,
    /// Its `install.toml`.
    pub record: InstallRecord,
}

impl Installed {
    /// Reads the version directory `dir`.
    pub fn read(dir: &Path) -> Result<Installed> {
        let path = dir.join(RECORD_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let record: InstallRecord = toml::from_str(&text).map_err(|e| {
            anyhow!(
                "invalid {}: {}",
                path.display(),
                e.message().trim().replace('\n', " ")
            )
        })?;
        let plain = Path::new(&record.library)
            .components()
            .map(|c| matches!(c, std::path::Component::Normal(_)))
            .collect::<Vec<_>>()
            == [true];
        if !plain {
            bail!(
                "{}: library `{}` is not a file name in its folder",
                path.display(),
                record.library
            );
        }
        Ok(Installed {
            dir: dir.to_path_buf(),
            record,
        })
    }

    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.record.name, self.record.version)
    }

    /// The library file.
    pub fn library(&self) -> PathBuf {
        self.dir.join(&self.record.library)
    }

    /// Loads the library after checking it is the file that was installed.
    pub fn open(&self) -> Result<LoadedPlugin> {
        let lib = self.library();
        if !lib.is_file() {
            bail!(
                "installed plugin {} ({}) has lost its library {}; install it again",
                self.id(),
                self.dir.display(),
                self.record.library
            );
        }
        let sum = file_sha256(&lib)?;
        if sum != self.record.library_sha256 {
            bail!(
                "installed plugin {}: its library {} has changed since it was installed (SHA-256 {} where {} was recorded); install it again",
                self.id(),
                lib.display(),
                short(&sum),
                short(&self.record.library_sha256)
            );
        }
        let plugin = LoadedPlugin::load_library(&lib, None)?;
        if plugin.manifest.name.as_str() != self.record.name
            || plugin.manifest.version.as_str() != self.record.version
        {
            bail!(
                "installed plugin {}: its library says it is {}@{}",
                self.id(),
                plugin.manifest.name,
                plugin.manifest.version
            );
        }
        Ok(plugin)
    }
}

/// Whether `dir` is a version folder of the installed-plugins directory (a folder elsewhere
/// with an `install.toml` in it is not taken for one).
pub fn is_installed_dir(dir: &Path) -> bool {
    if !dir.join(RECORD_FILE).is_file() {
        return false;
    }
    match (dir.canonicalize(), plugin_dir().canonicalize()) {
        (Ok(d), Ok(root)) => d.parent().and_then(Path::parent) == Some(root.as_path()),
        _ => false,
    }
}

/// The first 12 hex digits of a checksum, for messages.
pub fn short(sum: &str) -> &str {
    &sum[..sum.len().min(12)]
}

/// Every installed version under `root`, by name and then version (oldest first). A version
/// directory whose record cannot be read is skipped with a warning.
pub fn list(root: &Path) -> Vec<Installed> {
    let mut out = Vec::new();
    for name_dir in sorted_dirs(root) {
        let mut versions: Vec<Installed> = sorted_dirs(&name_dir)
            .into_iter()
            .filter(|d| d.join(RECORD_FILE).is_file())
            .filter_map(|d| match Installed::read(&d) {
                Ok(i) => Some(i),
                Err(e) => {
                    tracing::warn!("skipping {}: {e:#}", d.display());
                    None
                }
            })
            .collect();
        versions.sort_by(|a, b| compare_versions(&a.record.version, &b.record.version));
        out.extend(versions);
    }
    out
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Orders versions by semver where both parse, else as text.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

/// Whether `version` satisfies `wanted`: an exact version (`0.2.0`) or a semver requirement
/// (`^0.2`, `>=0.1, <0.3`).
pub fn version_matches(version: &str, wanted: &str) -> Result<bool> {
    if version == wanted {
        return Ok(true);
    }
    if semver::Version::parse(wanted).is_ok() {
        return Ok(false);
    }
    let req = semver::VersionReq::parse(wanted)
        .map_err(|e| anyhow!("`{wanted}` is neither a version nor a version requirement: {e}"))?;
    Ok(semver::Version::parse(version).is_ok_and(|v| req.matches(&v)))
}

/// The installed version of `name` that `wanted` picks (the newest when `None`), if any. A
/// version asked for and not installed is an error naming the versions that are.
pub fn find(root: &Path, name: &str, wanted: Option<&str>) -> Result<Option<Installed>> {
    let all: Vec<Installed> = list(root)
        .into_iter()
        .filter(|i| i.record.name == name)
        .collect();
    let Some(wanted) = wanted else {
        return Ok(all.last().cloned());
    };
    let mut picked = None;
    for i in &all {
        if version_matches(&i.record.version, wanted)? {
            picked = Some(i.clone());
        }
    }
    if picked.is_none() {
        bail!(
            "plugin {name}@{wanted} is not installed in {} (installed versions of {name}: {})",
            root.display(),
            if all.is_empty() {
                "none".to_string()
            } else {
                all.iter()
                    .map(|i| i.record.version.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    Ok(picked)
}

/// Splits `name@version`; `None` for a plain name or a path.
pub fn split_pinned(spec: &str) -> Option<(&str, &str)> {
    if spec.contains('/') || spec.contains(std::path::MAIN_SEPARATOR) {
        return None;
    }
    let (name, version) = spec.split_once('@')?;
    (!name.is_empty() && !version.is_empty()).then_some((name, version))
}

/// `NAME@VERSION` as the name and the version, a plain name (or a path) with none.
pub fn name_and_version(spec: &str) -> (&str, Option<&str>) {
    match split_pinned(spec) {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    }
}

/// Checks a plugin name or version read from a library before it names a directory: letters,
/// digits, `-`, `_`, and for versions `.` and `+` too.
pub fn check_component(what: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && !value.starts_with('.')
        && value.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || c == '-'
                || c == '_'
                || (what == "version" && (c == '.' || c == '+'))
        });
    if !ok {
        bail!(
            "plugin {what} `{value}` cannot name a directory (letters, digits, `-`, `_`{}; at most 64 characters)",
            if what == "version" { ", `.`, `+`" } else { "" }
        );
    }
    Ok(())
}

/// What [`install_library`] is told besides the library.
#[derive(Clone, Debug)]
pub struct Provenance {
    /// Where it came from.
    pub source: Source,
    /// SHA-256 of the source tree, when built from one.
    pub source_sha256: String,
    /// The toolchain that built it, when built here.
    pub toolchain: String,
    /// The crate's `plugin.toml`, copied beside the library when there is one.
    pub plugin_toml: Option<PathBuf>,
    /// The index that listed it, when installed by name from one.
    pub index: String,
    /// The trusted key that verified the index record.
    pub signed_by: String,
    /// The name and version an index record says it is: a library that says otherwise is
    /// refused before anything is written.
    pub expect: Option<(String, String)>,
}

/// Copies a built library into `root` as `<name>/<version>`, after loading it to check its ABI
/// and manifest. An installed version is replaced only with `replace`.
pub fn install_library(
    root: &Path,
    library: &Path,
    provenance: Provenance,
    replace: bool,
) -> Result<Installed> {
    let plugin = LoadedPlugin::load_library(library, None)?;
    let name = plugin.manifest.name.to_string();
    let version = plugin.manifest.version.to_string();
    if let Some((n, v)) = &provenance.expect {
        if (n, v) != (&name, &version) {
            bail!("the index lists {n}@{v}, and its library is {name}@{version}; nothing was installed");
        }
    }
    check_component("name", &name)?;
    check_component("version", &version)?;
    let api = built_against(library)?;
    let file_name = library
        .file_name()
        .ok_or_else(|| anyhow!("{} is not a file", library.display()))?
        .to_string_lossy()
        .into_owned();
    let name_dir = root.join(&name);
    let dest = name_dir.join(&version);
    if dest.exists() && !replace {
        bail!(
            "{name}@{version} is already installed in {} (`plugins remove {name}@{version}` first, or install with --force)",
            dest.display()
        );
    }
    std::fs::create_dir_all(&name_dir)
        .with_context(|| format!("cannot create {}", name_dir.display()))?;
    let staging = name_dir.join(format!(".installing-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    let result = (|| -> Result<InstallRecord> {
        std::fs::copy(library, staging.join(&file_name))
            .with_context(|| format!("cannot copy {}", library.display()))?;
        if let Some(t) = &provenance.plugin_toml {
            std::fs::copy(t, staging.join("plugin.toml"))
                .with_context(|| format!("cannot copy {}", t.display()))?;
        }
        let record = InstallRecord {
            name: name.clone(),
            version: version.clone(),
            description: plugin.manifest.description.to_string(),
            kinds: plugin
                .kinds
                .iter()
                .map(|k| k.as_str().to_string())
                .collect(),
            library: file_name.clone(),
            library_sha256: file_sha256(&staging.join(&file_name))?,
            source_sha256: provenance.source_sha256.clone(),
            plugin_api: api.clone(),
            target: TARGET.to_string(),
            profile: super::build::current_profile().to_string(),
            toolchain: provenance.toolchain.clone(),
            installed_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            source: provenance.source.clone(),
            index: provenance.index.clone(),
            signed_by: provenance.signed_by.clone(),
        };
        std::fs::write(staging.join(RECORD_FILE), toml::to_string(&record)?)
            .context("cannot write the install record")?;
        Ok(record)
    })();
    let record = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    if dest.exists() {
        std::fs::remove_dir_all(&dest)
            .with_context(|| format!("cannot replace {}", dest.display()))?;
    }
    if let Err(e) = std::fs::rename(&staging, &dest) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e)
            .with_context(|| format!("cannot move the new version into {}", dest.display()));
    }
    Ok(Installed { dir: dest, record })
}

/// The target triple this host was built for; installed libraries are built for it too.
pub const TARGET: &str = env!("OPENCLAW_TARGET");

/// The plugin API version a library was built against, read from its ABI header.
pub fn built_against(library: &Path) -> Result<String> {
    let header = abi_stable::library::lib_header_from_path(library)
        .map_err(|e| anyhow!("cannot read the ABI header of {}: {e}", library.display()))?;
    Ok(header.version_strings().version.to_string())
}

/// Removes installed versions of `name`: the one `version` picks, or all of them. Returns what
/// was removed.
pub fn remove(root: &Path, name: &str, version: Option<&str>) -> Result<Vec<Installed>> {
    let all: Vec<Installed> = list(root)
        .into_iter()
        .filter(|i| i.record.name == name)
        .collect();
    if all.is_empty() {
        let names: Vec<String> = {
            let mut n: Vec<String> = list(root).into_iter().map(|i| i.record.name).collect();
            n.dedup();
            n
        };
        bail!(
            "no plugin named `{name}` is installed in {} (installed: {})",
            root.display(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    let picked: Vec<Installed> = match version {
        None => all,
        Some(v) => {
            let one = find(root, name, Some(v))?.expect("find errs when none matches");
            vec![one]
        }
    };
    for i in &picked {
        std::fs::remove_dir_all(&i.dir)
            .with_context(|| format!("cannot remove {}", i.dir.display()))?;
    }
    let name_dir = root.join(name);
    if sorted_dirs(&name_dir).is_empty() {
        let _ = std::fs::remove_dir_all(&name_dir);
    }
    Ok(picked)
}

/// SHA-256 of a file, in hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// SHA-256 of a crate's source tree: each file's path relative to `dir` (with `/`), its length
/// and its bytes, in path order. Only the top-level `.git/` and `target/` (build output) are
/// left out, so a checkout, a clone and an unpacked archive of the same files give the same
/// sum, and every file cargo could read in the folder counts. A symbolic link is refused:
/// what it points at is not part of the tree.
pub fn tree_sha256(dir: &Path) -> Result<String> {
    let mut hasher = Sha256::new();
    for (key, rel) in tree_files(dir)? {
        let bytes = std::fs::read(dir.join(&rel))
            .with_context(|| format!("cannot read {}", dir.join(&rel).display()))?;
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// The files of a crate's tree as [`tree_sha256`] counts them (all but the top-level `.git/`
/// and `target/`; a symbolic link refused), each with its path relative to `dir` joined by
/// `/`, in that order. A source archive holds the same files.
pub fn tree_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let abs = dir.join(&rel);
        let entries =
            std::fs::read_dir(&abs).with_context(|| format!("cannot read {}", abs.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("cannot read {}", abs.display()))?;
            let name = e.file_name();
            let name_str = name.to_string_lossy();
            if rel.as_os_str().is_empty() && (name_str == ".git" || name_str == "target") {
                continue;
            }
            let kind = e.file_type()?;
            let child = rel.join(&name);
            if kind.is_symlink() {
                bail!(
                    "{} is a symbolic link; a plugin's source tree holds plain files only",
                    dir.join(&child).display()
                );
            } else if kind.is_dir() {
                stack.push(child);
            } else {
                files.push(child);
            }
        }
    }
    let mut keyed: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let key = p
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            (key, p)
        })
        .collect();
    keyed.sort();
    Ok(keyed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_directory_follows_the_documented_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            plugin_dir_from(env(&[
                ("OPENCLAW_PLUGIN_DIR", "/p"),
                ("OPENCLAW_HOME", "/oc"),
                ("HOME", "/h")
            ])),
            PathBuf::from("/p")
        );
        assert_eq!(
            plugin_dir_from(env(&[("OPENCLAW_HOME", "/oc"), ("HOME", "/h")])),
            PathBuf::from("/oc/plugins")
        );
        assert_eq!(
            plugin_dir_from(env(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")])),
            PathBuf::from("/x/openclaw-host/plugins")
        );
        assert_eq!(
            plugin_dir_from(env(&[("OPENCLAW_PLUGIN_DIR", ""), ("HOME", "/h")])),
            PathBuf::from("/h/.local/share/openclaw-host/plugins")
        );
    }

    #[test]
    fn versions_match_exactly_or_by_requirement() {
        assert!(version_matches("0.2.0", "0.2.0").unwrap());
        // A bare version is exact, not a caret requirement.
        assert!(!version_matches("0.2.1", "0.2.0").unwrap());
        assert!(version_matches("0.2.1", "^0.2").unwrap());
        assert!(!version_matches("0.3.0", "^0.2").unwrap());
        assert!(version_matches("0.3.0", ">=0.2, <0.4").unwrap());
        let e = version_matches("0.3.0", "not a version").unwrap_err();
        assert!(format!("{e}").contains("neither a version"), "{e}");
        assert_eq!(
            compare_versions("0.10.0", "0.9.0"),
            std::cmp::Ordering::Greater
        );
    }

    #[test]
    fn pinned_names_and_paths_are_told_apart() {
        assert_eq!(split_pinned("combine@0.1.0"), Some(("combine", "0.1.0")));
        assert_eq!(split_pinned("combine"), None);
        assert_eq!(split_pinned("./x@1/y"), None);
        assert_eq!(split_pinned("@1"), None);
    }

    #[test]
    fn names_from_a_library_cannot_climb_out() {
        for bad in ["..", "../x", "a/b", "", ".hidden", "a b"] {
            assert!(check_component("name", bad).is_err(), "{bad}");
        }
        assert!(check_component("version", "1.0.0+build.2").is_ok());
        assert!(check_component("name", "1.0").is_err());
        assert!(check_component("name", "my_plugin-2").is_ok());
    }

    #[test]
    fn the_tree_sum_ignores_build_output_and_sees_every_byte_and_name() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("src")).unwrap();
        std::fs::write(a.path().join("Cargo.toml"), "[package]\n").unwrap();
        std::fs::write(a.path().join("src/lib.rs"), "fn f() {}\n").unwrap();
        let before = tree_sha256(a.path()).unwrap();
        std::fs::create_dir_all(a.path().join("target/debug")).unwrap();
        std::fs::write(a.path().join("target/debug/x"), "built").unwrap();
        std::fs::create_dir_all(a.path().join(".git")).unwrap();
        std::fs::write(a.path().join(".git/HEAD"), "ref").unwrap();
        assert_eq!(tree_sha256(a.path()).unwrap(), before);
        // A lock file or a hidden file is read by cargo: it counts.
        std::fs::write(a.path().join("Cargo.lock"), "lock").unwrap();
        assert_ne!(tree_sha256(a.path()).unwrap(), before);
        std::fs::remove_file(a.path().join("Cargo.lock")).unwrap();
        std::fs::write(a.path().join("src/.hidden.rs"), "x").unwrap();
        assert_ne!(tree_sha256(a.path()).unwrap(), before);
        std::fs::remove_file(a.path().join("src/.hidden.rs")).unwrap();
        std::fs::write(a.path().join("src/lib.rs"), "fn g() {}\n").unwrap();
        let edited = tree_sha256(a.path()).unwrap();
        assert_ne!(edited, before);
        // A rename with the same bytes changes it too.
        std::fs::rename(a.path().join("src/lib.rs"), a.path().join("src/main.rs")).unwrap();
        assert_ne!(tree_sha256(a.path()).unwrap(), edited);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/passwd", a.path().join("src/link")).unwrap();
            let e = tree_sha256(a.path()).unwrap_err();
            assert!(format!("{e}").contains("symbolic link"), "{e}");
        }
    }

    #[test]
    fn an_empty_directory_lists_nothing_and_finds_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert!(list(d.path()).is_empty());
        assert!(find(d.path(), "x", None).unwrap().is_none());
        let e = find(d.path(), "x", Some("1.0.0")).unwrap_err();
        assert!(format!("{e}").contains("not installed"), "{e}");
        let e = remove(d.path(), "x", None).unwrap_err();
        assert!(format!("{e}").contains("no plugin named `x`"), "{e}");
    }
}

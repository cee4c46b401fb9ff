//! `openclaw-plugins.lock`: the plugins a run used, by version and checksum. A run writes it
//! into each checkpoint, so a resumed run can say which of its plugins changed since.

use super::build::CrateLibrary;
use super::installed::{self, Installed};
use super::load::LoadedPlugin;
use super::manifest_file::PluginToml;
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The lockfile's name, in a checkpoint directory.
pub const LOCK_FILE: &str = "openclaw-plugins.lock";

/// The layout version of the lockfile.
const FORMAT: u32 = 1;

/// The plugins of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    /// Layout version.
    pub format: u32,
    /// One entry per plugin, by name.
    #[serde(default, rename = "plugin")]
    pub plugins: Vec<Locked>,
}

/// One plugin as a run used it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Locked {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The kinds it provides.
    pub kinds: Vec<String>,
    /// SHA-256 of the library loaded.
    pub library_sha256: String,
    /// Where it was loaded from: `installed <dir>` (with where that came from), `crate <dir>`
    /// or `library <file>`.
    pub source: String,
    /// SHA-256 of its source tree, when known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_sha256: String,
}

impl Locked {
    /// The entry of a loaded plugin.
    pub fn of(plugin: &LoadedPlugin) -> Result<Locked> {
        let installed_dir = plugin
            .library
            .parent()
            .filter(|d| installed::is_installed_dir(d));
        if let Some(dir) = installed_dir {
            return Ok(Self::of_installed(&Installed::read(dir)?));
        }
        let library_sha256 = installed::file_sha256(&plugin.library)?;
        let kinds = plugin
            .kinds
            .iter()
            .map(|k| k.as_str().to_string())
            .collect();
        let (source, source_sha256) = match &plugin.crate_dir {
            Some(dir) => (
                format!("crate {}", dir.display()),
                installed::tree_sha256(dir).unwrap_or_default(),
            ),
            None => (
                format!("library {}", plugin.library.display()),
                String::new(),
            ),
        };
        Ok(Locked {
            name: plugin.manifest.name.to_string(),
            version: plugin.manifest.version.to_string(),
            kinds,
            library_sha256,
            source,
            source_sha256,
        })
    }

    fn of_installed(i: &Installed) -> Locked {
        Locked {
            name: i.record.name.clone(),
            version: i.record.version.clone(),
            kinds: i.record.kinds.clone(),
            library_sha256: i.record.library_sha256.clone(),
            source: format!(
                "installed {} from {}",
                i.dir.display(),
                i.record.source.describe()
            ),
            source_sha256: i.record.source_sha256.clone(),
        }
    }

    /// The entry of a plugin already loaded elsewhere in the process, from where it lies: an
    /// installed version directory, a crate directory (its built library), or a library file.
    pub fn at(path: &Path) -> Result<Locked> {
        if installed::is_installed_dir(path) {
            return Ok(Self::of_installed(&Installed::read(path)?));
        }
        if path.is_dir() {
            let toml = PluginToml::read(path)?;
            let library = CrateLibrary::locate(path)?.artifact;
            return Ok(Locked {
                name: toml.name,
                version: toml.version,
                kinds: toml.kinds.iter().map(|k| k.as_str().to_string()).collect(),
                library_sha256: installed::file_sha256(&library)?,
                source: format!("crate {}", path.display()),
                source_sha256: installed::tree_sha256(path).unwrap_or_default(),
            });
        }
        let plugin = LoadedPlugin::load_library(path, None)?;
        Self::of(&plugin)
    }
}

impl Lockfile {
    /// A lockfile of `entries`, sorted by name.
    pub fn new(mut entries: Vec<Locked>) -> Lockfile {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        entries.dedup_by(|a, b| a.name == b.name && a.library_sha256 == b.library_sha256);
        Lockfile {
            format: FORMAT,
            plugins: entries,
        }
    }

    /// Its text.
    pub fn to_toml(&self) -> String {
        format!(
            "# The plugins this run used, by version and checksum (openclaw-host).\n{}",
            toml::to_string(self).expect("a lockfile serialises")
        )
    }

    /// Parses a lockfile's text.
    pub fn parse(text: &str) -> Result<Lockfile> {
        let lock: Lockfile = toml::from_str(text).map_err(|e| anyhow!("{}", e.message().trim()))?;
        if lock.format != FORMAT {
            anyhow::bail!(
                "lockfile format {} is not one this host reads ({FORMAT})",
                lock.format
            );
        }
        Ok(lock)
    }

    /// Reads `dir/openclaw-plugins.lock`, if there is one.
    pub fn read_in(dir: &Path) -> Result<Option<Lockfile>> {
        let path = dir.join(LOCK_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text)
            .with_context(|| format!("invalid {}", path.display()))
            .map(Some)
    }

    /// One line per plugin that differs from `earlier`: another version, another library, or
    /// added or left out.
    pub fn changes_since(&self, earlier: &Lockfile) -> Vec<String> {
        let mut out = Vec::new();
        for now in &self.plugins {
            match earlier.plugins.iter().find(|p| p.name == now.name) {
                None => out.push(format!("{} {} was not used before", now.name, now.version)),
                Some(then) if then.version != now.version => out.push(format!(
                    "{} was {} and is now {}",
                    now.name, then.version, now.version
                )),
                Some(then) if then.library_sha256 != now.library_sha256 => out.push(format!(
                    "{} {} is another library now (SHA-256 {} where {} was used)",
                    now.name,
                    now.version,
                    installed::short(&now.library_sha256),
                    installed::short(&then.library_sha256)
                )),
                Some(_) => {}
            }
        }
        for then in &earlier.plugins {
            if !self.plugins.iter().any(|p| p.name == then.name) {
                out.push(format!("{} {} is not used now", then.name, then.version));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, version: &str, sum: &str) -> Locked {
        Locked {
            name: name.into(),
            version: version.into(),
            kinds: vec!["loss".into()],
            library_sha256: sum.into(),
            source: "crate /x".into(),
            source_sha256: String::new(),
        }
    }

    #[test]
    fn a_lockfile_reads_back_and_names_each_change() {
        let then = Lockfile::new(vec![entry("b", "0.1.0", "aa"), entry("a", "1.0.0", "bb")]);
        assert_eq!(then.plugins[0].name, "a");
        let back = Lockfile::parse(&then.to_toml()).unwrap();
        assert_eq!(back, then);
        assert!(back.changes_since(&then).is_empty());
        let now = Lockfile::new(vec![entry("a", "1.1.0", "cc"), entry("c", "0.1.0", "dd")]);
        let changes = now.changes_since(&then).join("\n");
        assert!(
            changes.contains("a was 1.0.0 and is now 1.1.0"),
            "{changes}"
        );
        assert!(changes.contains("c 0.1.0 was not used before"), "{changes}");
        assert!(changes.contains("b 0.1.0 is not used now"), "{changes}");
        let rebuilt = Lockfile::new(vec![entry("a", "1.0.0", "ee"), entry("b", "0.1.0", "aa")]);
        let changes = rebuilt.changes_since(&then).join("\n");
        assert!(changes.contains("another library"), "{changes}");
        let e = Lockfile::parse("format = 9\n").unwrap_err();
        assert!(format!("{e}").contains("format 9"), "{e}");
    }
}

//! `plugin.toml`: what a plugin crate says about itself before it is built.

use anyhow::{bail, Context, Result};
use openclaw_plugin_api::PluginKind;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// What a plugin may declare it does beyond computing on what the host hands it, with what
/// each means. A declaration is the publisher's word: the plugin runs as native code with the
/// host's rights either way.
pub const PERMISSIONS: [(&str, &str); 4] = [
    ("network", "opens network connections of its own"),
    (
        "filesystem",
        "reads or writes files beyond what the host hands it",
    ),
    (
        "sandbox",
        "runs commands (its tasks' or the model's) in the bubblewrap sandbox",
    ),
    (
        "process",
        "starts programs on the host, outside the sandbox",
    ),
];

/// The parsed `[plugin]` table of a `plugin.toml`.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginToml {
    /// The plugin's name; the library's manifest must say the same.
    pub name: String,
    /// The plugin's version; the library's manifest must say the same.
    pub version: String,
    /// The kinds the plugin provides.
    pub kinds: Vec<PluginKind>,
    /// One line about the plugin.
    pub description: String,
    /// What it declares it does beyond computing on what the host hands it (`network`,
    /// `filesystem`, `sandbox`), as an index lists it.
    pub permissions: Vec<String>,
    /// The crate directory the file was read from.
    pub dir: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    plugin: Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    name: String,
    version: String,
    kinds: Vec<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    permissions: Vec<String>,
}

impl PluginToml {
    /// Reads `DIR/plugin.toml`. Errors name the file and what is wrong in it.
    pub fn read(dir: &Path) -> Result<PluginToml> {
        if !dir.exists() {
            bail!("plugin directory {} does not exist", dir.display());
        }
        if !dir.is_dir() {
            bail!(
                "{} is not a plugin directory or a plugin library (.{})",
                dir.display(),
                std::env::consts::DLL_EXTENSION
            );
        }
        let path = dir.join("plugin.toml");
        if !path.exists() {
            bail!(
                "{} has no plugin.toml (expected a plugin crate directory with a plugin.toml)",
                dir.display()
            );
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text, dir).with_context(|| format!("invalid {}", path.display()))
    }

    /// Parses the text of a `plugin.toml` found in `dir`.
    pub fn parse(text: &str, dir: &Path) -> Result<PluginToml> {
        let file: File = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", e.message().trim().replace('\n', " ")))?;
        let t = file.plugin;
        if t.name.trim().is_empty() {
            bail!("[plugin] name is empty");
        }
        if t.kinds.is_empty() {
            bail!(
                "[plugin] kinds is empty (expected some of: loss, reward, rollout, generate, env)"
            );
        }
        let mut kinds = Vec::new();
        for k in &t.kinds {
            let kind: PluginKind = k
                .parse()
                .map_err(|e: String| anyhow::anyhow!("[plugin] kinds: {e}"))?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        for p in &t.permissions {
            if !PERMISSIONS.iter().any(|(n, _)| n == p) {
                bail!(
                    "[plugin] permissions: unknown permission `{p}` (known: {})",
                    PERMISSIONS.map(|(n, _)| n).join(", ")
                );
            }
        }
        Ok(PluginToml {
            name: t.name,
            version: t.version,
            kinds,
            description: t.description,
            permissions: t.permissions,
            dir: dir.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_plugin_table() {
        let p = PluginToml::parse(
            "[plugin]\nname = \"opd\"\nversion = \"0.1.0\"\nkinds = [\"loss\", \"reward\"]\ndescription = \"d\"\n",
            Path::new("methods/opd"),
        )
        .unwrap();
        assert_eq!(p.name, "opd");
        assert_eq!(p.kinds, vec![PluginKind::Loss, PluginKind::Reward]);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = PluginToml::parse(
            "[plugin]\nname = \"x\"\nversion = \"1\"\nkinds = [\"lose\"]\n",
            Path::new("."),
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown plugin kind `lose`"),
            "{e:#}"
        );
        let e = PluginToml::parse("[plugin]\nname = \"x\"\n", Path::new(".")).unwrap_err();
        assert!(
            format!("{e:#}").contains("missing field `version`"),
            "{e:#}"
        );
        let e = PluginToml::parse(
            "[plugin]\nname = \"x\"\nversion = \"1\"\nkinds = []\n",
            Path::new("."),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("kinds is empty"), "{e:#}");
        let e = PluginToml::read(Path::new("/definitely/not/here")).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
    }
}

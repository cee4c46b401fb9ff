//! Loading a plugin library through the stable ABI and checking it against what it claims.

use super::build::CrateLibrary;
use super::manifest_file::PluginToml;
use abi_stable::library::{lib_header_from_path, LibraryError};
use anyhow::{anyhow, bail, Result};
use openclaw_plugin_api::{Manifest, PluginKind, PluginModuleRef, API_VERSION};
use std::path::{Path, PathBuf};

/// A loaded plugin library. Libraries are never unloaded: reloading means restarting.
#[derive(Clone)]
pub struct LoadedPlugin {
    /// The library's manifest.
    pub manifest: Manifest,
    /// The kinds the library provides (checked against its constructors).
    pub kinds: Vec<PluginKind>,
    /// The library file.
    pub library: PathBuf,
    /// The crate directory it was built from, when it came from one.
    pub crate_dir: Option<PathBuf>,
    module: PluginModuleRef,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.manifest.name)
            .field("kinds", &self.kinds)
            .field("library", &self.library)
            .finish()
    }
}

impl LoadedPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The root module, for constructing plugin objects.
    pub fn module(&self) -> PluginModuleRef {
        self.module
    }

    /// Where the plugin came from, for messages: the crate directory or the library file.
    pub fn origin(&self) -> &Path {
        self.crate_dir.as_deref().unwrap_or(&self.library)
    }

    /// Loads a plugin from a crate directory (building it when needed) or a library file.
    pub fn open(path: &Path) -> Result<LoadedPlugin> {
        if is_library_file(path) {
            if !path.exists() {
                bail!("plugin library {} does not exist", path.display());
            }
            return Self::load_library(path, None);
        }
        if super::installed::is_installed_dir(path) {
            return super::installed::Installed::read(path)?.open();
        }
        if !path.exists() && path.is_absolute() {
            bail!("plugin directory {} does not exist", path.display());
        }
        if !path.exists() {
            bail!(
                "plugin directory {} does not exist here, under {}, or as an installed plugin in {} (install one with `openclaw-host plugins install <crate dir | git URL | library>`)",
                path.display(),
                super::discover::roots()
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
                super::installed::plugin_dir().display()
            );
        }
        let toml = PluginToml::read(path)?;
        let krate = CrateLibrary::locate(path)?;
        let library = krate.ensure_built()?;
        let plugin = Self::load_library(&library, Some(path.to_path_buf()))?;
        plugin.check_against(&toml)?;
        Ok(plugin)
    }

    /// Loads a library file and checks its ABI and its manifest.
    pub fn load_library(library: &Path, crate_dir: Option<PathBuf>) -> Result<LoadedPlugin> {
        let module = lib_header_from_path(library)
            .and_then(|h| h.init_root_module::<PluginModuleRef>())
            .map_err(|e| describe_load_error(library, e))?;
        let manifest = (module.manifest())().into_result().map_err(|e| {
            anyhow!(
                "plugin library {}: its manifest failed: {e}",
                library.display()
            )
        })?;
        let mut kinds = Vec::new();
        for k in &manifest.kinds {
            let kind: PluginKind = k.as_str().parse().map_err(|e: String| {
                anyhow!(
                    "plugin `{}` ({}) claims a kind this host does not know: {e}",
                    manifest.name,
                    library.display()
                )
            })?;
            let provided = match kind {
                PluginKind::Loss => module.loss_ctor().is_some(),
                PluginKind::Reward => module.reward_ctor().is_some(),
                PluginKind::Rollout => module.rollout_ctor().is_some(),
                PluginKind::Generate => module.generate_ctor().is_some(),
                PluginKind::Env => module.env_ctor().is_some(),
            };
            if !provided {
                bail!(
                    "plugin `{}` ({}) claims kind `{kind}` but its library has no {kind} constructor",
                    manifest.name,
                    library.display()
                );
            }
            kinds.push(kind);
        }
        Ok(LoadedPlugin {
            manifest,
            kinds,
            library: library.to_path_buf(),
            crate_dir,
            module,
        })
    }

    /// Checks the library's manifest against its crate's `plugin.toml`.
    pub fn check_against(&self, toml: &PluginToml) -> Result<()> {
        let m = &self.manifest;
        if m.name.as_str() != toml.name {
            bail!(
                "{}: plugin.toml names the plugin `{}` but its library says `{}`",
                toml.dir.display(),
                toml.name,
                m.name
            );
        }
        if m.version.as_str() != toml.version {
            bail!(
                "{}: plugin.toml says version {} but its library says {} (rebuild it, or fix plugin.toml)",
                toml.dir.display(),
                toml.version,
                m.version
            );
        }
        for k in &toml.kinds {
            if !self.kinds.contains(k) {
                bail!(
                    "{}: plugin.toml claims kind `{k}` but the library `{}` does not provide it (it provides: {})",
                    toml.dir.display(),
                    m.name,
                    kind_list(&self.kinds)
                );
            }
        }
        Ok(())
    }

    /// Whether the plugin provides `kind`.
    pub fn has(&self, kind: PluginKind) -> bool {
        self.kinds.contains(&kind)
    }
}

/// Kinds as a comma-separated list.
pub fn kind_list(kinds: &[PluginKind]) -> String {
    if kinds.is_empty() {
        return "none".into();
    }
    kinds
        .iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a path names a dynamic library rather than a crate directory.
pub fn is_library_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("so" | "dylib" | "dll")
    )
}

/// One line for a load failure. abi_stable's layout reports run to hundreds of lines: they go
/// to the debug log, not the terminal.
fn describe_load_error(library: &Path, e: LibraryError) -> anyhow::Error {
    let lib = library.display();
    let full = e.to_string();
    tracing::debug!("loading {lib} failed:\n{full}");
    match e {
        LibraryError::OpenError { .. } => {
            // abi_stable words it "Could not open library at:\n\t<path>\nbecause:\n\t<why>":
            // the reason is after "because:".
            let why = full
                .split_once("because:")
                .map_or(full.as_str(), |(_, w)| w)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            anyhow!("cannot open plugin library {lib}: {why}")
        }
        LibraryError::GetSymbolError { .. } => anyhow!(
            "{lib} is not an openclaw-host plugin: it exports no plugin root module (expected a library built with openclaw_plugin_api::export_plugin!)"
        ),
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => anyhow!(
            "plugin library {lib} was built against plugin API {actual_version}, which this host (plugin API {expected_version}) cannot load; rebuild the plugin against openclaw-plugin-api {API_VERSION}"
        ),
        LibraryError::AbiInstability(_) => anyhow!(
            "plugin library {lib} has an ABI layout incompatible with this host's plugin API {API_VERSION} (types differ); rebuild it against this version (RUST_LOG=debug shows the full layout report)"
        ),
        LibraryError::InvalidAbiHeader(h) => anyhow!(
            "plugin library {lib} was built with an incompatible abi_stable ({h:?}); rebuild it against openclaw-plugin-api {API_VERSION}"
        ),
        other => {
            let first = other.to_string();
            let first = first.lines().next().unwrap_or("").trim().to_string();
            anyhow!("cannot load plugin library {lib}: {first}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_that_cannot_be_opened_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnot_a_plugin.so");
        std::fs::write(&lib, "this is text, not a shared library").unwrap();
        let e = format!(
            "{:#}",
            LoadedPlugin::open(&lib).map(|_| ()).expect_err("refused")
        );
        assert!(e.contains("cannot open plugin library"), "{e}");
        // The loader's own reason, not abi_stable's heading.
        assert!(
            !e.trim_end().ends_with("at:") && !e.contains("Could not open library at"),
            "{e}"
        );
        assert!(e.contains("ELF") || e.contains("too short"), "{e}");
    }
}

//! The plugins a run has loaded, by name.

use super::discover;
use super::load::LoadedPlugin;
use anyhow::{bail, Result};
use openclaw_plugin_api::PluginKind;
use std::path::Path;

/// The loaded plugins of a process. Names are unique.
#[derive(Default, Debug)]
pub struct Registry {
    plugins: Vec<LoadedPlugin>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads `NAME|DIR|LIBRARY` (building the crate when needed) and adds it. Loading the same
    /// library twice returns the one already loaded; two different plugins with one name are
    /// refused.
    pub fn load(&mut self, spec: &str) -> Result<&LoadedPlugin> {
        let path = discover::resolve(spec)?;
        let plugin = LoadedPlugin::open(&path)?;
        self.add(plugin)
    }

    /// Adds a loaded plugin, refusing a second plugin with the same name.
    pub fn add(&mut self, plugin: LoadedPlugin) -> Result<&LoadedPlugin> {
        if let Some(i) = self.plugins.iter().position(|p| p.name() == plugin.name()) {
            let existing = &self.plugins[i];
            if same_file(&existing.library, &plugin.library) {
                return Ok(&self.plugins[i]);
            }
            bail!(
                "two plugins are named `{}`: {} and {}",
                plugin.name(),
                existing.origin().display(),
                plugin.origin().display()
            );
        }
        self.plugins.push(plugin);
        Ok(self.plugins.last().unwrap())
    }

    /// The plugin with this name.
    pub fn get(&self, name: &str) -> Option<&LoadedPlugin> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    /// All loaded plugins, in load order.
    pub fn plugins(&self) -> &[LoadedPlugin] {
        &self.plugins
    }

    /// The loaded plugins that provide `kind`.
    pub fn with_kind(&self, kind: PluginKind) -> impl Iterator<Item = &LoadedPlugin> {
        self.plugins.iter().filter(move |p| p.has(kind))
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

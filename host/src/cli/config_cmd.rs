//! `openclaw-host config`: the resolved configuration, annotated.

use super::flags::RunFlags;
use crate::config::{render, resolve, PluginConfigs};
use crate::plugin::assign::assign;
use crate::plugin::Registry;
use anyhow::Result;

pub fn run(flags: &RunFlags) -> Result<i32> {
    // Resolve once to learn which plugins the run uses, then again with their defaults.
    let first = resolve(&flags.inputs(), &PluginConfigs::default())?;
    let mut registry = Registry::new();
    let assignments = assign(&first.config, &mut registry)?;
    let mut plugins = PluginConfigs {
        loaded: true,
        ..Default::default()
    };
    let main_name = registry
        .plugins()
        .first()
        .filter(|_| !first.config.plugin.is_empty())
        .map(|p| p.name().to_string());
    for p in registry.plugins() {
        let entry = (p.name().to_string(), p.manifest.default_config.to_string());
        if Some(p.name()) == main_name.as_deref() {
            plugins.main = Some(entry);
        } else {
            plugins.others.push(entry);
        }
    }
    let resolved = resolve(&flags.inputs(), &plugins)?;
    if !assignments.is_empty() {
        println!("# plugins of this run:");
        for a in &assignments {
            let p = registry
                .get(&a.plugin)
                .expect("assigned plugins are loaded");
            println!(
                "#   {:<8} {} {} ({}, via {})",
                a.kind.as_str(),
                p.name(),
                p.manifest.version,
                p.origin().display(),
                a.via
            );
        }
    }
    print!("{}", render(&resolved));
    Ok(0)
}

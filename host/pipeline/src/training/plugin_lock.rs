//! The run's plugin lockfile (`openclaw-plugins.lock`): written into every checkpoint, and
//! compared with the checkpoint's own when a run resumes from one.

use anyhow::Result;
use openclaw_config::RunConfig;
use openclaw_plugins::lockfile::{Locked, Lockfile, LOCK_FILE};
use openclaw_plugins::RunPlugins;
use openclaw_trainer::ExtraFile;
use std::path::Path;

/// The plugins `cfg` runs with: those loaded for it and, when the run has an environment
/// loaded here (not a remote pool), the environment's plugin.
pub fn of_run(cfg: &RunConfig, plugins: &RunPlugins) -> Result<Lockfile> {
    let mut entries = plugins
        .registry
        .plugins()
        .iter()
        .map(Locked::of)
        .collect::<Result<Vec<_>>>()?;
    if !cfg.env.is_empty() && cfg.env_pool_url.is_empty() {
        // Best effort: `train` names an environment it does not load.
        match openclaw_episodes::setup::env_location(&cfg.env).and_then(|at| Locked::at(&at)) {
            Ok(entry) => entries.push(entry),
            Err(e) => tracing::warn!(
                "the plugin lockfile leaves out environment `{}`: {e:#}",
                cfg.env
            ),
        }
    }
    Ok(Lockfile::new(entries))
}

/// The lockfile as a checkpoint's extra file.
pub fn extra_file(lock: &Lockfile) -> ExtraFile {
    ExtraFile {
        name: LOCK_FILE.into(),
        contents: lock.to_toml().into_bytes(),
    }
}

/// Warns, one line each, of the plugins that changed since the checkpoint `resumed_from` was
/// written (a checkpoint from before lockfiles says nothing).
pub fn warn_of_changes(resumed_from: &Path, now: &Lockfile) {
    match Lockfile::read_in(resumed_from) {
        Ok(Some(then)) => {
            for change in now.changes_since(&then) {
                tracing::warn!(
                    "plugins changed since {} was written: {change}",
                    resumed_from.display()
                );
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!("{e:#}"),
    }
}

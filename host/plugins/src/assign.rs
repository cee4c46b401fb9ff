//! Which plugin serves each kind in a run: the method (`--plugin`), with single kinds replaced
//! by `--custom-loss-function-path`, `--custom-rm-path`, `--rollout-function-path` and
//! `--custom-generate-function-path`.

use super::registry::Registry;
use anyhow::{bail, Result};
use openclaw_config::RunConfig;
use openclaw_plugin_api::PluginKind;

/// One kind's plugin.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The kind.
    pub kind: PluginKind,
    /// The plugin's name in the registry.
    pub plugin: String,
    /// Why: `--plugin` or the replacing flag.
    pub via: &'static str,
}

/// The replacement settings, by kind.
pub const REPLACEMENTS: [(PluginKind, &str, &str); 4] = [
    (
        PluginKind::Loss,
        "custom_loss_function_path",
        "--custom-loss-function-path",
    ),
    (PluginKind::Reward, "custom_rm_path", "--custom-rm-path"),
    (
        PluginKind::Rollout,
        "rollout_function_path",
        "--rollout-function-path",
    ),
    (
        PluginKind::Generate,
        "custom_generate_function_path",
        "--custom-generate-function-path",
    ),
];

fn replacement_spec(cfg: &RunConfig, kind: PluginKind) -> &str {
    match kind {
        PluginKind::Loss => &cfg.custom_loss_function_path,
        PluginKind::Reward => &cfg.custom_rm_path,
        PluginKind::Rollout => &cfg.rollout_function_path,
        PluginKind::Generate => &cfg.custom_generate_function_path,
        PluginKind::Env => "",
    }
}

/// Loads the run's plugins into `registry` and says which serves each kind. A replacement
/// must provide the kind it replaces.
pub fn assign(cfg: &RunConfig, registry: &mut Registry) -> Result<Vec<Assignment>> {
    let mut out = Vec::new();
    if !cfg.plugin.is_empty() {
        let main = registry.load(&cfg.plugin)?.clone();
        for kind in &main.kinds {
            out.push(Assignment {
                kind: *kind,
                plugin: main.name().to_string(),
                via: "--plugin",
            });
        }
    }
    for (kind, _, flag) in REPLACEMENTS {
        let spec = replacement_spec(cfg, kind);
        if spec.is_empty() {
            continue;
        }
        let p = registry.load(spec)?.clone();
        if !p.has(kind) {
            bail!(
                "{flag} {spec}: plugin `{}` does not provide kind `{kind}` (it provides: {})",
                p.name(),
                super::load::kind_list(&p.kinds)
            );
        }
        out.retain(|a| a.kind != kind);
        out.push(Assignment {
            kind,
            plugin: p.name().to_string(),
            via: flag,
        });
    }
    out.sort_by_key(|a| a.kind);
    Ok(out)
}

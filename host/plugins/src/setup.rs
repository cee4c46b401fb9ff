//! A run's plugins: the configuration resolved twice (once to learn which plugins the run
//! uses, then with their default configurations), the plugins loaded, and each kind's object
//! constructed with its resolved configuration.

use super::assign::{assign, Assignment};
use super::{GenerateHandle, LossHandle, Registry, RewardHandle, RolloutHandle};
use anyhow::{anyhow, Result};
use openclaw_config::{resolve, ConfigInputs, PluginConfigs, Resolved};
use openclaw_plugin_api::{HostServices, LossInputs, PluginKind};

/// The resolved configuration and the loaded plugins of a run.
pub struct RunPlugins {
    /// The configuration, plugin tables included.
    pub resolved: Resolved,
    /// The loaded plugins.
    pub registry: Registry,
    /// Which plugin serves each kind.
    pub assignments: Vec<Assignment>,
}

impl RunPlugins {
    /// Resolves `inputs()` and loads the plugins it names (building them when stale).
    pub fn load(inputs: impl Fn() -> ConfigInputs) -> Result<RunPlugins> {
        let first = resolve(&inputs(), &PluginConfigs::default())?;
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
        let resolved = resolve(&inputs(), &plugins)?;
        Ok(RunPlugins {
            resolved,
            registry,
            assignments,
        })
    }

    /// The plugin serving `kind`, if any.
    pub fn plugin_for(&self, kind: PluginKind) -> Option<&str> {
        self.assignments
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.plugin.as_str())
    }

    /// The resolved configuration (TOML text) of the plugin `name`.
    pub fn config_of(&self, name: &str) -> String {
        self.resolved
            .plugins
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.to_toml())
            .unwrap_or_default()
    }

    fn required(&self, kind: PluginKind) -> Result<&str> {
        self.plugin_for(kind).ok_or_else(|| {
            anyhow!(
                "no plugin provides kind `{kind}`: give --plugin (a method such as methods/combine){}",
                match kind {
                    PluginKind::Loss => " or --custom-loss-function-path",
                    PluginKind::Reward => " or --custom-rm-path",
                    _ => "",
                }
            )
        })
    }

    /// Constructs the run's loss.
    pub fn loss(&self, host: HostServices) -> Result<LossHandle> {
        let name = self.required(PluginKind::Loss)?;
        let p = self
            .registry
            .get(name)
            .expect("assigned plugins are loaded");
        LossHandle::new(p, &self.config_of(name), host)
    }

    /// What the run's loss reads besides the policy's and behaviour log-probabilities, as its
    /// plugin states it. A library built against plugin API 1.0 cannot say; it gets
    /// [`LossInputs::by_convention`], what hosts before 1.1 gave every loss.
    pub fn loss_inputs(&self) -> Result<LossInputs> {
        let name = self.required(PluginKind::Loss)?;
        let p = self
            .registry
            .get(name)
            .expect("assigned plugins are loaded");
        match p.module().loss_inputs_fn() {
            Some(f) => f(self.config_of(name).into())
                .into_result()
                .map_err(|e| anyhow!("plugin `{name}`: cannot state its loss inputs: {e}")),
            None => {
                let config = self.config_of(name);
                tracing::info!(
                    "plugin `{name}` (plugin API 1.0) does not state its loss inputs: the convention applies (a reference for a positive kl_coef, a frozen teacher)"
                );
                Ok(LossInputs::by_convention(&config))
            }
        }
    }

    /// Constructs the run's reward.
    pub fn reward(&self, host: HostServices) -> Result<RewardHandle> {
        let name = self.required(PluginKind::Reward)?;
        let p = self
            .registry
            .get(name)
            .expect("assigned plugins are loaded");
        RewardHandle::new(p, &self.config_of(name), host)
    }

    /// Constructs the run's rollout function, when a plugin provides one
    /// (`--rollout-function-path`, or the method itself).
    pub fn rollout(&self, host: HostServices) -> Result<Option<RolloutHandle>> {
        let Some(name) = self.plugin_for(PluginKind::Rollout) else {
            return Ok(None);
        };
        let p = self
            .registry
            .get(name)
            .expect("assigned plugins are loaded");
        RolloutHandle::new(p, &self.config_of(name), host).map(Some)
    }

    /// Constructs the run's generate function, when a plugin provides one
    /// (`--custom-generate-function-path`, or the method itself).
    pub fn generate(&self, host: HostServices) -> Result<Option<GenerateHandle>> {
        let Some(name) = self.plugin_for(PluginKind::Generate) else {
            return Ok(None);
        };
        let p = self
            .registry
            .get(name)
            .expect("assigned plugins are loaded");
        GenerateHandle::new(p, &self.config_of(name), host).map(Some)
    }
}

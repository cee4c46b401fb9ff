//! Plugin objects the host constructed, with calls that turn a plugin's error (or panic) into
//! an error naming the plugin, logged, while the host keeps running.

use super::load::LoadedPlugin;
use super::watch;
use abi_stable::std_types::{RResult, RString};
use anyhow::{anyhow, Result};
use openclaw_plugin_api::ffi::{EnvBox, GenerateBox, LossBox, RewardBox, RolloutBox};
use openclaw_plugin_api::host::{LogLevel, LogSink};
use openclaw_plugin_api::GenerateRequest;
use openclaw_plugin_api::{
    Action, Evaluation, HostServices, LossBatch, LossOutput, Observation, PluginKind,
    RolloutOutput, RolloutRequest, Score, ScoreRequest, StepOutcome, Task, TrainingSample,
    NO_EVALUATE, NO_REFERENCE,
};
use std::sync::Arc;

/// Plugin log lines go to the host's tracing subscriber, tagged with the plugin's name.
pub struct TracingLog {
    plugin: String,
}

impl TracingLog {
    /// A sink for the plugin `name`.
    pub fn new(name: &str) -> Arc<TracingLog> {
        Arc::new(TracingLog {
            plugin: name.to_string(),
        })
    }
}

impl LogSink for TracingLog {
    fn log(&self, level: LogLevel, message: &str) {
        let plugin = self.plugin.as_str();
        match level {
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

fn call<T>(plugin: &str, kind: PluginKind, r: RResult<T, RString>) -> Result<T> {
    r.into_result().map_err(|e| {
        // Callers decide how loud a failure is; the harness expects some.
        tracing::debug!(plugin, kind = kind.as_str(), "plugin call failed: {e}");
        anyhow!("plugin `{plugin}` ({kind}) failed: {e}")
    })
}

fn missing(plugin: &LoadedPlugin, kind: PluginKind) -> anyhow::Error {
    anyhow!(
        "plugin `{}` ({}) does not provide kind `{kind}` (it provides: {})",
        plugin.name(),
        plugin.origin().display(),
        super::load::kind_list(&plugin.kinds)
    )
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $boxed:ty, $kind:expr, $ctor:ident, $ctor_doc:literal) => {
        $(#[$doc])*
        pub struct $name {
            plugin: String,
            inner: $boxed,
        }

        impl $name {
            #[doc = $ctor_doc]
            pub fn new(plugin: &LoadedPlugin, config: &str, host: HostServices) -> Result<Self> {
                let ctor = plugin.module().$ctor().ok_or_else(|| missing(plugin, $kind))?;
                let inner = call(plugin.name(), $kind, ctor(config.into(), host.into_ffi()))?;
                Ok($name {
                    plugin: plugin.name().to_string(),
                    inner,
                })
            }

            /// The name of the plugin this object came from.
            pub fn plugin(&self) -> &str {
                &self.plugin
            }
        }
    };
}

handle!(
    /// A loss plugin object.
    LossHandle, LossBox, PluginKind::Loss, loss_ctor,
    "Constructs the plugin's loss with a configuration (TOML text) and the host's services."
);
handle!(
    /// A reward plugin object.
    RewardHandle, RewardBox, PluginKind::Reward, reward_ctor,
    "Constructs the plugin's reward with a configuration (TOML text) and the host's services."
);
handle!(
    /// A rollout plugin object.
    RolloutHandle, RolloutBox, PluginKind::Rollout, rollout_ctor,
    "Constructs the plugin's rollout with a configuration (TOML text) and the host's services."
);
handle!(
    /// A generate plugin object.
    GenerateHandle, GenerateBox, PluginKind::Generate, generate_ctor,
    "Constructs the plugin's generate function with a configuration (TOML text) and the host's services."
);
handle!(
    /// An environment plugin object.
    EnvHandle, EnvBox, PluginKind::Env, env_ctor,
    "Constructs the plugin's environment with a configuration (TOML text) and the host's services."
);

impl LossHandle {
    /// Computes the loss; the plugin's output is checked for the right shapes.
    pub fn compute(&self, batch: &LossBatch) -> Result<LossOutput> {
        let out = watch::watched(&self.plugin, PluginKind::Loss, "compute", || {
            call(&self.plugin, PluginKind::Loss, self.inner.compute(batch))
        })?;
        let tokens = batch.num_tokens();
        if out.grad_logp.len() != tokens {
            return Err(anyhow!(
                "plugin `{}` (loss) returned {} gradients for {tokens} tokens",
                self.plugin,
                out.grad_logp.len()
            ));
        }
        Ok(out)
    }
}

impl RewardHandle {
    /// Scores one turn.
    pub fn score(&self, request: &ScoreRequest) -> Result<Score> {
        watch::watched(&self.plugin, PluginKind::Reward, "score", || {
            call(&self.plugin, PluginKind::Reward, self.inner.score(request))
        })
    }
}

impl RolloutHandle {
    /// Produces one batch.
    pub fn rollout(&self, request: &RolloutRequest) -> Result<RolloutOutput> {
        watch::watched(&self.plugin, PluginKind::Rollout, "rollout", || {
            call(
                &self.plugin,
                PluginKind::Rollout,
                self.inner.rollout(request),
            )
        })
    }
}

impl GenerateHandle {
    /// Generates for one prompt.
    pub fn generate(&self, request: &GenerateRequest) -> Result<Vec<TrainingSample>> {
        watch::watched(&self.plugin, PluginKind::Generate, "generate", || {
            call(
                &self.plugin,
                PluginKind::Generate,
                self.inner.generate(request),
            )
        })
        .map(Vec::from)
    }
}

impl EnvHandle {
    /// The tasks of a split.
    pub fn tasks(&self, split: &str) -> Result<Vec<Task>> {
        call(
            &self.plugin,
            PluginKind::Env,
            self.inner.tasks(split.into()),
        )
        .map(Vec::from)
    }
    /// Starts an episode.
    pub fn reset(&self, task: &Task, seed: u64) -> Result<(u64, Observation)> {
        call(&self.plugin, PluginKind::Env, self.inner.reset(task, seed)).map(|t| (t.0, t.1))
    }
    /// Applies an action.
    pub fn step(&self, episode: u64, action: &Action) -> Result<StepOutcome> {
        call(
            &self.plugin,
            PluginKind::Env,
            self.inner.step(episode, action),
        )
    }
    /// Ends an episode.
    pub fn close(&self, episode: u64) -> Result<()> {
        call(&self.plugin, PluginKind::Env, self.inner.close(episode))
    }
    /// Scores an episode after its loop (`Ok(None)` when the environment does not evaluate:
    /// it scores by step rewards, or was built against API 1.1).
    pub fn evaluate(&self, episode: u64) -> Result<Option<Evaluation>> {
        match self.inner.evaluate(episode).into_result() {
            Err(e) if e.as_str() == NO_EVALUATE => Ok(None),
            r => call(&self.plugin, PluginKind::Env, r.into()).map(Some),
        }
    }
    /// A task's reference solution (`Ok(None)` when the environment has none, or was built
    /// against an API before 1.4).
    pub fn reference(&self, task: &Task) -> Result<Option<Vec<Action>>> {
        match self.inner.reference(task).into_result() {
            Err(e) if e.as_str() == NO_REFERENCE => Ok(None),
            r => call(&self.plugin, PluginKind::Env, r.into()).map(|v| Some(v.into_vec())),
        }
    }
    /// The tasks the environment could not load, one line each.
    pub fn problems(&self) -> Vec<String> {
        self.inner
            .problems()
            .into_iter()
            .map(|s| s.into_string())
            .collect()
    }
}

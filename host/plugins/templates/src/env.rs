//! The environment: the agent counts upwards, one number per step.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, Action, Env, EnvInfo, Evaluation, HostServices, Message, Observation,
    PluginResult, StepOutcome, Task,
};
use std::collections::HashMap;
use std::sync::Mutex;

/// The `[env]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Steps before an episode is cut off.
    pub max_steps: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_steps: 5 }
    }
}

struct Episode {
    start: u32,
    next: u32,
    steps: u32,
}

/// The environment object; episodes are kept by id so parallel workers can share it.
pub struct MyEnv {
    cfg: Config,
    episodes: Mutex<HashMap<u64, Episode>>,
    next_id: Mutex<u64>,
}

impl Env for MyEnv {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "env")?;
        if cfg.max_steps == 0 {
            return Err("env.max_steps must be at least 1".into());
        }
        Ok(MyEnv {
            cfg,
            episodes: Mutex::default(),
            next_id: Mutex::new(0),
        })
    }

    fn tasks(&self, _split: &str) -> PluginResult<Vec<Task>> {
        Ok((1..=3)
            .map(|start| Task {
                id: format!("count-from-{start}").into(),
                instruction: format!("Count upwards from {start}, one number per message.").into(),
                data_json: format!("{{\"start\": {start}}}").into(),
            })
            .collect())
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let start = task
            .id
            .rsplit('-')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        let mut id = self.next_id.lock().map_err(|e| e.to_string())?;
        *id += 1;
        self.episodes.lock().map_err(|e| e.to_string())?.insert(
            *id,
            Episode {
                start,
                next: start,
                steps: 0,
            },
        );
        let obs = Observation {
            messages: vec![Message::new("user", &task.instruction)].into(),
            tools_json: "".into(),
        };
        Ok((*id, obs))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        let mut eps = self.episodes.lock().map_err(|e| e.to_string())?;
        let ep = eps
            .get_mut(&episode)
            .ok_or_else(|| format!("no episode {episode}"))?;
        ep.steps += 1;
        let said_it = action.message.content.contains(&ep.next.to_string());
        if said_it {
            ep.next += 1;
        }
        let done = ep.steps >= self.cfg.max_steps;
        Ok(StepOutcome {
            observation: Observation {
                messages: vec![Message::new(
                    "user",
                    if said_it {
                        "Good, go on."
                    } else {
                        "That is not the next number."
                    },
                )]
                .into(),
                tools_json: "".into(),
            },
            reward: if said_it { 1.0 } else { -1.0 },
            done,
            info: EnvInfo {
                truncated: done,
                metadata_json: "{}".into(),
            },
        })
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        self.episodes
            .lock()
            .map_err(|e| e.to_string())?
            .remove(&episode);
        Ok(())
    }

    /// The outcome, after the loop (also when the host cut it off): the share of steps that
    /// said the next number.
    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        let eps = self.episodes.lock().map_err(|e| e.to_string())?;
        let ep = eps
            .get(&episode)
            .ok_or_else(|| format!("no episode {episode}"))?;
        let counted = ep.next - ep.start;
        Ok(Evaluation {
            reward: counted as f32 / self.cfg.max_steps as f32,
            solved: counted == self.cfg.max_steps,
            details_json: format!("{{\"counted\": {counted}}}").into(),
        })
    }
}

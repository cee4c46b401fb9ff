//! The reward: reads the next state (the user's reply) for praise or correction.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, PluginResult, Reward, Score, ScoreRequest,
};

/// The `[reward]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Words that mean the answer was good.
    pub positive: Vec<String>,
    /// Words that mean the answer was not.
    pub negative: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            positive: vec!["thanks".into(), "great".into()],
            negative: vec!["wrong".into(), "redo".into()],
        }
    }
}

/// The reward object.
pub struct MyReward {
    cfg: Config,
}

impl Reward for MyReward {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        Ok(MyReward {
            cfg: parse_config_section(config, "reward")?,
        })
    }

    fn score(&self, request: &ScoreRequest) -> PluginResult<Score> {
        let Some(next) = request.turn.next_state.as_ref().into_option() else {
            // Nothing followed the turn: no evidence either way, so it does not train.
            return Ok(Score::default());
        };
        let text = next.content.to_lowercase();
        let has = |words: &[String]| words.iter().any(|w| text.contains(&w.to_lowercase()));
        let value = match (has(&self.cfg.positive), has(&self.cfg.negative)) {
            (true, false) => 1.0,
            (false, true) => -1.0,
            _ => 0.0,
        };
        Ok(Score {
            value,
            trainable: value != 0.0,
            votes: vec![value].into(),
            judge_text: format!("next state read as {value}").into(),
            ..Score::default()
        })
    }
}

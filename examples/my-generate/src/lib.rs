//! my-generate: a custom generate function, slime's `--custom-generate-function-path` in plain
//! Rust. The host calls it once per trajectory with a prompt of its task file (the messages,
//! tools, sampling and the task's data) and trains what it returns, one sample or one per agent
//! step; the host normalises the trajectories' rewards within each prompt's group. Here: the
//! policy's answer, +1 when it keeps to `max_words` words, -1 otherwise (a user who wants short
//! answers). Every sample says in its metadata that this function made it.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, Generate, GenerateRequest, HostServices, PluginResult, Policy,
    TrainingSample,
};

/// The `[generate]` section.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Answers of at most this many words score +1.
    pub max_words: usize,
    /// Cap on tokens per answer.
    pub max_tokens: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_words: 12,
            max_tokens: 64,
        }
    }
}

/// The generate function.
pub struct BriefGenerate {
    cfg: Config,
    policy: Policy,
}

/// The reward of an answer: +1 within `max_words` words, else -1.
pub fn brevity(text: &str, max_words: usize) -> f32 {
    if text.split_whitespace().count() <= max_words {
        1.0
    } else {
        -1.0
    }
}

impl Generate for BriefGenerate {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "generate")?;
        if cfg.max_tokens == 0 {
            return Err("generate.max_tokens must be at least 1".into());
        }
        let policy = host.policy().ok_or("my-generate needs the host's policy")?;
        Ok(BriefGenerate { cfg, policy })
    }

    fn generate(&self, request: &GenerateRequest) -> PluginResult<Vec<TrainingSample>> {
        let mut sampling = request.sampling.clone();
        sampling.max_tokens = sampling.max_tokens.min(self.cfg.max_tokens);
        let g = self
            .policy
            .chat(&request.messages, &request.tools_json, &sampling)?;
        let words = g.message.content.split_whitespace().count();
        let n = g.response_ids.len();
        Ok(vec![TrainingSample {
            // The host names the samples of each trajectory and sets their group.
            session_id: "".into(),
            turn_index: 0,
            group_id: 0,
            prompt_ids: g.prompt_ids,
            response_ids: g.response_ids,
            rollout_logprobs: g.logprobs,
            loss_mask: vec![1.0; n].into(),
            weight_version: g.weight_version,
            reward: brevity(&g.message.content, self.cfg.max_words),
            advantages: None.into(),
            teacher_logprobs: None.into(),
            teacher_topk: None.into(),
            metadata_json: format!("{{\"made_by\": \"my-generate\", \"words\": {words}}}").into(),
        }])
    }
}

openclaw_plugin_api::export_plugin! {
    name: "my-generate",
    description: "A custom generate function: the policy's answer to one prompt, +1 when it keeps to max_words words, -1 otherwise",
    default_config: include_str!("../config.toml"),
    generate: BriefGenerate,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_answers_score_one() {
        assert_eq!(brevity("A cat is an animal.", 12), 1.0);
        assert_eq!(brevity(&"word ".repeat(13), 12), -1.0);
    }
}

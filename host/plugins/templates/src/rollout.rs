//! The rollout: asks the policy a fixed list of prompts and returns its answers as samples.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Message, PluginResult, Policy, Rollout, RolloutOutput,
    RolloutRequest, SamplingParams, TrainingSample,
};

/// The `[rollout]` section of config.toml.
#[derive(Deserialize, Default)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// The prompts to ask, in turn.
    pub prompts: Vec<String>,
}

/// The rollout object.
pub struct MyRollout {
    cfg: Config,
    policy: Policy,
}

impl Rollout for MyRollout {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "rollout")?;
        if cfg.prompts.is_empty() {
            return Err("rollout.prompts is empty".into());
        }
        let policy = host
            .policy()
            .ok_or("this rollout needs the host's policy")?;
        Ok(MyRollout { cfg, policy })
    }

    fn rollout(&self, request: &RolloutRequest) -> PluginResult<RolloutOutput> {
        let mut samples = Vec::new();
        for i in 0..request.batch_size as usize {
            let prompt =
                &self.cfg.prompts[(request.rollout_id as usize + i) % self.cfg.prompts.len()];
            let g = self.policy.chat(
                &[Message::new("user", prompt)],
                "",
                &SamplingParams::default(),
            )?;
            let n = g.response_ids.len();
            samples.push(TrainingSample {
                session_id: format!("rollout-{}", request.rollout_id).into(),
                turn_index: i as u32,
                group_id: i as u64,
                prompt_ids: g.prompt_ids,
                response_ids: g.response_ids,
                rollout_logprobs: g.logprobs,
                loss_mask: vec![1.0; n].into(),
                weight_version: g.weight_version,
                reward: 0.0,
                advantages: None.into(),
                teacher_logprobs: None.into(),
                teacher_topk: None.into(),
                metadata_json: "{}".into(),
            });
        }
        Ok(RolloutOutput {
            samples: samples.into(),
            metrics: Vec::new().into(),
        })
    }
}

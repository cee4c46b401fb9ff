//! The generate function: one prompt in, the policy's answer out as one sample.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, Generate, GenerateRequest, HostServices, PluginResult, Policy,
    TrainingSample,
};

/// The `[generate]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Cap on generated tokens.
    pub max_tokens: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { max_tokens: 64 }
    }
}

/// The generate object.
pub struct MyGenerate {
    cfg: Config,
    policy: Policy,
}

impl Generate for MyGenerate {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg = parse_config_section(config, "generate")?;
        let policy = host
            .policy()
            .ok_or("this generate function needs the host's policy")?;
        Ok(MyGenerate { cfg, policy })
    }

    fn generate(&self, request: &GenerateRequest) -> PluginResult<Vec<TrainingSample>> {
        let mut sampling = request.sampling.clone();
        sampling.max_tokens = sampling.max_tokens.min(self.cfg.max_tokens);
        let g = self
            .policy
            .chat(&request.messages, &request.tools_json, &sampling)?;
        let n = g.response_ids.len();
        Ok(vec![TrainingSample {
            session_id: "generate".into(),
            turn_index: 0,
            group_id: 0,
            prompt_ids: g.prompt_ids,
            response_ids: g.response_ids,
            rollout_logprobs: g.logprobs,
            loss_mask: vec![1.0; n].into(),
            weight_version: g.weight_version,
            reward: 0.0,
            advantages: None.into(),
            teacher_logprobs: None.into(),
            teacher_topk: None.into(),
            metadata_json: request.metadata_json.clone(),
        }])
    }
}

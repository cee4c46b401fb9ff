//! my-rollout: a rollout function, slime's `--rollout-function-path` in plain Rust. The host
//! asks it for a batch (`rollout_id`, `batch_size`, `samples_per_prompt`) and trains what it
//! returns: here, arithmetic questions asked of the host's policy, each `samples_per_prompt`
//! times (a group), each answer rewarded +1 when it contains the right number and -1 otherwise.
//! Every sample says in its metadata that this function made it.

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Message, Metric, PluginResult, Policy, Rollout,
    RolloutOutput, RolloutRequest, SamplingParams, TrainingSample,
};

/// The `[rollout]` section.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// Largest operand.
    pub max_operand: u64,
    /// Tokens per answer.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_operand: 9,
            max_tokens: 48,
            temperature: 1.0,
        }
    }
}

/// The rollout function.
pub struct ArithmeticRollout {
    cfg: Config,
    policy: Policy,
}

/// The question of the `i`-th prompt of rollout `id`, and its answer.
pub fn question(id: u64, i: u64, max: u64) -> (String, u64) {
    // A fixed mix, so a rollout is the same whichever run asks it.
    let x = id
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xBF58_476D));
    let (a, b) = (1 + (x >> 7) % max, 1 + (x >> 23) % max);
    (format!("What is {a} plus {b}?"), a + b)
}

/// Whether `text` says `answer` as a number of its own.
pub fn says(text: &str, answer: u64) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .any(|w| w.parse::<u64>() == Ok(answer))
}

impl Rollout for ArithmeticRollout {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "rollout")?;
        if cfg.max_operand == 0 || cfg.max_tokens == 0 {
            return Err("rollout.max_operand and rollout.max_tokens must be at least 1".into());
        }
        let policy = host.policy().ok_or("my-rollout needs the host's policy")?;
        Ok(ArithmeticRollout { cfg, policy })
    }

    fn rollout(&self, request: &RolloutRequest) -> PluginResult<RolloutOutput> {
        let per = request.samples_per_prompt.max(1) as u64;
        let prompts = (request.batch_size as u64).div_ceil(per).max(1);
        let mut samples = Vec::new();
        let mut right = 0usize;
        for p in 0..prompts {
            let (q, answer) = question(request.rollout_id, p, self.cfg.max_operand);
            for k in 0..per {
                let sampling = SamplingParams {
                    temperature: self.cfg.temperature,
                    max_tokens: self.cfg.max_tokens,
                    seed: Some(request.rollout_id * 1_000_003 + p * 1009 + k).into(),
                    ..SamplingParams::default()
                };
                let g = self
                    .policy
                    .chat(&[Message::new("user", &q)], "", &sampling)?;
                let ok = says(&g.message.content, answer);
                right += usize::from(ok);
                let n = g.response_ids.len();
                samples.push(TrainingSample {
                    session_id: format!("my-rollout-{}-{p}", request.rollout_id).into(),
                    turn_index: k as u32,
                    group_id: request.rollout_id * 1_000_003 + p,
                    prompt_ids: g.prompt_ids,
                    response_ids: g.response_ids,
                    rollout_logprobs: g.logprobs,
                    loss_mask: vec![1.0; n].into(),
                    weight_version: g.weight_version,
                    reward: if ok { 1.0 } else { -1.0 },
                    advantages: None.into(),
                    teacher_logprobs: None.into(),
                    teacher_topk: None.into(),
                    metadata_json: format!(
                        "{{\"made_by\": \"my-rollout\", \"rollout_id\": {}, \"question\": \"{q}\", \"right\": {ok}}}",
                        request.rollout_id
                    )
                    .into(),
                });
            }
        }
        let share = right as f64 / samples.len().max(1) as f64;
        Ok(RolloutOutput {
            samples: samples.into(),
            metrics: vec![Metric::new("right_share", share)].into(),
        })
    }
}

openclaw_plugin_api::export_plugin! {
    name: "my-rollout",
    description: "A rollout function: arithmetic questions asked of the policy in groups, +1 when the answer has the right number, -1 otherwise",
    default_config: include_str!("../config.toml"),
    rollout: ArithmeticRollout,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_fixed_and_answers_are_read_as_whole_numbers() {
        let (q, a) = question(3, 1, 9);
        assert_eq!(question(3, 1, 9), (q.clone(), a));
        assert!(q.starts_with("What is ") && (2..=18).contains(&a));
        assert!(says("It is 12.", 12));
        assert!(!says("It is 112.", 12));
        assert!(!says("twelve", 12));
    }
}

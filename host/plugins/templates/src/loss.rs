//! The loss: a clipped policy gradient with the sample's reward as its advantage.
//!
//! The host gives per-token log-probabilities; the loss returns its value and dL/dlogp per
//! token, and the host backpropagates that through the model.

use openclaw_plugin_api::math::{ppo_clip, SampleMean};
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::{
    parse_config_section, HostServices, Loss, LossBatch, LossOutput, Metric, PluginResult,
};

/// The `[loss]` section of config.toml.
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// PPO clip range around ratio 1.
    pub clip_eps: f32,
}

impl Default for Config {
    fn default() -> Self {
        Config { clip_eps: 0.2 }
    }
}

/// The loss object the host constructs once per run.
pub struct MyLoss {
    cfg: Config,
}

impl Loss for MyLoss {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "loss")?;
        if !(0.0..1.0).contains(&cfg.clip_eps) {
            return Err(format!(
                "loss.clip_eps must be in [0, 1), got {}",
                cfg.clip_eps
            ));
        }
        Ok(MyLoss { cfg })
    }

    fn compute(&self, batch: &LossBatch) -> PluginResult<LossOutput> {
        batch.validate()?;
        let reduce = SampleMean::new(batch);
        let owner = batch.token_samples();
        let mut loss = 0.0;
        let mut grad = vec![0.0f32; batch.num_tokens()];
        let mut clipped = 0.0;
        for t in 0..batch.num_tokens() {
            let w = reduce.weight(t);
            if w == 0.0 {
                continue; // masked token, or a sample with nothing to train
            }
            let advantage = batch.rewards[owner[t]];
            let tok = ppo_clip(
                batch.logp[t],
                batch.old_logp[t],
                advantage,
                self.cfg.clip_eps,
                self.cfg.clip_eps,
            );
            loss += w * tok.loss;
            grad[t] = (w * tok.grad) as f32;
            clipped += tok.clipped as u8 as f64;
        }
        let counted = batch.loss_mask.iter().filter(|m| **m != 0.0).count().max(1) as f64;
        Ok(LossOutput {
            loss,
            grad_logp: grad.into(),
            grad_topk: Vec::new().into(),
            metrics: vec![
                Metric::new("pg_loss", loss),
                Metric::new("pg_clipfrac", clipped / counted),
                Metric::new(
                    "ppo_kl",
                    reduce.token_mean(|t| (batch.old_logp[t] - batch.logp[t]) as f64),
                ),
            ]
            .into(),
        })
    }
}

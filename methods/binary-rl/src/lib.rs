//! Binary RL loss plugin: the PPO clipped surrogate on reward advantages.
//!
//! Each sample's scalar reward (from the judge's majority vote, or a precomputed per-token
//! advantage) becomes the advantage of its tokens; the loss is the asymmetric PPO-clip
//! surrogate, optionally with a k3 KL penalty against a reference model and a truncated
//! importance weight for the rollout/train policy mismatch. See README.md.

mod advantage;
mod config;
mod loss;

pub use advantage::reward_advantages;
pub use config::{BinaryRlConfig, DEFAULT_CONFIG};
pub use loss::BinaryRlLoss;

openclaw_plugin_api::export_plugin! {
    name: "binary-rl",
    description: "PPO-clip policy gradient on per-sample reward advantages (binary RL / GRPO)",
    default_config: include_str!("../config.toml"),
    loss: BinaryRlLoss,
}

#[cfg(test)]
mod tests {
    use openclaw_plugin_api::toml;

    #[test]
    fn the_manifest_agrees_with_plugin_toml() {
        let m = super::__openclaw_plugin_manifest().unwrap();
        let file: toml::Table = toml::from_str(include_str!("../plugin.toml")).unwrap();
        let p = file["plugin"].as_table().unwrap();
        assert_eq!(p["name"].as_str(), Some(m.name.as_str()));
        assert_eq!(p["version"].as_str(), Some(m.version.as_str()));
        assert_eq!(p["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
        assert_eq!(p["description"].as_str(), Some(m.description.as_str()));
        assert_eq!(m.kinds.len(), 1);
        assert_eq!(m.kinds[0].as_str(), "loss");
        assert_eq!(p["kinds"].as_array().unwrap().len(), 1);
        assert_eq!(m.default_config.as_str(), super::DEFAULT_CONFIG);
    }

    #[test]
    fn the_exported_constructor_builds_the_loss() {
        use openclaw_plugin_api::{HostServices, Loss, LossBatch};
        let ctor = super::__openclaw_plugin_root().loss_ctor().unwrap();
        let err = ctor(
            "eps_clip = 1.5".into(),
            HostServices::standalone().into_ffi(),
        )
        .into_result()
        .err()
        .unwrap();
        assert!(err.contains("eps_clip"), "{err}");
        let ffi = ctor(
            super::DEFAULT_CONFIG.into(),
            HostServices::standalone().into_ffi(),
        )
        .into_result()
        .unwrap_or_else(|e| panic!("{e}"));
        let batch = LossBatch {
            sample_offsets: vec![0, 1, 3].into(),
            logp: vec![-1.0, -0.8, -2.0].into(),
            old_logp: vec![-1.1, -0.9, -1.9].into(),
            rollout_logp: vec![-1.1, -0.9, -1.9].into(),
            loss_mask: vec![1.0, 1.0, 0.0].into(),
            rewards: vec![1.0, -1.0].into(),
            group_ids: vec![0, 1].into(),
            step_samples: 2,
            ..Default::default()
        };
        let direct =
            super::BinaryRlLoss::new(super::DEFAULT_CONFIG, HostServices::standalone()).unwrap();
        assert_eq!(
            ffi.compute(&batch).into_result().unwrap(),
            direct.compute(&batch).unwrap()
        );
    }
}

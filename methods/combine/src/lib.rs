//! Combined loss plugin: on-policy distillation and binary RL in one advantage.
//!
//! Each token's advantage is `w_opd·(teacher_logp - old_logp) + w_rl·A_rl`, where the teacher
//! term is 0 for samples without a teacher and `A_rl` is the reward advantage of binary-rl;
//! the loss is the asymmetric PPO clipped surrogate, optionally with a k3 KL penalty and a
//! truncated importance weight. See README.md.

mod advantage;
mod config;
mod loss;

pub use advantage::AdvantageParts;
pub use config::{CombineConfig, DEFAULT_CONFIG};
pub use loss::CombineLoss;

openclaw_plugin_api::export_plugin! {
    name: "combine",
    description: "PPO-clip on a weighted sum of teacher-minus-student token advantages and reward advantages",
    default_config: include_str!("../config.toml"),
    loss: CombineLoss,
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
        let err = ctor("w_opd = nan".into(), HostServices::standalone().into_ffi())
            .into_result()
            .err()
            .unwrap();
        assert!(err.contains("w_opd"), "{err}");
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
            teacher_logp: Some(vec![-0.5, -1.0, -0.7].into()).into(),
            loss_mask: vec![1.0, 1.0, 0.0].into(),
            rewards: vec![1.0, -1.0].into(),
            group_ids: vec![0, 1].into(),
            step_samples: 2,
            ..Default::default()
        };
        let direct =
            super::CombineLoss::new(super::DEFAULT_CONFIG, HostServices::standalone()).unwrap();
        assert_eq!(
            ffi.compute(&batch).into_result().unwrap(),
            direct.compute(&batch).unwrap()
        );
    }
}

//! `my-method`: a custom loss plugin, and the template for writing your own.
//!
//! A loss plugin is an ordinary Rust library that depends on `openclaw-plugin-api` only:
//!
//! 1. `config.rs` reads the plugin's settings (defaults in `config.toml`),
//! 2. `loss.rs` turns per-token log-probs into a loss and its gradient,
//! 3. `export_plugin!` below makes the library loadable by `openclaw-host`.
//!
//! Copy this folder, rename the package, the plugin and the types, and change the math.

mod config;
mod loss;
mod reward;

pub use config::{MyConfig, DEFAULT_CONFIG};
pub use loss::MyLoss;
pub use reward::{classifier_text, MyReward, MyRewardConfig};

// The name is what `--plugin` and the logs call it; `loss: MyLoss` says this library provides
// a loss, built by `MyLoss::new`.
openclaw_plugin_api::export_plugin! {
    name: "my-method",
    description: "A clipped policy-gradient loss with a KL penalty, and a classifier reward model, written in plain Rust as a template",
    default_config: include_str!("../config.toml"),
    loss: MyLoss,
    reward: MyReward,
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_manifest_agrees_with_plugin_toml() {
        let m = super::__openclaw_plugin_manifest().unwrap();
        let kinds = openclaw_plugin_api::testing::assert_manifest_matches(
            &m,
            include_str!("../plugin.toml"),
            env!("CARGO_PKG_VERSION"),
        );
        assert_eq!(kinds, ["loss", "reward"]);
        assert_eq!(m.default_config.as_str(), super::DEFAULT_CONFIG);
    }

    #[test]
    fn the_exported_constructor_builds_the_loss() {
        use openclaw_plugin_api::{HostServices, Loss, LossBatch};
        let ctor = super::__openclaw_plugin_root().loss_ctor().unwrap();
        let err = ctor(
            "clip_eps = 1.5".into(),
            HostServices::standalone().into_ffi(),
        )
        .into_result()
        .err()
        .unwrap();
        assert!(err.contains("clip_eps"), "{err}");
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
        let direct = super::MyLoss::new(super::DEFAULT_CONFIG, HostServices::standalone()).unwrap();
        assert_eq!(
            ffi.compute(&batch).into_result().unwrap(),
            direct.compute(&batch).unwrap()
        );
    }
}

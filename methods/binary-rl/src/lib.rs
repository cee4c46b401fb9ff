//! Binary RL plugin: a judge scores each turn from its next state, and the PPO clipped
//! surrogate trains on the scores.
//!
//! The reward kind asks the judge model, `judge.votes` times, whether the next state (the
//! user's reply or the tool's output) shows that the turn made progress (+1), needed a
//! correction (-1) or cannot tell (0), and takes the majority. The loss kind makes each
//! sample's scalar reward (or a precomputed per-token advantage) the advantage of its tokens
//! in the asymmetric PPO-clip surrogate, optionally with a k3 KL penalty against a reference
//! model and a truncated importance weight for the rollout/train policy mismatch. See
//! README.md.

mod advantage;
mod config;
mod loss;
mod reward;

pub use advantage::reward_advantages;
pub use config::{BinaryRlConfig, BinaryRlRewardConfig, DEFAULT_CONFIG};
pub use loss::BinaryRlLoss;
pub use reward::{verdict_score, BinaryRlReward};

openclaw_plugin_api::export_plugin! {
    name: "binary-rl",
    description: "Binary RL: a majority-vote judge scores each turn +1/-1/0 from its next state; PPO-clip on the reward advantages",
    default_config: include_str!("../config.toml"),
    loss: BinaryRlLoss,
    reward: BinaryRlReward,
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

    #[test]
    fn the_library_states_that_only_a_kl_term_needs_the_reference() {
        let inputs = super::__openclaw_plugin_root().loss_inputs_fn().unwrap();
        let of = |config: &str| inputs(config.into()).into_result().unwrap();
        assert!(!of(super::DEFAULT_CONFIG).reference_logprobs);
        let with_kl = of("kl_coef = 0.05");
        assert!(with_kl.reference_logprobs && !with_kl.teacher_logprobs);
        let e = inputs("kl_coef = -1".into()).into_result().unwrap_err();
        assert!(e.contains("kl_coef"), "{e}");
    }

    #[test]
    fn the_exported_constructor_builds_the_reward() {
        use openclaw_judging::scripted::ScriptedJudge;
        use openclaw_plugin_api::HostServices;
        use std::sync::Arc;
        let ctor = super::__openclaw_plugin_root().reward_ctor().unwrap();
        let err = ctor(
            super::DEFAULT_CONFIG.into(),
            HostServices::standalone().into_ffi(),
        )
        .into_result()
        .err()
        .unwrap();
        assert!(err.contains("judge"), "{err}");
        let host = HostServices::builder()
            .judge(Arc::new(ScriptedJudge::always(&["\\boxed{1}"])))
            .build();
        let reward = ctor(super::DEFAULT_CONFIG.into(), host.into_ffi())
            .into_result()
            .unwrap_or_else(|e| panic!("{e}"));
        let turn: openclaw_plugin_api::Turn = openclaw_plugin_api::serde_json::from_str(
            r#"{"session_id":"s","turn_index":0,"turn_type":"main","prompt_messages":[],
                "response":{"role":"assistant","content":"done"},"prompt_ids":[],
                "response_ids":[1],"response_logprobs":[-0.5],"weight_version":0,
                "next_state":{"role":"user","content":"thanks!"},"trainable":true}"#,
        )
        .unwrap();
        let score = reward
            .score(&openclaw_plugin_api::ScoreRequest {
                turn,
                response_text: "done".into(),
                session_closed: false,
                judge: Default::default(),
            })
            .into_result()
            .unwrap();
        assert_eq!(
            (score.value, score.trainable, score.votes.len()),
            (1.0, true, 3)
        );
    }
}

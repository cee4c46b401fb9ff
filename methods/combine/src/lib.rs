//! Combined plugin: on-policy distillation and binary RL in one sample and one advantage.
//!
//! The reward kind runs the hint judge (with the hinted teacher) and the binary-RL votes on
//! each turn concurrently and merges them into at most one sample (with `w_opd = 0` it runs the
//! binary-RL votes alone, and the samples are binary-rl's). In the loss, each token's
//! advantage is `w_opd·(teacher_logp - old_logp) + w_rl·A_rl`, where the teacher
//! term is 0 for samples without a teacher and `A_rl` is the reward advantage of binary-rl;
//! the loss is the asymmetric PPO clipped surrogate, optionally with a k3 KL penalty and a
//! truncated importance weight. See README.md.

mod advantage;
mod config;
mod loss;
mod reward;

pub use advantage::AdvantageParts;
pub use config::{CombineConfig, CombineRewardConfig, DEFAULT_CONFIG};
pub use loss::CombineLoss;
pub use reward::{combined_score, sample_kind, CombineReward};

openclaw_plugin_api::export_plugin! {
    name: "combine",
    description: "Hint judge with hinted teacher (unless w_opd = 0) and majority-vote judge score on each turn, run concurrently; PPO-clip on a weighted sum of teacher-minus-student token advantages and reward advantages",
    default_config: include_str!("../config.toml"),
    loss: CombineLoss,
    reward: CombineReward,
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

    #[test]
    fn the_exported_constructor_builds_the_reward() {
        use openclaw_judging::scripted::{ScriptedJudge, ScriptedPolicy};
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
            .judge(Arc::new(ScriptedJudge::always(&[
                "\\boxed{1} [HINT_START]Answer in one line.[HINT_END]",
            ])))
            .policy(Arc::new(ScriptedPolicy::default()))
            .build();
        let reward = ctor(super::DEFAULT_CONFIG.into(), host.into_ffi())
            .into_result()
            .unwrap_or_else(|e| panic!("{e}"));
        let turn: openclaw_plugin_api::Turn = openclaw_plugin_api::serde_json::from_str(
            r#"{"session_id":"s","turn_index":0,"turn_type":"main",
                "prompt_messages":[{"role":"user","content":"hi"}],
                "response":{"role":"assistant","content":"hello there"},"prompt_ids":[],
                "response_ids":[1,2],"response_logprobs":[-0.5,-0.5],"weight_version":0,
                "next_state":{"role":"user","content":"shorter please"},"trainable":true}"#,
        )
        .unwrap();
        let score = reward
            .score(&openclaw_plugin_api::ScoreRequest {
                turn,
                response_text: "hello there".into(),
                session_closed: false,
                judge: Default::default(),
            })
            .into_result()
            .unwrap();
        assert_eq!((score.value, score.trainable), (1.0, true));
        assert_eq!(score.teacher_logprobs.unwrap().len(), 2);
    }
}

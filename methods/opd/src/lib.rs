//! On-policy distillation (OPD) plugin.
//!
//! The reward kind asks a hint judge whether a turn's next state holds hindsight that would
//! have improved the response, appends the best hint to the turn's prompt, and has the teacher
//! score the turn's exact response tokens under that prompt. For the loss kind: in `token` mode the teacher's log-prob of each sampled token, minus the student's at the
//! start of the step, is that token's advantage in the PPO clipped surrogate. In `topk` mode
//! the loss is the reverse KL from the student to the teacher over the teacher's top-k tokens
//! plus a tail bin. See README.md.

mod config;
mod loss;
mod reward;
mod token;
mod topk;

pub use config::{Mode, OpdConfig, OpdRewardConfig, DEFAULT_CONFIG};
pub use loss::OpdLoss;
pub use reward::{distillation_score, OpdReward};
pub use token::teacher_advantages;
pub use topk::{topk_distillation, TopkRow, MAX_TOPK_LOGSUMEXP};

openclaw_plugin_api::export_plugin! {
    name: "opd",
    description: "On-policy distillation: a judge extracts hindsight hints, the hinted teacher scores the response; PPO-clip on teacher-minus-student token advantages, or reverse KL over the teacher's top-k",
    default_config: include_str!("../config.toml"),
    loss: OpdLoss,
    reward: OpdReward,
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_library_states_that_it_reads_teacher_logprobs() {
        let inputs = super::__openclaw_plugin_root().loss_inputs_fn().unwrap();
        let stated = inputs(super::DEFAULT_CONFIG.into()).into_result().unwrap();
        assert!(stated.teacher_logprobs && !stated.reference_logprobs);
    }

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
            teacher_logp: Some(vec![-0.5, -1.0, -0.7].into()).into(),
            loss_mask: vec![1.0, 1.0, 0.0].into(),
            rewards: vec![1.0, -1.0].into(),
            group_ids: vec![0, 1].into(),
            step_samples: 2,
            ..Default::default()
        };
        let direct =
            super::OpdLoss::new(super::DEFAULT_CONFIG, HostServices::standalone()).unwrap();
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
            .teacher(Arc::new(ScriptedPolicy::default()))
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
        assert!(score.trainable);
        assert_eq!(score.teacher_logprobs.unwrap().len(), 2);
    }
}

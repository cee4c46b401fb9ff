//! `train`'s data: a trajectory file's main, trainable turns, scored by their `reward` field or,
//! where a turn has none, by the method's reward plugin (with the starting model as its policy
//! and the run's judge), ready for the [`Epochs`](super::producer::Epochs) producer.

use crate::training::samples::given_score;
use crate::training::{sample_from, turn_from_record, TurnTokens};
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_buffer::trajectory::read_trajectories;
use openclaw_config::backend::Placement;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_judge as judge;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{HostServices, PluginKind, ScoreRequest, TrainingSample};
use openclaw_plugins::instance::TracingLog;
use openclaw_plugins::{RewardHandle, RunPlugins};
use openclaw_policy::{model_source, policy_engine};
use std::path::Path;
use std::sync::Arc;

/// The samples of one pass over a trajectory file, and what could not be used.
pub struct Dataset {
    /// Main, trainable turns judged trainable, in file order.
    pub samples: Vec<TrainingSample>,
    /// One line per record or turn that was skipped, naming the file, line or turn and why.
    pub skipped: Vec<String>,
    /// Turns the reward judged not trainable.
    pub untrainable: usize,
}

/// The reward plugin with the host's services: the starting model as the policy, the run's
/// judge and the log.
fn reward_plugin<B: Backend>(
    run: &RunPlugins,
    cfg: &RunConfig,
    placement: &Placement<B>,
) -> Result<RewardHandle>
where
    Model<B>: Send + Sync,
{
    let choice = judge::JudgeChoice::resolve(cfg, true, &judge::is_classifier)?;
    eprintln!("{}", choice.describe());
    let engine: Arc<dyn PolicyService> = policy_engine::<B>(cfg, &placement.serve)?;
    // The starting model is not updated while the data is scored: it judges under `--judge self`.
    let judges =
        judge::Judges::load::<B>(&choice, cfg, &placement.judge, &mut || Ok(engine.clone()))?;
    let name = run.plugin_for(PluginKind::Reward).unwrap_or("reward");
    let host = judges
        .give(HostServices::builder())
        .policy(engine)
        .log(TracingLog::new(name))
        .build();
    run.reward(host)
}

impl Dataset {
    /// Reads and scores `cfg.data_path` with the model's tokenizer and template.
    pub fn load<B: Backend>(
        run: &RunPlugins,
        cfg: &RunConfig,
        placement: &Placement<B>,
    ) -> Result<Dataset>
    where
        Model<B>: Send + Sync,
    {
        if cfg.data_path.is_empty() {
            bail!("no data: give --data-path FILE (or DATA_PATH)");
        }
        let data = Path::new(&cfg.data_path);
        let read = read_trajectories(data)?;
        let mut skipped: Vec<String> = read.errors.iter().map(|e| e.to_string()).collect();
        let (tokenizer, template) =
            openclaw_model_store::tokenizer_and_template(&model_source(cfg)?, None)?;
        let tok = TurnTokens {
            tokenizer: &tokenizer,
            template: &template,
        };
        let needs_judge = read
            .trajectories
            .iter()
            .flat_map(|t| &t.turns)
            .any(|t| t.turn_type == "main" && t.trainable && t.reward.is_none());
        let reward = if needs_judge {
            Some(std::sync::Arc::new(
                reward_plugin::<B>(run, cfg, placement).context(
                    "some turns have no `reward` field, so the method's reward plugin scores them",
                )?,
            ))
        } else {
            None
        };
        let settings = judge::settings(cfg);
        let mut samples = Vec::new();
        let mut untrainable = 0usize;
        for (ti, traj) in read.trajectories.iter().enumerate() {
            for (i, rec) in traj.turns.iter().enumerate() {
                if rec.turn_type != "main" || !rec.trainable {
                    continue;
                }
                let at = format!(
                    "{}: session {:?} turns[{i}]",
                    data.display(),
                    traj.session_id
                );
                let turn = match turn_from_record(&traj.session_id, i as u32, rec, &tok) {
                    Ok(t) => t,
                    Err(e) => {
                        skipped.push(format!("{at}: {e:#}"));
                        continue;
                    }
                };
                let score = match (rec.reward, &reward) {
                    (Some(r), _) => given_score(r),
                    (None, Some(plugin)) => {
                        let request = ScoreRequest {
                            response_text: turn.response.content.clone(),
                            session_closed: turn.next_state.is_none(),
                            judge: settings.clone(),
                            turn: turn.clone(),
                        };
                        let timeout = std::time::Duration::from_secs(cfg.judge_timeout);
                        match openclaw_judge::pool::score_within(plugin, &request, timeout, None)
                            .and_then(|s| {
                                openclaw_judge::pool::vote_given(s).map_err(str::to_string)
                            }) {
                            Ok(s) => s,
                            Err(e) => {
                                skipped.push(format!("{at}: {e}"));
                                continue;
                            }
                        }
                    }
                    (None, None) => unreachable!("a reward plugin is loaded when a turn needs one"),
                };
                if !score.trainable {
                    untrainable += 1;
                    continue;
                }
                // One group per file turn: every pass trains the same groups.
                let group = ((ti as u64) << 20) | i as u64;
                samples.push(sample_from(&turn, &score, group));
            }
        }
        Ok(Dataset {
            samples,
            skipped,
            untrainable,
        })
    }
}

//! Producers that hand sample-making to plugins, as slime's hooks do:
//!
//! - [`PluginRollouts`] (`--rollout-function-path`): the rollout plugin makes whole batches with
//!   the host's policy; the host records each batch's samples and trains them.
//! - [`GeneratedGroups`] (`--custom-generate-function-path`): for each prompt of the task file,
//!   `--num-rollouts-per-prompt` calls of the generate plugin, each one trajectory (one sample,
//!   or one per agent step); the trajectories' rewards are normalised within the group as for
//!   environment episodes, and the advantage is given to every sample of the trajectory (unless
//!   the plugin gave advantages itself).
//!
//! The host names what the plugins return (session `gen-<group>-<k>` for generated
//! trajectories, `rollout-<id>:<the plugin's name>` for rollouts, numbered on across restarts), checks that every sample is whole (response
//! tokens, a logprob and a mask value per token), records the samples in the durable buffer and
//! sends them to training in buffer order. A plugin that fails three calls in a row stops the
//! run with its error.

use super::producer::ReplayGate;
use super::samples::SampleMaker;
use super::Producer;
use crate::training::episodes::trajectory_samples;
use anyhow::{bail, Result};
use openclaw_episodes::setup::read_task_messages;
use openclaw_plugin_api::{GenerateRequest, RolloutRequest, SamplingParams, Task, TrainingSample};
use openclaw_plugins::{GenerateHandle, RolloutHandle};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Plugin calls that may fail in a row before the run stops.
const FAILURES_IN_A_ROW: usize = 3;

/// Why a plugin stopped the run, for the command to report.
#[derive(Debug, Default)]
pub struct PluginFailure(Mutex<Option<String>>);

impl PluginFailure {
    /// The error that stopped the run, if one did.
    pub fn get(&self) -> Option<String> {
        self.0.lock().expect("failure lock").clone()
    }

    fn set(&self, why: String) {
        *self.0.lock().expect("failure lock") = Some(why);
    }
}

/// Checks that every sample can train: response tokens, and a logprob (or none, for the trainer
/// to fill) and a mask value per response token.
pub fn check_samples(who: &str, samples: &[TrainingSample]) -> Result<()> {
    for (i, s) in samples.iter().enumerate() {
        let n = s.response_ids.len();
        let problem = if n == 0 {
            Some("has no response tokens".to_string())
        } else if s.loss_mask.len() != n {
            Some(format!(
                "has {} mask values for {n} response tokens",
                s.loss_mask.len()
            ))
        } else if !s.rollout_logprobs.is_empty() && s.rollout_logprobs.len() != n {
            Some(format!(
                "has {} logprobs for {n} response tokens",
                s.rollout_logprobs.len()
            ))
        } else if s
            .advantages
            .as_ref()
            .into_option()
            .is_some_and(|a| a.len() != n)
        {
            Some(format!(
                "has advantages for other than its {n} response tokens"
            ))
        } else if !s.reward.is_finite() {
            Some(format!("has the reward {}", s.reward))
        } else {
            None
        };
        if let Some(p) = problem {
            bail!("{who}: sample {i} (session `{}`) {p}", s.session_id);
        }
    }
    Ok(())
}

/// `--rollout-function-path`: batches made by the rollout plugin.
pub struct PluginRollouts {
    /// The rollout plugin.
    pub rollout: RolloutHandle,
    /// Samples asked for per call (`--rollout-batch-size`).
    pub batch_size: u32,
    /// Samples per prompt the plugin is asked for (`--num-rollouts-per-prompt`).
    pub samples_per_prompt: u32,
    /// The first rollout id (after the buffer's highest).
    pub first_id: u64,
    /// Where samples are recorded and sent.
    pub samples: Arc<SampleMaker>,
    /// Set when the plugin stopped the run.
    pub failure: Arc<PluginFailure>,
    /// Waited for before the first sample (replayed samples train first).
    pub gate: Arc<ReplayGate>,
}

/// Records `samples`: `true` to go on; `false` when training stopped or the buffer failed (then
/// the run is stopped, with the reason for a failure).
fn record(
    samples: &SampleMaker,
    made: Vec<TrainingSample>,
    failure: &PluginFailure,
    stop: &AtomicBool,
) -> bool {
    match samples.record_samples(made) {
        Ok(Some(_)) => true,
        Ok(None) => false,
        Err(e) => {
            let why = format!("cannot record the plugin's samples: {e:#}");
            tracing::error!("{why}");
            failure.set(why);
            stop.store(true, Ordering::SeqCst);
            false
        }
    }
}

impl Producer for PluginRollouts {
    fn name(&self) -> &'static str {
        "rollout"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        if !self.gate.wait(&stop) {
            return Ok(());
        }
        let mut id = self.first_id;
        let mut failed = 0;
        while !stop.load(Ordering::SeqCst) {
            let request = RolloutRequest {
                rollout_id: id,
                batch_size: self.batch_size,
                samples_per_prompt: self.samples_per_prompt,
                evaluation: false,
            };
            let out = self.rollout.rollout(&request).and_then(|out| {
                check_samples(&format!("rollout {id}"), &out.samples)?;
                Ok(out)
            });
            match out {
                Ok(out) => {
                    failed = 0;
                    let metrics: Vec<String> = out
                        .metrics
                        .iter()
                        .map(|m| format!("{}={:.4}", m.name, m.value))
                        .collect();
                    tracing::info!(
                        "rollout {id}: {} samples {}",
                        out.samples.len(),
                        metrics.join(" ")
                    );
                    // The host names each rollout's samples, so ids go on across restarts.
                    let made: Vec<TrainingSample> = out
                        .samples
                        .iter()
                        .cloned()
                        .map(|mut s| {
                            s.session_id = format!("rollout-{id}:{}", s.session_id).into();
                            s
                        })
                        .collect();
                    if !record(&self.samples, made, &self.failure, &stop) {
                        break;
                    }
                    id += 1;
                }
                Err(e) => {
                    failed += 1;
                    tracing::warn!("rollout {id} failed: {e:#}");
                    if failed >= FAILURES_IN_A_ROW {
                        let why = format!(
                            "the rollout plugin failed {failed} times in a row; the last: {e:#}"
                        );
                        self.failure.set(why.clone());
                        stop.store(true, Ordering::SeqCst);
                        bail!(why);
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
        Ok(())
    }
}

/// `--custom-generate-function-path`: groups of trajectories the generate plugin makes for
/// each prompt of the task file.
pub struct GeneratedGroups {
    /// The generate plugin.
    pub generate: GenerateHandle,
    /// The prompts, cycled through in order.
    pub tasks: Vec<Task>,
    /// Trajectories per prompt.
    pub group_size: usize,
    /// Calls running at once (`PARALLEL_ENVS`).
    pub parallel: usize,
    /// How the plugin is asked to sample.
    pub sampling: SamplingParams,
    /// The first group number (after the buffer's highest).
    pub first_group: u64,
    /// Where samples are recorded and sent.
    pub samples: Arc<SampleMaker>,
    /// Set when the plugin stopped the run.
    pub failure: Arc<PluginFailure>,
    /// Waited for before the first sample (replayed samples train first).
    pub gate: Arc<ReplayGate>,
}

impl Producer for GeneratedGroups {
    fn name(&self) -> &'static str {
        "generate"
    }

    fn run(self: Box<Self>, stop: Arc<AtomicBool>) -> Result<()> {
        if self.tasks.is_empty() {
            bail!("--custom-generate-function-path: the task file has no prompts");
        }
        if !self.gate.wait(&stop) {
            return Ok(());
        }
        let next_job = AtomicU64::new(self.first_group * self.group_size as u64);
        let failed = AtomicUsize::new(0);
        type Open = HashMap<u64, Vec<Option<Vec<TrainingSample>>>>;
        let open: Mutex<Open> = Mutex::new(HashMap::new());
        std::thread::scope(|s| {
            for _ in 0..self.parallel.max(1) {
                s.spawn(|| {
                    while !stop.load(Ordering::SeqCst) {
                        let job = next_job.fetch_add(1, Ordering::SeqCst);
                        let (group, k) = (job / self.group_size as u64, (job % self.group_size as u64) as usize);
                        let task = &self.tasks[(group % self.tasks.len() as u64) as usize];
                        let mut sampling = self.sampling.clone();
                        sampling.seed = Some(self.sampling.seed.into_option().unwrap_or(0).wrapping_add(job)).into();
                        let request = GenerateRequest {
                            messages: read_task_messages(task).into(),
                            tools_json: "".into(),
                            sampling,
                            evaluation: false,
                            metadata_json: task.data_json.clone(),
                        };
                        let who = format!("generate (prompt `{}`, trajectory {k})", task.id);
                        let made = self.generate.generate(&request).and_then(|samples| {
                            check_samples(&who, &samples)?;
                            if samples.is_empty() {
                                bail!("{who}: the plugin returned no sample");
                            }
                            Ok(samples)
                        });
                        let trajectory = match made {
                            Ok(mut samples) => {
                                failed.store(0, Ordering::SeqCst);
                                for (i, sample) in samples.iter_mut().enumerate() {
                                    sample.session_id = format!("gen-{group}-{k}").into();
                                    sample.turn_index = i as u32;
                                }
                                Some(samples)
                            }
                            Err(e) => {
                                tracing::warn!("{e:#}");
                                if failed.fetch_add(1, Ordering::SeqCst) + 1 >= FAILURES_IN_A_ROW {
                                    self.failure.set(format!(
                                        "the generate plugin failed {FAILURES_IN_A_ROW} times in a row; the last: {e:#}"
                                    ));
                                    stop.store(true, Ordering::SeqCst);
                                }
                                None
                            }
                        };
                        let whole = {
                            let mut o = open.lock().expect("open lock");
                            let g = o.entry(group).or_insert_with(|| vec![None; self.group_size]);
                            // A failed call leaves an empty trajectory: its group trains without it.
                            g[k] = Some(trajectory.unwrap_or_default());
                            if g.iter().all(Option::is_some) {
                                o.remove(&group)
                            } else {
                                None
                            }
                        };
                        if let Some(g) = whole {
                            let trajectories: Vec<Vec<TrainingSample>> =
                                g.into_iter().flatten().filter(|t| !t.is_empty()).collect();
                            let samples = trajectory_samples(trajectories, group);
                            if !samples.is_empty()
                                && !record(&self.samples, samples, &self.failure, &stop)
                            {
                                stop.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                });
            }
        });
        if let Some(why) = self.failure.get() {
            bail!(why);
        }
        Ok(())
    }
}

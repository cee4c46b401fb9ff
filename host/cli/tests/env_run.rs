//! `run --env` as a library: episodes of a real environment plugin (built from the workspace)
//! played by the built-in model, recorded in the durable buffer, made into per-step samples
//! with one group-normalised advantage per trajectory, and trained; a restart goes on with new
//! group numbers and finishes a group the crash left short.

mod common;

use common::{inputs, workspace};
use openclaw_buffer::record::EpisodeEntry;
use openclaw_buffer::{export, Log, LogOptions, Record};
use openclaw_config::backend::{Cpu, Placement};
use openclaw_pipeline::Pipeline;
use openclaw_plugins::RunPlugins;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
/// What one life of a run did.
struct Life {
    /// The steps seen.
    steps: Vec<u64>,
    /// The sequence numbers of the samples each step trained.
    trained: Vec<u64>,
    /// Unfinished episode groups found at start.
    unfinished: usize,
    /// Samples each step trained.
    per_step: Vec<usize>,
    /// Samples dropped as too stale, in all.
    dropped: usize,
}

/// Runs `run --env` on the coin-scored fixture until `steps`.
fn run_env(dir: &Path, model: &Path, steps: u64) -> Life {
    run_env_with(dir, model, steps, &[])
}

/// [`run_env`] with more flags.
fn run_env_with(dir: &Path, model: &Path, steps: u64, extra: &[(&'static str, String)]) -> Life {
    let d = |p: &str| dir.join(p).display().to_string();
    std::fs::write(dir.join("env.toml"), "[env]\nfault = \"coin\"\n").unwrap();
    let flags = vec![
        (
            "plugin",
            workspace().join("methods/binary-rl").display().to_string(),
        ),
        ("model_path", model.display().to_string()),
        ("port", "0".to_string()),
        ("rl_buffer_dir", d("rl_buffer")),
        ("save_dir", d("checkpoints")),
        ("log_dir", d("logs")),
        ("max_steps", steps.to_string()),
        ("rollout_batch_size", "12".into()),
        ("default_max_tokens", "12".into()),
        ("save_interval", "1".into()),
        ("batch_timeout", "30".into()),
        ("max_staleness", "100".into()),
        ("lr", "1e-4".into()),
        (
            "env",
            workspace()
                .join("tests/fixtures/env-faults")
                .display()
                .to_string(),
        ),
        ("env_config", d("env.toml")),
        ("num_rollouts_per_prompt", "4".into()),
        ("parallel_envs", "4".into()),
        ("max_episode_steps", "3".into()),
    ];
    let flags: Vec<(&str, String)> = flags.into_iter().chain(extra.iter().cloned()).collect();
    let plugins = RunPlugins::load(|| inputs(&flags)).unwrap();
    let cfg = plugins.resolved.config.clone();
    let pipeline =
        Pipeline::<Cpu>::four_loops(&cfg, &plugins, &Placement::all(Default::default())).unwrap();
    let unfinished = pipeline.replay.unfinished_groups;
    assert!(pipeline.env.is_some());
    let seen = Arc::new(Mutex::new((Vec::new(), Vec::new(), Vec::new(), 0)));
    let observer = seen.clone();
    let handle = pipeline
        .start(move |ev| {
            let mut o = observer.lock().unwrap();
            o.0.push(ev.report.step);
            o.1.extend(ev.sample_seqs.iter().copied());
            o.2.push(ev.sample_seqs.len());
            o.3 += ev.dropped_stale;
        })
        .unwrap();
    handle.wait();
    handle.shutdown().unwrap().expect("it trains");
    let (steps, trained, per_step, dropped) = seen.lock().unwrap().clone();
    Life {
        steps,
        trained,
        unfinished,
        per_step,
        dropped,
    }
}

fn episodes(dir: &Path) -> Vec<EpisodeEntry> {
    Log::read_all(&dir.join("rl_buffer"))
        .unwrap()
        .records
        .into_iter()
        .filter_map(|e| match e.record {
            Record::Episode { episode } => Some(*episode),
            _ => None,
        })
        .collect()
}

#[test]
fn episodes_become_durable_step_samples_with_trajectory_advantages_and_survive_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();

    // First life: two steps of 12 samples (one group of 4 episodes of 3 steps each).
    let first = run_env(dir, &model, 2);
    assert_eq!(first.steps, vec![1, 2]);
    let records = Log::read_all(&dir.join("rl_buffer")).unwrap().records;
    // Each group's samples are written after all of its episodes.
    let mut last_episode_seq: HashMap<u64, u64> = HashMap::new();
    for env in &records {
        if let Record::Episode { episode } = &env.record {
            let s = last_episode_seq.entry(episode.group).or_default();
            *s = (*s).max(env.seq);
        }
    }
    let eps: HashMap<String, EpisodeEntry> = records
        .iter()
        .filter_map(|e| match &e.record {
            Record::Episode { episode } => Some((episode.episode_id.clone(), (**episode).clone())),
            _ => None,
        })
        .collect();
    assert!(eps.len() >= 8, "{} episodes", eps.len());
    let mut by_group: BTreeMap<u64, Vec<&EpisodeEntry>> = BTreeMap::new();
    for e in eps.values() {
        assert_eq!(e.group_size, 4);
        assert_eq!(e.steps.len(), 3, "the fixture's episodes take three steps");
        assert_eq!(e.action_at, vec![1, 3, 5]);
        by_group.entry(e.group).or_default().push(e);
    }
    let mut any_signal = false;
    let mut samples_seen = 0;
    for env in &records {
        let Record::Sample { sample, .. } = &env.record else {
            continue;
        };
        samples_seen += 1;
        let e = &eps[sample.session_id.as_str()];
        assert!(
            env.seq > last_episode_seq[&e.group],
            "a sample before its group was whole"
        );
        // Exactly the tokens the policy saw and sampled at that step.
        let step = &e.steps[sample.turn_index as usize];
        assert_eq!(sample.prompt_ids, step.prompt_ids);
        assert_eq!(sample.response_ids, step.response_ids);
        assert_eq!(sample.rollout_logprobs, step.logprobs);
        assert!(sample.loss_mask.iter().all(|&m| m == 1.0));
        // One advantage per trajectory: its reward against its whole group's.
        let group = &by_group[&e.group];
        assert_eq!(
            group.len(),
            4,
            "a sample is written once its group is whole"
        );
        let rewards: Vec<f64> = group.iter().map(|g| g.reward.unwrap() as f64).collect();
        let mean = rewards.iter().sum::<f64>() / 4.0;
        let std = (rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        let want = ((e.reward.unwrap() as f64 - mean) / (std + 1e-6)) as f32;
        let adv = sample.advantages.as_ref().expect("advantages given");
        assert_eq!(adv.len(), sample.response_ids.len());
        assert!(
            adv.iter().all(|&a| (a - want).abs() < 1e-4),
            "{adv:?} vs {want}"
        );
        any_signal |= want != 0.0;
        assert_eq!(sample.reward, e.reward.unwrap());
    }
    assert!(samples_seen >= 24);
    // Coin rewards: with several groups of four, some group disagrees.
    assert!(any_signal || by_group.len() < 2, "no group had a signal");

    // The export shows episodes as sessions of steps, and each episode with its samples.
    let trajectories = export::trajectories(&records);
    let t = trajectories
        .iter()
        .find(|t| t.session_id == "ep-0-0")
        .expect("episode ep-0-0 exported");
    assert_eq!(t.turns.len(), 3);
    assert_eq!(t.turns[1].prompt.as_array().unwrap().len(), 3);
    assert_eq!(t.turns[0].next_state.as_ref().unwrap()["content"], "Again.");
    let full = export::episodes(&records);
    let ep0 = full.iter().find(|v| v["episode_id"] == "ep-0-0").unwrap();
    assert_eq!(ep0["samples"].as_array().unwrap().len(), 3);

    // A crash that left a group short: one of its four episodes recorded, no samples.
    let next = by_group.keys().max().unwrap() + 1;
    let mut lone = eps["ep-0-0"].clone();
    lone.group = next;
    lone.sample = 2;
    lone.episode_id = format!("ep-{next}-2");
    {
        let (log, _) = Log::open(&dir.join("rl_buffer"), LogOptions::default()).unwrap();
        log.append(&Record::Episode {
            episode: Box::new(lone.clone()),
        })
        .unwrap();
    }

    // Second life: the short group is finished first (its three missing episodes run, the
    // recorded one kept), then new groups follow its number.
    let second = run_env(dir, &model, 6);
    assert_eq!(second.steps, vec![3, 4, 5, 6]);
    assert!(second.unfinished >= 1);
    // No sample trains twice across the restart, and each life trains in buffer order.
    for life in [&first.trained, &second.trained] {
        assert!(life.windows(2).all(|w| w[0] < w[1]), "{life:?}");
    }
    assert!(first.trained.last() < second.trained.first());
    let after = episodes(dir);
    let group: Vec<&EpisodeEntry> = after.iter().filter(|e| e.group == next).collect();
    let mut members: Vec<u32> = group.iter().map(|e| e.sample).collect();
    members.sort();
    assert_eq!(members, vec![0, 1, 2, 3], "the short group was completed");
    assert_eq!(
        group.iter().filter(|e| e.sample == 2).count(),
        1,
        "the recorded episode is not run again"
    );
    assert!(
        after.iter().any(|e| e.group > next),
        "new groups are numbered after the short one"
    );
    let ids: Vec<&str> = after.iter().map(|e| e.episode_id.as_str()).collect();
    let unique: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "episode ids never repeat across restarts"
    );
}

#[test]
fn judged_steps_add_their_mean_score_to_the_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let life = run_env_with(
        dir,
        &model,
        1,
        &[("prm_step_coef", "0.5".into()), ("judge", "rule".into())],
    );
    assert_eq!(life.steps, vec![1]);
    let eps = episodes(dir);
    assert!(eps.len() >= 4);
    for e in &eps {
        // The method's reward plugin (binary RL, rule judge) scored each of the three steps.
        assert_eq!(e.step_scores.len(), 3, "{}", e.episode_id);
        let outcome = e
            .outcome
            .expect("the outcome is kept beside the combined reward");
        assert!(outcome == 1.0 || outcome == -1.0);
        let mean = e.step_scores.iter().sum::<f32>() / 3.0;
        assert!((e.reward.unwrap() - (outcome + 0.5 * mean)).abs() < 1e-6);
    }
}

/// Samples too stale to train leave before a batch is taken: every step trains a whole batch of
/// samples of the current weights, never the remnant of one (a step of one sample after fifteen
/// were dropped takes a whole step's learning rate on one episode).
#[test]
fn stale_samples_are_dropped_before_a_batch_is_made_so_every_step_trains_a_whole_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model =
        openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false).unwrap();
    let life = run_env_with(dir, &model, 3, &[("max_staleness", "0".into())]);
    assert_eq!(life.steps, vec![1, 2, 3]);
    assert_eq!(life.per_step, vec![12, 12, 12], "dropped {}", life.dropped);
    let mut seen = std::collections::HashSet::new();
    assert!(
        life.trained.iter().all(|s| seen.insert(*s)),
        "{:?}",
        life.trained
    );
    // With no lag allowed, the samples made while a step trained are stale: this run must
    // have dropped some for the check above to say anything.
    assert!(life.dropped > 0, "nothing was stale");
}

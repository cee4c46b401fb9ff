//! The trainer's settings, read from the run configuration.

use anyhow::{Context, Result};
use openclaw_config::RunConfig;
use openclaw_trainer::{AdamWConfig, LoraConfig, LrSchedule, ScheduleKind, TrainConfig};

/// The step offline training stops at: the end of a schedule of `schedule_steps`, or
/// `--max-steps` when sooner (the schedule still spans the whole data, so a run cut short and
/// resumed follows the same learning rates as one that runs straight through).
pub fn last_step(cfg: &RunConfig, schedule_steps: u64) -> u64 {
    if cfg.max_steps > 0 {
        schedule_steps.min(cfg.max_steps)
    } else {
        schedule_steps
    }
}

/// Where a training session reads and writes, from the run settings (quiet: the caller
/// reports steps).
pub fn session_options(cfg: &RunConfig) -> super::SessionOptions {
    super::SessionOptions {
        model_dir: std::path::PathBuf::from(&cfg.model_path),
        save_dir: (!cfg.save_dir.is_empty()).then(|| std::path::PathBuf::from(&cfg.save_dir)),
        save_interval: cfg.save_interval as u64,
        keep: cfg.keep_checkpoints as usize,
        resume: cfg.resume_from_checkpoint.clone(),
        log_dir: std::path::PathBuf::from(&cfg.log_dir),
        quiet: true,
        extras: Vec::new(),
    }
}

/// A [`TrainConfig`] from the run settings; `total_steps` is where a cosine schedule ends.
/// `data_parallel` uses every core the machine has, up to 2 threads per step by default
/// (element-wise work on the CPU backend runs on the calling thread).
pub fn train_config(cfg: &RunConfig, total_steps: u64) -> Result<TrainConfig> {
    let kind = ScheduleKind::parse(&cfg.lr_schedule).context("lr_schedule")?;
    let warmup = cfg.lr_warmup_steps as u64;
    let schedule = LrSchedule {
        kind,
        base_lr: cfg.lr,
        warmup_steps: warmup,
        total_steps: total_steps.max(warmup + 1),
        min_lr: cfg.min_lr,
    };
    let lora = if cfg.use_lora {
        Some(LoraConfig {
            rank: cfg.lora_rank as usize,
            alpha: cfg.lora_alpha,
            dropout: cfg.lora_dropout,
            target_modules: LoraConfig::parse_targets(&cfg.lora_target_modules)?,
        })
    } else {
        None
    };
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let tc = TrainConfig {
        schedule,
        optimizer: AdamWConfig {
            weight_decay: cfg.weight_decay,
            beta1: cfg.adam_beta1,
            beta2: cfg.adam_beta2,
            eps: cfg.adam_eps,
            offload_state: cfg.offload_optimizer_state,
        },
        max_grad_norm: cfg.max_grad_norm,
        max_tokens_per_batch: cfg.max_tokens_per_batch as usize,
        lora,
        seed: cfg.seed,
        base_model: cfg.model_path.clone(),
        data_parallel: cores.clamp(1, 2),
        ..TrainConfig::default()
    };
    tc.validate()?;
    Ok(tc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_config::{resolve, ConfigInputs, PluginConfigs};

    fn config(sets: &[&str]) -> RunConfig {
        let inputs = ConfigInputs {
            file: None,
            flags: Vec::new(),
            sets: sets.iter().map(|s| s.to_string()).collect(),
            env: Box::new(|_| None),
        };
        resolve(&inputs, &PluginConfigs::default()).unwrap().config
    }

    #[test]
    fn run_settings_reach_the_trainer() {
        let c = config(&[
            "lr=3e-4",
            "lr_schedule=\"cosine\"",
            "lr_warmup_steps=5",
            "min_lr=1e-5",
            "adam_beta2=0.95",
            "use_lora=true",
            "lora_rank=4",
            "lora_target_modules=\"q_proj,v_proj\"",
        ]);
        let t = train_config(&c, 100).unwrap();
        assert_eq!(t.schedule.kind, ScheduleKind::Cosine);
        assert_eq!(
            (
                t.schedule.base_lr,
                t.schedule.warmup_steps,
                t.schedule.total_steps
            ),
            (3e-4, 5, 100)
        );
        assert_eq!(t.optimizer.beta2, 0.95);
        let l = t.lora.unwrap();
        assert_eq!(l.rank, 4);
        assert_eq!(l.target_modules, vec!["q_proj", "v_proj"]);
    }

    #[test]
    fn a_short_cosine_run_still_makes_a_valid_schedule() {
        let c = config(&["lr_schedule=\"cosine\"", "lr_warmup_steps=10"]);
        let t = train_config(&c, 3).unwrap();
        assert!(t.schedule.total_steps > t.schedule.warmup_steps);
    }
}

//! Learning-rate schedules: constant, linear warmup, and warmup followed by cosine decay.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// The shape of the schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// The base rate at every step (warmup steps are ignored).
    #[default]
    Constant,
    /// Linear warmup to the base rate, then constant.
    Warmup,
    /// Linear warmup, then cosine decay from the base rate to `min_lr` at `total_steps`.
    Cosine,
}

impl ScheduleKind {
    /// Parses `constant`, `warmup` or `cosine`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "constant" => Ok(ScheduleKind::Constant),
            "warmup" => Ok(ScheduleKind::Warmup),
            "cosine" => Ok(ScheduleKind::Cosine),
            other => bail!("unknown lr schedule `{other}` (expected constant, warmup or cosine)"),
        }
    }
}

/// A learning-rate schedule over optimizer steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    /// The shape.
    pub kind: ScheduleKind,
    /// The peak (and, for `constant`, the only) learning rate.
    pub base_lr: f64,
    /// Steps of linear warmup (`warmup` and `cosine`).
    pub warmup_steps: u64,
    /// The step at which the cosine reaches `min_lr` (`cosine` only; it stays there after).
    pub total_steps: u64,
    /// The floor of the cosine.
    pub min_lr: f64,
}

impl LrSchedule {
    /// A constant rate.
    pub fn constant(lr: f64) -> Self {
        LrSchedule {
            kind: ScheduleKind::Constant,
            base_lr: lr,
            warmup_steps: 0,
            total_steps: 0,
            min_lr: 0.0,
        }
    }

    /// Checks the numbers make a schedule.
    pub fn validate(&self) -> Result<()> {
        if !(self.base_lr.is_finite() && self.base_lr >= 0.0) {
            bail!("lr must be a finite number >= 0, got {}", self.base_lr);
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0) {
            bail!("min_lr must be a finite number >= 0, got {}", self.min_lr);
        }
        if self.kind == ScheduleKind::Cosine && self.total_steps <= self.warmup_steps {
            bail!(
                "the cosine schedule needs total_steps ({}) > warmup_steps ({})",
                self.total_steps,
                self.warmup_steps
            );
        }
        Ok(())
    }

    /// The learning rate of the optimizer step with 0-based index `step` (the number of steps
    /// already taken). Warmup gives step `s < warmup_steps` the rate `base_lr · (s + 1) /
    /// warmup_steps`, so the first step already moves (Megatron's convention, not transformers'
    /// first step at 0) and step `warmup_steps - 1` reaches `base_lr`.
    pub fn lr(&self, step: u64) -> f64 {
        let w = self.warmup_steps;
        if self.kind != ScheduleKind::Constant && step < w {
            return self.base_lr * (step + 1) as f64 / w as f64;
        }
        match self.kind {
            ScheduleKind::Constant | ScheduleKind::Warmup => self.base_lr,
            ScheduleKind::Cosine => {
                let span = self.total_steps.saturating_sub(w).max(1) as f64;
                let progress = ((step - w) as f64 / span).min(1.0);
                let cos = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
                self.min_lr + (self.base_lr - self.min_lr) * cos
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(kind: ScheduleKind) -> LrSchedule {
        LrSchedule {
            kind,
            base_lr: 1.0,
            warmup_steps: 4,
            total_steps: 14,
            min_lr: 0.1,
        }
    }

    #[test]
    fn constant_ignores_warmup() {
        let s = sched(ScheduleKind::Constant);
        assert_eq!((s.lr(0), s.lr(100)), (1.0, 1.0));
    }

    #[test]
    fn warmup_is_linear_then_flat() {
        let s = sched(ScheduleKind::Warmup);
        let lrs: Vec<f64> = (0..6).map(|i| s.lr(i)).collect();
        assert_eq!(lrs, vec![0.25, 0.5, 0.75, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn cosine_warms_up_then_decays_to_the_floor() {
        let s = sched(ScheduleKind::Cosine);
        assert_eq!(s.lr(0), 0.25);
        assert_eq!(s.lr(3), 1.0);
        assert!((s.lr(4) - 1.0).abs() < 1e-12);
        // Half-way through the decay: the mean of peak and floor.
        assert!((s.lr(9) - 0.55).abs() < 1e-12);
        assert!((s.lr(14) - 0.1).abs() < 1e-12);
        assert!((s.lr(1000) - 0.1).abs() < 1e-12);
        for i in 4..14 {
            assert!(s.lr(i + 1) <= s.lr(i));
        }
    }

    #[test]
    fn bad_schedules_are_named() {
        let mut s = sched(ScheduleKind::Cosine);
        s.total_steps = 4;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("total_steps"));
        assert!(ScheduleKind::parse("linear").is_err());
        assert_eq!(
            ScheduleKind::parse(" Cosine ").unwrap(),
            ScheduleKind::Cosine
        );
    }
}

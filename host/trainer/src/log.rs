//! The training log: one JSON object per step appended to `training.log`, a short human line
//! per step, and progress bars for long offline runs.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::step::StepReport;

/// The log file's name inside the log directory.
pub const LOG_FILE: &str = "training.log";

/// Appends step reports to `<log_dir>/training.log`.
pub struct TrainLog {
    path: PathBuf,
    file: File,
    echo: Echo,
}

enum Echo {
    Stderr,
    Quiet,
    Progress(ProgressBar),
}

impl TrainLog {
    /// Opens (creating) `<log_dir>/training.log` for appending; human lines go to stderr.
    pub fn open(log_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(log_dir)
            .with_context(|| format!("cannot create {}", log_dir.display()))?;
        let path = log_dir.join(LOG_FILE);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(TrainLog {
            path,
            file,
            echo: Echo::Stderr,
        })
    }

    /// No human lines (the JSON lines are still written).
    pub fn quiet(mut self) -> Self {
        self.echo = Echo::Quiet;
        self
    }

    /// Human lines are printed above `bar` (so they do not break it) and the bar advances one
    /// position per step.
    pub fn with_progress(mut self, bar: ProgressBar) -> Self {
        self.echo = Echo::Progress(bar);
        self
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `report` as one JSON line (with a Unix timestamp `time`) and prints its human
    /// line.
    pub fn record(&mut self, report: &StepReport) -> Result<()> {
        self.record_with(report, serde_json::Map::new())
    }

    /// [`TrainLog::record`] with `fields` added to the line (which adapter the step trained).
    pub fn record_with(
        &mut self,
        report: &StepReport,
        fields: serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let mut v = serde_json::to_value(report)?;
        for (k, x) in fields {
            v[k] = x;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        v["time"] = serde_json::json!(now);
        let mut line = serde_json::to_string(&v)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        match &self.echo {
            Echo::Stderr => eprintln!("{}", human_line(report)),
            Echo::Quiet => {}
            Echo::Progress(bar) => {
                bar.println(human_line(report));
                bar.inc(1);
            }
        }
        Ok(())
    }
}

/// A one-line summary: `step 12  loss 0.4210  grad 1.23  lr 1.0e-5  2048 tok  0.91 s …`.
pub fn human_line(r: &StepReport) -> String {
    let mut s = format!(
        "step {}  loss {:.4}  grad {:.3}  lr {:.2e}  {} tok  {:.2} s",
        r.step, r.loss, r.grad_norm, r.lr, r.tokens, r.step_time_s
    );
    if let Some(d) = r.logprob_diff {
        s += &format!("  |Δlogp| {d:.4}");
    }
    if let Some(st) = r.staleness {
        s += &format!("  stale {st:.2}");
    }
    for (k, v) in &r.metrics {
        s += &format!("  {k} {v:.4}");
    }
    s
}

/// A progress bar of `total` steps labelled `label`, with elapsed time, rate and ETA; hidden
/// when stderr is not a terminal.
pub fn progress_bar(total: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
    )
    .expect("the template is valid");
    bar.set_style(style);
    bar.set_prefix(label.to_string());
    bar
}

//! `openclaw-host plot`: learning curves from JSON Lines logs to a PNG (the work is in
//! [`openclaw_lab::report`]; this prints).

use anyhow::Result;
use openclaw_lab::report;
use std::path::PathBuf;

/// Skipped-line warnings printed before the rest are counted: a log cut mid-write has one, a
/// wrong file has thousands.
const MAX_WARNINGS: usize = 20;

/// The arguments of `plot`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlotArgs {
    /// JSON Lines logs (training.log, eval logs); each is one series per panel, named by its
    /// folder (or file stem), so several runs are compared side by side.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The PNG to write (default: the first FILE with the extension .png).
    #[arg(long, value_name = "PNG")]
    pub out: Option<PathBuf>,
    /// The fields to plot, one panel each, nested ones dotted (metrics.kl). Default for a
    /// training log: loss, grad_norm, lr, logprob_diff, step_time_s and every metrics.* field;
    /// for other logs, every numeric field.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub metrics: Vec<String>,
    /// The field on the x axis.
    #[arg(long, default_value = "step", value_name = "FIELD")]
    pub x: String,
}

/// Runs `plot`: prints skipped lines to stderr and the written path to stdout.
pub fn run(args: &PlotArgs) -> Result<i32> {
    let curves = report::learning_curves(&args.files, &args.metrics, &args.x)?;
    for w in curves.warnings.iter().take(MAX_WARNINGS) {
        eprintln!("warning: skipped {w}");
    }
    if curves.warnings.len() > MAX_WARNINGS {
        eprintln!(
            "warning: skipped {} more lines",
            curves.warnings.len() - MAX_WARNINGS
        );
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| report::default_png_path(&args.files[0]));
    let size = report::grid_size(curves.charts.len(), report::PANEL_SIZE);
    report::draw_png(&curves.charts, &out, size)?;
    println!("{}", out.display());
    Ok(0)
}

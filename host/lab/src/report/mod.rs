//! Reports on runs: learning curves read from the JSON Lines logs the loops write, drawn as
//! PNG panels so that runs (methods, seeds, settings) can be compared side by side.
//!
//! `series` reads logs, `plot` draws charts; [`learning_curves`] joins them the way
//! `openclaw-host plot` does, and is there for any other caller (a benchmark report) too.

pub mod bars;
pub mod plot;
pub mod series;

pub use plot::{draw_png, grid_size, render_rgb, Chart};
pub use series::{read_jsonl_series, JsonlSeries, Series};

use anyhow::{bail, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The fields of a training log plotted when no metric is named, in panel order; every
/// `metrics.*` field (the loss plugin's own numbers) follows them.
pub const TRAINING_METRICS: [&str; 5] = ["loss", "grad_norm", "lr", "logprob_diff", "step_time_s"];

/// The size of one panel in pixels: readable tick labels and legend at 100% zoom.
pub const PANEL_SIZE: (u32, u32) = (560, 380);

/// Learning-curve panels built from logs, with what was skipped while reading them.
#[derive(Debug, Clone)]
pub struct LearningCurves {
    /// One panel per metric; in each, one series per log that has the metric.
    pub charts: Vec<Chart>,
    /// Skipped lines of every log, `file:line: why`.
    pub warnings: Vec<String>,
}

/// Reads `files` (JSON Lines logs) and makes one panel per metric with one series per file,
/// named by [`run_names`], against `x_key`.
///
/// `metrics` empty picks [`default_metrics`]; a name that no file has is an error listing the
/// ones they do have.
pub fn learning_curves(
    files: &[PathBuf],
    metrics: &[String],
    x_key: &str,
) -> Result<LearningCurves> {
    if files.is_empty() {
        bail!("no log to plot");
    }
    let mut logs = Vec::with_capacity(files.len());
    let mut warnings = Vec::new();
    for f in files {
        let mut log = read_jsonl_series(f, x_key)?;
        warnings.append(&mut log.warnings);
        logs.push(log.series);
    }
    let available: BTreeSet<&str> = logs
        .iter()
        .flat_map(|l| l.keys().map(String::as_str))
        .collect();
    let wanted: Vec<String> = metrics
        .iter()
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect();
    let chosen = if wanted.is_empty() {
        default_metrics(&available)
    } else {
        if let Some(unknown) = wanted.iter().find(|m| !available.contains(m.as_str())) {
            let known: Vec<&str> = available.iter().copied().collect();
            bail!(
                "unknown metric `{unknown}` (available: {})",
                known.join(", ")
            );
        }
        wanted
    };
    let names = run_names(files);
    let charts = chosen
        .into_iter()
        .map(|metric| Chart {
            series: logs
                .iter()
                .zip(&names)
                .filter_map(|(log, name)| Some(Series::new(name, log.get(&metric)?.clone())))
                .collect(),
            x_label: x_key.to_owned(),
            title: metric,
            y_label: String::new(),
            y_range: None,
        })
        .collect();
    Ok(LearningCurves { charts, warnings })
}

/// The metrics plotted by default: [`TRAINING_METRICS`] that are present, then every
/// `metrics.*` field; a log with none of these (an eval or score log) gets all its fields.
pub fn default_metrics(available: &BTreeSet<&str>) -> Vec<String> {
    let mut chosen: Vec<String> = TRAINING_METRICS
        .iter()
        .filter(|m| available.contains(*m))
        .map(ToString::to_string)
        .collect();
    chosen.extend(
        available
            .iter()
            .filter(|m| m.starts_with("metrics."))
            .map(ToString::to_string),
    );
    if chosen.is_empty() {
        chosen = available.iter().map(ToString::to_string).collect();
    }
    chosen
}

/// Legend names for logs: the parent folder's name (`runs/opd/training.log` is `opd`, since a
/// run is a folder), else the file stem when the folders do not tell them apart, else the
/// paths as given.
pub fn run_names(files: &[PathBuf]) -> Vec<String> {
    // Canonical, so `training.log` in the current folder and `../x/training.log` have parents.
    let full: Vec<PathBuf> = files
        .iter()
        .map(|f| {
            f.canonicalize()
                .or_else(|_| std::path::absolute(f))
                .unwrap_or_else(|_| f.clone())
        })
        .collect();
    let name = |p: Option<&std::ffi::OsStr>| p.map(|s| s.to_string_lossy().into_owned());
    let parents: Vec<Option<String>> = full
        .iter()
        .map(|p| name(p.parent().and_then(Path::file_name)))
        .collect();
    let stems: Vec<Option<String>> = full.iter().map(|p| name(p.file_stem())).collect();
    for candidate in [parents, stems] {
        if let Some(names) = distinct(candidate) {
            return names;
        }
    }
    files.iter().map(|f| f.display().to_string()).collect()
}

/// The names, if every one is present, non-empty and unique.
fn distinct(names: Vec<Option<String>>) -> Option<Vec<String>> {
    let names: Vec<String> = names
        .into_iter()
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    (unique.len() == names.len()).then_some(names)
}

/// Where `plot` writes when no `--out` is given: the first log with the extension `.png`.
pub fn default_png_path(first_log: &Path) -> PathBuf {
    first_log.with_extension("png")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &Path, rel: &str, lines: &[&str]) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p
    }

    const TRAIN: [&str; 2] = [
        r#"{"step":1,"samples":4,"loss":0.12,"metrics":{"clip_frac":0.0,"kl":0.01},"grad_norm":0.8,"lr":0.0001,"tokens":300,"logprob_diff":0.001,"step_time_s":0.05}"#,
        r#"{"step":2,"samples":4,"loss":0.10,"metrics":{"clip_frac":0.1,"kl":0.02},"grad_norm":0.7,"lr":0.0001,"tokens":310,"logprob_diff":0.002,"step_time_s":0.06}"#,
    ];

    #[test]
    fn report_default_metrics_of_a_training_log() {
        let dir = tempfile::tempdir().unwrap();
        let f = log(dir.path(), "opd/training.log", &TRAIN);
        let curves = learning_curves(&[f], &[], "step").unwrap();
        let titles: Vec<&str> = curves.charts.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "loss",
                "grad_norm",
                "lr",
                "logprob_diff",
                "step_time_s",
                "metrics.clip_frac",
                "metrics.kl"
            ]
        );
        assert_eq!(curves.charts[0].series[0].name, "opd");
        assert_eq!(curves.charts[0].x_label, "step");
    }

    #[test]
    fn report_other_logs_plot_all_their_fields() {
        let mut available = BTreeSet::new();
        available.extend(["on_topic", "plain_share"]);
        assert_eq!(default_metrics(&available), ["on_topic", "plain_share"]);
    }

    #[test]
    fn report_runs_side_by_side_and_unknown_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            log(dir.path(), "runs/binary-rl/training.log", &TRAIN),
            log(dir.path(), "runs/opd/training.log", &TRAIN[..1]),
            log(
                dir.path(),
                "runs/combine/training.log",
                &[r#"{"step":1,"grad_norm":0.5}"#],
            ),
        ];
        let metrics = vec!["loss".to_string(), "metrics.kl".to_string()];
        let curves = learning_curves(&files, &metrics, "step").unwrap();
        assert_eq!(curves.charts.len(), 2);
        let names: Vec<&str> = curves.charts[0]
            .series
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        // combine has no loss: it is absent from that panel, not an empty line.
        assert_eq!(names, ["binary-rl", "opd"]);
        assert_eq!(curves.charts[0].series[1].points, [(1.0, 0.12)]);

        let e = learning_curves(&files, &["los".to_string()], "step")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown metric `los`")
                && e.contains("available: grad_norm, logprob_diff, loss"),
            "{e}"
        );
    }

    #[test]
    fn report_run_names_fall_back_to_stems_then_paths() {
        let dir = tempfile::tempdir().unwrap();
        let a = log(dir.path(), "same/a.log", &TRAIN);
        let b = log(dir.path(), "same/b.log", &TRAIN);
        assert_eq!(run_names(&[a.clone(), b]), ["a", "b"]);
        let c = log(dir.path(), "other/same/a.log", &TRAIN);
        let names = run_names(&[a.clone(), c.clone()]);
        assert_eq!(names, [a.display().to_string(), c.display().to_string()]);
        assert_eq!(default_png_path(&a), dir.path().join("same/a.png"));
    }
}

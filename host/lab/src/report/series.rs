//! Numeric series read from JSON Lines logs (`training.log`, eval and score logs).
//!
//! Every log the host writes is one JSON object a line with an x field (`step`) and numeric
//! fields, some nested one level (`metrics.kl`). Reading is lenient line by line, because a
//! log being written (or cut by a crash) may end in half a line, and strict about the file,
//! because a missing or empty log is a mistake worth stopping for.

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// One named line of a chart: `(x, y)` points in drawing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend text.
    pub name: String,
    /// The points, drawn in this order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from its name and points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
        }
    }
}

/// What [`read_jsonl_series`] found in one log.
#[derive(Debug, Clone, Default)]
pub struct JsonlSeries {
    /// Every numeric field by its dotted name (`loss`, `metrics.kl`), as `(x, value)` points in
    /// file order. The x field itself is not among them.
    pub series: BTreeMap<String, Vec<(f64, f64)>>,
    /// One line per skipped line, `file:line: why`.
    pub warnings: Vec<String>,
}

/// Reads a JSON Lines log into one series per numeric field, keyed by dotted name, with
/// `x_key` (itself possibly dotted) as the x value.
///
/// Null and non-numeric values are skipped. A line that is not a JSON object, or has no
/// numeric `x_key`, is skipped with a warning naming `file:line`, so a log cut mid-line still
/// plots. A missing file, an empty one, or one with no numeric field is an error naming it.
pub fn read_jsonl_series(path: &Path, x_key: &str) -> Result<JsonlSeries> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read log {}", path.display()))?;
    if text.trim().is_empty() {
        bail!("log {} is empty", path.display());
    }
    let mut out = JsonlSeries::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{}:{}", path.display(), i + 1);
        let object = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => o,
            Ok(other) => {
                out.warnings.push(format!(
                    "{at}: not a JSON object ({})",
                    openclaw_chat::json_kind(&other)
                ));
                continue;
            }
            Err(e) => {
                out.warnings.push(format!("{at}: malformed JSON ({e})"));
                continue;
            }
        };
        let mut fields = Vec::new();
        flatten("", &object, &mut fields);
        let Some(x) = fields.iter().find(|(k, _)| k == x_key).map(|&(_, v)| v) else {
            out.warnings
                .push(format!("{at}: no numeric `{x_key}` field"));
            continue;
        };
        for (name, y) in fields {
            if name != x_key {
                out.series.entry(name).or_default().push((x, y));
            }
        }
    }
    if out.series.is_empty() {
        let why = out
            .warnings
            .first()
            .map(|w| format!("; first problem: {w}"))
            .unwrap_or_default();
        bail!(
            "log {} has no numeric field to plot against `{x_key}`{why}",
            path.display()
        );
    }
    Ok(out)
}

/// Collects the finite numeric leaves of `object`, nested names joined with dots.
fn flatten(prefix: &str, object: &Map<String, Value>, out: &mut Vec<(String, f64)>) {
    for (key, value) in object {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Number(n) => {
                if let Some(v) = n.as_f64().filter(|v| v.is_finite()) {
                    out.push((name, v));
                }
            }
            Value::Object(inner) => flatten(&name, inner, out),
            // Nulls (a NaN serialised by serde_json), strings, booleans and arrays are not points.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn report_reads_flattened_numeric_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "training.log",
            concat!(
                r#"{"step":1,"loss":0.5,"metrics":{"kl":0.01,"clip_frac":0.0,"note":"x"},"lr":null,"ok":true}"#,
                "\n",
                r#"{"step":2,"loss":0.25,"metrics":{"kl":0.02},"lr":0.0001}"#,
                "\n\n",
            ),
        );
        let got = read_jsonl_series(&p, "step").unwrap();
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        let keys: Vec<&str> = got.series.keys().map(String::as_str).collect();
        assert_eq!(keys, ["loss", "lr", "metrics.clip_frac", "metrics.kl"]);
        assert_eq!(got.series["loss"], [(1.0, 0.5), (2.0, 0.25)]);
        assert_eq!(got.series["lr"], [(2.0, 0.0001)]);
        assert_eq!(got.series["metrics.kl"], [(1.0, 0.01), (2.0, 0.02)]);
    }

    #[test]
    fn report_dotted_x_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "eval.log",
            "{\"at\":{\"step\":3},\"plain_share\":0.4}\n",
        );
        let got = read_jsonl_series(&p, "at.step").unwrap();
        assert_eq!(got.series["plain_share"], [(3.0, 0.4)]);
        assert!(!got.series.contains_key("at.step"));
    }

    #[test]
    fn report_malformed_lines_are_warnings_with_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "training.log",
            concat!(
                r#"{"step":1,"loss":0.5}"#,
                "\n",
                r#"{"step":2,"loss":"#,
                "\n",
                "[1,2]\n",
                r#"{"loss":0.1}"#,
                "\n",
                r#"{"step":5,"loss":0.3}"#,
                "\n",
            ),
        );
        let got = read_jsonl_series(&p, "step").unwrap();
        assert_eq!(got.series["loss"], [(1.0, 0.5), (5.0, 0.3)]);
        assert_eq!(got.warnings.len(), 3, "{:?}", got.warnings);
        let shown = p.display().to_string();
        assert!(got.warnings[0].starts_with(&format!("{shown}:2: malformed JSON")));
        assert!(got.warnings[1].starts_with(&format!("{shown}:3: not a JSON object")));
        assert!(got.warnings[2].starts_with(&format!("{shown}:4: no numeric `step`")));
    }

    #[test]
    fn report_missing_empty_and_pointless_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.log");
        let e = format!("{:#}", read_jsonl_series(&missing, "step").unwrap_err());
        assert!(
            e.contains("cannot read log") && e.contains("nope.log"),
            "{e}"
        );

        let empty = write(dir.path(), "empty.log", "\n  \n");
        let e = format!("{:#}", read_jsonl_series(&empty, "step").unwrap_err());
        assert!(e.contains("empty.log is empty"), "{e}");

        let bad = write(dir.path(), "bad.log", "not json\n{\"step\":1}\n");
        let e = format!("{:#}", read_jsonl_series(&bad, "step").unwrap_err());
        assert!(
            e.contains("bad.log has no numeric field") && e.contains("bad.log:1: malformed"),
            "{e}"
        );
    }
}

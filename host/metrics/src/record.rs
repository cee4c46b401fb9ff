//! Scalars by step (the training log's numbers, the scoreboard's, evaluations'): kept for the
//! dashboard and, with `--tensorboard-dir`, written as TensorBoard event files.

use crate::tensorboard::EventWriter;
use crate::{unix_now, Metrics};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Every number in `values` as `(prefix/key, value)`: nested objects join their keys with `/`;
/// booleans are 0 or 1; strings, nulls and arrays are not scalars and are left out.
pub fn flatten(prefix: &str, values: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    walk(prefix, values, &mut out);
    out
}

fn walk(tag: &str, v: &Value, out: &mut Vec<(String, f64)>) {
    match v {
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.push((tag.to_string(), x));
            }
        }
        Value::Bool(b) => out.push((tag.to_string(), f64::from(u8::from(*b)))),
        Value::Object(map) => {
            for (k, v) in map {
                let tag = if tag.is_empty() {
                    k.clone()
                } else {
                    format!("{tag}/{k}")
                };
                walk(&tag, v, out);
            }
        }
        _ => {}
    }
}

impl Metrics {
    /// From now on every recorded scalar is also written as TensorBoard event files in `dir`;
    /// returns the event file.
    pub fn write_tensorboard(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let writer = EventWriter::create(dir)?;
        let path = writer.path().to_path_buf();
        *self.tensorboard.lock().expect("tensorboard lock") = Some(writer);
        Ok(path)
    }

    /// Records every number of `values` (see [`flatten`]) as `prefix/key` at `step`: in the
    /// dashboard's history and, when on, in TensorBoard (flushed, so a reader sees the step
    /// while the run goes on). A TensorBoard write that fails is logged once and switched off;
    /// training goes on.
    pub fn record(&self, prefix: &str, step: u64, values: &Value) {
        let mut scalars = flatten(prefix, values);
        // The step is the x axis already.
        scalars.retain(|(tag, _)| !tag.ends_with("/step"));
        for (tag, v) in &scalars {
            self.history.push(tag, step, *v);
        }
        let mut tb = self.tensorboard.lock().expect("tensorboard lock");
        if let Some(w) = tb.as_mut() {
            let written = w
                .scalars(
                    step as i64,
                    unix_now(),
                    scalars.iter().map(|(t, v)| (t.as_str(), *v)),
                )
                .and_then(|_| w.flush());
            if let Err(e) = written {
                tracing::warn!(
                    "cannot write {}: {e}; TensorBoard files are off for the rest of the run",
                    w.path().display()
                );
                *tb = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_flatten_into_tags_and_text_is_left_out() {
        let v = json!({"loss": 0.5, "metrics": {"kl": 0.01, "pg": {"clip": 0.0}},
                       "ok": true, "name": "x", "seqs": [1, 2], "staleness": null});
        let mut got = flatten("train", &v);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            vec![
                ("train/loss".to_string(), 0.5),
                ("train/metrics/kl".to_string(), 0.01),
                ("train/metrics/pg/clip".to_string(), 0.0),
                ("train/ok".to_string(), 1.0),
            ]
        );
    }

    #[test]
    fn recorded_scalars_reach_the_event_file() {
        let dir = tempfile::tempdir().unwrap();
        let m = Metrics::new();
        let file = m.write_tensorboard(dir.path()).unwrap();
        m.record("train", 1, &json!({"loss": 0.25}));
        m.record("score", 1, &json!({"preferred": 0.5}));
        let bytes = std::fs::read(file).unwrap();
        // The version event and two scalar events, each tag in the file.
        for tag in ["train/loss", "score/preferred", "brain.Event:2"] {
            assert!(
                bytes.windows(tag.len()).any(|w| w == tag.as_bytes()),
                "{tag}"
            );
        }
    }
}

//! The trajectory format: a session and its turns, as `buffer export` writes them and
//! `train --data-path` reads them.
//!
//! ```json
//! {"session_id": "s1", "turns": [
//!   {"type": "main", "prompt": [{"role": "user", "content": "hi"}], "response": {"role": "assistant", "content": "hello"},
//!    "next_state": {"role": "user", "content": "thanks"}, "trainable": true}
//! ]}
//! ```
//!
//! `prompt` is the request's OpenAI messages (a plain string is read as one user message);
//! `response` the assistant message (or a string); `next_state` what followed (or null).
//! Exported turns also carry the exact `prompt_ids`, `response_ids`, `response_logprobs` and
//! `weight_version`, and `reward` once judged; hand-written files may leave them out.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// One session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrajectoryRecord {
    /// The session id.
    pub session_id: String,
    /// Its turns, in order.
    pub turns: Vec<TurnRecord>,
}

/// One turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRecord {
    /// `main` (trainable agent step) or `side` (never trained).
    #[serde(rename = "type")]
    pub turn_type: String,
    /// The turn's index in its session, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_index: Option<u32>,
    /// The request messages (OpenAI shape), or a string.
    pub prompt: Value,
    /// The tools of the request (OpenAI `tools` array), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Value>,
    /// The assistant message, or a string.
    pub response: Value,
    /// What followed the turn: `{role, content}`, or null.
    #[serde(default)]
    pub next_state: Option<Value>,
    /// Whether the turn may be trained (side turns never are).
    #[serde(default = "yes")]
    pub trainable: bool,
    /// A reward, when already known (judged, or given by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<f32>,
    /// The exact prompt token ids served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ids: Option<Vec<u32>>,
    /// The exact sampled token ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_ids: Option<Vec<u32>>,
    /// The logprob of each sampled token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_logprobs: Option<Vec<f32>>,
    /// The weight version that sampled the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_version: Option<u64>,
    /// The grammar the response was decoded under (`json_object`, `json_schema`,
    /// `tool_call`), when one was: its logprobs are the masked distribution's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// The LoRA adapter the response was sampled with over the base, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
}

fn yes() -> bool {
    true
}

impl TurnRecord {
    /// Checks the fields' shapes; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.turn_type != "main" && self.turn_type != "side" {
            return Err(format!(
                "field `type` is {:?}, expected \"main\" or \"side\"",
                self.turn_type
            ));
        }
        match &self.prompt {
            Value::String(_) => {}
            Value::Array(msgs) => {
                for (i, m) in msgs.iter().enumerate() {
                    if m.get("role").and_then(Value::as_str).is_none() {
                        return Err(format!("field `prompt[{i}]` has no string `role`"));
                    }
                }
            }
            other => {
                return Err(format!(
                    "field `prompt` is {}, expected messages or a string",
                    openclaw_chat::json_kind(other)
                ))
            }
        }
        match &self.response {
            Value::String(_) | Value::Object(_) => {}
            other => {
                return Err(format!(
                    "field `response` is {}, expected a message or a string",
                    openclaw_chat::json_kind(other)
                ))
            }
        }
        if let Some(ns) = &self.next_state {
            match ns {
                Value::Null | Value::String(_) => {}
                Value::Object(o) if o.get("content").is_some() => {}
                _ => {
                    return Err(
                        "field `next_state` must be {role, content}, a string or null".into(),
                    )
                }
            }
        }
        if let (Some(ids), Some(lps)) = (&self.response_ids, &self.response_logprobs) {
            if ids.len() != lps.len() {
                return Err(format!(
                    "field `response_logprobs` has {} values for {} response_ids",
                    lps.len(),
                    ids.len()
                ));
            }
        }
        Ok(())
    }
}

/// What reading a data file found: the good trajectories, and one error line per bad record.
#[derive(Debug, Default)]
pub struct ReadResult {
    /// Trajectories that parsed and validated.
    pub trajectories: Vec<TrajectoryRecord>,
    /// `FILE:LINE: problem`, one per record skipped.
    pub errors: Vec<String>,
}

/// The largest record (a JSONL line, or a JSON array file) read: a record past it is skipped
/// unread, so one huge line cannot take minutes and gigabytes before it is found useless.
/// 16 MiB is some four million tokens of text, far past any context served here.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// Reads a JSONL file (one trajectory per line), a JSON array of trajectories, or trajectories
/// as JSON objects laid out any other way (one pretty-printed object). Bad records are
/// reported with file, line and field, and the good ones are still returned.
pub fn read_trajectories(path: &Path) -> Result<ReadResult> {
    read_trajectories_capped(path, MAX_RECORD_BYTES)
}

/// [`read_trajectories`] with records capped at `cap` bytes.
pub fn read_trajectories_capped(path: &Path, cap: usize) -> Result<ReadResult> {
    if path.is_dir() {
        bail!(
            "data file {} is a directory; give a JSONL file",
            path.display()
        );
    }
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open data file {}", path.display()))?;
    let mut reader = BufReader::new(file);
    // A JSON array starts with `[`; anything else is read as JSONL first.
    let mut peek = [0u8; 1];
    loop {
        let buf = reader.fill_buf()?;
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                peek[0] = buf[i];
                break;
            }
            None if buf.is_empty() => bail!("data file {} is empty", path.display()),
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
    let mut out = ReadResult::default();
    let name = path.display().to_string();
    if peek[0] == b'[' {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if size > cap as u64 {
            bail!(
                "{name}: a JSON array of {size} bytes is read whole, and records are capped at {cap} bytes; write it as JSON Lines (one trajectory a line)"
            );
        }
        let all: Vec<Value> = serde_json::from_reader(reader)
            .map_err(|e| anyhow::anyhow!("{name}:{}: invalid JSON: {e}", e.line()))?;
        for (i, v) in all.into_iter().enumerate() {
            accept(v, &format!("{name}: record {}", i + 1), &mut out);
        }
        return Ok(out);
    }
    let mut line_no = 0;
    let mut line = Vec::new();
    loop {
        line.clear();
        line_no += 1;
        // At most `cap + 1` bytes of a line are held; the rest of a longer one is skipped.
        let n = (&mut reader)
            .take(cap as u64 + 1)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("{name}:{line_no}: cannot read"))?;
        if n == 0 {
            break;
        }
        if line.len() > cap && line.last() != Some(&b'\n') {
            let mut skipped = line.len() as u64;
            loop {
                let buf = reader
                    .fill_buf()
                    .with_context(|| format!("{name}:{line_no}: cannot read"))?;
                if buf.is_empty() {
                    break;
                }
                let (used, end) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (i + 1, true),
                    None => (buf.len(), false),
                };
                reader.consume(used);
                skipped += used as u64;
                if end {
                    break;
                }
            }
            out.errors.push(format!(
                "{name}:{line_no}: a record of {skipped} bytes, past the cap of {cap} bytes; skipped unread"
            ));
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            out.errors
                .push(format!("{name}:{line_no}: not UTF-8 text; skipped"));
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v) => accept(v, &format!("{name}:{line_no}"), &mut out),
            Err(e) => out
                .errors
                .push(format!("{name}:{line_no}: invalid JSON: {e}")),
        }
    }
    if peek[0] == b'{' && out.trajectories.is_empty() && !out.errors.is_empty() {
        // Not JSON Lines: one pretty-printed object (what the original's how-to calls a JSON
        // trajectory file), or several one after another, within the cap of one record.
        if let Some(whole) = read_objects(path, &name, cap)? {
            return Ok(whole);
        }
    }
    Ok(out)
}

/// The file as JSON objects one after another, however they are laid out; `None` when it is
/// larger than `cap` or is not that.
fn read_objects(path: &Path, name: &str, cap: usize) -> Result<Option<ReadResult>> {
    if std::fs::metadata(path).map(|m| m.len()).unwrap_or(u64::MAX) > cap as u64 {
        return Ok(None);
    }
    let bytes = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    let mut out = ReadResult::default();
    for (i, v) in serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Value>()
        .enumerate()
    {
        match v {
            Ok(v) => accept(v, &format!("{name}: object {}", i + 1), &mut out),
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(out))
}

fn accept(v: Value, at: &str, out: &mut ReadResult) {
    match serde_json::from_value::<TrajectoryRecord>(v) {
        Ok(t) => {
            for (i, turn) in t.turns.iter().enumerate() {
                if let Err(e) = turn.validate() {
                    out.errors.push(format!("{at}: turns[{i}]: {e}"));
                    return;
                }
            }
            out.trajectories.push(t);
        }
        Err(e) => out.errors.push(format!("{at}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_printed_objects_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.json");
        let one = serde_json::json!({"session_id": "a", "turns": [{"type": "main", "prompt": "hi", "response": "hello", "next_state": {"role": "user", "content": "thanks"}, "trainable": true}]});
        let text = serde_json::to_string_pretty(&one).unwrap();
        std::fs::write(&path, &text).unwrap();
        let r = read_trajectories(&path).unwrap();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.trajectories.len(), 1);
        assert_eq!(r.trajectories[0].session_id, "a");
        std::fs::write(&path, format!("{text}\n{text}\n")).unwrap();
        assert_eq!(read_trajectories(&path).unwrap().trajectories.len(), 2);
        // Broken JSON that is neither still names its lines.
        std::fs::write(&path, "{\n  \"session_id\": \n").unwrap();
        let r = read_trajectories(&path).unwrap();
        assert!(r.trajectories.is_empty());
        assert!(
            r.errors[0].contains("data.json:1: invalid JSON"),
            "{:?}",
            r.errors
        );
    }

    #[test]
    fn good_records_are_kept_and_bad_ones_named_by_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.jsonl");
        std::fs::write(
            &path,
            concat!(
                r#"{"session_id":"a","turns":[{"type":"main","prompt":"hi","response":"hello","next_state":{"role":"user","content":"thanks"},"trainable":true}]}"#, "\n",
                "\n",
                r#"{"session_id":"b","turns":[{"type":"mian","prompt":"x","response":"y"}]}"#, "\n",
                r#"{"session_id":"c","turns":[{"type":"main","prompt":"x"}]}"#, "\n",
                "{not json\n",
                r#"{"session_id":"d","turns":[{"type":"side","prompt":[{"role":"user","content":"q"}],"response":{"role":"assistant","content":"r"},"next_state":null,"trainable":false}]}"#, "\n",
            ),
        )
        .unwrap();
        let r = read_trajectories(&path).unwrap();
        assert_eq!(r.trajectories.len(), 2);
        assert_eq!(r.trajectories[0].session_id, "a");
        assert_eq!(r.errors.len(), 3, "{:?}", r.errors);
        assert!(
            r.errors[0].contains("data.jsonl:3: turns[0]: field `type` is \"mian\""),
            "{}",
            r.errors[0]
        );
        assert!(
            r.errors[1].contains("data.jsonl:4: ")
                && r.errors[1].contains("missing field `response`"),
            "{}",
            r.errors[1]
        );
        assert!(
            r.errors[2].contains("data.jsonl:5: invalid JSON"),
            "{}",
            r.errors[2]
        );
    }

    #[test]
    fn an_oversized_or_non_utf8_line_is_skipped_unread_naming_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.jsonl");
        let good = r#"{"session_id":"a","turns":[]}"#;
        let huge = format!(r#"{{"session_id":"{}","turns":[]}}"#, "x".repeat(5000));
        let mut bytes = format!("{good}\n{huge}\n").into_bytes();
        bytes.extend_from_slice(b"{\"session_id\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(format!("{good}\n").as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let r = read_trajectories_capped(&path, 1024).unwrap();
        assert_eq!(r.trajectories.len(), 2, "{:?}", r.errors);
        assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
        assert!(
            r.errors[0].contains("data.jsonl:2: a record of 5029 bytes, past the cap of 1024"),
            "{}",
            r.errors[0]
        );
        assert!(
            r.errors[1].contains("data.jsonl:3: not UTF-8"),
            "{}",
            r.errors[1]
        );
        let e = read_trajectories(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
    }

    #[test]
    fn a_json_array_file_is_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.json");
        std::fs::write(
            &path,
            r#" [{"session_id":"a","turns":[]}, {"session_id":1}]"#,
        )
        .unwrap();
        let r = read_trajectories(&path).unwrap();
        assert_eq!(r.trajectories.len(), 1);
        assert!(r.errors[0].contains("record 2"), "{:?}", r.errors);
    }
}

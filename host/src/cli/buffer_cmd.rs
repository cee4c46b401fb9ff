//! `openclaw-host buffer ...`: the durable buffer as the user's dataset.

use super::BufferCommand;
use crate::buffer::{export, Log};
use anyhow::{Context, Result};
use std::io::Write;

pub fn run(cmd: BufferCommand) -> Result<i32> {
    match cmd {
        BufferCommand::Export {
            rl_buffer_dir,
            out,
            episodes,
        } => {
            let replay = Log::read_all(&rl_buffer_dir)?;
            for w in &replay.warnings {
                eprintln!("warning: {w}");
            }
            let (lines, what) = if episodes {
                let eps = export::episodes(&replay.records);
                let what = format!("{} episodes", eps.len());
                (jsonl(&eps)?, what)
            } else {
                let trajectories = export::trajectories(&replay.records);
                let turns: usize = trajectories.iter().map(|t| t.turns.len()).sum();
                let what = format!("{} sessions ({turns} turns)", trajectories.len());
                (jsonl(&trajectories)?, what)
            };
            match out {
                Some(path) => {
                    std::fs::write(&path, lines)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!("wrote {what} to {}", path.display());
                }
                None => std::io::stdout().write_all(lines.as_bytes())?,
            }
            Ok(0)
        }
    }
}

/// `items` as JSON Lines.
fn jsonl<T: serde::Serialize>(items: &[T]) -> Result<String> {
    let mut text = String::new();
    for i in items {
        text.push_str(&serde_json::to_string(i)?);
        text.push('\n');
    }
    Ok(text)
}

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
            if episodes {
                let eps = export::episodes(&replay.records);
                let mut text = String::new();
                for e in &eps {
                    text.push_str(&serde_json::to_string(e)?);
                    text.push('\n');
                }
                match out {
                    Some(path) => {
                        std::fs::write(&path, text)
                            .with_context(|| format!("cannot write {}", path.display()))?;
                        eprintln!("wrote {} episodes to {}", eps.len(), path.display());
                    }
                    None => std::io::stdout().write_all(text.as_bytes())?,
                }
                return Ok(0);
            }
            let trajectories = export::trajectories(&replay.records);
            let mut text = String::new();
            for t in &trajectories {
                text.push_str(&serde_json::to_string(t)?);
                text.push('\n');
            }
            match out {
                Some(path) => {
                    std::fs::write(&path, text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    let turns: usize = trajectories.iter().map(|t| t.turns.len()).sum();
                    eprintln!(
                        "wrote {} sessions ({turns} turns) to {}",
                        trajectories.len(),
                        path.display()
                    );
                }
                None => std::io::stdout().write_all(text.as_bytes())?,
            }
            Ok(0)
        }
    }
}

//! `openclaw-host buffer ...`: the durable buffer as the user's dataset.

use super::BufferCommand;
use anyhow::{Context, Result};
use openclaw_buffer::{export, log, Log};
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
        BufferCommand::Check { rl_buffer_dir } => {
            let found = log::check(&rl_buffer_dir)?;
            let mut damaged = 0;
            for c in &found {
                let name = c.path.display();
                if c.damage.is_empty() {
                    println!("{name}: {} records, whole", c.records);
                    continue;
                }
                if c.torn_tail {
                    println!(
                        "{name}: {} records and a torn tail at byte {} (a write cut short by a crash; the next run cuts it)",
                        c.records, c.damage[0].start
                    );
                    continue;
                }
                damaged += 1;
                println!(
                    "{name}: {} whole records, {} damaged spans:",
                    c.records,
                    c.damage.len()
                );
                for d in &c.damage {
                    println!(
                        "  bytes {}..{} ({} bytes): {}",
                        d.start,
                        d.end,
                        d.end - d.start,
                        d.why
                    );
                }
            }
            if damaged > 0 {
                println!(
                    "{damaged} damaged segments: `openclaw-host buffer repair --rl-buffer-dir {}` keeps every whole record (the originals are kept beside them)",
                    rl_buffer_dir.display()
                );
                return Ok(1);
            }
            println!("{} segments, no damage", found.len());
            Ok(0)
        }
        BufferCommand::Repair { rl_buffer_dir } => {
            let done = log::repair(&rl_buffer_dir)?;
            for r in &done {
                println!(
                    "{}: rewritten with its {} whole records ({} damaged bytes left out); the original is {}",
                    r.path.display(),
                    r.kept,
                    r.dropped_bytes,
                    r.original.display()
                );
            }
            if done.is_empty() {
                println!("no damaged segment; nothing changed");
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

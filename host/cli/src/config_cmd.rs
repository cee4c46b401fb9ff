//! `openclaw-host config`: the resolved configuration, annotated.

use super::flags::RunFlags;
use anyhow::Result;
use openclaw_config::render;
use openclaw_plugins::RunPlugins;

pub fn run(flags: &RunFlags) -> Result<i32> {
    let run = RunPlugins::load(|| flags.inputs())?;
    if !run.assignments.is_empty() {
        println!("# plugins of this run:");
        for a in &run.assignments {
            let p = run
                .registry
                .get(&a.plugin)
                .expect("assigned plugins are loaded");
            println!(
                "#   {:<8} {} {} ({}, via {})",
                a.kind.as_str(),
                p.name(),
                p.manifest.version,
                p.origin().display(),
                a.via
            );
        }
    }
    print!("{}", render(&run.resolved));
    Ok(0)
}

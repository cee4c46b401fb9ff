//! Prints the engine benchmark as JSON: `cargo run --release -p openclaw-engine --example bench`.

fn main() -> anyhow::Result<()> {
    let report = openclaw_engine::bench::run(&openclaw_engine::bench::BenchConfig::default())?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

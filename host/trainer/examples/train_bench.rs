//! Training throughput on the tiny Qwen3: `cargo run --release -p openclaw-trainer --example
//! train_bench [iters] [lora] [dp2]` (`dp2`: the step's two halves on two threads).

use burn::backend::Autodiff;
use openclaw_engine::CpuBackend;
use openclaw_trainer::bench::{run, BenchConfig};
use openclaw_trainer::LoraConfig;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mut cfg = BenchConfig::tiny();
    if let Some(n) = args.get(1) {
        cfg.iters = n.parse()?;
    }
    if args.iter().any(|a| a == "lora") {
        cfg.lora = Some(LoraConfig::default());
    }
    if args.iter().any(|a| a == "dp2") {
        cfg.data_parallel = 2;
    }
    let r = run::<Autodiff<CpuBackend>>(&cfg, &Default::default())?;
    println!("{}", serde_json::to_string(&r)?);
    println!(
        "train {}x{}: best {:.0} tok/s, mean {:.0} tok/s",
        cfg.batch, cfg.seq, r.best_tokens_per_s, r.mean_tokens_per_s
    );
    Ok(())
}

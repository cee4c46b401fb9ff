//! What the plugin ABI costs: the binary-rl loss on 16 samples of 4,096 tokens, called through
//! the loaded library (`LossHandle`) and directly as a Rust function, in one process. Prints
//! the medians and their ratio. Run with `cargo bench -p openclaw-integration-tests`.

use openclaw_method_binary_rl::{BinaryRlLoss, DEFAULT_CONFIG};
use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::{HostServices, Loss, LossBatch};
use openclaw_plugins::{LoadedPlugin, LossHandle};
use std::path::Path;
use std::time::{Duration, Instant};

const SAMPLES: usize = 16;
const TOKENS: usize = 4096;
const ROUNDS: usize = 41;

/// A deterministic batch: log-probs from a simple generator, every fourth token masked out.
fn batch() -> LossBatch {
    let n = SAMPLES * TOKENS;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f32 / (1u64 << 53) as f32
    };
    let logp: Vec<f32> = (0..n).map(|_| -4.0 * next() - 0.01).collect();
    let old: Vec<f32> = logp.iter().map(|l| l + 0.2 * (next() - 0.5)).collect();
    let rollout: Vec<f32> = old.iter().map(|l| l + 0.02 * (next() - 0.5)).collect();
    let reference: Vec<f32> = logp.iter().map(|l| l + 0.1 * (next() - 0.5)).collect();
    LossBatch {
        sample_offsets: (0..=SAMPLES).map(|i| (i * TOKENS) as u32).collect(),
        logp: logp.into(),
        old_logp: old.into(),
        rollout_logp: rollout.into(),
        ref_logp: ROption::RSome(reference.into()),
        loss_mask: (0..n).map(|t| if t % 4 == 3 { 0.0 } else { 1.0 }).collect(),
        rewards: (0..SAMPLES)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect(),
        group_ids: (0..SAMPLES as u64).collect(),
        step_samples: SAMPLES as u32,
        ..Default::default()
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let config = format!("{DEFAULT_CONFIG}\nkl_coef = 0.02\ntis_cap = 2.0\n")
        .replace("kl_coef = 0.0\n", "")
        .replace("tis_cap = 0.0\n", "");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../methods/binary-rl");
    let plugin = LoadedPlugin::open(&dir).expect("build and load methods/binary-rl");
    let through_abi =
        LossHandle::new(&plugin, &config, HostServices::standalone()).expect("construct");
    let direct = BinaryRlLoss::new(&config, HostServices::standalone()).expect("construct");
    let b = batch();

    // Same answer both ways, or the comparison means nothing.
    let a = through_abi.compute(&b).unwrap();
    let d = direct.compute(&b).unwrap();
    assert_eq!(a.loss, d.loss);
    assert_eq!(a.grad_logp, d.grad_logp);

    let (mut t_abi, mut t_direct) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS + 3 {
        // Alternate the order so neither side always runs on a warmer cache.
        let order = [round % 2 == 0, round % 2 == 1];
        for abi_first in order {
            let start = Instant::now();
            let out = if abi_first {
                through_abi.compute(&b).unwrap()
            } else {
                direct.compute(&b).unwrap()
            };
            std::hint::black_box(out);
            let took = start.elapsed();
            if round >= 3 {
                if abi_first {
                    t_abi.push(took);
                } else {
                    t_direct.push(took);
                }
            }
        }
    }
    let (abi, direct) = (median(t_abi), median(t_direct));
    let ratio = abi.as_secs_f64() / direct.as_secs_f64();
    println!("binary-rl loss, {SAMPLES} samples x {TOKENS} tokens, median of {ROUNDS} calls each:");
    println!(
        "  direct call        {:>8.3} ms",
        direct.as_secs_f64() * 1e3
    );
    println!("  through the ABI    {:>8.3} ms", abi.as_secs_f64() * 1e3);
    println!(
        "  ratio abi/direct   {ratio:>8.3}  (overhead {:+.1}%)",
        (ratio - 1.0) * 100.0
    );
}

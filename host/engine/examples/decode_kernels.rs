//! The quantised matmuls of one decode step of SmolLM2-135M (Q4_1 projections, Q8_0 head), and
//! nothing else: `cargo run --release -p openclaw-engine --example decode_kernels [batch]`.
//!
//! Thirty layers of distinct random weights, so that every step streams them from memory as a
//! real one does; prints the best of twenty steps (and of their layers and head apart) in
//! multiply-adds per second, beside the machine's peak: every pool thread running independent
//! AVX-512 FMAs at once (on a CPU with AVX-512). Against the whole step (`openclaw-host bench
//! decode`) it tells the kernels from everything around them; the time of each projection apart
//! tells which shape a kernel change helped or hurt.

use std::time::Instant;

use openclaw_engine::quant::ggml::GgmlType;
use openclaw_engine::quant::QuantMatrix;

/// SmolLM2-135M's projections, `[rows, cols]`: q, k, v, o, gate, up, down.
const LAYER: [(usize, usize); 7] = [
    (576, 576),
    (192, 576),
    (192, 576),
    (576, 576),
    (1536, 576),
    (1536, 576),
    (576, 1536),
];
const LAYERS: usize = 30;
const VOCAB: usize = 49152;
const HIDDEN: usize = 576;

/// GGUF blocks with unit scales, random quants and (Q4_1) a minimum of -2.
fn blocks(ty: GgmlType, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    let mut byte = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        (state >> 24) as u8
    };
    let mut out = Vec::new();
    for _ in 0..rows * cols / 32 {
        if ty == GgmlType::Q4_1 {
            out.extend_from_slice(&[0x00, 0x3c, 0x00, 0xc0]);
            out.extend((0..16).map(|_| byte()));
        } else {
            out.extend_from_slice(&[0x00, 0x3c]);
            out.extend((0..32).map(|_| byte() & 0x7f));
        }
    }
    out
}

/// Multiply-adds per second of every pool thread issuing independent AVX-512 FMAs at once (12
/// accumulators, enough to cover the FMA latency); `None` without AVX-512.
fn fma_peak() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        if !is_x86_feature_detected!("avx512f") {
            return None;
        }
        const ROUNDS: usize = 20_000_000;
        #[target_feature(enable = "avx512f")]
        unsafe fn spin(rounds: usize) -> f32 {
            let (a, b) = (
                _mm512_set1_ps(std::hint::black_box(1.0)),
                _mm512_set1_ps(std::hint::black_box(1e-9)),
            );
            let mut acc = [_mm512_setzero_ps(); 12];
            for _ in 0..rounds {
                for c in acc.iter_mut() {
                    *c = _mm512_fmadd_ps(*c, a, b);
                }
            }
            acc.iter().map(|&c| _mm512_reduce_add_ps(c)).sum()
        }
        let t = Instant::now();
        // SAFETY: the CPU has AVX-512 (checked above).
        let sums = rayon::broadcast(|_| unsafe { spin(ROUNDS) });
        let lanes = (std::hint::black_box(sums).len() * ROUNDS * 12 * 16) as f64;
        Some(lanes / t.elapsed().as_secs_f64())
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

fn main() -> anyhow::Result<()> {
    let m: usize = match std::env::args().nth(1) {
        Some(s) => s.parse()?,
        None => 8,
    };
    let layers = (0..LAYERS)
        .map(|l| {
            LAYER
                .iter()
                .enumerate()
                .map(|(i, &(r, c))| {
                    let seed = (l * LAYER.len() + i + 1) as u32;
                    QuantMatrix::from_gguf(
                        GgmlType::Q4_1,
                        r,
                        c,
                        &blocks(GgmlType::Q4_1, r, c, seed),
                    )
                })
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let head = QuantMatrix::from_gguf(
        GgmlType::Q8_0,
        VOCAB,
        HIDDEN,
        &blocks(GgmlType::Q8_0, VOCAB, HIDDEN, 999),
    )?;
    let input = |k: usize| -> Vec<f32> {
        (0..m * k)
            .map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5)
            .collect()
    };
    let (x, x_down) = (input(HIDDEN), input(LAYER[6].1));
    let layer_macs = (LAYERS * LAYER.iter().map(|(r, c)| r * c).sum::<usize>() * m) as f64;
    let head_macs = (VOCAB * HIDDEN * m) as f64;
    let (mut best_layers, mut best_head, mut best_step) =
        (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    // Each projection's time summed over the layers, the best of the steps.
    let mut best_per = [f64::INFINITY; LAYER.len()];
    let mut best_grouped = f64::INFINITY;
    // On a pool thread, as a decode step runs (its matmuls split with a plain join).
    rayon::scope(|_| {
        for _ in 0..20 {
            let step = Instant::now();
            let t = Instant::now();
            let mut per = [0f64; LAYER.len()];
            for layer in &layers {
                for (i, q) in layer.iter().enumerate() {
                    let t = Instant::now();
                    std::hint::black_box(q.matmul(if i == 6 { &x_down } else { &x }, m));
                    per[i] += t.elapsed().as_secs_f64();
                }
            }
            for (best, t) in best_per.iter_mut().zip(per) {
                *best = best.min(t);
            }
            best_layers = best_layers.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            std::hint::black_box(head.matmul(&x, m));
            best_head = best_head.min(t.elapsed().as_secs_f64());
            best_step = best_step.min(step.elapsed().as_secs_f64());
            // The layers as the model calls them: q, k and v in one parallel region, gate
            // and up in one.
            let t = Instant::now();
            for l in &layers {
                std::hint::black_box(QuantMatrix::matmul_group([&l[0], &l[1], &l[2]], &x, m));
                std::hint::black_box(l[3].matmul(&x, m));
                std::hint::black_box(QuantMatrix::matmul_group([&l[4], &l[5]], &x, m));
                std::hint::black_box(l[6].matmul(&x_down, m));
            }
            best_grouped = best_grouped.min(t.elapsed().as_secs_f64());
        }
    });
    let rate = (layer_macs + head_macs) / best_step;
    println!(
        "batch {m}, {} threads: layers {:.2} ms ({:.1} G multiply-adds/s), head {:.2} ms ({:.1}), step {:.2} ms ({:.1})",
        rayon::current_num_threads(),
        best_layers * 1e3,
        layer_macs / best_layers / 1e9,
        best_head * 1e3,
        head_macs / best_head / 1e9,
        best_step * 1e3,
        rate / 1e9,
    );
    println!(
        "layers with q, k, v in one parallel region and gate, up in one (as the model runs them): {:.2} ms",
        best_grouped * 1e3
    );
    let per: Vec<String> = best_per.iter().map(|t| format!("{:.2}", t * 1e3)).collect();
    println!(
        "each projection over the {LAYERS} layers (q k v o gate up down), best step: {} ms",
        per.join(" ")
    );
    match fma_peak() {
        Some(peak) => println!(
            "FMA peak of the pool: {:.1} G multiply-adds/s; the step's matmuls run at {:.0}% of it",
            peak / 1e9,
            100.0 * rate / peak
        ),
        None => println!("FMA peak: not measured (no AVX-512 here)"),
    }
    Ok(())
}

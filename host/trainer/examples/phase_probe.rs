//! Where a training step's time goes on the benchmark model: decoder forward, head and
//! log-softmax, backward, AdamW. `cargo run --release -p openclaw-trainer --example phase_probe`.

use std::time::Instant;

use burn::backend::Autodiff;
use burn::optim::GradientsParams;
use burn::prelude::*;
use openclaw_engine::{random_model, CpuBackend};
use openclaw_trainer::bench::BenchConfig;
use openclaw_trainer::logprob::layout_logprobs;
use openclaw_trainer::pack::{Layout, SeqRef};
use openclaw_trainer::rng::SplitMix;
use openclaw_trainer::{AdamW, AdamWConfig};

type AD = Autodiff<CpuBackend>;

fn main() {
    let cfg = BenchConfig::tiny();
    let dev = Default::default();
    let mut model = random_model::<AD>(cfg.model.clone(), 0, &dev).unwrap();
    let mut rng = SplitMix::new(1);
    let seqs: Vec<Vec<u32>> = (0..cfg.batch)
        .map(|_| (0..cfg.seq).map(|_| rng.below(4096) as u32).collect())
        .collect();
    let refs: Vec<SeqRef<'_>> = seqs
        .iter()
        .map(|s| SeqRef {
            tokens: vec![&s[..]],
            targets: (1..s.len()).collect(),
        })
        .collect();
    let layout = Layout::new(&refs);
    let n = layout.rows.len();
    let mut opt = AdamW::new(AdamWConfig::default());
    for round in 0..4 {
        let t0 = Instant::now();
        let ids = Tensor::<AD, 2, Int>::from_data(
            TensorData::new(layout.ids.clone(), [layout.batch, layout.width]),
            &dev,
        );
        let h = model.hidden_full(ids);
        let _ = h.clone().into_data();
        let t_hidden = t0.elapsed().as_secs_f64();
        let out = layout_logprobs(&model, &layout, None, 1.0, n);
        let loss = out.logp.sum().mul_scalar(-1.0 / n as f64);
        let _ = loss.clone().into_scalar();
        let t1 = Instant::now();
        let grads = loss.backward();
        let t2 = Instant::now();
        let mut gp = GradientsParams::from_grads(grads, &model);
        model = opt.step::<AD, _>(model, &mut gp, 1e-4);
        let t3 = Instant::now();
        println!(
            "round {round}: decoder fwd {:.0} ms | full fwd (decoder + head + log_softmax) {:.0} ms | bwd {:.0} ms | adamw {:.0} ms",
            t_hidden * 1e3,
            (t1 - t0).as_secs_f64() * 1e3 - t_hidden * 1e3,
            (t2 - t1).as_secs_f64() * 1e3,
            (t3 - t2).as_secs_f64() * 1e3
        );
    }
}

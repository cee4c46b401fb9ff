//! AdamW against PyTorch's update rule, offloaded state, and state round trips.

mod common;

use burn::module::Param;
use burn::nn::Linear;
use burn::optim::GradientsParams;
use burn::prelude::*;
use common::*;
use openclaw_trainer::{AdamW, AdamWConfig};

fn linear(w: Vec<f32>) -> Linear<AD> {
    Linear {
        weight: Param::from_data(TensorData::new(w, [2, 2]), &device()),
        bias: None,
    }
}

/// Gradients of `sum(x W · c)` for a fixed `x` and `c`.
fn grads(l: &Linear<AD>, x: [f32; 2], c: [f32; 2]) -> GradientsParams {
    let dev = device();
    let x = Tensor::<AD, 2>::from_data(TensorData::new(x.to_vec(), [1, 2]), &dev);
    let c = Tensor::<AD, 2>::from_data(TensorData::new(c.to_vec(), [1, 2]), &dev);
    let y = x.matmul(l.weight.val()) * c;
    GradientsParams::from_grads(y.sum().backward(), l)
}

/// PyTorch's AdamW (single-tensor path) in f64.
fn torch_adamw(
    p: &mut [f64],
    m: &mut [f64],
    v: &mut [f64],
    g: &[f64],
    t: i32,
    lr: f64,
    c: &AdamWConfig,
) {
    for i in 0..p.len() {
        p[i] *= 1.0 - lr * c.weight_decay;
        m[i] = c.beta1 * m[i] + (1.0 - c.beta1) * g[i];
        v[i] = c.beta2 * v[i] + (1.0 - c.beta2) * g[i] * g[i];
        let bc1 = 1.0 - c.beta1.powi(t);
        let bc2 = 1.0 - c.beta2.powi(t);
        let denom = v[i].sqrt() / bc2.sqrt() + c.eps;
        p[i] -= lr / bc1 * m[i] / denom;
    }
}

#[test]
fn adamw_follows_pytorch() {
    let cfg = AdamWConfig {
        weight_decay: 0.1,
        beta1: 0.8,
        beta2: 0.95,
        eps: 1e-6,
        offload_state: false,
    };
    let w0 = vec![0.5f32, -1.0, 2.0, 0.25];
    let (x, c) = ([1.0f32, -2.0], [0.5f32, 3.0]);
    // dL/dW[i][j] = x_i c_j
    let g: Vec<f64> = (0..4).map(|k| (x[k / 2] * c[k % 2]) as f64).collect();
    for offload in [false, true] {
        let mut opt = AdamW::new(AdamWConfig {
            offload_state: offload,
            ..cfg.clone()
        });
        let mut l = linear(w0.clone());
        let mut p: Vec<f64> = w0.iter().map(|&v| v as f64).collect();
        let (mut m, mut v) = (vec![0.0; 4], vec![0.0; 4]);
        for (t, lr) in [(1, 0.1), (2, 0.05), (3, 0.02)] {
            let mut gp = grads(&l, x, c);
            l = opt.step::<AD, _>(l, &mut gp, lr);
            torch_adamw(&mut p, &mut m, &mut v, &g, t, lr, &cfg);
        }
        let got = l.weight.val().into_data().to_vec::<f32>().unwrap();
        for (a, b) in got.iter().zip(&p) {
            assert!(
                (*a as f64 - b).abs() < 1e-6,
                "offload {offload}: {a} vs {b}"
            );
        }
        assert!(opt.param_paths().eq(["weight"]));
    }
}

#[test]
fn defaults_are_pytorchs() {
    let c = AdamWConfig::default();
    assert_eq!(
        (c.weight_decay, c.beta1, c.beta2, c.eps),
        (0.01, 0.9, 0.999, 1e-8)
    );
    assert!(AdamWConfig { beta2: 1.0, ..c }.validate().is_err());
}

#[test]
fn saved_state_continues_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("opt.safetensors");
    let (x, c) = ([0.3f32, -0.7], [1.5f32, -0.5]);
    let mut opt = AdamW::new(AdamWConfig::default());
    let mut l = linear(vec![0.1, 0.2, 0.3, 0.4]);
    let mut gp = grads(&l, x, c);
    l = opt.step::<AD, _>(l, &mut gp, 0.01);
    opt.save(&file).unwrap();
    for offload in [false, true] {
        let cfg = AdamWConfig {
            offload_state: offload,
            ..Default::default()
        };
        let mut restored = AdamW::<Inner>::load(&file, cfg, &device()).unwrap();
        let mut straight = opt.clone();
        let (mut a, mut b) = (l.clone(), l.clone());
        for _ in 0..2 {
            let mut g1 = grads(&a, x, c);
            a = straight.step::<AD, _>(a, &mut g1, 0.01);
            let mut g2 = grads(&b, x, c);
            b = restored.step::<AD, _>(b, &mut g2, 0.01);
        }
        assert_eq!(
            a.weight.val().into_data().to_vec::<f32>().unwrap(),
            b.weight.val().into_data().to_vec::<f32>().unwrap()
        );
    }
    // State that does not fit the module is refused before any update.
    let wide = Linear::<AD> {
        weight: Param::from_data(TensorData::new(vec![0f32; 6], [2, 3]), &device()),
        bias: None,
    };
    let restored = AdamW::<Inner>::load(&file, AdamWConfig::default(), &device()).unwrap();
    let e = restored.check::<AD, _>(&wide).unwrap_err().to_string();
    assert!(e.contains("optimizer state of weight has 4 values"), "{e}");
}

//! The combined loss against the real binary-RL and OPD plugins: with one weight at 0 it is
//! the other method's loss, to the bit in its gradient.
//!
//! An integration test, not a unit test, because it links the two plugins as libraries beside
//! this one, and each defines the library header abi_stable looks up under one fixed name; the
//! build script lets the linker take the first for the integration tests only (a test binary is
//! never loaded as a plugin), so the plugin library itself keeps the linker's duplicate check.

use openclaw_method_binary_rl::BinaryRlLoss;
use openclaw_method_combine::CombineLoss;
use openclaw_method_opd::OpdLoss;
use openclaw_plugin_api::testing::{metric, random_batch};
use openclaw_plugin_api::{HostServices, Loss, LossOutput};

fn combine(text: &str) -> CombineLoss {
    CombineLoss::new(text, HostServices::standalone()).unwrap()
}

fn assert_same(a: &LossOutput, b: &LossOutput, what: &str) {
    assert!(
        (a.loss - b.loss).abs() < 1e-12,
        "{what}: {} vs {}",
        a.loss,
        b.loss
    );
    assert_eq!(a.grad_logp, b.grad_logp, "{what}");
    for m in b.metrics.iter() {
        let v = metric(a, m.name.as_str()).unwrap_or_else(|| panic!("{what}: {}", m.name));
        assert!(
            (v - m.value).abs() < 1e-12,
            "{what}: {} {v} vs {}",
            m.name,
            m.value
        );
    }
}

#[test]
fn without_the_teacher_weight_it_is_binary_rl() {
    let shared = [
        "",
        "group_norm = \"center_scale\"\nkl_coef = 0.1",
        "eps_clip_high = 0.2\ntis_cap = 1.5",
    ];
    for extra in shared {
        let combine = combine(&format!("w_opd = 0.0\n{extra}"));
        let rl = BinaryRlLoss::new(extra, HostServices::standalone()).unwrap();
        for seed in 0..10 {
            let b = random_batch(seed);
            let what = format!("{extra:?}, seed {seed}");
            assert_same(
                &combine.compute(&b).unwrap(),
                &rl.compute(&b).unwrap(),
                &what,
            );
        }
    }
}

#[test]
fn without_the_reward_weight_it_is_opd_token_mode() {
    let shared = ["", "kl_coef = 0.1\ntis_cap = 2.0", "eps_clip = 0.1"];
    for extra in shared {
        // OPD's default clip is symmetric 0.2; combine's upper one is 0.28.
        let combine = combine(&format!("w_rl = 0.0\neps_clip_high = 0.2\n{extra}"));
        let opd = OpdLoss::new(extra, HostServices::standalone()).unwrap();
        for seed in 0..10 {
            let mut b = random_batch(seed);
            let what = format!("{extra:?}, seed {seed}");
            assert_same(
                &combine.compute(&b).unwrap(),
                &opd.compute(&b).unwrap(),
                &what,
            );
            // Every sample with a teacher.
            b.teacher_present = Default::default();
            assert_same(
                &combine.compute(&b).unwrap(),
                &opd.compute(&b).unwrap(),
                &what,
            );
        }
    }
}

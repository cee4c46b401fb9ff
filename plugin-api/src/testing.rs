//! Random loss batches and gradient-check assertions for plugin tests (feature `testing`).

use crate::math::GradCheck;
use crate::{LossBatch, LossOutput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A log-probability in [-4, -0.05].
fn lp(rng: &mut StdRng) -> f32 {
    rng.random_range(-4.0..-0.05)
}

/// A random batch of 5–8 samples of 0–11 tokens with every optional input present. `logp`
/// stays near `old_logp` for about half the tokens, so both branches of the clip are exercised.
pub fn random_batch(seed: u64) -> LossBatch {
    let mut rng = StdRng::seed_from_u64(seed);
    let samples = rng.random_range(5..=8usize);
    let mut offsets = vec![0u32];
    for _ in 0..samples {
        let len = rng.random_range(0..12u32);
        offsets.push(offsets.last().unwrap() + len);
    }
    let n = *offsets.last().unwrap() as usize;
    let old: Vec<f32> = (0..n).map(|_| lp(&mut rng)).collect();
    let logp: Vec<f32> = old
        .iter()
        .map(|&o| {
            if rng.random_bool(0.5) {
                (o + rng.random_range(-0.4..0.4f32)).clamp(-4.0, -0.05)
            } else {
                lp(&mut rng)
            }
        })
        .collect();
    LossBatch {
        sample_offsets: offsets.into(),
        logp: logp.into(),
        old_logp: old.into(),
        rollout_logp: (0..n).map(|_| lp(&mut rng)).collect(),
        ref_logp: Some((0..n).map(|_| lp(&mut rng)).collect::<Vec<_>>().into()).into(),
        teacher_logp: Some((0..n).map(|_| lp(&mut rng)).collect::<Vec<_>>().into()).into(),
        teacher_present: (0..samples).map(|_| rng.random_bool(0.7)).collect(),
        rewards: (0..samples)
            .map(|_| rng.random_range(-1..=1) as f32)
            .collect(),
        group_ids: (0..samples).map(|_| rng.random_range(0..3u64)).collect(),
        loss_mask: (0..n)
            .map(|_| if rng.random_bool(0.8) { 1.0 } else { 0.0 })
            .collect(),
        step_samples: (samples + rng.random_range(0..3)) as u32,
        ..Default::default()
    }
}

/// Asserts a gradient check passed and was not vacuous.
pub fn assert_good(check: &GradCheck, what: &str) {
    assert!(check.passes(1e-3), "{what}: {check:?}");
    let total = check.checked + check.skipped_kinks;
    assert!(
        check.skipped_kinks * 20 <= total.max(20),
        "{what}: too many kinks skipped: {check:?}"
    );
}

/// `k` log-probs whose probabilities sum to a mass in [0.3, 0.95].
fn topk_row(rng: &mut StdRng, k: usize) -> Vec<f32> {
    let mass: f64 = rng.random_range(0.3..0.95);
    let u: Vec<f64> = (0..k).map(|_| rng.random_range(0.05..1.0)).collect();
    let total: f64 = u.iter().sum();
    u.iter().map(|x| (mass * x / total).ln() as f32).collect()
}

/// [`random_batch`] with valid top-k rows for student and teacher.
pub fn random_topk_batch(seed: u64) -> LossBatch {
    let mut b = random_batch(seed);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x70b4);
    let k = rng.random_range(1..=5usize);
    let n = b.num_tokens();
    let mut student = Vec::with_capacity(n * k);
    let mut teacher = Vec::with_capacity(n * k);
    for _ in 0..n {
        student.extend(topk_row(&mut rng, k));
        teacher.extend(topk_row(&mut rng, k));
    }
    b.topk = Some(crate::TopKBatch {
        k: k as u32,
        token_ids: (0..(n * k) as u32).collect(),
        student_logp: student.into(),
        teacher_logp: teacher.into(),
    })
    .into();
    b
}

/// Asserts that a plugin's manifest agrees with its `plugin.toml` (name, version, description,
/// kinds) and with its crate version, and returns the manifest's kinds for further checks.
pub fn assert_manifest_matches(
    manifest: &crate::Manifest,
    plugin_toml: &str,
    crate_version: &str,
) -> Vec<String> {
    let file: toml::Table = toml::from_str(plugin_toml).expect("plugin.toml parses");
    let p = file["plugin"].as_table().expect("a [plugin] table");
    assert_eq!(p["name"].as_str(), Some(manifest.name.as_str()));
    assert_eq!(p["version"].as_str(), Some(manifest.version.as_str()));
    assert_eq!(p["version"].as_str(), Some(crate_version));
    assert_eq!(
        p["description"].as_str(),
        Some(manifest.description.as_str())
    );
    let kinds: Vec<String> = manifest.kinds.iter().map(|k| k.to_string()).collect();
    let listed: Vec<String> = p["kinds"]
        .as_array()
        .expect("kinds is an array")
        .iter()
        .map(|k| k.as_str().expect("kind names are strings").to_string())
        .collect();
    assert_eq!(listed, kinds, "plugin.toml kinds");
    kinds
}

/// The value of metric `name` in a loss's output, if it reports one.
pub fn metric(out: &LossOutput, name: &str) -> Option<f64> {
    out.metrics
        .iter()
        .find(|m| m.name.as_str() == name)
        .map(|m| m.value)
}

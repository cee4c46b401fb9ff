//! Turning one row of logits into the distribution that is sampled from (temperature, top-k,
//! top-p), drawing from it, and reading the logprob of a token under it.
//!
//! Generation and scoring both go through [`Distribution::new`], so a recomputed logprob equals
//! the recorded one up to the logits' own rounding.

use anyhow::{bail, Result};

use crate::rng::Rng;

/// How logits become a sampling distribution (applied in transformers' order:
/// temperature, then top-k, then top-p).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep only the k most likely tokens (ties at the k-th value kept); 0 disables.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose mass reaches top_p; 1 disables.
    pub top_p: f32,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
        }
    }
}

impl SamplingParams {
    /// Greedy decoding.
    pub fn greedy() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
        }
    }

    /// Rejects values that have no meaning.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            bail!(
                "temperature must be a finite number >= 0, got {}",
                self.temperature
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            bail!("top_p must be in (0, 1], got {}", self.top_p);
        }
        Ok(())
    }

    /// Whether decoding is greedy.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }
}

/// The distribution sampled from at one position: the kept tokens (most likely first) and their
/// renormalised log-probabilities.
#[derive(Clone, Debug)]
pub struct Distribution {
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    /// Every token kept: `logprob(i) = logits[i]/t - shift`. `mass` holds the unnormalised
    /// probabilities summed in blocks of [`BLOCK`] tokens, so sampling skips whole blocks.
    Full {
        inv_t: f64,
        shift: f64,
        max: f64,
        mass: Vec<f64>,
    },
    /// An explicit subset, most likely first.
    Subset { ids: Vec<u32>, logprobs: Vec<f64> },
    /// Greedy: the argmax, reported with its temperature-1 logprob.
    Greedy { id: u32, logprob: f64, shift: f64 },
    /// A grammar's tokens only: `inner` is the distribution of the logits `sub` gathered at
    /// `ids` (ascending), so every other token has probability 0 whatever its logit.
    Masked {
        ids: Vec<u32>,
        sub: Vec<f32>,
        inner: Box<Distribution>,
    },
}

/// Tokens per block of [`Kind::Full`]'s mass table.
const BLOCK: usize = 64;

/// `exp(x)` for `x <= 0` in f32 (within a few ulps), written without branches or library calls
/// so that loops over a whole vocabulary vectorise; libm's scalar `expf` dominated sampling time.
/// Outside its domain it stays finite: NaN gives `exp(-87)`, a positive `x` gives 1.
#[inline(always)]
fn exp_nonpos(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // exp(-87) is still a normal f32; below that the probability is 0 for every purpose here.
    // (`max` also turns NaN into -87, where `clamp` would keep it; `min` keeps a positive
    // argument from leaving the range.)
    #[allow(clippy::manual_clamp)]
    let x = x.max(-87.0).min(0.0);
    // n = round(x / ln 2) (x <= 0, so truncating x/ln2 - 0.5 rounds), r in [-ln2/2, ln2/2].
    // SAFETY: x / ln 2 - 0.5 is within about [-126.01, -0.5], so it truncates to an i32 in
    // [-126, 0]. (`as` would give the same value but checks for saturation lane by lane, which
    // kept the whole loop from vectorising.)
    let n: i32 = unsafe { (x * std::f32::consts::LOG2_E - 0.5).to_int_unchecked() };
    let nf = n as f32;
    let r = x - nf * LN2_HI - nf * LN2_LO;
    // e^r by its Taylor series to degree 7: the remainder is below 1e-8 on this range.
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    f32::from_bits(((n + 127) as u32) << 23) * p
}

/// Unnormalised probabilities `exp(x_i * scale - max)` summed per block, and `ln(sum)`-ready
/// maximum: returns `(max, block sums)`.
fn block_mass(logits: &[f32], scale: f64) -> (f64, Vec<f64>) {
    pulp::Arch::new().dispatch(BlockMass { logits, scale })
}

/// [`block_mass`], compiled for the CPU's widest vectors (the binary targets baseline x86-64):
/// the same operations whatever the width (no fused multiply-adds are formed), so the same bits.
struct BlockMass<'a> {
    logits: &'a [f32],
    scale: f64,
}

impl pulp::WithSimd for BlockMass<'_> {
    type Output = (f64, Vec<f64>);

    // Inlined into pulp's function for the features found. Loops rather than `map(..).sum()`
    // and `collect`: those stayed out-of-line functions compiled for the baseline.
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> (f64, Vec<f64>) {
        let BlockMass { logits, scale } = self;
        // The largest logit, as sixteen running maxima (a maximum does not depend on the order
        // it is taken in; NaNs are passed over either way).
        let mut tops = [f32::NEG_INFINITY; 16];
        let chunks = logits.chunks_exact(16);
        let rest = chunks.remainder();
        for c in chunks {
            for (t, &v) in tops.iter_mut().zip(c) {
                *t = t.max(v);
            }
        }
        let top = tops
            .iter()
            .chain(rest)
            .fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        let max = top as f64 * scale;
        let mut mass = Vec::with_capacity(logits.len().div_ceil(BLOCK));
        for c in logits.chunks(BLOCK) {
            // The block's terms first, in a loop the compiler vectorises, then their sum in
            // order (which it may not reorder); f32 within a block (64 terms), f64 across.
            let mut terms = [0f32; BLOCK];
            for (t, &v) in terms.iter_mut().zip(c) {
                *t = exp_nonpos((v as f64 * scale - max) as f32);
            }
            let mut sum = 0f32;
            for &t in &terms[..c.len()] {
                sum += t;
            }
            mass.push(sum as f64);
        }
        (max, mass)
    }
}

/// `ln(sum(exp(x * scale)))` over `logits`.
fn logsumexp_scaled(logits: &[f32], scale: f64) -> f64 {
    let (m, mass) = block_mass(logits, scale);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + mass.iter().sum::<f64>().ln()
}

/// `ln(sum(exp(x)))` of a few values.
fn logsumexp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + xs
        .map(|x| exp_nonpos((x - m) as f32) as f64)
        .sum::<f64>()
        .ln()
}

fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        // Strictly greater: ties go to the lowest id, like torch.argmax.
        if v > logits[best] {
            best = i;
        }
    }
    best
}

/// The top `k` token ids by logit, most likely first (ties by lower id).
fn top_ids(logits: &[f32], k: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let cmp = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    if k < ids.len() {
        ids.select_nth_unstable_by(k, cmp);
        ids.truncate(k);
    }
    ids.sort_unstable_by(cmp);
    ids
}

impl Distribution {
    /// Builds the distribution for one row of logits.
    pub fn new(logits: &[f32], p: &SamplingParams) -> Self {
        let n = logits.len();
        if p.is_greedy() {
            let id = argmax(logits);
            let shift = logsumexp_scaled(logits, 1.0);
            return Distribution {
                kind: Kind::Greedy {
                    id: id as u32,
                    logprob: logits[id] as f64 - shift,
                    shift,
                },
            };
        }
        let inv_t = 1.0 / p.temperature as f64;
        let use_k = p.top_k > 0 && p.top_k < n;
        let use_p = p.top_p < 1.0;
        if !use_k && !use_p {
            let (m, mass) = block_mass(logits, inv_t);
            let shift = m + mass.iter().sum::<f64>().ln();
            return Distribution {
                kind: Kind::Full {
                    inv_t,
                    shift,
                    max: m,
                    mass,
                },
            };
        }

        // Candidates after top-k, most likely first. transformers keeps every token tied with
        // the k-th value, so extend past k over ties.
        let mut ids: Vec<u32> = if use_k {
            let mut ids = top_ids(logits, p.top_k);
            let kth = logits[*ids.last().expect("k > 0") as usize];
            let mut ties: Vec<u32> = (0..n as u32)
                .filter(|&i| logits[i as usize] == kth && !ids.contains(&i))
                .collect();
            ids.append(&mut ties);
            ids
        } else {
            Vec::new()
        };

        if use_p {
            // Normaliser over all candidates (all tokens when there is no top-k).
            let z = if use_k {
                logsumexp(ids.iter().map(|&i| logits[i as usize] as f64 * inv_t))
            } else {
                logsumexp_scaled(logits, inv_t)
            };
            // Keep the most likely tokens until their mass reaches top_p (the crossing token is
            // kept). Without top-k only a prefix is sorted, grown until it holds the nucleus.
            let mut k = if use_k { ids.len() } else { 64.min(n) };
            loop {
                if !use_k {
                    ids = top_ids(logits, k);
                }
                let mut mass = 0.0;
                let mut keep = None;
                for (j, &i) in ids.iter().enumerate() {
                    mass += exp_nonpos((logits[i as usize] as f64 * inv_t - z) as f32) as f64;
                    if mass >= p.top_p as f64 {
                        keep = Some(j + 1);
                        break;
                    }
                }
                match keep {
                    Some(j) => {
                        ids.truncate(j);
                        break;
                    }
                    None if use_k || k >= n => break, // rounding left the mass short: keep all
                    None => k = (k * 4).min(n),
                }
            }
        }

        let zk = logsumexp(ids.iter().map(|&i| logits[i as usize] as f64 * inv_t));
        let logprobs = ids
            .iter()
            .map(|&i| logits[i as usize] as f64 * inv_t - zk)
            .collect();
        Distribution {
            kind: Kind::Subset { ids, logprobs },
        }
    }

    /// The distribution of `logits` restricted to `allowed` (ascending, non-empty ids): the
    /// sampling settings apply among the allowed tokens alone, as when every other logit is
    /// set to minus infinity first (what vLLM does), without putting infinities through the
    /// vectorised exponential.
    pub fn masked(logits: &[f32], p: &SamplingParams, allowed: &[u32]) -> Self {
        debug_assert!(!allowed.is_empty() && allowed.windows(2).all(|w| w[0] < w[1]));
        let sub: Vec<f32> = allowed.iter().map(|&i| logits[i as usize]).collect();
        let inner = Box::new(Distribution::new(&sub, p));
        Distribution {
            kind: Kind::Masked {
                ids: allowed.to_vec(),
                sub,
                inner,
            },
        }
    }

    /// Whether this distribution was narrowed by a grammar ([`Distribution::masked`]).
    pub fn is_masked(&self) -> bool {
        matches!(self.kind, Kind::Masked { .. })
    }

    /// Logprob of `token` under this distribution (`-inf` if it was filtered out). For greedy
    /// decoding this is the temperature-1 logprob.
    pub fn logprob(&self, logits: &[f32], token: u32) -> f32 {
        let v = match &self.kind {
            Kind::Masked { ids, sub, inner } => {
                return match ids.binary_search(&token) {
                    Ok(j) => inner.logprob(sub, j as u32),
                    Err(_) => f32::NEG_INFINITY,
                }
            }
            Kind::Full { inv_t, shift, .. } => logits[token as usize] as f64 * inv_t - shift,
            Kind::Greedy { shift, .. } => logits[token as usize] as f64 - shift,
            Kind::Subset { ids, logprobs } => match ids.iter().position(|&i| i == token) {
                Some(j) => logprobs[j],
                None => f64::NEG_INFINITY,
            },
        };
        v as f32
    }

    /// Draws a token with one uniform number from `rng`; returns it with its logprob.
    pub fn sample(&self, logits: &[f32], rng: &mut Rng) -> (u32, f32) {
        match &self.kind {
            Kind::Masked { ids, sub, inner } => {
                let (j, lp) = inner.sample(sub, rng);
                (ids[j as usize], lp)
            }
            Kind::Greedy { id, logprob, .. } => (*id, *logprob as f32),
            Kind::Full {
                inv_t,
                shift,
                max,
                mass,
            } => {
                // Walk whole blocks, then tokens inside the block that crosses u * total.
                let total: f64 = mass.iter().sum();
                let target = rng.uniform() * total;
                let mut acc = 0.0;
                let mut block = mass.len() - 1;
                for (b, &bm) in mass.iter().enumerate() {
                    if acc + bm > target {
                        block = b;
                        break;
                    }
                    acc += bm;
                }
                let start = block * BLOCK;
                let end = (start + BLOCK).min(logits.len());
                let mut last = start;
                for (i, &v) in logits[start..end]
                    .iter()
                    .enumerate()
                    .map(|(k, v)| (k + start, v))
                {
                    let p = exp_nonpos((v as f64 * inv_t - max) as f32) as f64;
                    if p > 0.0 {
                        last = i;
                    }
                    acc += p;
                    if acc > target {
                        last = i;
                        break;
                    }
                }
                (last as u32, (logits[last] as f64 * inv_t - shift) as f32)
            }
            Kind::Subset { ids, logprobs } => {
                let u = rng.uniform();
                let mut acc = 0.0;
                for (j, lp) in logprobs.iter().enumerate() {
                    acc += exp_nonpos(*lp as f32) as f64;
                    if acc > u {
                        return (ids[j], *lp as f32);
                    }
                }
                let j = ids.len() - 1;
                (ids[j], logprobs[j] as f32)
            }
        }
    }

    /// The `k` most likely tokens with their logprobs, most likely first.
    pub fn top(&self, logits: &[f32], k: usize) -> Vec<(u32, f32)> {
        match &self.kind {
            Kind::Masked { ids, sub, inner } => inner
                .top(sub, k)
                .into_iter()
                .map(|(j, lp)| (ids[j as usize], lp))
                .collect(),
            Kind::Subset { ids, logprobs } => ids
                .iter()
                .zip(logprobs)
                .take(k)
                .map(|(&i, &lp)| (i, lp as f32))
                .collect(),
            _ => top_ids(logits, k.min(logits.len()))
                .into_iter()
                .map(|i| (i, self.logprob(logits, i)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOGITS: [f32; 6] = [1.0, 3.0, 2.0, 3.0, -1.0, 0.5];

    fn probs_sum(d: &Distribution, logits: &[f32]) -> f64 {
        (0..logits.len() as u32)
            .map(|i| (d.logprob(logits, i) as f64).exp())
            .sum()
    }

    #[test]
    fn a_masked_distribution_is_the_allowed_tokens_renormalised() {
        let allowed = [0u32, 2, 5];
        for p in [
            SamplingParams::default(),
            SamplingParams {
                temperature: 0.7,
                top_k: 2,
                top_p: 1.0,
            },
            SamplingParams {
                temperature: 1.3,
                top_k: 0,
                top_p: 0.8,
            },
            SamplingParams::greedy(),
        ] {
            let d = Distribution::masked(&LOGITS, &p, &allowed);
            assert!(d.is_masked());
            // Tokens 1 and 3 hold the largest logits, yet have no mass.
            for t in [1u32, 3, 4] {
                assert_eq!(d.logprob(&LOGITS, t), f32::NEG_INFINITY, "{p:?} token {t}");
            }
            let mut rng = Rng::new(9);
            for _ in 0..200 {
                let (t, lp) = d.sample(&LOGITS, &mut rng);
                assert!(allowed.contains(&t), "{p:?} sampled {t}");
                assert_eq!(lp, d.logprob(&LOGITS, t));
            }
            for (t, _) in d.top(&LOGITS, 3) {
                assert!(allowed.contains(&t));
            }
            if !p.is_greedy() {
                assert!((probs_sum(&d, &LOGITS) - 1.0).abs() < 1e-5, "{p:?}");
            }
        }
        // Unfiltered, it is the softmax of the allowed logits alone.
        let d = Distribution::masked(&LOGITS, &SamplingParams::default(), &allowed);
        let z = (1f64.exp() + 2f64.exp() + 0.5f64.exp()).ln();
        assert!((d.logprob(&LOGITS, 2) as f64 - (2.0 - z)).abs() < 1e-5);
        // Greedy takes the best allowed token; one allowed token has logprob 0.
        let g = Distribution::masked(&LOGITS, &SamplingParams::greedy(), &allowed);
        assert_eq!(g.sample(&LOGITS, &mut Rng::new(1)).0, 2);
        let one = Distribution::masked(&LOGITS, &SamplingParams::default(), &[4]);
        assert_eq!(one.sample(&LOGITS, &mut Rng::new(1)), (4, 0.0));
    }

    #[test]
    fn fast_exp_matches_libm() {
        let mut worst = 0f64;
        for i in 0..200_000 {
            let x = -(i as f32) * 0.0005; // 0 .. -100
            let want = (x as f64).exp();
            let got = exp_nonpos(x) as f64;
            if want > 1e-37 {
                worst = worst.max(((got - want) / want).abs());
            } else {
                assert!(got < 1e-36);
            }
        }
        assert!(worst < 5e-7, "worst relative error {worst}");
        assert_eq!(exp_nonpos(0.0), 1.0);
        assert_eq!(exp_nonpos(f32::NEG_INFINITY), exp_nonpos(-87.0));
        // Outside its domain it stays finite (the conversion to an integer needs it).
        assert_eq!(exp_nonpos(f32::NAN), exp_nonpos(-87.0));
        assert_eq!(exp_nonpos(3.0), 1.0);
        assert_eq!(exp_nonpos(f32::INFINITY), 1.0);
    }

    #[test]
    fn block_masses_are_each_blocks_terms_summed_in_order() {
        // Twenty-nine whole blocks and a short last one of 37 values (a length no vector width
        // divides); values over many octaves, so any other order of additions would round apart.
        let logits: Vec<f32> = (0..8 * BLOCK * 3 + 5 * BLOCK + 37)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) % 4000) as f32 / 100.0 - 30.0)
            .collect();
        let scale = 0.9;
        let (max, mass) = block_mass(&logits, scale);
        let top = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        assert_eq!(max.to_bits(), (top as f64 * scale).to_bits());
        let want: Vec<f64> = logits
            .chunks(BLOCK)
            .map(|c| {
                let mut sum = 0f32;
                for &v in c {
                    sum += exp_nonpos((v as f64 * scale - max) as f32);
                }
                sum as f64
            })
            .collect();
        assert_eq!(mass.len(), want.len());
        for (b, (got, want)) in mass.iter().zip(&want).enumerate() {
            assert_eq!(got.to_bits(), want.to_bits(), "block {b}: {got} vs {want}");
        }
    }

    #[test]
    fn full_distribution_is_normalised() {
        let p = SamplingParams {
            temperature: 0.7,
            ..Default::default()
        };
        let d = Distribution::new(&LOGITS, &p);
        assert!((probs_sum(&d, &LOGITS) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn top_k_keeps_k_and_ties() {
        let p = SamplingParams {
            top_k: 1,
            ..Default::default()
        };
        let d = Distribution::new(&LOGITS, &p);
        // ids 1 and 3 tie at the top value; both are kept with half the mass each.
        assert!((d.logprob(&LOGITS, 1) - 0.5f32.ln()).abs() < 1e-6);
        assert!((d.logprob(&LOGITS, 3) - 0.5f32.ln()).abs() < 1e-6);
        assert_eq!(d.logprob(&LOGITS, 2), f32::NEG_INFINITY);
        let p = SamplingParams {
            top_k: 3,
            ..Default::default()
        };
        let d = Distribution::new(&LOGITS, &p);
        assert!((probs_sum(&d, &LOGITS) - 1.0).abs() < 1e-6);
        assert_eq!(d.logprob(&LOGITS, 0), f32::NEG_INFINITY);
        let mut rng = Rng::new(3);
        for _ in 0..200 {
            let (t, lp) = d.sample(&LOGITS, &mut rng);
            assert!([1, 2, 3].contains(&t));
            assert_eq!(lp, d.logprob(&LOGITS, t));
        }
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        // Probabilities 0.5, 0.3, 0.15, 0.05.
        let logits: Vec<f32> = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.ln()).collect();
        let d = Distribution::new(
            &logits,
            &SamplingParams {
                top_p: 0.75,
                ..Default::default()
            },
        );
        let lp0 = d.logprob(&logits, 0);
        assert!((lp0 - (0.5f32 / 0.8).ln()).abs() < 1e-5, "{lp0}");
        assert_eq!(d.logprob(&logits, 2), f32::NEG_INFINITY);
        let d = Distribution::new(
            &logits,
            &SamplingParams {
                top_p: 0.85,
                ..Default::default()
            },
        );
        assert!(d.logprob(&logits, 2).is_finite());
        assert_eq!(d.logprob(&logits, 3), f32::NEG_INFINITY);
    }

    #[test]
    fn greedy_reports_temperature_one_logprob() {
        let d = Distribution::new(&LOGITS, &SamplingParams::greedy());
        let (t, lp) = d.sample(&LOGITS, &mut Rng::new(0));
        assert_eq!(t, 1);
        let z: f32 = LOGITS.iter().map(|v| v.exp()).sum::<f32>().ln();
        assert!((lp - (3.0 - z)).abs() < 1e-6);
    }

    #[test]
    fn sampling_follows_the_distribution() {
        let p = SamplingParams {
            temperature: 1.0,
            ..Default::default()
        };
        let d = Distribution::new(&LOGITS, &p);
        let mut rng = Rng::new(11);
        let mut counts = [0usize; 6];
        let n = 20_000;
        for _ in 0..n {
            counts[d.sample(&LOGITS, &mut rng).0 as usize] += 1;
        }
        for (i, c) in counts.iter().enumerate() {
            let expect = (d.logprob(&LOGITS, i as u32) as f64).exp();
            assert!((*c as f64 / n as f64 - expect).abs() < 0.02, "token {i}");
        }
    }

    #[test]
    fn top_lists_most_likely_first() {
        let d = Distribution::new(&LOGITS, &SamplingParams::default());
        let top = d.top(&LOGITS, 3);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 2]);
    }
}

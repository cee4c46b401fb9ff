//! The statistics of an evaluation: shares with Wilson score intervals, and how varied a set
//! of answers is.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// The normal quantile of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A share of samples with its 95% Wilson score interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Samples that have the property.
    pub count: usize,
    /// Samples in all.
    pub n: usize,
    /// `count / n` (0 when `n` is 0).
    pub value: f64,
    /// Lower end of the 95% interval.
    pub lo: f64,
    /// Upper end of the 95% interval.
    pub hi: f64,
}

impl Share {
    /// The share `count / n` with its 95% Wilson interval.
    pub fn new(count: usize, n: usize) -> Share {
        let (lo, hi) = wilson(count, n, Z95);
        Share {
            count,
            n,
            value: if n == 0 { 0.0 } else { count as f64 / n as f64 },
            lo,
            hi,
        }
    }
}

/// The Wilson score interval of `count` successes in `n` trials at normal quantile `z`.
/// Unlike the normal approximation it stays inside [0, 1] and is not degenerate at shares of
/// 0 or 1, which are exactly the shares an evaluation of a trained preference sees. With no
/// trials nothing is known: `(0, 1)`.
pub fn wilson(count: usize, n: usize, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = count as f64 / n_f;
    let z2 = z * z;
    let denom = 1.0 + z2 / n_f;
    let centre = (p + z2 / (2.0 * n_f)) / denom;
    let half = z * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt() / denom;
    // Clamp the rounding noise at the ends (count 0 or n give exactly 0 or 1 in exact maths).
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// Distinct texts over texts (1 when every answer differs; 0 for no answers).
pub fn distinct_ratio<S: AsRef<str>>(texts: &[S]) -> f64 {
    if texts.is_empty() {
        return 0.0;
    }
    let set: HashSet<&str> = texts.iter().map(|t| t.as_ref()).collect();
    set.len() as f64 / texts.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-5
    }

    #[test]
    fn wilson_matches_published_values() {
        // Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
        // method 3 (score interval without continuity correction).
        for (k, n, lo, hi) in [
            (81, 263, 0.2553, 0.3662),
            (15, 148, 0.0624, 0.1605),
            (0, 20, 0.0, 0.1611),
            (1, 29, 0.0061, 0.1718),
            (29, 29, 0.8830, 1.0),
        ] {
            let (l, h) = wilson(k, n, Z95);
            assert!(close(l, lo) && close(h, hi), "{k}/{n}: {l} {h}");
        }
        assert_eq!(wilson(0, 0, Z95), (0.0, 1.0));
    }

    #[test]
    fn the_interval_holds_the_share_and_narrows_with_more_samples() {
        for (k, n) in [(1, 3), (30, 100), (99, 100), (300, 1000)] {
            let s = Share::new(k, n);
            assert!(s.lo <= s.value && s.value <= s.hi, "{s:?}");
        }
        let small = Share::new(3, 10);
        let large = Share::new(300, 1000);
        assert!(large.hi - large.lo < small.hi - small.lo);
        assert_eq!(Share::new(0, 0).value, 0.0);
    }

    #[test]
    fn distinct_ratio_counts_repeats_once() {
        assert_eq!(distinct_ratio(&["a", "b", "a", "c"]), 0.75);
        assert_eq!(distinct_ratio(&["x", "x"]), 0.5);
        assert_eq!(distinct_ratio::<&str>(&[]), 0.0);
        assert_eq!(distinct_ratio(&[String::from("p"), String::from("q")]), 1.0);
    }
}

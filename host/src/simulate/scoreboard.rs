//! How the first answer of each simulated conversation fared.

use openclaw_sim::Verdict;
use serde::Serialize;
use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// One first answer.
#[derive(Clone, Debug)]
pub struct FirstAnswer {
    /// The weight version that wrote it.
    pub weight_version: u64,
    /// Its style.
    pub verdict: Verdict,
    /// Whether it answered the question.
    pub on_topic: bool,
    /// Its text.
    pub text: String,
}

/// Shares over a window of recent first answers.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WindowStats {
    /// Answers in the window.
    pub n: usize,
    /// Share that met the preference: plain, finished and on topic.
    pub preferred: f64,
    /// Share in plain style (on topic or not).
    pub plain: f64,
    /// Share on topic.
    pub on_topic: f64,
    /// Share unfinished or too short.
    pub invalid: f64,
    /// Distinct answers over answers (1: all different).
    pub distinct: f64,
    /// Lowest and highest weight version in the window.
    pub versions: (u64, u64),
}

/// Counts of one weight version's first answers, kept for the whole run.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    n: usize,
    preferred: usize,
    plain: usize,
    on_topic: usize,
    invalid: usize,
}

/// Every first answer so far: the recent ones whole (for rolling windows), and counts per
/// weight version for the whole run (so the starting weights' share survives long runs).
#[derive(Default)]
pub struct Scoreboard {
    answers: Mutex<VecDeque<FirstAnswer>>,
    total: Mutex<usize>,
    by_version: Mutex<std::collections::BTreeMap<u64, Counts>>,
}

/// Answers kept for windows (older ones are only counted).
const KEEP: usize = 4096;

impl Scoreboard {
    /// Adds an answer.
    pub fn add(&self, a: FirstAnswer) {
        {
            let mut m = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
            let c = m.entry(a.weight_version).or_default();
            c.n += 1;
            c.preferred += (a.verdict == Verdict::Plain && a.on_topic) as usize;
            c.plain += (a.verdict == Verdict::Plain) as usize;
            c.on_topic += a.on_topic as usize;
            c.invalid += (a.verdict == Verdict::Invalid) as usize;
        }
        let mut q = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(a);
        if q.len() > KEEP {
            q.pop_front();
        }
        *self.total.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    /// First answers seen so far.
    pub fn total(&self) -> usize {
        *self.total.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Statistics of the last `n` answers.
    pub fn recent(&self, n: usize) -> WindowStats {
        let q = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let skip = q.len().saturating_sub(n);
        stats(q.iter().skip(skip))
    }

    /// Statistics of the answers written by weight versions in `lo..=hi`, over the whole run
    /// (`distinct` only over the answers still kept for windows).
    pub fn by_versions(&self, lo: u64, hi: u64) -> WindowStats {
        let mut w = {
            let q = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            stats(
                q.iter()
                    .filter(|a| a.weight_version >= lo && a.weight_version <= hi),
            )
        };
        let m = self.by_version.lock().unwrap_or_else(|e| e.into_inner());
        let mut c = Counts::default();
        let mut versions = (u64::MAX, 0);
        for (v, x) in m.range(lo..=hi) {
            c.n += x.n;
            c.preferred += x.preferred;
            c.plain += x.plain;
            c.on_topic += x.on_topic;
            c.invalid += x.invalid;
            versions = (versions.0.min(*v), versions.1.max(*v));
        }
        if c.n == 0 {
            return WindowStats::default();
        }
        let n = c.n as f64;
        w.n = c.n;
        w.preferred = c.preferred as f64 / n;
        w.plain = c.plain as f64 / n;
        w.on_topic = c.on_topic as f64 / n;
        w.invalid = c.invalid as f64 / n;
        w.versions = versions;
        w
    }
}

fn stats<'a>(answers: impl Iterator<Item = &'a FirstAnswer>) -> WindowStats {
    let mut w = WindowStats {
        versions: (u64::MAX, 0),
        ..Default::default()
    };
    let mut texts = HashSet::new();
    let (mut preferred, mut plain, mut topical, mut invalid) = (0, 0, 0, 0);
    for a in answers {
        w.n += 1;
        w.versions = (
            w.versions.0.min(a.weight_version),
            w.versions.1.max(a.weight_version),
        );
        texts.insert(a.text.trim().to_string());
        plain += (a.verdict == Verdict::Plain) as usize;
        invalid += (a.verdict == Verdict::Invalid) as usize;
        topical += a.on_topic as usize;
        preferred += (a.verdict == Verdict::Plain && a.on_topic) as usize;
    }
    if w.n == 0 {
        return WindowStats::default();
    }
    let n = w.n as f64;
    w.preferred = preferred as f64 / n;
    w.plain = plain as f64 / n;
    w.on_topic = topical as f64 / n;
    w.invalid = invalid as f64 / n;
    w.distinct = texts.len() as f64 / n;
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: u64, verdict: Verdict, on_topic: bool, text: &str) -> FirstAnswer {
        FirstAnswer {
            weight_version: v,
            verdict,
            on_topic,
            text: text.into(),
        }
    }

    #[test]
    fn windows_count_what_they_should() {
        let b = Scoreboard::default();
        b.add(a(0, Verdict::Markdown, true, "## x"));
        b.add(a(0, Verdict::Plain, false, "off"));
        b.add(a(1, Verdict::Plain, true, "good"));
        b.add(a(2, Verdict::Plain, true, "good"));
        b.add(a(2, Verdict::Invalid, true, "cut"));
        let all = b.recent(100);
        assert_eq!(all.n, 5);
        assert!((all.preferred - 0.4).abs() < 1e-12);
        assert!((all.plain - 0.6).abs() < 1e-12);
        assert!((all.invalid - 0.2).abs() < 1e-12);
        assert!((all.distinct - 0.8).abs() < 1e-12);
        assert_eq!(all.versions, (0, 2));
        let last2 = b.recent(2);
        assert_eq!((last2.n, last2.preferred), (2, 0.5));
        let v0 = b.by_versions(0, 0);
        assert_eq!((v0.n, v0.preferred, v0.on_topic), (2, 0.0, 0.5));
        assert_eq!(b.by_versions(7, 9), WindowStats::default());
        assert_eq!(b.total(), 5);
        // The starting weights' share survives answers beyond what windows keep.
        for _ in 0..KEEP + 10 {
            b.add(a(5, Verdict::Plain, true, "later"));
        }
        let v0 = b.by_versions(0, 0);
        assert_eq!((v0.n, v0.preferred), (2, 0.0));
        assert_eq!(b.recent(KEEP * 2).n, KEEP);
    }
}

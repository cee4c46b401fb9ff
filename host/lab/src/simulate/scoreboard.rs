//! How the first answer of each simulated conversation fared.

use openclaw_sim::{Style, Verdict};
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
    /// The style the request asked for in so many words, when it did.
    pub requested: Option<Style>,
    /// The style its user wants when the request does not say.
    pub prefers: Style,
}

impl FirstAnswer {
    /// Whether an answer to an explicit request is in the style asked for and on topic.
    fn followed(&self) -> bool {
        let style = match self.requested {
            Some(Style::Plain) => Verdict::Plain,
            Some(Style::Markdown) => Verdict::Markdown,
            None => return false,
        };
        self.verdict == style && self.on_topic
    }
}

/// Shares over a window of recent first answers.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WindowStats {
    /// Answers to requests without a style instruction in the window; the shares below
    /// `distinct` are of them.
    pub n: usize,
    /// Share that met the preference (their user's style, plain unless the user wants
    /// markdown), finished and on topic.
    pub preferred: f64,
    /// Share in plain style (on topic or not).
    pub plain: f64,
    /// Share on topic.
    pub on_topic: f64,
    /// Share unfinished or too short.
    pub invalid: f64,
    /// Distinct answers over answers (1: all different).
    pub distinct: f64,
    /// Answers to requests with an explicit style instruction in the window.
    pub requested: usize,
    /// Share of those in the style asked for and on topic.
    pub followed: f64,
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
    requested: usize,
    followed: usize,
}

impl Counts {
    fn add(&mut self, a: &FirstAnswer) {
        if a.requested.is_some() {
            self.requested += 1;
            self.followed += a.followed() as usize;
            return;
        }
        self.n += 1;
        let wanted = match a.prefers {
            Style::Plain => Verdict::Plain,
            Style::Markdown => Verdict::Markdown,
        };
        self.preferred += (a.verdict == wanted && a.on_topic) as usize;
        self.plain += (a.verdict == Verdict::Plain) as usize;
        self.on_topic += a.on_topic as usize;
        self.invalid += (a.verdict == Verdict::Invalid) as usize;
    }

    fn merge(&mut self, x: &Counts) {
        self.n += x.n;
        self.preferred += x.preferred;
        self.plain += x.plain;
        self.on_topic += x.on_topic;
        self.invalid += x.invalid;
        self.requested += x.requested;
        self.followed += x.followed;
    }

    /// The shares, into `w` (which keeps its `distinct` and versions).
    fn shares(&self, w: &mut WindowStats) {
        let share = |k: usize, n: usize| if n == 0 { 0.0 } else { k as f64 / n as f64 };
        w.n = self.n;
        w.preferred = share(self.preferred, self.n);
        w.plain = share(self.plain, self.n);
        w.on_topic = share(self.on_topic, self.n);
        w.invalid = share(self.invalid, self.n);
        w.requested = self.requested;
        w.followed = share(self.followed, self.requested);
    }
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
            m.entry(a.weight_version).or_default().add(&a);
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

    /// Statistics of the last `n` answers to users who prefer `style`.
    pub fn recent_of(&self, style: Style, n: usize) -> WindowStats {
        let q = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine: Vec<&FirstAnswer> = q
            .iter()
            .rev()
            .filter(|a| a.prefers == style)
            .take(n)
            .collect();
        mine.reverse();
        stats(mine.into_iter())
    }

    /// Statistics of the answers still kept to users who prefer `style`, written by weight
    /// versions in `lo..=hi`.
    pub fn of_versions(&self, style: Style, lo: u64, hi: u64) -> WindowStats {
        let q = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        stats(
            q.iter()
                .filter(|a| a.prefers == style && a.weight_version >= lo && a.weight_version <= hi),
        )
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
            c.merge(x);
            versions = (versions.0.min(*v), versions.1.max(*v));
        }
        if c.n + c.requested == 0 {
            return WindowStats::default();
        }
        c.shares(&mut w);
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
    let mut c = Counts::default();
    for a in answers {
        w.versions = (
            w.versions.0.min(a.weight_version),
            w.versions.1.max(a.weight_version),
        );
        if a.requested.is_none() {
            texts.insert(a.text.trim().to_string());
        }
        c.add(a);
    }
    if c.n + c.requested == 0 {
        return WindowStats::default();
    }
    c.shares(&mut w);
    w.distinct = if c.n == 0 {
        0.0
    } else {
        texts.len() as f64 / c.n as f64
    };
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
            requested: None,
            prefers: Style::Plain,
        }
    }

    #[test]
    fn answers_to_explicit_requests_count_apart_by_whether_they_followed_them() {
        let b = Scoreboard::default();
        let asked = |style, verdict, on_topic| FirstAnswer {
            requested: Some(style),
            ..a(1, verdict, on_topic, "x")
        };
        b.add(a(1, Verdict::Plain, true, "plain"));
        b.add(a(1, Verdict::Markdown, true, "md"));
        b.add(asked(Style::Markdown, Verdict::Markdown, true));
        b.add(asked(Style::Markdown, Verdict::Plain, true));
        b.add(asked(Style::Markdown, Verdict::Markdown, false));
        b.add(asked(Style::Plain, Verdict::Plain, true));
        for w in [b.recent(100), b.by_versions(0, 1)] {
            assert_eq!((w.n, w.preferred, w.plain), (2, 0.5, 0.5), "{w:?}");
            assert_eq!((w.requested, w.followed), (4, 0.5), "{w:?}");
        }
        assert_eq!(b.recent(100).distinct, 1.0);
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

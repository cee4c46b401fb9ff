//! Progress of long work (a plugin build, the default model's build, loading a model, an
//! environment step's episodes, an eval): a bar or spinner on a terminal, and on a pipe or a
//! file a line when the work starts, every [`LINE_EVERY`] while it goes and when it ends, so a
//! log shows that something is happening.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a line is written while work goes on, when stderr is not a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(10);

/// One piece of long work.
#[derive(Clone)]
pub struct Progress {
    inner: Arc<Inner>,
}

struct Inner {
    label: String,
    total: Option<u64>,
    started: Instant,
    /// `Some` on a terminal.
    bar: Option<ProgressBar>,
    /// Items done, and when the last line was written (lines only).
    lines: Mutex<(u64, Instant)>,
    finished: AtomicBool,
}

impl Progress {
    /// Starts showing `label`: `total` items (a bar) or an unknown amount (a spinner).
    pub fn start(label: &str, total: Option<u64>) -> Self {
        Self::start_on(label, total, std::io::stderr().is_terminal())
    }

    /// [`Progress::start`] with the terminal decision made by the caller (tests).
    pub fn start_on(label: &str, total: Option<u64>, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = match total {
                Some(n) => ProgressBar::new(n).with_style(
                    ProgressStyle::with_template(
                        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}",
                    )
                    .expect("the template is valid"),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{spinner} {prefix} [{elapsed_precise}] {msg}")
                        .expect("the template is valid"),
                ),
            };
            bar.set_draw_target(ProgressDrawTarget::stderr());
            bar.set_prefix(label.to_string());
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        if bar.is_none() {
            match total {
                Some(n) => eprintln!("{label}: 0/{n}"),
                None => eprintln!("{label} ..."),
            }
        }
        Progress {
            inner: Arc::new(Inner {
                label: label.to_string(),
                total,
                started: Instant::now(),
                bar,
                lines: Mutex::new((0, Instant::now())),
                finished: AtomicBool::new(false),
            }),
        }
    }

    /// `n` more items done; `note` (say, a running share) is shown beside the count.
    pub fn advance(&self, n: u64, note: &str) {
        let i = &self.inner;
        if let Some(bar) = &i.bar {
            bar.inc(n);
            bar.set_message(note.to_string());
            return;
        }
        let mut lines = i.lines.lock().expect("progress lock");
        lines.0 += n;
        if lines.1.elapsed() >= LINE_EVERY {
            lines.1 = Instant::now();
            eprintln!("{}", i.line(lines.0, note));
        }
    }

    /// A line shown above the bar, or written as it is.
    pub fn println(&self, line: &str) {
        match &self.inner.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// The work is done: the bar is cleared and `summary` written (with the time taken).
    pub fn finish(&self, summary: &str) {
        let i = &self.inner;
        if i.finished.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(bar) = &i.bar {
            bar.finish_and_clear();
        }
        eprintln!(
            "{}: {summary} ({:.1} s)",
            i.label,
            i.started.elapsed().as_secs_f64()
        );
    }

    /// Items done so far (lines only; a bar keeps its own).
    pub fn done(&self) -> u64 {
        match &self.inner.bar {
            Some(bar) => bar.position(),
            None => self.inner.lines.lock().expect("progress lock").0,
        }
    }
}

impl Inner {
    fn line(&self, done: u64, note: &str) -> String {
        let count = match self.total {
            Some(n) => format!("{done}/{n}"),
            None => format!("{done} done"),
        };
        let note = if note.is_empty() {
            String::new()
        } else {
            format!(" {note}")
        };
        format!(
            "{}: {count}{note} ({:.0} s)",
            self.label,
            self.started.elapsed().as_secs_f64()
        )
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Work abandoned by an error: the bar must not stay drawn over what follows.
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_count_items_and_say_the_total() {
        let p = Progress::start_on("episodes of step 3", Some(8), false);
        p.advance(3, "solved 0.33");
        p.advance(2, "");
        assert_eq!(p.done(), 5);
        assert_eq!(
            p.inner.line(5, "solved 0.40"),
            "episodes of step 3: 5/8 solved 0.40 (0 s)"
        );
        let s = Progress::start_on("building plugin x", None, false);
        assert_eq!(s.inner.line(0, ""), "building plugin x: 0 done (0 s)");
        p.finish("8 episodes");
        p.finish("twice is once");
    }
}

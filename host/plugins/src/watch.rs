//! Plugin calls in flight, so a hung one can be noticed and named. Every loss, reward, rollout
//! and generate call through a handle is registered here for its duration; the run's watchdog
//! stops training when a call outlives `--plugin-timeout`, and the judge pool abandons a reward
//! call past `--judge-timeout`.
//!
//! One table for the process: handles are made in many places, and a call's entry is only
//! read to name what hangs.

use openclaw_plugin_api::PluginKind;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// A plugin call under way.
#[derive(Clone, Debug)]
pub struct InFlightCall {
    /// The plugin's name.
    pub plugin: String,
    /// The kind called.
    pub kind: PluginKind,
    /// The method called (`compute`, `score`, `rollout`, `generate`).
    pub call: &'static str,
    /// When it began.
    pub since: Instant,
    /// The OS thread running it (Linux thread id; 0 elsewhere).
    pub tid: i64,
    /// Whether its caller stopped waiting for it (it still runs).
    pub abandoned: bool,
}

impl std::fmt::Display for InFlightCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "plugin `{}` ({}) has been in `{}` for {:.0} s",
            self.plugin,
            self.kind,
            self.call,
            self.since.elapsed().as_secs_f64()
        )
    }
}

static CALLS: LazyLock<Mutex<HashMap<u64, InFlightCall>>> = LazyLock::new(Mutex::default);
static NEXT: AtomicU64 = AtomicU64::new(0);

struct Entry(u64);

impl Drop for Entry {
    fn drop(&mut self) {
        if let Ok(mut c) = CALLS.lock() {
            c.remove(&self.0);
        }
    }
}

/// The calling OS thread's id.
pub fn thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as i64 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Runs `f`, registered as a call of `plugin` for its duration (a panic unregisters it too).
pub fn watched<T>(plugin: &str, kind: PluginKind, call: &'static str, f: impl FnOnce() -> T) -> T {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut c) = CALLS.lock() {
        c.insert(
            id,
            InFlightCall {
                plugin: plugin.to_string(),
                kind,
                call,
                since: Instant::now(),
                tid: thread_id(),
                abandoned: false,
            },
        );
    }
    let _entry = Entry(id);
    f()
}

/// The longest-running call of one of `kinds`, begun at `since` or later (a pipeline's own
/// calls, not those an earlier one left behind), that has run for longer than `limit`.
pub fn overdue(kinds: &[PluginKind], since: Instant, limit: Duration) -> Option<InFlightCall> {
    let c = CALLS.lock().ok()?;
    c.values()
        .filter(|k| kinds.contains(&k.kind) && k.since >= since && k.since.elapsed() > limit)
        .min_by_key(|k| k.since)
        .cloned()
}

/// Marks the call running on thread `tid` as abandoned by its caller.
pub fn abandon(tid: i64) {
    if let Ok(mut c) = CALLS.lock() {
        for k in c.values_mut().filter(|k| k.tid == tid) {
            k.abandoned = true;
        }
    }
}

/// Calls of `plugin` and `kind` that were abandoned and still run.
pub fn abandoned(plugin: &str, kind: PluginKind) -> usize {
    CALLS
        .lock()
        .map(|c| {
            c.values()
                .filter(|k| k.abandoned && k.kind == kind && k.plugin == plugin)
                .count()
        })
        .unwrap_or(0)
}

/// Every call under way, oldest first.
pub fn in_flight() -> Vec<InFlightCall> {
    let mut v: Vec<InFlightCall> = CALLS
        .lock()
        .map(|c| c.values().cloned().collect())
        .unwrap_or_default();
    v.sort_by_key(|k| k.since);
    v
}

/// Lowers a thread to the lowest scheduling priority (nice 19): for the thread of an abandoned
/// call, which cannot be stopped and would otherwise compete with serving for the cores.
pub fn lower_priority(tid: i64) {
    #[cfg(target_os = "linux")]
    if tid > 0 {
        // SAFETY: setpriority with PRIO_PROCESS and a thread id changes that thread's nice
        // value on Linux; a stale id fails with ESRCH, which is ignored.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = tid;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_listed_while_it_runs_and_overdue_once_past_its_limit() {
        let start = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            watched("slowpoke", PluginKind::Rollout, "rollout", || {
                rx.recv().unwrap();
            })
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        let mine = || in_flight().into_iter().find(|c| c.plugin == "slowpoke");
        while mine().is_none() {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(30));
        let late = overdue(&[PluginKind::Rollout], start, Duration::from_millis(20)).unwrap();
        assert!(
            overdue(&[PluginKind::Rollout], Instant::now(), Duration::ZERO)
                .is_none_or(|c| c.plugin != "slowpoke")
        );
        assert_eq!((late.plugin.as_str(), late.call), ("slowpoke", "rollout"));
        assert!(late
            .to_string()
            .contains("`slowpoke` (rollout) has been in `rollout`"));
        assert!(
            overdue(&[PluginKind::Loss], start, Duration::from_millis(20))
                .is_none_or(|c| c.plugin != "slowpoke")
        );
        assert_eq!(abandoned("slowpoke", PluginKind::Rollout), 0);
        abandon(late.tid);
        assert_eq!(abandoned("slowpoke", PluginKind::Rollout), 1);
        lower_priority(late.tid);
        tx.send(()).unwrap();
        t.join().unwrap();
        assert!(mine().is_none(), "unregistered when it returns");
        assert_eq!(abandoned("slowpoke", PluginKind::Rollout), 0);
    }
}

//! Starting bubblewrap with the limits, feeding and reading it, and killing it at its wall clock.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Limits;

/// What a sandboxed command did.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutput {
    /// Its exit code (bubblewrap passes the command's on; 128 + n when signal n ended it
    /// inside), `None` when the sandbox itself was killed.
    pub exit_code: Option<i32>,
    /// Whether the wall clock ran out and the sandbox was killed.
    pub timed_out: bool,
    /// Its stdout, up to the limit.
    pub stdout: Vec<u8>,
    /// Its stderr, up to the limit.
    pub stderr: Vec<u8>,
    /// Whether stdout or stderr went past the limit (the rest was dropped).
    pub truncated: bool,
    /// Whether the kernel killed a process for going over the memory of all processes
    /// together (`memory_total_bytes`, where a cgroup holds it).
    pub memory_exceeded: bool,
    /// Whether the work directory grew past its size while the command ran, which killed it.
    pub workdir_full: bool,
    /// Wall-clock time from start to end.
    pub elapsed: Duration,
}

impl RunOutput {
    /// Whether it exited with 0 in time.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// One bubblewrap start.
pub(crate) struct Spawn<'a> {
    pub bwrap: &'a Path,
    pub args: Vec<std::ffi::OsString>,
    /// The seccomp program's descriptor (`--seccomp` names it), kept open across the exec.
    pub filter: std::os::fd::OwnedFd,
    /// The command's memory cgroup, which the child joins before bubblewrap runs.
    pub group: Option<crate::cgroup::Group>,
    /// The work directory and its size, measured while the command runs (no tmpfs caps it).
    pub watch: Option<(std::path::PathBuf, u64)>,
    pub uid: Option<u32>,
    pub limits: &'a Limits,
    pub processes: u64,
    pub stdin: &'a [u8],
    pub wall: Duration,
}

/// bubblewrap's command with the limits set in the child, every stream piped, in a process
/// group of its own.
fn command(s: &Spawn) -> Command {
    let l = s.limits;
    let cpu = l.cpu_seconds as libc::rlim_t;
    let rlimits: [(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t); 6] = [
        (libc::RLIMIT_AS, l.memory_bytes as _, l.memory_bytes as _),
        // The soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        (libc::RLIMIT_CPU, cpu, cpu + 1),
        (libc::RLIMIT_NPROC, s.processes as _, s.processes as _),
        (
            libc::RLIMIT_FSIZE,
            l.file_size_bytes as _,
            l.file_size_bytes as _,
        ),
        (libc::RLIMIT_NOFILE, l.open_files as _, l.open_files as _),
        (libc::RLIMIT_CORE, 0, 0),
    ];
    // Never above the host's own hard limits: an unprivileged process cannot raise them, and
    // setrlimit would fail every start.
    let rlimits = rlimits.map(|(resource, soft, hard)| {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        if unsafe { libc::getrlimit(resource, &mut cur) } == 0
            && cur.rlim_max != libc::RLIM_INFINITY
        {
            (resource, soft.min(cur.rlim_max), hard.min(cur.rlim_max))
        } else {
            (resource, soft, hard)
        }
    });
    let mut cmd = Command::new(s.bwrap);
    // An empty environment: bubblewrap's own would be readable inside at /proc/1/environ.
    cmd.env_clear()
        .args(&s.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let filter = std::os::fd::AsRawFd::as_raw_fd(&s.filter);
    let group = s.group.as_ref().map(|g| g.procs_fd());
    let uid = s.uid;
    // SAFETY: the closure only calls write, fcntl, setgroups, setgid, setuid and setrlimit
    // (async-signal-safe) on values computed before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fail = || Err(std::io::Error::last_os_error());
            // Into the memory cgroup first, while still allowed to write its files; every
            // process of the sandbox descends from this one.
            if let Some(fd) = group {
                crate::cgroup::join(fd)?;
            }
            // Then the sandbox's own uid (as Command::uid would, but after the cgroup).
            if let Some(u) = uid {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(u) != 0
                    || libc::setuid(u) != 0
                {
                    return fail();
                }
            }
            // The filter's descriptor is close-on-exec in the parent (no other child inherits
            // it); this child hands it to bubblewrap.
            if libc::fcntl(filter, libc::F_SETFD, 0) != 0 {
                return fail();
            }
            for (resource, soft, hard) in rlimits {
                let r = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(resource, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd
}

pub(crate) fn run(s: Spawn) -> std::io::Result<RunOutput> {
    let l = s.limits;
    let started = Instant::now();
    let mut child = command(&s).spawn()?;
    let pid = child.id() as libc::pid_t;
    // Writing and reading on threads of their own, so a command that ignores its stdin or
    // fills one pipe while we wait on the other cannot stall us.
    let mut stdin = child.stdin.take().expect("piped");
    let input = s.stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let cap = l.output_bytes;
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        let _ = tx.send((true, read_capped(out, cap)));
    });
    std::thread::spawn(move || {
        let _ = tx2.send((false, read_capped(err, cap)));
    });
    let deadline = started + s.wall;
    let mut timed_out = false;
    let mut workdir_full = false;
    let mut measured = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if over_size(&s.watch, &mut measured) {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            workdir_full = true;
            break child.wait()?;
        }
        if Instant::now() >= deadline {
            // bubblewrap's group; the sandbox's init (in a session of its own) dies with its
            // parent. Sent before the child is reaped, so the group id is still ours.
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            timed_out = true;
            break child.wait()?;
        }
        std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    let _ = writer.join();
    // The pipes close when the last process in the sandbox is gone. Should the sandbox's init
    // outlive a kill that came while bubblewrap was still setting it up (before it tied itself
    // to its parent), its output is given up after a grace period rather than waited for.
    let grace = std::time::Instant::now() + Duration::from_secs(2);
    let ((mut stdout, mut t_out), (mut stderr, mut t_err)) =
        ((Vec::new(), false), (Vec::new(), false));
    for _ in 0..2 {
        let left = grace.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, r)) => (stdout, t_out) = r,
            Ok((false, r)) => (stderr, t_err) = r,
            Err(_) => break,
        }
    }
    Ok(RunOutput {
        exit_code: if timed_out || workdir_full {
            None
        } else {
            status.code()
        },
        timed_out,
        stdout,
        stderr,
        truncated: t_out || t_err,
        elapsed: started.elapsed(),
        memory_exceeded: s.group.as_ref().is_some_and(|g| g.oom_killed()),
        workdir_full,
    })
}

/// Whether the watched work directory is past its size; measured at most every 200 ms, since
/// a walk of a large tree is not free.
fn over_size(watch: &Option<(std::path::PathBuf, u64)>, measured: &mut Instant) -> bool {
    let Some((dir, limit)) = watch else {
        return false;
    };
    if measured.elapsed() < Duration::from_millis(200) {
        return false;
    }
    *measured = Instant::now();
    crate::tree_bytes(dir) > *limit
}

/// Reads to the end, keeping the first `cap` bytes; says whether more came.
fn read_capped(mut r: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 16 << 10];
    let mut more = false;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                more |= n > room;
            }
        }
    }
    (kept, more)
}

/// How a background command stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Status {
    /// Still running.
    Running,
    /// Ended with this exit code (`None`: killed by a signal).
    Exited(Option<i32>),
    /// Killed at its wall clock, or because it was stopped.
    Killed,
}

struct Shared {
    /// stdout and stderr as they came, up to the cap.
    output: Vec<u8>,
    /// Bytes of `output` already handed out.
    seen: usize,
    /// Whether output past the cap was dropped.
    dropped: bool,
    status: Status,
}

/// A sandboxed command running in the background (a shell session's process): its output is
/// collected as it comes, its stdin can be written, and it is killed at its wall clock, by
/// [`Background::stop`], or when dropped.
pub struct Background {
    pid: libc::pid_t,
    stdin: Option<std::process::ChildStdin>,
    shared: std::sync::Arc<(std::sync::Mutex<Shared>, std::sync::Condvar)>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

pub(crate) fn start(mut s: Spawn) -> std::io::Result<Background> {
    use std::sync::{atomic::AtomicBool, atomic::Ordering, Arc, Condvar, Mutex};
    let cap = s.limits.output_bytes;
    let mut cmd = command(&s);
    // The group and the measured directory go with the watcher, which outlives the process.
    let (group, watch) = (s.group.take(), s.watch.take());
    let input = s.stdin.to_vec();
    let deadline = Instant::now() + s.wall;
    let shared = Arc::new((
        Mutex::new(Shared {
            output: Vec::new(),
            seen: 0,
            dropped: false,
            status: Status::Running,
        }),
        Condvar::new(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    // bubblewrap dies with its parent (`--die-with-parent`), and to Linux the parent is the
    // thread that forked it: the watcher thread, which lives until it has reaped the child,
    // starts it, so it outlives the (short-lived) thread of the call that asked for it.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    let _ = started_tx.send(Err(e));
                    return;
                }
            };
            let pid = child.id() as libc::pid_t;
            let _ = started_tx.send(Ok((
                pid,
                child.stdin.take(),
                child.stdout.take(),
                child.stderr.take(),
            )));
            let _group = group;
            let mut measured = Instant::now();
            loop {
                let status = match child.try_wait() {
                    Ok(Some(st)) => Some(Status::Exited(st.code())),
                    Err(_) => Some(Status::Exited(None)),
                    Ok(None)
                        if stop.load(Ordering::Relaxed)
                            || Instant::now() >= deadline
                            || over_size(&watch, &mut measured) =>
                    {
                        // Sent before the child is reaped, so the group id is still ours.
                        // SAFETY: kill has no memory preconditions.
                        unsafe { libc::kill(-pid, libc::SIGKILL) };
                        let _ = child.wait();
                        Some(Status::Killed)
                    }
                    Ok(None) => None,
                };
                if let Some(st) = status {
                    let (lock, cv) = &*shared;
                    if let Ok(mut sh) = lock.lock() {
                        sh.status = st;
                    }
                    cv.notify_all();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    }
    let (pid, mut stdin, out, err) = started_rx
        .recv()
        .map_err(|_| std::io::Error::other("the sandbox's watcher ended before starting it"))??;
    if !input.is_empty() {
        if let Some(mut w) = stdin.take() {
            // On a thread of its own: a command that does not read cannot stall the caller.
            std::thread::spawn(move || {
                let _ = w.write_all(&input);
            });
        }
    }
    let pipes: [Box<dyn Read + Send>; 2] =
        [Box::new(out.expect("piped")), Box::new(err.expect("piped"))];
    for mut pipe in pipes {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8 << 10];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let (lock, cv) = &*shared;
                let Ok(mut sh) = lock.lock() else { return };
                let room = cap.saturating_sub(sh.output.len());
                sh.output.extend_from_slice(&buf[..n.min(room)]);
                sh.dropped |= n > room;
                cv.notify_all();
            }
        });
    }
    Ok(Background {
        pid,
        stdin,
        shared,
        stop,
    })
}

impl Background {
    /// The process id of bubblewrap on the host.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Writes to the command's stdin.
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self.stdin.as_mut() {
            Some(w) => w.write_all(bytes).and_then(|_| w.flush()),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "its stdin is closed",
            )),
        }
    }

    /// Closes the command's stdin (it reads end of file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// How it stands now.
    pub fn status(&self) -> Status {
        self.shared.0.lock().map_or(Status::Killed, |s| s.status)
    }

    /// The output that came since the last call (stdout and stderr in arrival order), and
    /// whether output past the cap (the first `output_bytes`) was dropped.
    pub fn take_output(&self) -> (Vec<u8>, bool) {
        let Ok(mut sh) = self.shared.0.lock() else {
            return (Vec::new(), false);
        };
        let new = sh.output[sh.seen..].to_vec();
        sh.seen = sh.output.len();
        (new, sh.dropped)
    }

    /// Waits until it ends or `timeout` passes; how it stands then.
    pub fn wait(&self, timeout: Duration) -> Status {
        let end = Instant::now() + timeout;
        let (lock, cv) = &*self.shared;
        let Ok(mut sh) = lock.lock() else {
            return Status::Killed;
        };
        while sh.status == Status::Running {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sh = match cv.wait_timeout(sh, left) {
                Ok((g, _)) => g,
                Err(_) => return Status::Killed,
            };
        }
        sh.status
    }

    /// Kills it (and everything in its sandbox) and waits for that.
    pub fn stop(&self) -> Status {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.wait(Duration::from_secs(5))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Tasks (processes and threads) the user `uid` has now, which `RLIMIT_NPROC` counts.
pub(crate) fn tasks_of_user(uid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for entry in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(uid as u64) {
            n += field("Threads:").unwrap_or(1);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_cap_is_dropped_and_flagged() {
        let (kept, more) = read_capped(&[7u8; 100][..], 40);
        assert_eq!((kept.len(), more), (40, true));
        let (kept, more) = read_capped(&[7u8; 40][..], 40);
        assert_eq!((kept.len(), more), (40, false));
    }

    #[test]
    fn this_process_counts_among_its_users_tasks() {
        // SAFETY: getuid has no preconditions.
        assert!(tasks_of_user(unsafe { libc::getuid() }) >= 1);
    }
}

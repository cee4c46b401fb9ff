//! One memory cgroup per sandboxed command, where this process may make them: a bound on the
//! memory of all the command's processes together, which `RLIMIT_AS` (per process) cannot give
//! (64 processes of 1 GiB each once added 4.6 GB to a host).
//!
//! cgroup v2 (a delegated subtree with the memory controller, or the root hierarchy) and v1's
//! memory hierarchy (root) are both used; the sandbox's processes join their group before
//! bubblewrap runs (the spawned child writes itself into `cgroup.procs`, then drops to the
//! sandbox's uid), so nothing they start escapes it. Where no hierarchy is writable,
//! [`Cgroups::find`] says why and the sandbox bounds the total by its process count instead.
//!
//! Written over the cgroup files directly: they are a handful of writes, and the crates that
//! wrap them bring systemd or D-Bus along.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Which cgroup version a hierarchy is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Version {
    V1,
    V2,
}

/// A sandbox's own folder of groups (`openclaw-sandbox-<pid>-<n>`), removed when dropped.
#[derive(Debug)]
pub(crate) struct Cgroups {
    version: Version,
    dir: PathBuf,
}

/// Numbers folders and groups apart within this process (several sandboxes may share it).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One command's group, removed (its processes killed first) when dropped.
#[derive(Debug)]
pub(crate) struct Group {
    version: Version,
    dir: PathBuf,
    /// `cgroup.procs`, open for the spawned child to write itself into.
    procs: File,
}

/// The memory hierarchies this process sees: (version, where its own group is).
fn candidates() -> Vec<(Version, PathBuf)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let theirs: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) =
            (fields.get(3), fields.get(4), theirs.first())
        else {
            continue;
        };
        let (version, path) = match *fstype {
            "cgroup2" => (
                Version::V2,
                own.lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .unwrap_or("/"),
            ),
            "cgroup"
                if theirs
                    .get(2)
                    .is_some_and(|o| o.split(',').any(|o| o == "memory")) =>
            {
                (
                    Version::V1,
                    own.lines()
                        .find_map(|l| {
                            let mut p = l.splitn(3, ':');
                            let (_, ctl, path) = (p.next()?, p.next()?, p.next()?);
                            ctl.split(',').any(|c| c == "memory").then_some(path)
                        })
                        .unwrap_or("/"),
                )
            }
            _ => continue,
        };
        // The group as seen at this mount (whose root may already be the group itself).
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .trim_start_matches('/');
        let mut dir = PathBuf::from(point);
        if !rel.is_empty() {
            dir.push(rel);
        }
        out.push((version, dir));
        if !rel.is_empty() {
            out.push((version, PathBuf::from(point)));
        }
    }
    // v2 first: where both exist, v1's memory hierarchy is the one with the controller, and
    // v2's try fails quickly.
    out.sort_by_key(|(v, _)| *v == Version::V1);
    out
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

impl Cgroups {
    /// A folder of groups this process may make and limit, or why there is none.
    pub fn find() -> Result<Cgroups, String> {
        let mut why = Vec::new();
        for (version, parent) in candidates() {
            match Self::make_in(version, &parent) {
                Ok(c) => return Ok(c),
                Err(e) => why.push(format!("{}: {e}", parent.display())),
            }
        }
        if why.is_empty() {
            why.push("no cgroup hierarchy with the memory controller is mounted".into());
        }
        Err(why.join("; "))
    }

    fn make_in(version: Version, parent: &Path) -> Result<Cgroups, String> {
        if !parent.is_dir() {
            return Err("not a folder".into());
        }
        // Groups of processes killed with `kill -9` (their commands' processes died with
        // them) are empty now, and removed.
        if let Ok(entries) = std::fs::read_dir(parent) {
            for e in entries.flatten() {
                let name = e.file_name();
                let pid = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("openclaw-sandbox-"))
                    .and_then(|n| n.split('-').next())
                    .and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(crate::dead) {
                    if let Ok(groups) = std::fs::read_dir(e.path()) {
                        for g in groups.flatten().filter(|g| g.path().is_dir()) {
                            let _ = std::fs::remove_dir(g.path());
                        }
                    }
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
        let dir = parent.join(format!(
            "openclaw-sandbox-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make a group: {e}"))?;
        let c = Cgroups { version, dir };
        if version == Version::V2 {
            // Children get memory.max only where their parent hands the controller down.
            if !c.dir.join("memory.max").exists() {
                let _ = write(&parent.join("cgroup.subtree_control"), "+memory");
                if !c.dir.join("memory.max").exists() {
                    return Err("the memory controller is not delegated here".into());
                }
            }
            write(&c.dir.join("cgroup.subtree_control"), "+memory")
                .map_err(|e| format!("cannot hand the memory controller down: {e}"))?;
        }
        // A probe: a group with a limit, then gone.
        c.group(64 << 20)
            .map_err(|e| format!("cannot limit a group's memory: {e}"))?;
        Ok(c)
    }

    /// A new group whose processes may use `bytes` of memory together (swap included where
    /// the kernel counts it).
    pub fn group(&self, bytes: u64) -> std::io::Result<Group> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(format!("cmd-{n}"));
        std::fs::create_dir(&dir)?;
        let limit = bytes.to_string();
        let set = || -> std::io::Result<()> {
            match self.version {
                Version::V2 => {
                    write(&dir.join("memory.max"), &limit)?;
                    if dir.join("memory.swap.max").exists() {
                        write(&dir.join("memory.swap.max"), "0")?;
                    }
                }
                Version::V1 => {
                    write(&dir.join("memory.limit_in_bytes"), &limit)?;
                    // Memory plus swap, where swap is accounted: no way around the limit.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        write(&dir.join("memory.memsw.limit_in_bytes"), &limit)?;
                    }
                }
            }
            Ok(())
        };
        if let Err(e) = set() {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
        let procs = match File::options().write(true).open(dir.join("cgroup.procs")) {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        Ok(Group {
            version: self.version,
            dir,
            procs,
        })
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Group {
    /// The descriptor of its `cgroup.procs`, which the spawned child writes `0` to.
    pub fn procs_fd(&self) -> std::os::fd::RawFd {
        self.procs.as_raw_fd()
    }

    /// Whether the kernel killed a process of the group for going over its memory.
    pub fn oom_killed(&self) -> bool {
        let file = match self.version {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        };
        std::fs::read_to_string(self.dir.join(file))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("oom_kill "))
            .any(|n| n.trim().parse::<u64>().is_ok_and(|n| n > 0))
    }

    /// The pids in the group now.
    fn pids(&self) -> Vec<libc::pid_t> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Whatever is left (a command's orphans whose sandbox init was not tied to it yet)
        // is killed, so the group can go.
        for _ in 0..50 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for p in pids {
                // SAFETY: kill has no memory preconditions.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Writes the calling process into the group whose `cgroup.procs` is `fd`: for the spawned
/// child, before it drops its privileges. Async-signal-safe (one `write`).
pub(crate) fn join(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    let zero = b"0\n";
    // SAFETY: writes two bytes from a static buffer to a descriptor the parent opened.
    if unsafe { libc::write(fd, zero.as_ptr().cast(), zero.len()) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_limits_the_memory_of_a_process_that_joins_it() {
        let c = match Cgroups::find() {
            Ok(c) => c,
            Err(why) => {
                eprintln!("SKIPPED: no memory cgroup here: {why}");
                return;
            }
        };
        let g = c.group(32 << 20).unwrap();
        let fd = g.procs_fd();
        let mut cmd = std::process::Command::new("python3");
        cmd.args(["-c", "b = bytearray(200 << 20); print(len(b))"]);
        // SAFETY: the closure only calls write.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || join(fd));
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{out:?}");
        assert!(g.oom_killed() || !out.stderr.is_empty(), "{out:?}");
        let dir = g.dir.clone();
        drop(g);
        assert!(!dir.exists());
    }
}

//! The sandbox every environment runs untrusted code in (a tool call's Python, a terminal
//! task's shell, its tests): bubblewrap with every namespace unshared, and rlimits on top.
//!
//! What a command inside sees and may do:
//!
//! - **Files:** `/usr` (and the `/bin`, `/lib`… links or directories beside it) read-only, a few
//!   files of `/etc` (the loader cache, `alternatives`, a `passwd` and `group` naming the
//!   sandbox user), private `/proc`, `/dev` and a size-capped `/tmp`, and its episode's work
//!   directory at `/work`, the only host directory it can write. Nothing else of the host
//!   exists inside: not `/home`, `/root`, the project, or other episodes' directories. With a
//!   task's image ([`SystemRoot::Image`], built by `openclaw-env-images`) the image's folders
//!   and its `/etc` take the place of the host's `/usr`, links and `/etc` files; the rest is
//!   the same.
//! - **Network:** none (its own empty network namespace: loopback only, and nothing listens).
//! - **Environment:** cleared twice (the host starts bubblewrap with an empty environment, so
//!   not even `/proc/1/environ` inside holds a host variable), then `PATH`, `HOME`, `LANG`,
//!   `TMPDIR` and what the caller sets.
//! - **Privileges:** uid 1000 inside, no capabilities, no new user namespaces, no new
//!   privileges, and a seccomp filter refusing the kernel interfaces untrusted code never needs
//!   (`seccomp.rs`); when the host runs as root each work directory gets a host uid of its own
//!   (`uid_base` + n), so nothing runs or writes as host root and the process limit counts one
//!   episode only.
//! - **Limits:** the memory of all of a command's processes together (a memory cgroup per
//!   command where this process can make one, see `cgroup.rs`; elsewhere the process count is
//!   lowered so that processes × memory per process fits the total); address space, CPU
//!   seconds, file size and open files per process (each at most the host's own hard limit);
//!   processes per sandbox user (`RLIMIT_NPROC`; for a non-root host
//!   it counts that user's own processes, other sandboxes' included, so it is raised by their
//!   number at start); the size of the work directory (a tmpfs under root; otherwise measured
//!   while the command runs, which is killed when it passes the size); a wall clock after which bubblewrap's process group is killed, and
//!   with it the sandbox's PID namespace (its init dies with its parent: nothing outlives its
//!   command).
//!
//! Where bubblewrap is missing or cannot start, [`Sandbox::new`] fails with a message saying
//! how to install it. There is no unsandboxed mode.
//!
//! Written over the `bwrap` binary (Debian's `bubblewrap`) rather than a namespace crate: it is
//! the setup that distributions maintain and audit for exactly this use, and it needs no
//! privileges.

mod cgroup;
mod process;
pub mod seccomp;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use process::{Background, RunOutput, Status};

/// Resource limits of a sandboxed command.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Address space of each process, bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// Memory of all of a command's processes together, bytes: a memory cgroup of that size
    /// where this process can make one; elsewhere `processes` is lowered so that
    /// `processes × memory_bytes` stays within it.
    pub memory_total_bytes: u64,
    /// CPU seconds of each process (`RLIMIT_CPU`): SIGXCPU at the limit, SIGKILL a second later.
    pub cpu_seconds: u64,
    /// Processes and threads the sandbox user may have at once (`RLIMIT_NPROC`).
    pub processes: u64,
    /// Largest file a process may write, bytes (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Size of the private `/tmp`, bytes.
    pub tmp_bytes: u64,
    /// Size of an episode's work directory, bytes: a tmpfs of that size when the host is root,
    /// else checked after each command (a command that leaves it larger fails, and so does
    /// every later one).
    pub work_bytes: u64,
    /// Wall-clock time after which the whole sandbox is killed.
    pub wall: Duration,
    /// Bytes of stdout, and of stderr, kept (the rest is read and dropped).
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 512 << 20,
            memory_total_bytes: 8 << 30,
            cpu_seconds: 10,
            processes: 64,
            file_size_bytes: 64 << 20,
            open_files: 256,
            tmp_bytes: 64 << 20,
            work_bytes: 256 << 20,
            wall: Duration::from_secs(30),
            output_bytes: 1 << 20,
        }
    }
}

/// Settings of a [`Sandbox`].
#[derive(Clone, Debug)]
pub struct SandboxConfig {
    /// The bubblewrap binary: a path, or a name looked up in `PATH`.
    pub bwrap: PathBuf,
    /// Limits of every command (a [`Run`] may set its own wall clock).
    pub limits: Limits,
    /// When the host runs as root: the first of the unused host uids given to work
    /// directories, one each.
    pub uid_base: u32,
    /// Host directories bound read-only at the same path inside, besides `/usr`.
    pub read_only: Vec<PathBuf>,
    /// Where work directories are made (default: the system's temporary directory).
    pub workdir_root: Option<PathBuf>,
    /// Where the work directory appears inside (and `HOME`, and where commands start):
    /// `/work` by default; the terminal environment uses terminal-bench's `/app`.
    pub work_mount: PathBuf,
    /// How the memory of a command's processes together is bounded.
    pub memory_bound: MemoryBound,
    /// The system commands see: the host's `/usr` (default) or a task's image.
    pub system: SystemRoot,
    /// Environment variables every command gets after the sandbox's own (an image's `ENV`);
    /// a [`Run`]'s come after these and win.
    pub env: Vec<(String, String)>,
}

/// The system a sandbox's commands see at `/usr`, `/bin`…, and `/etc`.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum SystemRoot {
    /// The host's `/usr` and the links or folders beside it, and a few files of its `/etc`.
    #[default]
    Host,
    /// A root filesystem built for the task (`openclaw-env-images`): each of its top-level
    /// folders read-only (links as links), its whole `/etc` among them, except the ones the
    /// sandbox makes its own ([`IMAGE_OWN`] and the work directory's). Host paths bound inside
    /// (`read_only`, a [`Run`]'s binds) need their mount point in the image when they lie
    /// under one of its folders, which are read-only.
    Image(PathBuf),
}

/// Top-level folders of an image the sandbox does not show: it mounts its own `/proc`, `/dev`
/// and `/tmp`, and shows nothing of `/sys` or `/run` (an image's `/run` holds only what its
/// build left).
pub const IMAGE_OWN: [&str; 5] = ["proc", "dev", "sys", "tmp", "run"];

/// How a sandbox bounds the memory of all of a command's processes together.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum MemoryBound {
    /// A memory cgroup per command where this process can make one (root, or a delegated
    /// cgroup v2 subtree), else [`MemoryBound::ProcessCount`].
    #[default]
    CgroupWhereAvailable,
    /// `processes × memory_bytes` within `memory_total_bytes`, by lowering `processes`.
    ProcessCount,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            bwrap: PathBuf::from("bwrap"),
            limits: Limits::default(),
            uid_base: 200_000,
            read_only: Vec::new(),
            workdir_root: None,
            work_mount: PathBuf::from("/work"),
            memory_bound: MemoryBound::default(),
            system: SystemRoot::Host,
            env: Vec::new(),
        }
    }
}

/// Why a sandbox could not be made or a command not run.
#[derive(Debug)]
pub enum SandboxError {
    /// No bubblewrap binary where the configuration says.
    Missing(PathBuf),
    /// bubblewrap is there but could not start a sandbox (its own words).
    Unusable(String),
    /// The limits cannot be kept here as given (why, and what to change).
    Limits(String),
    /// The configured image is not a root filesystem (what is missing).
    Image(String),
    /// A command left the work directory larger than its limit (bytes).
    WorkdirFull(u64),
    /// The host failed (a directory, a pipe, a process).
    Io(std::io::Error),
}

impl std::fmt::Display for SandboxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SandboxError::Missing(p) => write!(
                f,
                "bubblewrap (`{}`) is not installed, and environments run code only inside it; \
                 install it (`apt-get install bubblewrap` on Debian and Ubuntu, `dnf install \
                 bubblewrap` on Fedora) or name its binary in the sandbox's `bwrap` setting",
                p.display()
            ),
            SandboxError::Unusable(why) => write!(
                f,
                "bubblewrap cannot start a sandbox here: {why} (it needs unprivileged user \
                 namespaces, or to be run as root)"
            ),
            SandboxError::Limits(why) => write!(f, "sandbox limits: {why}"),
            SandboxError::Image(why) => write!(f, "sandbox image: {why}"),
            SandboxError::WorkdirFull(limit) => write!(
                f,
                "the work directory grew past its limit of {} MiB",
                limit >> 20
            ),
            SandboxError::Io(e) => write!(f, "sandbox: {e}"),
        }
    }
}

impl std::error::Error for SandboxError {}

impl From<std::io::Error> for SandboxError {
    fn from(e: std::io::Error) -> Self {
        SandboxError::Io(e)
    }
}

/// One command to run in a work directory.
#[derive(Clone, Debug, Default)]
pub struct Run {
    argv: Vec<String>,
    stdin: Vec<u8>,
    wall: Option<Duration>,
    env: Vec<(String, String)>,
    binds: Vec<(PathBuf, PathBuf)>,
}

impl Run {
    /// `argv[0]` (looked up in the sandbox's `PATH`) with its arguments.
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(argv: I) -> Self {
        Run {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Run::default()
        }
    }

    /// `sh -c script`.
    pub fn shell(script: &str) -> Self {
        Run::new(["sh", "-c", script])
    }

    /// Bytes written to the command's stdin (then closed).
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = bytes.into();
        self
    }

    /// A wall clock of its own (at most the sandbox's).
    pub fn wall(mut self, wall: Duration) -> Self {
        self.wall = Some(wall);
        self
    }

    /// One more environment variable inside.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A host directory or file shown read-only at `inside` for this command only (a test
    /// suite the agent must not see during its episode). `inside` must be absolute and outside
    /// the work directory.
    pub fn ro_bind(mut self, host: impl Into<PathBuf>, inside: impl Into<PathBuf>) -> Self {
        self.binds.push((host.into(), inside.into()));
        self
    }
}

struct Inner {
    bwrap: PathBuf,
    config: SandboxConfig,
    /// The sandbox's own `/etc/passwd` and `/etc/group`.
    etc: tempfile::TempDir,
    root: bool,
    /// The seccomp program every command runs under ([`seccomp`]).
    seccomp: Vec<u8>,
    /// Where each command gets a memory cgroup, when it can.
    cgroups: Option<cgroup::Cgroups>,
    /// Processes per command: the configured number, lowered without a cgroup so that they
    /// cannot use more than `memory_total_bytes` together.
    processes: u64,
}

/// A checked bubblewrap setup; cheap to clone and share between episodes.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// Processes a command must be allowed at least: bubblewrap outside and its init inside count
/// too, then a shell, its pipelines and what they start.
const MIN_PROCESSES: u64 = 16;

/// Uids given out per host process before they repeat.
const UID_SPAN: u32 = 50_000;

impl Sandbox {
    /// Finds bubblewrap and starts one empty sandbox to prove it works.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        if let SystemRoot::Image(root) = &config.system {
            for needed in ["usr", "etc"] {
                if !root.join(needed).is_dir() {
                    return Err(SandboxError::Image(format!(
                        "{} has no {needed} folder: not a root filesystem",
                        root.display()
                    )));
                }
            }
        }
        let bwrap = find_binary(&config.bwrap)
            .ok_or_else(|| SandboxError::Missing(config.bwrap.clone()))?;
        let etc = tempfile::Builder::new()
            .prefix(&format!("{ETC_PREFIX}{}-", std::process::id()))
            .tempdir()?;
        std::fs::write(
            etc.path().join("passwd"),
            "root:x:0:0::/:/usr/sbin/nologin\nsandbox:x:1000:1000::/work:/bin/sh\n\
             nobody:x:65534:65534::/:/usr/sbin/nologin\n",
        )?;
        std::fs::write(
            etc.path().join("group"),
            "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
        )?;
        // Readable by the sandbox's host uid whatever the umask.
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |m| std::fs::Permissions::from_mode(m);
            std::fs::set_permissions(etc.path(), mode(0o755))?;
            std::fs::set_permissions(etc.path().join("passwd"), mode(0o644))?;
            std::fs::set_permissions(etc.path().join("group"), mode(0o644))?;
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let l = &config.limits;
        let cgroups = match config.memory_bound {
            MemoryBound::CgroupWhereAvailable => cgroup::Cgroups::find().ok(),
            MemoryBound::ProcessCount => None,
        };
        let processes = match &cgroups {
            Some(_) => l.processes,
            None => {
                let fit = l.memory_total_bytes / l.memory_bytes.max(1);
                if fit < MIN_PROCESSES {
                    return Err(SandboxError::Limits(format!(
                        "no memory cgroup can be made here, so processes x memory per process must fit the memory of all ({} MiB), and {fit} processes of {} MiB are fewer than the {MIN_PROCESSES} a shell pipeline needs: raise the total or lower the memory per process",
                        l.memory_total_bytes >> 20,
                        l.memory_bytes >> 20
                    )));
                }
                l.processes.min(fit)
            }
        };
        clear_leftovers(
            &config
                .workdir_root
                .clone()
                .unwrap_or_else(std::env::temp_dir),
        );
        let sandbox = Sandbox {
            inner: Arc::new(Inner {
                bwrap,
                config,
                etc,
                root,
                seccomp: seccomp::program().map_err(SandboxError::Unusable)?,
                cgroups,
                processes,
            }),
        };
        let probe = sandbox.workdir()?.run(&Run::new(["true"]))?;
        if probe.exit_code != Some(0) {
            let said = String::from_utf8_lossy(&probe.stderr);
            let said = said
                .lines()
                .next()
                .unwrap_or("no message")
                .trim()
                .to_string();
            return Err(SandboxError::Unusable(format!(
                "`{} … true` exited with {:?}: {said}",
                sandbox.inner.bwrap.display(),
                probe.exit_code
            )));
        }
        Ok(sandbox)
    }

    /// The limits every command gets.
    pub fn limits(&self) -> &Limits {
        &self.inner.config.limits
    }

    /// How the memory of a command's processes together is bounded here: a cgroup, or
    /// the process count (and how many processes that leaves).
    pub fn memory_bound(&self) -> (MemoryBound, u64) {
        match &self.inner.cgroups {
            Some(_) => (MemoryBound::CgroupWhereAvailable, self.inner.processes),
            None => (MemoryBound::ProcessCount, self.inner.processes),
        }
    }

    /// A new, empty, private work directory (an episode's), removed when dropped.
    pub fn workdir(&self) -> Result<Workdir, SandboxError> {
        let mut b = tempfile::Builder::new();
        // The pid in the name lets a later process clear what a killed one left.
        let prefix = format!("{EPISODE_PREFIX}{}-", std::process::id());
        b.prefix(&prefix);
        let dir = match &self.inner.config.workdir_root {
            Some(root) => {
                std::fs::create_dir_all(root)?;
                b.tempdir_in(root)?
            }
            None => b.tempdir()?,
        };
        let uid = self.inner.root.then(|| {
            self.inner.config.uid_base + NEXT_UID.fetch_add(1, Ordering::Relaxed) % UID_SPAN
        });
        let mounted = match uid {
            Some(u) => mount_tmpfs(dir.path(), self.inner.config.limits.work_bytes, u),
            None => false,
        };
        set_owner_only(dir.path(), uid)?;
        Ok(Workdir {
            sandbox: self.clone(),
            dir,
            uid,
            mounted,
            over: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn bwrap_args(&self, workdir: &Path, run: &Run) -> Vec<OsString> {
        let c = &self.inner.config;
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |items: &[&dyn AsRefOs]| {
            for i in items {
                a.push(i.as_os());
            }
        };
        push(&[
            &"--unshare-all",
            &"--unshare-user",
            &"--uid",
            &"1000",
            &"--gid",
            &"1000",
            &"--hostname",
            &"sandbox",
            &"--die-with-parent",
            &"--new-session",
            &"--clearenv",
            &"--setenv",
            &"PATH",
            &"/usr/local/bin:/usr/bin:/bin",
            &"--setenv",
            &"HOME",
            &c.work_mount,
            &"--setenv",
            &"LANG",
            &"C.UTF-8",
            &"--setenv",
            &"TMPDIR",
            &"/tmp",
        ]);
        for (k, v) in c.env.iter().chain(&run.env) {
            push(&[&"--setenv", k, v]);
        }
        match &c.system {
            SystemRoot::Host => {
                push(&[&"--ro-bind", &"/usr", &"/usr"]);
                // Merged-/usr systems link these into /usr; older ones have real directories.
                for d in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
                    let p = Path::new(d);
                    match std::fs::read_link(p) {
                        Ok(target) => push(&[&"--symlink", &target, &p]),
                        Err(_) if p.is_dir() => push(&[&"--ro-bind", &p, &p]),
                        Err(_) => {}
                    }
                }
                for f in ["/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime"] {
                    if Path::new(f).exists() {
                        push(&[&"--ro-bind", &f, &f]);
                    }
                }
            }
            SystemRoot::Image(root) => {
                // The work directory replaces the image's folder of that name whole.
                let work_top = match c.work_mount.strip_prefix("/").ok().map(Path::components) {
                    Some(mut parts) => match (parts.next(), parts.next()) {
                        (Some(std::path::Component::Normal(top)), None) => Some(top.to_owned()),
                        _ => None,
                    },
                    None => None,
                };
                let mut names: Vec<OsString> = std::fs::read_dir(root)
                    .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
                    .unwrap_or_default();
                names.sort();
                for name in names {
                    if IMAGE_OWN.iter().any(|own| name == *own) || work_top.as_ref() == Some(&name)
                    {
                        continue;
                    }
                    let host = root.join(&name);
                    let inside = Path::new("/").join(&name);
                    match std::fs::symlink_metadata(&host) {
                        // A link means a path inside the image: bubblewrap makes it as it is.
                        Ok(m) if m.file_type().is_symlink() => {
                            if let Ok(target) = std::fs::read_link(&host) {
                                push(&[&"--symlink", &target, &inside]);
                            }
                        }
                        Ok(m) if m.is_dir() => push(&[&"--ro-bind", &host, &inside]),
                        _ => {}
                    }
                }
            }
        }
        let etc = self.inner.etc.path();
        push(&[
            &"--ro-bind",
            &etc.join("passwd"),
            &"/etc/passwd",
            &"--ro-bind",
            &etc.join("group"),
            &"/etc/group",
        ]);
        for p in &c.read_only {
            push(&[&"--ro-bind", p, p]);
        }
        for (host, inside) in &run.binds {
            push(&[&"--ro-bind", host, inside]);
        }
        let tmp = c.limits.tmp_bytes.to_string();
        push(&[
            &"--proc",
            &"/proc",
            &"--dev",
            &"/dev",
            &"--size",
            &tmp,
            &"--tmpfs",
            &"/tmp",
            &"--bind",
            &workdir,
            &c.work_mount,
            &"--chdir",
            &c.work_mount,
            &"--remount-ro",
            &"/",
            &"--disable-userns",
            &"--cap-drop",
            &"ALL",
            &"--",
        ]);
        a.extend(run.argv.iter().map(OsString::from));
        a
    }
}

/// Anything that is an OS string argument (keeps the argument list above readable).
trait AsRefOs {
    fn as_os(&self) -> OsString;
}

impl AsRefOs for &str {
    fn as_os(&self) -> OsString {
        OsString::from(self)
    }
}

impl AsRefOs for String {
    fn as_os(&self) -> OsString {
        OsString::from(self)
    }
}

impl AsRefOs for PathBuf {
    fn as_os(&self) -> OsString {
        self.as_os_str().to_owned()
    }
}

impl AsRefOs for Path {
    fn as_os(&self) -> OsString {
        self.as_os_str().to_owned()
    }
}

impl AsRefOs for &Path {
    fn as_os(&self) -> OsString {
        self.as_os_str().to_owned()
    }
}

/// An episode's private work directory, `/work` inside the sandbox; removed when dropped.
pub struct Workdir {
    sandbox: Sandbox,
    dir: tempfile::TempDir,
    uid: Option<u32>,
    /// Whether it is a size-capped tmpfs (unmounted on drop).
    mounted: bool,
    /// Whether a command left it larger than its limit (no command runs after that).
    over: std::sync::atomic::AtomicBool,
}

impl Drop for Workdir {
    fn drop(&mut self) {
        if self.mounted {
            if let Ok(c) = std::ffi::CString::new(self.dir.path().as_os_str().as_encoded_bytes()) {
                // SAFETY: a valid C string; MNT_DETACH so a busy mount still goes.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

impl Workdir {
    /// The directory on the host (read results here; never follow links the sandbox left).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The host uid commands run as (when the host is root).
    pub fn uid(&self) -> Option<u32> {
        self.uid
    }

    /// Runs one command in the sandbox, with this directory at `/work` (the configured
    /// `work_mount`), to its end or its wall clock.
    pub fn run(&self, run: &Run) -> Result<RunOutput, SandboxError> {
        let out = process::run(self.spawn_of(run)?)?;
        self.check_size()?;
        Ok(out)
    }

    /// Starts one command in the sandbox and returns at once: a shell session's background
    /// process, fed and read while it runs, killed at its wall clock or when dropped.
    pub fn start(&self, run: &Run) -> Result<Background, SandboxError> {
        Ok(process::start(self.spawn_of(run)?)?)
    }

    /// Whether the directory is within its size (a command left it larger: no command runs
    /// after that).
    pub fn check_size(&self) -> Result<(), SandboxError> {
        let limits = &self.sandbox.inner.config.limits;
        if !self.mounted && tree_bytes(self.dir.path()) > limits.work_bytes {
            self.over.store(true, Ordering::Relaxed);
            return Err(SandboxError::WorkdirFull(limits.work_bytes));
        }
        Ok(())
    }

    fn spawn_of<'a>(&'a self, run: &'a Run) -> Result<process::Spawn<'a>, SandboxError> {
        let inner = &self.sandbox.inner;
        let limits = &inner.config.limits;
        if self.over.load(Ordering::Relaxed) {
            return Err(SandboxError::WorkdirFull(limits.work_bytes));
        }
        let wall = run.wall.map_or(limits.wall, |w| w.min(limits.wall));
        let processes = match self.uid {
            Some(_) => inner.processes,
            // SAFETY: getuid has no preconditions.
            None => inner.processes + process::tasks_of_user(unsafe { libc::getuid() }),
        };
        let group = match &inner.cgroups {
            Some(c) => Some(c.group(limits.memory_total_bytes)?),
            None => None,
        };
        // Without a tmpfs of its size, the directory is measured while the command runs.
        let watch = (!self.mounted).then(|| (self.dir.path().to_path_buf(), limits.work_bytes));
        // A descriptor of its own per start: bubblewrap reads the program to its end.
        let filter = seccomp::memfd(&inner.seccomp)?;
        let mut args: Vec<OsString> = vec![
            "--seccomp".into(),
            std::os::fd::AsRawFd::as_raw_fd(&filter).to_string().into(),
        ];
        args.extend(self.sandbox.bwrap_args(self.dir.path(), run));
        Ok(process::Spawn {
            bwrap: &inner.bwrap,
            args,
            filter,
            group,
            watch,
            uid: self.uid,
            limits,
            processes,
            stdin: &run.stdin,
            wall,
        })
    }
}

/// `name` as given when it has a slash, else the first executable of that name in `PATH`.
fn find_binary(name: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.components().count() > 1 {
        return executable(name).then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

/// How work directories' names begin (then the pid of the process that made them).
const EPISODE_PREFIX: &str = "openclaw-episode-";

/// How a sandbox's own `/etc` folder's name begins (then its process's pid).
const ETC_PREFIX: &str = "openclaw-sandbox-etc-";

/// Whether process `pid` is gone (no such process; a process we may not signal is alive).
pub(crate) fn dead(pid: u32) -> bool {
    // SAFETY: signal 0 only checks the process exists.
    let missing = unsafe { libc::kill(pid as libc::pid_t, 0) } != 0;
    missing && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// The pid in a work directory's name, when it is one.
fn owner_of(name: &str) -> Option<u32> {
    owner_with(name, EPISODE_PREFIX)
}

/// The pid after `prefix` in `name` (`<prefix><pid>-…`), when it is there.
fn owner_with(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Removes the folders in `root` named `<prefix><pid>-…` whose process is gone (what a process
/// killed with `kill -9` left of its temporary folders); how many. For the environments' own
/// temporary folders too.
pub fn clear_dead_folders(root: &Path, prefix: &str) -> usize {
    let mut cleared = 0;
    if let Ok(entries) = std::fs::read_dir(root) {
        for e in entries.flatten() {
            let name = e.file_name();
            let stale = name
                .to_str()
                .and_then(|n| owner_with(n, prefix))
                .is_some_and(dead);
            if stale && std::fs::remove_dir_all(e.path()).is_ok() {
                cleared += 1;
            }
        }
    }
    cleared
}

/// Clears what processes killed with `kill -9` left: their work directories' tmpfs mounts
/// (which nothing else unmounts) and the directories in `root`. Only those whose process is
/// gone; what it clears is logged on stderr. Returns how many it cleared.
fn clear_leftovers(root: &Path) -> usize {
    let mut cleared = 0;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mounts.lines() {
        let Some(point) = line.split(' ').nth(4) else {
            continue;
        };
        // mountinfo escapes spaces and the like as octal; work directory names have none.
        let point = Path::new(point);
        let stale = point.parent() == Some(root)
            && point
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(owner_of)
                .is_some_and(dead);
        if !stale {
            continue;
        }
        if let Ok(c) = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid C string; MNT_DETACH so a busy mount still goes.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                cleared += 1;
            }
        }
    }
    cleared += clear_dead_folders(root, EPISODE_PREFIX);
    clear_dead_folders(&std::env::temp_dir(), ETC_PREFIX);
    if cleared > 0 {
        eprintln!(
            "sandbox: cleared {cleared} work directories and mounts left in {} by processes that were killed",
            root.display()
        );
    }
    cleared
}

/// Mounts a tmpfs of `bytes` (and a proportional number of inodes) owned by `uid` on `dir`;
/// false when the host cannot (a container without the right), and the size is then checked
/// after each command instead.
fn mount_tmpfs(dir: &Path, bytes: u64, uid: u32) -> bool {
    let (Ok(target), Ok(data)) = (
        std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()),
        std::ffi::CString::new(format!(
            "size={bytes},nr_inodes={},mode=0700,uid={uid},gid={uid}",
            (bytes / 4096).max(1024)
        )),
    ) else {
        return false;
    };
    // SAFETY: valid C strings; the flags only restrict the mount.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        ) == 0
    }
}

/// Bytes of the files under `dir` (links not followed).
pub(crate) fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Mode 0700, owned by `uid` when given.
fn set_owner_only(p: &Path, uid: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))?;
    if let Some(u) = uid {
        std::os::unix::fs::chown(p, Some(u), Some(u))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bubblewrap_is_refused_with_how_to_install_it() {
        let err = Sandbox::new(SandboxConfig {
            bwrap: PathBuf::from("/nonexistent/bwrap"),
            ..SandboxConfig::default()
        })
        .err()
        .expect("no sandbox without bubblewrap");
        let said = err.to_string();
        assert!(matches!(err, SandboxError::Missing(_)));
        assert!(said.contains("apt-get install bubblewrap"), "{said}");
        assert!(said.contains("/nonexistent/bwrap"), "{said}");
        let err = Sandbox::new(SandboxConfig {
            bwrap: PathBuf::from("no-such-bwrap-anywhere"),
            ..SandboxConfig::default()
        })
        .err()
        .expect("not in PATH either");
        assert!(matches!(err, SandboxError::Missing(_)));
    }

    #[test]
    fn what_a_killed_process_left_is_cleared_and_nothing_of_a_live_one() {
        let root = tempfile::tempdir().unwrap();
        // A pid that was just used and is gone.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let stale = root.path().join(format!("{EPISODE_PREFIX}{gone}-abc"));
        let live = root
            .path()
            .join(format!("{EPISODE_PREFIX}{}-def", std::process::id()));
        std::fs::create_dir(&stale).unwrap();
        std::fs::create_dir(&live).unwrap();
        std::fs::write(stale.join("f"), "x").unwrap();
        // SAFETY: geteuid has no preconditions.
        let root_user = unsafe { libc::geteuid() } == 0;
        let mounted = root_user && mount_tmpfs(&stale, 1 << 20, 0);
        let cleared = clear_leftovers(root.path());
        assert_eq!(cleared, if mounted { 2 } else { 1 });
        assert!(!stale.exists() && live.exists());
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!mounts.contains(stale.to_str().unwrap()), "still mounted");
    }

    #[test]
    fn the_command_comes_last_after_every_namespace_is_unshared() {
        let inner = Inner {
            bwrap: PathBuf::from("bwrap"),
            config: SandboxConfig::default(),
            etc: tempfile::tempdir().unwrap(),
            root: false,
            seccomp: Vec::new(),
            cgroups: None,
            processes: 64,
        };
        let s = Sandbox {
            inner: Arc::new(inner),
        };
        let args: Vec<String> = s
            .bwrap_args(
                Path::new("/tmp/w"),
                &Run::new(["python3", "-c", "print(1)"]).env("A", "b"),
            )
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let sep = args.iter().position(|a| a == "--").unwrap();
        assert_eq!(&args[sep + 1..], ["python3", "-c", "print(1)"]);
        for flag in [
            "--unshare-all",
            "--unshare-user",
            "--clearenv",
            "--die-with-parent",
            "--disable-userns",
        ] {
            assert!(args[..sep].iter().any(|a| a == flag), "{flag} missing");
        }
        let bind = args.iter().position(|a| a == "--bind").unwrap();
        assert_eq!(&args[bind + 1..bind + 3], ["/tmp/w", "/work"]);
        // Nothing of the host is writable but the work directory.
        assert_eq!(args.iter().filter(|a| *a == "--bind").count(), 1);
        let env = args.iter().position(|a| a == "A").unwrap();
        assert_eq!(args[env - 1], "--setenv");
        // The host's system by default, as before images.
        let usr = args.iter().position(|a| a == "/usr").unwrap();
        assert_eq!(&args[usr - 1..usr + 2], ["--ro-bind", "/usr", "/usr"]);
    }

    /// The arguments a sandbox of `config` gives bubblewrap for `run` in `/tmp/w`.
    fn args_of(config: SandboxConfig, run: &Run) -> Vec<String> {
        let s = Sandbox {
            inner: Arc::new(Inner {
                bwrap: PathBuf::from("bwrap"),
                config,
                etc: tempfile::tempdir().unwrap(),
                root: false,
                seccomp: Vec::new(),
                cgroups: None,
                processes: 64,
            }),
        };
        s.bwrap_args(Path::new("/tmp/w"), run)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    /// Whether `args` holds `window` in a row.
    fn has(args: &[String], window: &[&str]) -> bool {
        args.windows(window.len()).any(|w| w == window)
    }

    #[test]
    fn an_image_takes_the_place_of_the_hosts_system_and_nothing_else_changes() {
        let image = tempfile::tempdir().unwrap();
        let r = image.path();
        for d in [
            "usr/bin", "etc", "opt/tool", "proc", "tmp", "run", "app", "var",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
        std::fs::write(r.join("README"), "a file at the top is not shown").unwrap();
        let config = SandboxConfig {
            system: SystemRoot::Image(r.to_path_buf()),
            work_mount: PathBuf::from("/app"),
            env: vec![
                ("FROM_IMAGE".into(), "1".into()),
                ("B".into(), "image".into()),
            ],
            ..SandboxConfig::default()
        };
        let args = args_of(config, &Run::new(["python3"]).env("B", "run"));
        let at = |p: &Path| p.display().to_string();
        assert!(
            has(&args, &["--ro-bind", at(&r.join("usr")).as_str(), "/usr"]),
            "{args:?}"
        );
        assert!(
            has(&args, &["--ro-bind", at(&r.join("etc")).as_str(), "/etc"]),
            "{args:?}"
        );
        assert!(
            has(&args, &["--ro-bind", at(&r.join("opt")).as_str(), "/opt"]),
            "{args:?}"
        );
        assert!(has(&args, &["--symlink", "usr/bin", "/bin"]), "{args:?}");
        // Nothing of the host's system, nor the image's own /proc, /tmp, /run or work folder.
        assert!(!has(&args, &["--ro-bind", "/usr", "/usr"]), "{args:?}");
        assert!(
            !args.iter().any(|a| a.starts_with("/etc/ld.so")),
            "{args:?}"
        );
        for own in ["proc", "tmp", "run", "app", "README"] {
            assert!(!args.contains(&at(&r.join(own))), "{own} bound: {args:?}");
        }
        // The sandbox's own passwd and group lie over the image's /etc.
        let etc = args.iter().position(|a| *a == at(&r.join("etc"))).unwrap();
        let passwd = args.iter().position(|a| a == "/etc/passwd").unwrap();
        assert!(passwd > etc, "{args:?}");
        // The image's variables, then the run's, which win.
        let sep = args.iter().position(|a| a == "--").unwrap();
        assert!(has(&args[..sep], &["--setenv", "FROM_IMAGE", "1"]));
        let b = |v: &str| {
            args.windows(3)
                .position(|w| w == ["--setenv", "B", v])
                .unwrap()
        };
        assert!(b("image") < b("run"));
        // The same namespaces, work directory and read-only root as on the host's system.
        for flag in [
            "--unshare-all",
            "--clearenv",
            "--disable-userns",
            "--remount-ro",
        ] {
            assert!(args[..sep].iter().any(|a| a == flag), "{flag} missing");
        }
        assert!(has(&args, &["--bind", "/tmp/w", "/app"]));
        assert_eq!(args.iter().filter(|a| *a == "--bind").count(), 1);
    }

    #[test]
    fn an_image_without_usr_is_refused() {
        let empty = tempfile::tempdir().unwrap();
        let err = Sandbox::new(SandboxConfig {
            system: SystemRoot::Image(empty.path().to_path_buf()),
            ..SandboxConfig::default()
        })
        .err()
        .expect("an empty folder is no image");
        assert!(matches!(err, SandboxError::Image(_)), "{err}");
        assert!(err.to_string().contains("has no usr folder"), "{err}");
    }
}

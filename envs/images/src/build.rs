//! The cache and the build: an image is built once into `<cache>/<key>/root` (mmdebstrap, then
//! the copies, pip installs and folders in order), with `image.json` beside it, and found there
//! by every later use.
//!
//! A build happens under an exclusive lock on `<cache>/<key>.lock` (two processes asking for
//! the same image build it once: the second waits and finds it), in `<cache>/.<key>.partial`,
//! renamed to `<cache>/<key>` only when whole, so a folder named by its key is always complete.
//! A partial folder found under the lock is what a killed build left, and is cleared.
//!
//! As root, mmdebstrap writes the tree directly (`--mode=root`); otherwise it builds in a user
//! namespace (`--mode=unshare`, which needs `/etc/subuid`) and hands over a tarball, unpacked
//! here so that every file is the user's own (a directory written in that mode would belong to
//! subordinate uids the user can neither change nor delete). pip runs inside the new tree
//! under bubblewrap with the network, the only time an image sees one.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::spec::{ImageSpec, Step, DEFAULT_PATH};
use crate::ImageError;

/// Bumped with `image.json`'s layout.
const RECORD_FORMAT: u32 = 1;

/// Where the host's CA bundle is shown to pip during a build.
const BUILD_CA: &str = "/tmp/openclaw-build-ca.pem";

/// Top-level folders of an image the sandbox replaces with its own (also listed in
/// `openclaw-sandbox`), so nothing is copied there.
const SANDBOX_OWN: [&str; 5] = ["/proc", "/dev", "/sys", "/tmp", "/run"];

/// A built image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// Its cache key.
    pub key: String,
    /// Its folder in the cache (`root/`, `image.json`, `build.log`).
    pub dir: PathBuf,
    /// The root filesystem, for `openclaw_sandbox::SystemRoot::Image`.
    pub root: PathBuf,
    /// Environment variables its commands get (`ENV`), in order.
    pub env: Vec<(String, String)>,
    /// The working directory it names (`WORKDIR`), where an environment mounts its work
    /// directory.
    pub workdir: Option<PathBuf>,
    /// What the spec asked for that does nothing here, one line each.
    pub notes: Vec<String>,
}

impl Built {
    /// The host path of the image's folder at `inside` (absolute), when there is one and no
    /// link on the way: what `COPY` put where the sandbox mounts its work directory is hidden
    /// by it, and an environment copies it into each episode's directory from here.
    pub fn folder(&self, inside: &Path) -> Option<PathBuf> {
        let rel = inside.strip_prefix("/").ok()?;
        let mut p = self.root.clone();
        for c in rel.components() {
            let std::path::Component::Normal(name) = c else {
                return None;
            };
            p.push(name);
            let m = std::fs::symlink_metadata(&p).ok()?;
            if m.file_type().is_symlink() {
                // Its target means a path inside the image, not on the host.
                return None;
            }
        }
        p.is_dir().then_some(p)
    }
}

/// `image.json`: what a built image is, beside its root.
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    format: u32,
    key: String,
    origin: String,
    base: String,
    suite: String,
    packages: Vec<String>,
    env: Vec<(String, String)>,
    workdir: Option<String>,
    notes: Vec<String>,
    build_seconds: f64,
}

/// The images built on this machine, and how to build more.
#[derive(Clone, Debug)]
pub struct ImageCache {
    dir: PathBuf,
    mirror: Option<String>,
    mmdebstrap: PathBuf,
    bwrap: PathBuf,
}

impl ImageCache {
    /// A cache in `dir` (made when the first image is built).
    pub fn new(dir: impl Into<PathBuf>) -> ImageCache {
        ImageCache {
            dir: dir.into(),
            mirror: None,
            mmdebstrap: PathBuf::from("mmdebstrap"),
            bwrap: PathBuf::from("bwrap"),
        }
    }

    /// The cache in [`ImageCache::default_dir`].
    pub fn at_default() -> Result<ImageCache, ImageError> {
        ImageCache::default_dir()
            .map(ImageCache::new)
            .ok_or_else(|| {
                ImageError::Invalid(
                    "no cache folder for images: neither XDG_CACHE_HOME nor HOME is set; name one"
                        .into(),
                )
            })
    }

    /// `$OPENCLAW_IMAGE_CACHE` when set; else `/var/cache/openclaw-host/images` for root;
    /// otherwise `$XDG_CACHE_HOME/openclaw-host/images`, or `~/.cache/openclaw-host/images`.
    ///
    /// Root's sandboxes run as uids of their own, which cannot enter `/root`: its images must
    /// lie where every user may pass.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("OPENCLAW_IMAGE_CACHE").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(dir));
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return Some(PathBuf::from("/var/cache/openclaw-host/images"));
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .map(|h| h.join(".cache"))
            })?;
        Some(base.join("openclaw-host").join("images"))
    }

    /// Debian packages from this mirror alone (default: Debian's, with the suite's updates
    /// and security mirrors, as Docker's Debian images have).
    pub fn with_mirror(mut self, mirror: impl Into<String>) -> ImageCache {
        self.mirror = Some(mirror.into());
        self
    }

    /// The mmdebstrap and bubblewrap binaries: paths, or names looked up in `PATH`.
    pub fn with_tools(
        mut self,
        mmdebstrap: impl Into<PathBuf>,
        bwrap: impl Into<PathBuf>,
    ) -> ImageCache {
        self.mmdebstrap = mmdebstrap.into();
        self.bwrap = bwrap.into();
        self
    }

    /// The cache's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key `spec`'s image has in this cache (its mirror included).
    pub fn key(&self, spec: &ImageSpec) -> Result<String, ImageError> {
        spec.key_with_mirror(self.mirror.as_deref())
    }

    /// `spec`'s image when it is built, without building it.
    pub fn cached(&self, spec: &ImageSpec) -> Result<Option<Built>, ImageError> {
        read_built(&self.dir.join(self.key(spec)?))
    }

    /// `spec`'s image: from the cache, or built now (about a minute, with the network) and
    /// kept. Prints a line on stderr when it builds, and one when done.
    pub fn build(&self, spec: &ImageSpec) -> Result<Built, ImageError> {
        let key = self.key(spec)?;
        let done = self.dir.join(&key);
        if let Some(built) = read_built(&done)? {
            return Ok(built);
        }
        let mmdebstrap = find_binary(&self.mmdebstrap).ok_or_else(|| ImageError::Missing {
            tool: self.mmdebstrap.display().to_string(),
            why: "images are built with it",
            install: "apt-get install mmdebstrap",
        })?;
        let pip = spec.steps.iter().any(|s| matches!(s, Step::Pip { .. }));
        let bwrap = if pip {
            Some(find_binary(&self.bwrap).ok_or_else(|| ImageError::Missing {
                tool: self.bwrap.display().to_string(),
                why: "pip runs inside the new image under it",
                install: "apt-get install bubblewrap",
            })?)
        } else {
            None
        };
        make_dirs_open(&self.dir)?;
        check_passable(&self.dir)?;
        let _lock = Lock::exclusive(&self.dir.join(format!("{key}.lock")), &key)?;
        // Another process may have built it while this one waited.
        if let Some(built) = read_built(&done)? {
            return Ok(built);
        }
        let partial = self.dir.join(format!(".{key}.partial"));
        if std::fs::symlink_metadata(&partial).is_ok() {
            eprintln!(
                "images: clearing {}, left by a build that was stopped",
                partial.display()
            );
            remove_tree(&partial)?;
        }
        let log_path = self.dir.join(format!("{key}.log"));
        let log =
            File::create(&log_path).map_err(io(format!("creating {}", log_path.display())))?;
        eprintln!(
            "images: building {} ({}; Debian packages: {}, pip steps: {}) as {key}: about a minute, once; log {}",
            spec.origin,
            spec.base.name,
            spec.packages().len(),
            spec.steps.iter().filter(|s| matches!(s, Step::Pip { .. })).count(),
            log_path.display()
        );
        let started = Instant::now();
        let job = Job {
            spec,
            key: &key,
            log: &log,
            log_path: &log_path,
            partial: &partial,
            root: partial.join("root"),
            // SAFETY: geteuid has no preconditions.
            as_root: unsafe { libc::geteuid() } == 0,
        };
        let made = job
            .run(&mmdebstrap, bwrap.as_deref(), self.mirror.as_deref())
            .and_then(|()| {
                let record = Record {
                    format: RECORD_FORMAT,
                    key: key.clone(),
                    origin: spec.origin.clone(),
                    base: spec.base.name.clone(),
                    suite: spec.base.suite.clone(),
                    packages: spec.packages(),
                    env: spec.env.clone(),
                    workdir: spec.workdir.clone(),
                    notes: spec.notes.clone(),
                    build_seconds: started.elapsed().as_secs_f64(),
                };
                let json = serde_json::to_vec_pretty(&record).expect("plain data serialises");
                let path = partial.join("image.json");
                std::fs::write(&path, json).map_err(io(format!("writing {}", path.display())))
            })
            .and_then(|()| {
                std::fs::rename(&partial, &done).map_err(io(format!(
                    "moving {} to {}",
                    partial.display(),
                    done.display()
                )))
            });
        if let Err(e) = made {
            // The log stays, named in the error; the half-built tree goes.
            let _ = remove_tree(&partial);
            return Err(e);
        }
        let _ = std::fs::rename(&log_path, done.join("build.log"));
        let built = read_built(&done)?.ok_or_else(|| {
            ImageError::Invalid(format!("{}: built but not readable", done.display()))
        })?;
        eprintln!(
            "images: built {key} in {:.0} s, {} MiB",
            started.elapsed().as_secs_f64(),
            tree_bytes(&built.root) >> 20
        );
        Ok(built)
    }
}

/// One build in progress.
struct Job<'a> {
    spec: &'a ImageSpec,
    key: &'a str,
    log: &'a File,
    log_path: &'a Path,
    partial: &'a Path,
    root: PathBuf,
    as_root: bool,
}

impl Job<'_> {
    fn run(
        &self,
        mmdebstrap: &Path,
        bwrap: Option<&Path>,
        mirror: Option<&str>,
    ) -> Result<(), ImageError> {
        make_dirs_open(self.partial)?;
        self.debootstrap(mmdebstrap, mirror)?;
        for step in &self.spec.steps {
            match step {
                Step::Copy {
                    line,
                    sources,
                    dest,
                    into,
                } => self.copy(*line, sources, dest, *into)?,
                Step::Workdir { path, .. } => {
                    make_dirs_in(&self.root, path)?;
                }
                Step::Pip {
                    line,
                    args,
                    cwd,
                    env,
                } => {
                    let bwrap = bwrap.expect("bubblewrap was found for the pip steps");
                    self.pip(bwrap, *line, args, cwd, env)?;
                }
            }
        }
        // What mmdebstrap copied from the host for apt: no host name or resolver in an image.
        for (file, text) in [("/etc/resolv.conf", ""), ("/etc/hostname", "sandbox\n")] {
            let path = resolve_in_root(&self.root, file).map_err(|why| self.invalid(why))?;
            if path.exists() {
                std::fs::write(&path, text).map_err(io(format!("writing {}", path.display())))?;
            }
        }
        Ok(())
    }

    /// The Debian tree, with every package, by mmdebstrap.
    fn debootstrap(&self, mmdebstrap: &Path, mirror: Option<&str>) -> Result<(), ImageError> {
        let packages = self.spec.packages();
        let mut cmd = Command::new(mmdebstrap);
        cmd.arg(if self.as_root {
            "--mode=root"
        } else {
            "--mode=unshare"
        })
        .arg("--variant=apt");
        if !packages.is_empty() {
            cmd.arg(format!("--include={}", packages.join(",")));
        }
        if self.spec.recommends {
            cmd.arg("--aptopt=Apt::Install-Recommends \"true\"");
        }
        let tarball = self.partial.join("root.tar");
        cmd.arg(if self.as_root {
            "--format=directory"
        } else {
            "--format=tar"
        })
        .arg("--")
        .arg(&self.spec.base.suite)
        .arg(if self.as_root { &self.root } else { &tarball });
        if let Some(m) = mirror {
            cmd.arg(m);
        }
        let step = format!(
            "mmdebstrap (Debian {}, {} packages)",
            self.spec.base.suite,
            packages.len()
        );
        self.logged(cmd, &step)?;
        if !self.as_root {
            make_dirs_open(&self.root)?;
            let mut tar = Command::new("tar");
            // Device files cannot be made without root, and the sandbox brings its own /dev.
            tar.arg("--extract")
                .arg("--file")
                .arg(&tarball)
                .arg("--directory")
                .arg(&self.root)
                .args([
                    "--no-same-owner",
                    "--preserve-permissions",
                    "--exclude=./dev/*",
                ]);
            self.logged(tar, "unpacking mmdebstrap's tarball")?;
            std::fs::remove_file(&tarball)
                .map_err(io(format!("removing {}", tarball.display())))?;
        }
        Ok(())
    }

    /// One `COPY`: each source into the image, files 0644 (0755 when executable), folders
    /// 0755, links as links; paths in the image resolved as inside it (a link in the image
    /// never leads a write out to the host).
    fn copy(
        &self,
        line: usize,
        sources: &[String],
        dest: &str,
        into: bool,
    ) -> Result<(), ImageError> {
        if SANDBOX_OWN
            .iter()
            .any(|own| dest == *own || dest.starts_with(&format!("{own}/")))
        {
            return Err(ImageError::Invalid(format!(
                "{}:{line}: COPY to {dest}: the sandbox mounts its own {} over it",
                self.spec.origin,
                dest.split('/').take(2).collect::<Vec<_>>().join("/")
            )));
        }
        for src in sources {
            let from = self.spec.source(line, src)?;
            let to = if from.is_dir() || !into {
                dest.to_string()
            } else {
                let name = from
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("{}/{name}", dest.trim_end_matches('/'))
            };
            copy_into(&self.root, &from, &to).map_err(|why| {
                ImageError::Invalid(format!(
                    "{}:{line}: COPY {src} {dest}: {why}",
                    self.spec.origin
                ))
            })?;
        }
        Ok(())
    }

    /// One `pip install`, inside the tree, with the network.
    fn pip(
        &self,
        bwrap: &Path,
        line: usize,
        args: &[String],
        cwd: &str,
        env: &[(String, String)],
    ) -> Result<(), ImageError> {
        make_dirs_in(&self.root, cwd)?;
        let mut cmd = Command::new(bwrap);
        cmd.env_clear();
        // Root inside a user namespace of its own, with no capabilities, even when the host runs
        // as root: a package's install code can write the tree (its owner's files) but cannot
        // make devices, mount, or do anything else that needs host privileges.
        cmd.args([
            "--unshare-user",
            "--uid",
            "0",
            "--gid",
            "0",
            "--cap-drop",
            "ALL",
        ]);
        cmd.args([
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
        ])
        .arg("--bind")
        .arg(&self.root)
        .arg("/")
        .args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]);
        if Path::new("/etc/resolv.conf").exists() {
            cmd.args(["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]);
        }
        cmd.args(["--clearenv", "--setenv", "PATH", DEFAULT_PATH])
            .args(["--setenv", "HOME", "/root", "--setenv", "LANG", "C.UTF-8"]);
        // A proxy that re-signs TLS is trusted by the host's bundle, not the image's.
        if let Some(bundle) = host_ca_bundle() {
            cmd.arg("--ro-bind").arg(bundle).arg(BUILD_CA);
            cmd.args(["--setenv", "PIP_CERT", BUILD_CA]);
        }
        for var in PROXY_VARS {
            if let Some(v) = std::env::var_os(var) {
                cmd.args(["--setenv", var]).arg(v);
            }
        }
        for (k, v) in env {
            cmd.arg("--setenv").arg(k).arg(v);
        }
        cmd.args(["--chdir", cwd, "--", "python3", "-m", "pip", "install"])
            .args([
                "--break-system-packages",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-input",
                "--root-user-action=ignore",
                "--progress-bar=off",
            ])
            .args(args);
        let step = if line > 0 {
            format!(
                "{}:{line}: pip install {}",
                self.spec.origin,
                args.join(" ")
            )
        } else {
            format!("pip install {}", args.join(" "))
        };
        self.logged(cmd, &step)
    }

    /// Runs a step with its output appended to the log; a failure comes with the log's end,
    /// and is called a network failure when its output says so.
    fn logged(&self, mut cmd: Command, step: &str) -> Result<(), ImageError> {
        let mut log = self.log;
        let _ = writeln!(log, "== {step}\n$ {}", shown(&cmd));
        let start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let out = self.log.try_clone().map_err(io("the build log".into()))?;
        let err = self.log.try_clone().map_err(io("the build log".into()))?;
        // What the steps make is read by the sandbox's user: not the caller's umask's to decide.
        // SAFETY: umask is async-signal-safe and has no preconditions.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0o022);
                Ok(())
            });
        }
        let started = Instant::now();
        let status = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .status()
            .map_err(io(format!("starting {step}")))?;
        let _ = writeln!(
            log,
            "== {step}: {status} after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if status.success() {
            return Ok(());
        }
        let text = std::fs::read(self.log_path).unwrap_or_default();
        let text = String::from_utf8_lossy(text.get(start as usize..).unwrap_or_default());
        let tail = tail(&text, 25);
        let log = self.log_path.to_path_buf();
        match network_trouble(&text) {
            Some(said) => Err(ImageError::Network {
                key: self.key.to_string(),
                step: step.to_string(),
                said,
                log,
                tail,
            }),
            None => Err(ImageError::Build {
                key: self.key.to_string(),
                step: format!("{step} ({status})"),
                log,
                tail,
            }),
        }
    }

    fn invalid(&self, why: String) -> ImageError {
        ImageError::Invalid(format!("{}: {why}", self.spec.origin))
    }
}

/// Proxy settings passed on to pip (their values may hold credentials: kept out of the log).
const PROXY_VARS: [&str; 6] = [
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
];

/// A command as the log shows it: the program and its arguments, proxy values hidden.
fn shown(cmd: &Command) -> String {
    let mut out = cmd.get_program().to_string_lossy().into_owned();
    let mut hide = false;
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        out.push(' ');
        out.push_str(if hide { "<hidden>" } else { a.as_ref() });
        hide = PROXY_VARS.contains(&a.as_ref());
    }
    out
}

/// The host's CA bundle, as the host's own tools are told of it (pip's and OpenSSL's
/// variables, then Debian's place).
fn host_ca_bundle() -> Option<PathBuf> {
    ["PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .chain([PathBuf::from("/etc/ssl/certs/ca-certificates.crt")])
        .find(|p| p.is_file())
}

/// The first line of a build's output that says the network could not be reached.
pub(crate) fn network_trouble(output: &str) -> Option<String> {
    const SIGNS: [&str; 12] = [
        "Temporary failure resolving",
        "Temporary failure in name resolution",
        "Could not resolve",
        "Name or service not known",
        "Network is unreachable",
        "Failed to establish a new connection",
        "NameResolutionError",
        "Connection timed out",
        "ConnectTimeoutError",
        "Connection refused",
        "CERTIFICATE_VERIFY_FAILED",
        "Failed to fetch",
    ];
    output
        .lines()
        .find(|l| SIGNS.iter().any(|s| l.contains(s)))
        .map(|l| {
            let l = l.trim();
            if l.contains("CERTIFICATE_VERIFY_FAILED") {
                format!(
                    "{l} (a proxy that re-signs TLS? pip trusts the host's bundle from PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE, else /etc/ssl/certs/ca-certificates.crt)"
                )
            } else {
                l.to_string()
            }
        })
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The built image in `dir`, when `dir` holds one (its `image.json` is written last).
fn read_built(dir: &Path) -> Result<Option<Built>, ImageError> {
    let path = dir.join("image.json");
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(format!("reading {}", path.display()))(e)),
    };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| {
        ImageError::Invalid(format!(
            "{}: {e}; delete {} to build the image again",
            path.display(),
            dir.display()
        ))
    })?;
    if record.format != RECORD_FORMAT {
        return Err(ImageError::Invalid(format!(
            "{}: format {} where {RECORD_FORMAT} is read; delete {} to build the image again",
            path.display(),
            record.format,
            dir.display()
        )));
    }
    Ok(Some(Built {
        key: record.key,
        dir: dir.to_path_buf(),
        root: dir.join("root"),
        env: record.env,
        workdir: record.workdir.map(PathBuf::from),
        notes: record.notes,
    }))
}

/// An exclusive `flock` on a file, released when dropped or when the process ends however it
/// ends.
struct Lock {
    _file: File,
}

impl Lock {
    fn exclusive(path: &Path, key: &str) -> Result<Lock, ImageError> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io(format!("opening {}", path.display())))?;
        let fd = file.as_raw_fd();
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Lock { _file: file });
        }
        eprintln!("images: waiting for another build of image {key}");
        loop {
            // SAFETY: as above.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                return Ok(Lock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io(format!("locking {}", path.display()))(e));
            }
        }
    }
}

/// `inside` (absolute) as a host path under `root`, every link on the way resolved as the
/// image sees it (an absolute target is relative to `root`), as chroot would: a write through
/// a link of the image never reaches the host.
pub(crate) fn resolve_in_root(root: &Path, inside: &str) -> Result<PathBuf, String> {
    let mut done: Vec<String> = Vec::new();
    let mut todo: std::collections::VecDeque<String> = inside
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let host = done
            .iter()
            .fold(root.to_path_buf(), |p, d| p.join(d))
            .join(&c);
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return Err(format!("{inside}: too many links in the image"));
                }
                let target =
                    std::fs::read_link(&host).map_err(|e| format!("{}: {e}", host.display()))?;
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    done.clear();
                }
                let mut next: std::collections::VecDeque<String> = target
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect();
                next.extend(todo.drain(..));
                todo = next;
            }
            _ => done.push(c),
        }
    }
    Ok(done.iter().fold(root.to_path_buf(), |p, d| p.join(d)))
}

/// Copies the host file, folder or link `from` to `to` in the image (its contents, for a
/// folder). Modes are normalised so the sandbox's user may read everything.
fn copy_into(root: &Path, from: &Path, to: &str) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(from).map_err(|e| format!("{}: {e}", from.display()))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(|e| format!("{}: {e}", from.display()))?;
        let (parent, name) = to.rsplit_once('/').unwrap_or(("", to));
        let dir = make_dirs_in(root, if parent.is_empty() { "/" } else { parent })
            .map_err(|e| e.to_string())?;
        let host = dir.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&host) {
            if m.is_dir() {
                return Err(format!(
                    "{to} is a folder in the image; a link cannot replace it"
                ));
            }
            std::fs::remove_file(&host).map_err(|e| format!("{}: {e}", host.display()))?;
        }
        std::os::unix::fs::symlink(&target, &host)
            .map_err(|e| format!("{}: {e}", host.display()))?;
    } else if meta.is_dir() {
        make_dirs_in(root, to).map_err(|e| e.to_string())?;
        let mut names: Vec<_> = std::fs::read_dir(from)
            .map_err(|e| format!("{}: {e}", from.display()))?
            .filter_map(|e| e.ok().map(|e| e.file_name()))
            .collect();
        names.sort();
        for name in names {
            let child = format!("{}/{}", to.trim_end_matches('/'), name.to_string_lossy());
            copy_into(root, &from.join(&name), &child)?;
        }
    } else if meta.is_file() {
        let mut host = resolve_in_root(root, to)?;
        if host.is_dir() {
            // Onto a folder that is there: into it, as Docker does.
            host.push(from.file_name().unwrap_or_default());
        }
        if let Some(parent) = host.parent() {
            let inside = parent
                .strip_prefix(root)
                .map_err(|_| format!("{to}: outside the image"))?;
            make_dirs_in(root, &format!("/{}", inside.display())).map_err(|e| e.to_string())?;
        }
        if std::fs::symlink_metadata(&host).is_ok_and(|m| m.file_type().is_symlink()) {
            std::fs::remove_file(&host).map_err(|e| format!("{}: {e}", host.display()))?;
        }
        std::fs::copy(from, &host)
            .map_err(|e| format!("{} to {}: {e}", from.display(), host.display()))?;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", host.display()))?;
    } else {
        return Err(format!(
            "{}: only files, folders and links are copied",
            from.display()
        ));
    }
    Ok(())
}

/// Makes the folder `inside` (absolute) of the image and any parents missing, each 0755
/// whatever the umask; its host path.
fn make_dirs_in(root: &Path, inside: &str) -> Result<PathBuf, ImageError> {
    let host = resolve_in_root(root, inside).map_err(ImageError::Invalid)?;
    let rel = host
        .strip_prefix(root)
        .map_err(|_| ImageError::Invalid(format!("{inside}: outside the image")))?
        .to_path_buf();
    let mut p = root.to_path_buf();
    for c in rel.components() {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ImageError::Invalid(format!(
                    "{inside}: {} is a file in the image, not a folder",
                    p.display()
                )))
            }
            Err(_) => {
                std::fs::create_dir(&p).map_err(io(format!("making {}", p.display())))?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                    .map_err(io(format!("making {}", p.display())))?;
            }
        }
    }
    Ok(host)
}

/// Makes a host folder and its missing parents, each 0755 (the sandbox's uids pass through).
fn make_dirs_open(dir: &Path) -> Result<(), ImageError> {
    let mut missing = Vec::new();
    let mut p = dir;
    while std::fs::symlink_metadata(p).is_err() {
        missing.push(p);
        match p.parent() {
            Some(parent) => p = parent,
            None => break,
        }
    }
    for d in missing.into_iter().rev() {
        std::fs::create_dir(d).map_err(io(format!("making {}", d.display())))?;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
            .map_err(io(format!("making {}", d.display())))?;
    }
    Ok(())
}

/// As root, the sandbox runs as other uids: each folder above the cache must let them pass.
fn check_passable(dir: &Path) -> Result<(), ImageError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let dir = std::fs::canonicalize(dir).map_err(io(format!("{}", dir.display())))?;
    for d in dir.ancestors() {
        let mode = std::fs::metadata(d)
            .map_err(io(format!("{}", d.display())))?
            .permissions()
            .mode();
        if mode & 0o001 == 0 {
            return Err(ImageError::Invalid(format!(
                "the image cache {} lies under {}, which other users cannot enter, and the sandbox runs as uids of its own: put the cache elsewhere (root's default is /var/cache/openclaw-host/images)",
                dir.display(),
                d.display()
            )));
        }
    }
    Ok(())
}

/// Removes a folder this process owns, also where some of its folders are read-only.
fn remove_tree(dir: &Path) -> Result<(), ImageError> {
    if std::fs::remove_dir_all(dir).is_ok() || std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755));
        if let Ok(entries) = std::fs::read_dir(&d) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    std::fs::remove_dir_all(dir).map_err(io(format!("removing {}", dir.display())))
}

/// Bytes of the files under `dir` (links not followed).
fn tree_bytes(dir: &Path) -> u64 {
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

/// `name` as given when it has a slash, else the first executable of that name in `PATH`.
fn find_binary(name: &Path) -> Option<PathBuf> {
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

/// An I/O error with what was being done.
fn io(what: String) -> impl FnOnce(std::io::Error) -> ImageError {
    move |source| ImageError::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_the_image_resolve_inside_it() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("usr/bin")).unwrap();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::os::unix::fs::symlink("usr/bin", r.join("bin")).unwrap();
        // An absolute link means the image's /etc, never the host's.
        std::os::unix::fs::symlink("/etc", r.join("conf")).unwrap();
        std::os::unix::fs::symlink("../../..", r.join("usr/bin/up")).unwrap();
        assert_eq!(resolve_in_root(r, "/bin/x").unwrap(), r.join("usr/bin/x"));
        assert_eq!(
            resolve_in_root(r, "/conf/passwd").unwrap(),
            r.join("etc/passwd")
        );
        assert_eq!(resolve_in_root(r, "/bin/up/etc").unwrap(), r.join("etc"));
        assert_eq!(resolve_in_root(r, "/../../etc").unwrap(), r.join("etc"));
        std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
        assert!(resolve_in_root(r, "/loop/x")
            .unwrap_err()
            .contains("too many links"));
    }

    #[test]
    fn a_copy_through_an_absolute_link_stays_in_the_image() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let host = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(host.path(), r.join("out")).unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("f"), "x").unwrap();
        copy_into(r, &src.path().join("f"), "/out/f").unwrap();
        assert!(!host.path().join("f").exists(), "wrote through to the host");
        let landed = resolve_in_root(r, "/out/f").unwrap();
        assert!(landed.starts_with(r) && landed.is_file(), "{landed:?}");
    }

    #[test]
    fn copies_are_readable_by_all_and_keep_only_the_executable_bit() {
        let root = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        let s = src.path();
        std::fs::create_dir(s.join("d")).unwrap();
        std::fs::write(s.join("d/run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(s.join("d/secret"), "x").unwrap();
        std::fs::set_permissions(s.join("d/run.sh"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(s.join("d/secret"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::os::unix::fs::symlink("run.sh", s.join("d/link")).unwrap();
        copy_into(root.path(), &s.join("d"), "/app").unwrap();
        let mode = |p: &str| {
            std::fs::symlink_metadata(root.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("app"), 0o755);
        assert_eq!(mode("app/run.sh"), 0o755);
        assert_eq!(mode("app/secret"), 0o644);
        assert_eq!(
            std::fs::read_link(root.path().join("app/link")).unwrap(),
            Path::new("run.sh")
        );
    }

    #[test]
    fn the_log_shows_commands_without_proxy_credentials() {
        let mut cmd = Command::new("bwrap");
        cmd.args(["--setenv", "https_proxy", "http://user:secret@proxy:3128"])
            .args(["--setenv", "PIP_CERT", "/tmp/ca.pem"]);
        assert_eq!(
            shown(&cmd),
            "bwrap --setenv https_proxy <hidden> --setenv PIP_CERT /tmp/ca.pem"
        );
    }

    #[test]
    fn network_failures_are_told_from_other_failures() {
        for line in [
            "E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'",
            "WARNING: Retrying ... NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')",
            "certificate verify failed: self-signed certificate in certificate chain CERTIFICATE_VERIFY_FAILED",
        ] {
            let said = network_trouble(&format!("I: starting\n{line}\nE: failed\n")).expect(line);
            assert!(said.starts_with(line.trim()), "{said}");
        }
        assert!(network_trouble("E: Unable to locate package no-such-package\n").is_none());
        assert!(network_trouble("ERROR: No matching distribution found for nosuchpkg\n").is_none());
    }

    #[test]
    fn a_built_images_folder_is_found_only_without_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("app/src")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etclink")).unwrap();
        let built = Built {
            key: "k".into(),
            dir: dir.path().to_path_buf(),
            root: root.clone(),
            env: Vec::new(),
            workdir: Some(PathBuf::from("/app")),
            notes: Vec::new(),
        };
        assert_eq!(built.folder(Path::new("/app")), Some(root.join("app")));
        assert_eq!(built.folder(Path::new("/etclink")), None);
        assert_eq!(built.folder(Path::new("/nothing")), None);
        assert_eq!(built.folder(Path::new("app")), None);
    }
}

//! Escape attempts against the real sandbox (bubblewrap from Debian's `bubblewrap`, which
//! `.ci/run` installs): each must fail, and the host must be unharmed.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use openclaw_sandbox::{Limits, MemoryBound, Run, Sandbox, SandboxConfig};

fn sandbox(limits: Limits) -> Sandbox {
    Sandbox::new(SandboxConfig {
        limits,
        ..SandboxConfig::default()
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

fn short() -> Limits {
    Limits {
        wall: Duration::from_secs(20),
        ..Limits::default()
    }
}

/// Host processes whose command line contains `marker`.
fn host_processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let mut cmdline = Vec::new();
        if std::fs::File::open(entry.path().join("cmdline"))
            .and_then(|mut f| f.read_to_end(&mut cmdline))
            .is_err()
        {
            continue;
        }
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) && !text.contains("cargo") {
            found.push(text);
        }
    }
    found
}

#[test]
fn the_work_directory_is_the_only_place_written_and_it_reaches_the_host() {
    let sb = sandbox(short());
    let w = sb.workdir().unwrap();
    let out = w
        .run(&Run::shell(
            "echo hello > /work/out.txt && python3 -c 'print(6 * 7)' && id -un && pwd",
        ))
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout_text(), "42\nsandbox\n/work\n");
    assert_eq!(
        std::fs::read_to_string(w.path().join("out.txt")).unwrap(),
        "hello\n"
    );
    for target in [
        "/usr/evil",
        "/etc/evil",
        "/evil",
        "/proc/sys/kernel/hostname",
    ] {
        let out = w.run(&Run::shell(&format!("echo x > {target}"))).unwrap();
        assert_ne!(out.exit_code, Some(0), "wrote {target}: {out:?}");
    }
    assert!(!Path::new("/usr/evil").exists() && !Path::new("/evil").exists());
}

#[test]
fn host_files_outside_the_binds_cannot_be_read() {
    let sb = sandbox(short());
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "hunter2").unwrap();
    let w = sb.workdir().unwrap();
    // A link the sandbox finds in its own directory, pointing at the host file.
    std::os::unix::fs::symlink(&secret, w.path().join("link")).unwrap();
    let other = sb.workdir().unwrap();
    std::fs::write(other.path().join("theirs.txt"), "another episode").unwrap();
    let here = std::env::current_dir().unwrap();
    for path in [
        secret.display().to_string(),
        "/work/link".into(),
        "/etc/shadow".into(),
        "/root/.bashrc".into(),
        here.join("Cargo.toml").display().to_string(),
        other.path().join("theirs.txt").display().to_string(),
    ] {
        let out = w.run(&Run::new(["cat", &path])).unwrap();
        assert_ne!(out.exit_code, Some(0), "read {path}: {out:?}");
        assert!(!out.stdout_text().contains("hunter2"));
    }
    let out = w.run(&Run::shell("ls / /etc")).unwrap();
    assert!(!out.stdout_text().contains("home"), "{}", out.stdout_text());
    assert!(
        !out.stdout_text().contains("shadow"),
        "{}",
        out.stdout_text()
    );
}

#[test]
fn the_network_is_unreachable_even_on_the_hosts_loopback() {
    let sb = sandbox(short());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let w = sb.workdir().unwrap();
    let script = format!(
        "import socket\n\
         for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n\
         \x20   try:\n\
         \x20       socket.create_connection((host, port), timeout=3)\n\
         \x20       print('CONNECTED', host)\n\
         \x20   except OSError as e:\n\
         \x20       print('refused', host, e.errno)\n\
         try:\n\
         \x20   socket.getaddrinfo('example.com', 80)\n\
         \x20   print('RESOLVED')\n\
         except OSError:\n\
         \x20   print('no dns')\n"
    );
    let out = w.run(&Run::new(["python3", "-c", &script])).unwrap();
    assert!(out.success(), "{out:?}");
    let said = out.stdout_text();
    assert!(
        !said.contains("CONNECTED") && !said.contains("RESOLVED"),
        "{said}"
    );
    assert_eq!(said.matches("refused").count(), 2, "{said}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's port"
    );
}

#[test]
fn the_hosts_environment_does_not_reach_the_sandbox() {
    let sb = sandbox(short());
    let w = sb.workdir().unwrap();
    // The test runs under cargo, whose variables (CARGO_*) are in this process's environment.
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    let out = w
        .run(&Run::shell("env; cat /proc/*/environ | tr '\\0' '\\n'").env("TASK", "t1"))
        .unwrap();
    let said = out.stdout_text();
    assert!(!said.contains("CARGO"), "{said}");
    let names: std::collections::BTreeSet<&str> = said
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        assert!(
            ["PATH", "HOME", "LANG", "TMPDIR", "TASK", "PWD", "SHLVL", "_", "OLDPWD"]
                .contains(name),
            "{name} leaked in: {said}"
        );
    }
}

#[test]
fn a_fork_bomb_is_contained_and_leaves_nothing() {
    let sb = sandbox(Limits {
        wall: Duration::from_secs(4),
        processes: 32,
        ..Limits::default()
    });
    let w = sb.workdir().unwrap();
    let started = Instant::now();
    let out = w
        .run(&Run::new([
            "bash",
            "-c",
            "bomb() { bomb | bomb & }; bomb; sleep 424242",
        ]))
        .unwrap();
    assert!(out.timed_out, "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert!(host_processes_with("424242").is_empty());
    if let Some(uid) = w.uid() {
        // The sandbox's init may linger a moment as a zombie, until the host's init reaps it.
        let deadline = Instant::now() + Duration::from_secs(3);
        while tasks_of(uid) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(tasks_of(uid), 0, "processes of uid {uid} remain");
    }
    // The host still starts processes.
    assert!(std::process::Command::new("true")
        .status()
        .unwrap()
        .success());
}

/// Live (not zombie) processes of `uid` on the host.
fn tasks_of(uid: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                let field = |name: &str| {
                    s.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .and_then(|v| v.split_whitespace().next())
                        .map(str::to_string)
                };
                field("Uid:") == Some(uid.to_string()) && field("State:").as_deref() != Some("Z")
            })
        })
        .count()
}

#[test]
fn a_memory_hog_gets_a_memory_error_and_ordinary_use_fits() {
    let sb = sandbox(Limits {
        memory_bytes: 512 << 20,
        ..short()
    });
    let w = sb.workdir().unwrap();
    let out = w
        .run(&Run::new(["python3", "-c", "a = bytearray(4 << 30)"]))
        .unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stderr_text().contains("MemoryError"), "{out:?}");
    let out = w
        .run(&Run::new([
            "python3",
            "-c",
            "a = bytearray(100 << 20); print(len(a) >> 20)",
        ]))
        .unwrap();
    assert_eq!(out.stdout_text(), "100\n", "{out:?}");
}

#[test]
fn cpu_time_file_size_and_the_wall_clock_are_limited() {
    let sb = sandbox(Limits {
        cpu_seconds: 1,
        file_size_bytes: 1 << 20,
        wall: Duration::from_secs(20),
        ..Limits::default()
    });
    let w = sb.workdir().unwrap();
    let started = Instant::now();
    let out = w
        .run(&Run::new(["python3", "-c", "while True: pass"]))
        .unwrap();
    assert!(!out.timed_out && out.exit_code != Some(0), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let out = w
        .run(&Run::shell("head -c 5000000 /dev/zero > /work/big"))
        .unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(std::fs::metadata(w.path().join("big")).unwrap().len() <= 1 << 20);
    let started = Instant::now();
    let out = w
        .run(&Run::new(["sleep", "30"]).wall(Duration::from_millis(500)))
        .unwrap();
    assert!(out.timed_out && out.exit_code.is_none(), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn nothing_outlives_its_command() {
    let sb = sandbox(short());
    let w = sb.workdir().unwrap();
    let out = w
        .run(&Run::shell(
            "setsid sleep 535353 & nohup sleep 535354 >/dev/null 2>&1 & \
             (sleep 535355 &) ; echo started",
        ))
        .unwrap();
    assert_eq!(out.stdout_text(), "started\n", "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        host_processes_with("53535").is_empty(),
        "{:?}",
        host_processes_with("53535")
    );
}

#[test]
fn output_is_capped_and_stdin_is_fed() {
    let sb = sandbox(Limits {
        output_bytes: 1000,
        ..short()
    });
    let w = sb.workdir().unwrap();
    let out = w.run(&Run::new(["cat"]).stdin("from the host")).unwrap();
    assert_eq!(out.stdout_text(), "from the host");
    let out = w.run(&Run::shell("head -c 100000 /dev/zero")).unwrap();
    assert!(out.success() && out.truncated && out.stdout.len() == 1000);
}

#[test]
fn the_work_directory_cannot_grow_past_its_limit() {
    let sb = sandbox(Limits {
        work_bytes: 8 << 20,
        ..short()
    });
    let w = sb.workdir().unwrap();
    let fill =
        Run::shell("head -c 5000000 /dev/zero > /work/a; head -c 5000000 /dev/zero > /work/b");
    match w.run(&fill) {
        // Under root the directory is a tmpfs of that size: the second file does not fit.
        Ok(out) => {
            assert_ne!(out.exit_code, Some(0), "{out:?}");
            let total: u64 = ["a", "b"]
                .iter()
                .filter_map(|f| std::fs::metadata(w.path().join(f)).ok())
                .map(|m| m.len())
                .sum();
            assert!(total <= 8 << 20, "{total}");
        }
        // Otherwise the size is checked after the command, which then fails, as do later ones.
        Err(e) => {
            assert!(e.to_string().contains("past its limit of 8 MiB"), "{e}");
            assert!(w.run(&Run::new(["true"])).is_err());
        }
    }
}

#[test]
fn a_background_command_is_fed_and_read_while_it_runs_and_dies_with_its_handle() {
    use openclaw_sandbox::Status;
    let sb = sandbox(short());
    let w = sb.workdir().unwrap();
    let mut bg = w
        .start(&Run::shell(
            "echo ready; while read line; do echo \"got $line\"; done; echo bye",
        ))
        .unwrap();
    let until = |bg: &openclaw_sandbox::Background, want: &str| {
        let mut seen = String::new();
        let end = Instant::now() + Duration::from_secs(10);
        while !seen.contains(want) && Instant::now() < end {
            seen.push_str(&String::from_utf8_lossy(&bg.take_output().0));
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    };
    assert_eq!(until(&bg, "ready"), "ready\n");
    assert_eq!(bg.status(), Status::Running);
    bg.write(b"one\n").unwrap();
    assert_eq!(until(&bg, "got one"), "got one\n");
    bg.close_stdin();
    assert_eq!(bg.wait(Duration::from_secs(10)), Status::Exited(Some(0)));
    assert_eq!(until(&bg, "bye"), "bye\n");

    // Started by a thread that ends at once (as an environment call's thread does): it runs on.
    let w2 = std::sync::Arc::new(sb.workdir().unwrap());
    let handle = {
        let w2 = w2.clone();
        std::thread::spawn(move || w2.start(&Run::shell("sleep 5")).unwrap())
            .join()
            .unwrap()
    };
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(handle.status(), Status::Running);
    drop(handle);

    // One that would run on: killed when its handle goes, with everything it started.
    let bg = w
        .start(&Run::shell("sleep 636361 & sleep 636362; echo never"))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!host_processes_with("63636").is_empty());
    drop(bg);
    let end = Instant::now() + Duration::from_secs(5);
    while !host_processes_with("63636").is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        host_processes_with("63636").is_empty(),
        "{:?}",
        host_processes_with("63636")
    );

    // And at its wall clock.
    let bg = w
        .start(&Run::shell("sleep 100").wall(Duration::from_millis(500)))
        .unwrap();
    assert_eq!(bg.wait(Duration::from_secs(10)), Status::Killed);
}

#[test]
fn a_run_can_see_a_read_only_directory_it_cannot_change_and_the_work_mount_can_move() {
    let sb = Sandbox::new(SandboxConfig {
        limits: short(),
        work_mount: "/app".into(),
        ..SandboxConfig::default()
    })
    .unwrap();
    let w = sb.workdir().unwrap();
    let shown = tempfile::tempdir().unwrap();
    std::fs::write(shown.path().join("t.txt"), "test suite\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(shown.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(
            shown.path().join("t.txt"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    let out = w
        .run(
            &Run::shell("pwd; echo $HOME; cat /tests/t.txt; echo x > /tests/t.txt || echo refused")
                .ro_bind(shown.path(), "/tests"),
        )
        .unwrap();
    assert_eq!(
        out.stdout_text(),
        "/app\n/app\ntest suite\nrefused\n",
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(shown.path().join("t.txt")).unwrap(),
        "test suite\n"
    );
    // Not there for the next command.
    let out = w.run(&Run::shell("ls /tests")).unwrap();
    assert!(!out.success(), "{out:?}");
}

#[test]
fn kernel_interfaces_untrusted_code_never_needs_are_refused() {
    let sb = sandbox(short());
    let w = sb.workdir().unwrap();
    // Each call's result and errno through libc's syscall(): refused ones give -1 with EPERM
    // (1). Unfiltered, ptrace(TRACEME) succeeds, io_uring_setup with no parameters gives
    // EFAULT (14) and keyctl(GET_KEYRING_ID) a keyring or ENOKEY, so EPERM is the filter's.
    let script = r#"
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == "x86_64"
calls = {
    "io_uring_setup": (425, 1, 0),
    "keyctl": (250 if x86 else 219, 0, -3, 0),
    "ptrace": (101 if x86 else 117, 0, 0, 0, 0),
    "bpf": (321 if x86 else 280, 0, 0, 0),
    "unshare": (272 if x86 else 97, 0x10000000),
    "mount": (165 if x86 else 40, 0, 0, 0, 0, 0),
    "userfaultfd": (323 if x86 else 282, 0),
}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, r, ctypes.get_errno())
if x86:
    # x32's getpid: its architecture is x86_64's, its number 39 + 0x40000000.
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(0x40000000 + 39))
    print("x32_getpid", r, ctypes.get_errno())
ctypes.set_errno(0)
print("getpid", libc.syscall(39 if x86 else 172), ctypes.get_errno())
"#;
    let out = w.run(&Run::new(["python3", "-c", script])).unwrap();
    assert!(out.success(), "{out:?}");
    let text = out.stdout_text();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if parts[0] == "getpid" {
            assert!(parts[1] != "-1", "an ordinary call was refused: {text}");
        } else {
            assert_eq!((parts[1], parts[2]), ("-1", "1"), "{}: {text}", parts[0]);
        }
    }
    let expected = if cfg!(target_arch = "x86_64") { 9 } else { 8 };
    assert_eq!(text.lines().count(), expected, "{text}");
}

/// Free memory of the host, bytes (`MemAvailable`).
fn host_available() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

#[test]
fn many_processes_together_stay_within_the_sandboxs_memory() {
    // Eight processes of 200 MB each, every one within its own 512 MB, 1.6 GB together
    // against a total of 384 MB.
    let limits = Limits {
        memory_bytes: 512 << 20,
        memory_total_bytes: 384 << 20,
        processes: 64,
        ..short()
    };
    let hog = "for i in $(seq 8); do python3 -c 'import time; b = bytearray(200 << 20); \
        b[::4096] = b\"x\" * len(b[::4096]); time.sleep(3)' & done; wait; echo done";
    let sb = match Sandbox::new(SandboxConfig {
        limits: limits.clone(),
        ..SandboxConfig::default()
    }) {
        Ok(sb) => sb,
        Err(e) => panic!("{e}"),
    };
    let (bound, _) = sb.memory_bound();
    if bound == MemoryBound::CgroupWhereAvailable {
        let before = host_available();
        let out = sb.workdir().unwrap().run(&Run::shell(hog)).unwrap();
        let after = host_available();
        assert!(out.memory_exceeded, "{out:?}");
        eprintln!(
            "a memory cgroup bounded the eight: the host's available memory went from {} to {} MB",
            before >> 20,
            after >> 20
        );
    } else {
        eprintln!("no memory cgroup here: only the process count bounds the total");
    }
    // Without a cgroup the total is bounded by the process count: processes x memory per
    // process within the total, and a total too small for a shell pipeline is refused.
    let counted = Sandbox::new(SandboxConfig {
        limits: Limits {
            memory_total_bytes: 2 << 30,
            memory_bytes: 128 << 20,
            ..limits.clone()
        },
        memory_bound: MemoryBound::ProcessCount,
        ..SandboxConfig::default()
    })
    .unwrap();
    assert_eq!(counted.memory_bound(), (MemoryBound::ProcessCount, 16));
    let w = counted.workdir().unwrap();
    let out = w
        .run(&Run::shell(
            "for i in 1 2 3 4; do sleep 1 & done; jobs -p > /tmp/j; wc -l < /tmp/j",
        ))
        .unwrap();
    assert_eq!(out.stdout_text().trim(), "4", "{out:?}");
    let out = w
        .run(&Run::shell(
            "for i in $(seq 30); do sleep 1 & done; jobs -p > /tmp/j; wc -l < /tmp/j",
        ))
        .unwrap();
    assert!(
        !out.success() && out.stderr_text().contains("fork"),
        "thirty processes ran: {out:?}"
    );
    let e = Sandbox::new(SandboxConfig {
        limits,
        memory_bound: MemoryBound::ProcessCount,
        ..SandboxConfig::default()
    })
    .err()
    .expect("a total below sixteen processes was accepted");
    assert!(e.to_string().contains("raise the total"), "{e}");
}

//! Building images: the cache, its lock and its errors with a stand-in for mmdebstrap (no
//! network), then, in `slow`, a real image from a Dockerfile, run in the real sandbox.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use openclaw_env_images::{ImageCache, ImageError, ImageSpec};

/// A stand-in for mmdebstrap in `dir`: after a pause, a tree with `/usr/bin` and `/etc` (a
/// folder, or a tarball when the target ends in `.tar`), each start counted in `dir/starts`;
/// with `fail`, the network error apt prints instead.
fn fake_mmdebstrap(dir: &Path, fail: bool) -> PathBuf {
    let starts = dir.join("starts");
    let body = if fail {
        "echo \"E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'\" >&2\nexit 1\n".to_string()
    } else {
        r#"sleep 1
tree=$(mktemp -d)
mkdir -p "$tree/usr/bin" "$tree/etc"
echo fake > "$tree/etc/debian_version"
case "$target" in
*.tar) tar -cf "$target" -C "$tree" . ;;
*) mkdir -p "$target" && cp -a "$tree/." "$target/" ;;
esac
rm -rf "$tree"
"#
        .to_string()
    };
    let script = format!(
        "#!/bin/sh\nset -e\nfor a in \"$@\"; do target=$a; done\necho \"$*\" >> '{}'\n{body}",
        starts.display()
    );
    let path = dir.join("mmdebstrap");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A Dockerfile's folder with `hello.py`, and the spec of `text` read from it.
fn spec_in(text: &str) -> (tempfile::TempDir, ImageSpec) {
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(ctx.path().join("hello.py"), "GREETING = 'hi'\n").unwrap();
    std::fs::write(ctx.path().join("Dockerfile"), text).unwrap();
    let spec = ImageSpec::from_dockerfile(&ctx.path().join("Dockerfile")).unwrap();
    (ctx, spec)
}

/// A cache folder every uid may pass through (as root the sandbox runs as others).
fn cache_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn two_builders_of_one_image_build_it_once_and_a_killed_builds_leftovers_are_cleared() {
    let tools = tempfile::tempdir().unwrap();
    let cache_root = cache_dir();
    let cache = ImageCache::new(cache_root.path().join("images"))
        .with_tools(fake_mmdebstrap(tools.path(), false), "bwrap");
    let (_ctx, spec) = spec_in(
        "FROM debian:bookworm\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\nCOPY hello.py .\nENV GREETING=hi\nCMD [\"python3\"]\n",
    );
    let key = cache.key(&spec).unwrap();
    assert!(cache.cached(&spec).unwrap().is_none());
    // What a build killed halfway leaves.
    let partial = cache.dir().join(format!(".{key}.partial"));
    std::fs::create_dir_all(partial.join("root/usr")).unwrap();
    std::fs::write(partial.join("root/usr/half"), "x").unwrap();

    let built: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| cache.build(&spec))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(built[0], built[1]);
    let starts = std::fs::read_to_string(tools.path().join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 1, "built more than once: {starts}");
    assert!(
        starts.contains("--variant=apt") && starts.contains("--include=jq"),
        "{starts}"
    );
    assert!(starts.contains("-- bookworm "), "{starts}");

    let b = &built[0];
    assert_eq!(b.key, key);
    assert_eq!(b.root, cache.dir().join(&key).join("root"));
    assert!(!partial.exists(), "the partial folder is left");
    assert!(
        !b.root.join("usr/half").exists(),
        "a killed build's file was kept"
    );
    assert_eq!(b.env, [("GREETING".to_string(), "hi".to_string())]);
    assert_eq!(b.workdir.as_deref(), Some(Path::new("/app")));
    assert!(
        b.notes.iter().any(|n| n.contains("CMD is ignored")),
        "{:?}",
        b.notes
    );
    let copied = b.root.join("app/hello.py");
    assert_eq!(
        std::fs::read_to_string(&copied).unwrap(),
        "GREETING = 'hi'\n"
    );
    assert_eq!(
        std::fs::metadata(&copied).unwrap().permissions().mode() & 0o777,
        0o644
    );
    assert_eq!(b.folder(Path::new("/app")), Some(b.root.join("app")));
    assert!(b.dir.join("build.log").is_file());
    assert!(b.dir.join("image.json").is_file());
    // Found from then on without building.
    assert_eq!(cache.cached(&spec).unwrap().as_ref(), Some(b));
    assert_eq!(&cache.build(&spec).unwrap(), b);
    let starts = std::fs::read_to_string(tools.path().join("starts")).unwrap();
    assert_eq!(starts.lines().count(), 1);
}

#[test]
fn a_build_without_the_network_says_so_keeps_its_log_and_leaves_no_image() {
    let tools = tempfile::tempdir().unwrap();
    let cache_root = cache_dir();
    let cache =
        ImageCache::new(cache_root.path()).with_tools(fake_mmdebstrap(tools.path(), true), "bwrap");
    let (_ctx, spec) =
        spec_in("FROM debian:bookworm-slim\nRUN apt-get install -y --no-install-recommends git\n");
    let key = cache.key(&spec).unwrap();
    let err = cache.build(&spec).unwrap_err();
    let said = err.to_string();
    assert!(matches!(err, ImageError::Network { .. }), "{said}");
    assert!(said.contains("needs the network"), "{said}");
    assert!(
        said.contains("Temporary failure resolving 'deb.debian.org'"),
        "{said}"
    );
    let log = cache.dir().join(format!("{key}.log"));
    assert!(said.contains(&log.display().to_string()), "{said}");
    assert!(log.is_file());
    assert!(!cache.dir().join(&key).exists());
    assert!(!cache.dir().join(format!(".{key}.partial")).exists());
}

#[test]
fn a_missing_mmdebstrap_is_refused_with_how_to_install_it() {
    let cache_root = cache_dir();
    let cache = ImageCache::new(cache_root.path()).with_tools("/nonexistent/mmdebstrap", "bwrap");
    let (_ctx, spec) = spec_in("FROM debian:bookworm\n");
    let said = cache.build(&spec).unwrap_err().to_string();
    assert!(
        said.contains("/nonexistent/mmdebstrap is not installed"),
        "{said}"
    );
    assert!(said.contains("apt-get install mmdebstrap"), "{said}");
}

mod slow {
    use super::*;
    use openclaw_sandbox::{Run, Sandbox, SandboxConfig, SystemRoot};

    /// Whether mmdebstrap is here; without it the test fails under `OPENCLAW_REQUIRE_ASSETS=1`
    /// (CI) and is skipped elsewhere.
    fn have_mmdebstrap() -> bool {
        let found = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mmdebstrap").is_file()));
        if !found {
            assert!(
                std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
                "mmdebstrap is not installed and OPENCLAW_REQUIRE_ASSETS=1: apt-get install mmdebstrap"
            );
            eprintln!("SKIPPED: mmdebstrap is not installed (apt-get install mmdebstrap)");
        }
        found
    }

    /// The cache `OPENCLAW_IMAGE_CACHE` names; else root's default, where the sandbox's uids
    /// may reach it; else one in the target folder. Each outlives the test, so a second run
    /// finds the image built.
    fn cache() -> ImageCache {
        let named = std::env::var_os("OPENCLAW_IMAGE_CACHE").is_some();
        // SAFETY: geteuid has no preconditions.
        if named || unsafe { libc::geteuid() } == 0 {
            ImageCache::at_default().unwrap()
        } else {
            ImageCache::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join("images"))
        }
    }

    #[test]
    fn a_dockerfile_image_is_built_once_and_runs_python_in_the_sandbox() {
        if !have_mmdebstrap() {
            return;
        }
        let (_ctx, spec) = spec_in(
            // The same image as the terminal environment's image test, so a CI run builds it once.
            "FROM python:3.11-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git python3-pytest\nRUN pip install --no-cache-dir six==1.16.0\nCOPY hello.py /opt/hello/\nENV PYTHONPATH=/opt/hello\n",
        );
        let cache = cache();
        let built = cache.build(&spec).unwrap_or_else(|e| panic!("{e}"));
        assert!(built.root.join("usr/bin/python3").exists());
        let sandbox = Sandbox::new(SandboxConfig {
            system: SystemRoot::Image(built.root.clone()),
            env: built.env.clone(),
            ..SandboxConfig::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let w = sandbox.workdir().unwrap();
        let out = w
            .run(&Run::new([
                "python3",
                "-c",
                "import os, sys, six, hello; print(six.__version__, hello.GREETING, sys.version_info[:2], os.environ['PYTHONPATH'])",
            ]))
            .unwrap();
        assert!(out.success(), "{out:?}");
        assert_eq!(out.stdout_text(), "1.16.0 hi (3, 11) /opt/hello\n");
        // The image's system, not the host's: the host has mmdebstrap, the image does not.
        let out = w
            .run(&Run::shell(
                "test ! -e /usr/bin/mmdebstrap && python --version && id -un",
            ))
            .unwrap();
        assert!(out.success(), "{out:?}");
        assert!(out.stdout_text().starts_with("Python 3.11"), "{out:?}");
        assert!(out.stdout_text().ends_with("sandbox\n"), "{out:?}");
        // The image is read-only.
        let out = w.run(&Run::shell("touch /usr/local/x")).unwrap();
        assert!(!out.success(), "{out:?}");
        // Built once: the second call finds it.
        let started = std::time::Instant::now();
        assert_eq!(cache.build(&spec).unwrap(), built);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}

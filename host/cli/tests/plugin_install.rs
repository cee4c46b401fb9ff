//! The installed-plugins directory, used as a user uses it: plugin crates in real git
//! repositories, installed with the real binary into a directory of their own, found by name
//! from a folder outside this repository, updated, pinned by version and removed.

mod common;

use common::{host_command, host_command_home, workspace};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Plugin crates built by these tests share one target folder with `plugins_cli.rs`, so their
/// dependencies compile once.
fn scratch_target() -> PathBuf {
    workspace().join("target").join("test-plugins")
}

/// The binary run in `dir` with the installed-plugins directory `plugins`.
fn host(dir: &Path, plugins: &Path, args: &[&str]) -> Output {
    host_command(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("OPENCLAW_PLUGIN_DIR", plugins)
        .env("CARGO_TARGET_DIR", scratch_target())
        .args(args)
        .output()
        .expect("run openclaw-host")
}

/// [`host`] for crates of this workspace, which build in its own target folder.
fn host_ws(dir: &Path, plugins: &Path, args: &[&str]) -> Output {
    host_command(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("OPENCLAW_PLUGIN_DIR", plugins)
        .args(args)
        .output()
        .expect("run openclaw-host")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// The error line of a failed command (after cargo's build progress).
fn refused(o: Output, expect: &str) {
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(line.starts_with("error: "), "{err}");
    assert!(line.contains(expect), "expected `{expect}` in: {line}");
    assert!(!err.contains("panicked at"), "{err}");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        // None of the developer's git settings (signing, line endings, URL rewrites).
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "protocol.file.allow=always",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Appends a byte to the library of the installed version in `dir`.
fn change_library(dir: &Path) {
    let lib = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "so"))
        .expect("the installed library");
    let mut bytes = std::fs::read(&lib).unwrap();
    bytes.push(0);
    std::fs::write(&lib, bytes).unwrap();
}

/// Sets the version of the scaffolded crate in `dir` (Cargo.toml and plugin.toml).
fn set_version(dir: &Path, from: &str, to: &str) {
    for file in ["Cargo.toml", "plugin.toml"] {
        let p = dir.join(file);
        let text = std::fs::read_to_string(&p).unwrap();
        let old = format!("version = \"{from}\"");
        assert!(text.contains(&old), "{file}: {text}");
        std::fs::write(&p, text.replacen(&old, &format!("version = \"{to}\""), 1)).unwrap();
    }
}

/// A plugin crate `name` (a loss, as `plugins new` writes it) in a git repository of its
/// own, published as a bare repository; returns (working copy, bare repository).
fn published_plugin(root: &Path, plugins: &Path, name: &str) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    ok(host(
        &root.join("src"),
        plugins,
        &["plugins", "new", name, "--kind", "loss"],
    ));
    let work = root.join("src").join(name);
    // As a crate shared with others takes the API: by version, not by a path on one machine.
    let manifest = std::fs::read_to_string(work.join("Cargo.toml")).unwrap();
    let start = manifest.find("openclaw-plugin-api = ").unwrap();
    let end = start + manifest[start..].find('\n').unwrap();
    let api: Vec<&str> = openclaw_plugin_api::API_VERSION.split('.').collect();
    let manifest = format!(
        "{}openclaw-plugin-api = \"{}.{}\"{}",
        &manifest[..start],
        api[0],
        api[1],
        &manifest[end..]
    );
    std::fs::write(work.join("Cargo.toml"), manifest).unwrap();
    git(&work, &["init", "--quiet"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "--quiet", "-m", "0.1.0"]);
    git(&work, &["tag", "v0.1.0"]);
    let bare = root.join(format!("{name}.git"));
    git(
        root,
        &[
            "clone",
            "--quiet",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    (work, bare)
}

#[test]
fn a_plugin_from_git_is_found_by_name_anywhere_updated_pinned_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("installed");
    // A folder outside the repository, with no plugin crates of its own.
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (work, bare) = published_plugin(tmp.path(), &plugins, "greeter");
    let url = format!("file://{}", bare.display());

    let out = ok(host(&elsewhere, &plugins, &["plugins", "install", &url]));
    assert!(
        out.contains("installed greeter@0.1.0 (loss; plugin API"),
        "{out}"
    );
    assert!(out.contains("native code with this host's rights"), "{out}");
    let record = std::fs::read_to_string(plugins.join("greeter/0.1.0/install.toml")).unwrap();
    assert!(record.contains("kind = \"git\""), "{record}");
    assert!(
        record.contains(&git(&work, &["rev-parse", "HEAD"])),
        "{record}"
    );

    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "list", "--installed"],
    ));
    let row = out
        .lines()
        .find(|l| l.starts_with("greeter"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("0.1.0"), "{row}");
    assert!(row.contains(openclaw_plugin_api::API_VERSION), "{row}");
    assert!(row.contains(&url), "{row}");

    // By name, from a folder that has no plugins: the contract harness passes.
    let out = ok(host(&elsewhere, &plugins, &["plugins", "test", "greeter"]));
    assert!(out.contains("checking plugin `greeter` 0.1.0"), "{out}");
    assert!(out.contains(" 0 failed"), "{out}");

    // Installing the same version again is refused; --force replaces it.
    refused(
        host(&elsewhere, &plugins, &["plugins", "install", &url]),
        "greeter@0.1.0 is already installed",
    );

    // A new version is published; `update` installs it beside the old one.
    set_version(&work, "0.1.0", "0.2.0");
    git(&work, &["commit", "--quiet", "-am", "greeter 0.2.0"]);
    git(&work, &["push", "--quiet", "origin", "HEAD:main"]);
    let out = ok(host(&elsewhere, &plugins, &["plugins", "update"]));
    assert!(out.contains("greeter: 0.1.0 -> 0.2.0"), "{out}");
    let out = ok(host(&elsewhere, &plugins, &["plugins", "info", "greeter"]));
    assert!(out.contains("version:     0.2.0"), "{out}");
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "info", "greeter@0.1.0"],
    ));
    assert!(out.contains("version:     0.1.0"), "{out}");
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "update", "greeter"],
    ));
    assert!(out.contains("0.2.0 is the newest version"), "{out}");

    // A tag picks what is built.
    refused(
        host(
            &elsewhere,
            &plugins,
            &["plugins", "install", &url, "--rev", "v9"],
        ),
        "has no branch, tag or commit `v9`",
    );

    // A library changed after it was installed is refused when loaded.
    change_library(&plugins.join("greeter/0.2.0"));
    refused(
        host(&elsewhere, &plugins, &["plugins", "info", "greeter"]),
        "has changed since it was installed",
    );

    // Removing one version leaves the other, which the name then finds.
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "remove", "greeter@0.2.0"],
    ));
    assert!(out.contains("removed greeter@0.2.0"), "{out}");
    let out = ok(host(&elsewhere, &plugins, &["plugins", "info", "greeter"]));
    assert!(out.contains("version:     0.1.0"), "{out}");
    refused(
        host(&elsewhere, &plugins, &["plugins", "info", "greeter@0.2.0"]),
        "plugin greeter@0.2.0 is not installed",
    );
    ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "remove", "greeter"],
    ));
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "list", "--installed"],
    ));
    assert!(out.contains("no plugins installed"), "{out}");
    refused(
        host(&elsewhere, &plugins, &["plugins", "remove", "greeter"]),
        "no plugin named `greeter` is installed",
    );
}

#[test]
fn what_cannot_be_installed_is_refused_with_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("installed");
    let ws = workspace();
    // Built against plugin API 0.9.0: both versions named.
    refused(
        host_ws(
            &ws,
            &plugins,
            &["plugins", "install", "tests/fixtures/abi-old"],
        ),
        &format!(
            "was built against plugin API 0.9.0, which this host (plugin API {}) cannot load",
            openclaw_plugin_api::API_VERSION
        ),
    );
    // A repository with several plugin crates needs --subdir.
    let repo = tmp.path().join("two");
    for name in ["one", "two"] {
        std::fs::create_dir_all(repo.join("methods")).unwrap();
        ok(host(
            &repo.join("methods"),
            &plugins,
            &["plugins", "new", name, "--kind", "loss"],
        ));
    }
    git(&repo, &["init", "--quiet"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "two plugins"]);
    let url = format!("file://{}", repo.display());
    refused(
        host(tmp.path(), &plugins, &["plugins", "install", &url]),
        "holds 2 plugin crates; choose one with --subdir (methods/one, methods/two)",
    );
    refused(
        host(
            tmp.path(),
            &plugins,
            &["plugins", "install", &url, "--subdir", "../etc"],
        ),
        "must be a folder inside the repository",
    );
    let out = ok(host(
        tmp.path(),
        &plugins,
        &["plugins", "install", &url, "--subdir", "methods/two"],
    ));
    assert!(out.contains("installed two@0.1.0"), "{out}");
    refused(
        host(
            tmp.path(),
            &plugins,
            &["plugins", "install", "nothing-here"],
        ),
        "no plugin crate named `nothing-here`",
    );
    refused(
        host(tmp.path(), &plugins, &["plugins", "info", "two@^0.3"]),
        "plugin two@^0.3 is not installed",
    );
    // An installed plugin that is not an environment is not taken for one.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    refused(
        host(
            &empty,
            &plugins,
            &["env", "check", "two", "--split", "test"],
        ),
        "the installed plugin two@0.1.0 is not an environment",
    );
}

/// The README's method, installed, runs from a folder outside the repository by name, and
/// the run's checkpoints record which plugin it was.
#[test]
fn a_run_outside_the_repository_uses_the_installed_method_and_locks_it() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("installed");
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let combine = workspace().join("methods/combine");
    let out = ok(host_ws(
        &dir,
        &plugins,
        &["plugins", "install", combine.to_str().unwrap()],
    ));
    assert!(out.contains("installed combine@"), "{out}");
    refused(
        host(&dir, &plugins, &["run", "--plugin", "combine@9.9.9"]),
        "plugin combine@9.9.9 is not installed",
    );
    let o = host_command_home(&dir)
        .env("OPENCLAW_PLUGIN_DIR", &plugins)
        .args([
            "run",
            "--plugin",
            "combine",
            "--max-steps",
            "2",
            "--port",
            "0",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let checkpoint = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("checkpoint-"))
                && !p.is_symlink()
        })
        .expect("a checkpoint");
    let lock = std::fs::read_to_string(checkpoint.join("openclaw-plugins.lock")).unwrap();
    assert!(lock.contains("name = \"combine\""), "{lock}");
    let installed = plugins.join("combine");
    assert!(
        lock.contains(&format!("installed {}", installed.display())),
        "{lock}"
    );
    assert!(lock.contains("library_sha256 = \""), "{lock}");

    // An installed environment is found by `--env NAME` the same way, before the one beside
    // the binary: a changed library of it is refused.
    let toolcall = workspace().join("envs/toolcall");
    ok(host_ws(
        &dir,
        &plugins,
        &["plugins", "install", toolcall.to_str().unwrap()],
    ));
    let out = ok(host(
        &dir,
        &plugins,
        &["env", "check", "toolcall@0.1.0", "--split", "test"],
    ));
    assert!(out.contains(" ok, 0 failed"), "{out}");
    change_library(&plugins.join("toolcall/0.1.0"));
    refused(
        host(
            &dir,
            &plugins,
            &["env", "check", "toolcall", "--split", "test"],
        ),
        "has changed since it was installed",
    );
}

/// A static file server on loopback (Python's `http.server`, which serves a bare git
/// repository over git's dumb HTTP protocol as any static host would); stopped when dropped.
struct StaticServer {
    child: std::process::Child,
    url: String,
}

impl StaticServer {
    fn start(dir: &Path) -> StaticServer {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .unwrap_or_else(|| panic!("no port in: {line}"));
        StaticServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Publishes the working copy's HEAD into the served bare repository.
fn push(work: &Path, bare: &Path) {
    git(work, &["push", "--quiet", "origin", "HEAD:main", "--tags"]);
    git(bare, &["update-server-info"]);
}

#[test]
fn plugins_are_found_in_an_index_over_http_verified_installed_pinned_and_refused_for_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("installed");
    let www = tmp.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (work, _) = published_plugin(tmp.path(), &plugins, "herald");
    // Served: the bare repository under www/, over dumb HTTP.
    let bare = www.join("herald.git");
    git(
        tmp.path(),
        &[
            "clone",
            "--quiet",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(
        &work,
        &["remote", "set-url", "origin", bare.to_str().unwrap()],
    );
    git(&bare, &["update-server-info"]);
    let server = StaticServer::start(&www);
    let git_url = format!("{}/herald.git", server.url);
    let index_file = www.join("index.toml");
    let index_url = format!("{}/index.toml", server.url);

    // The publisher: a key, and a signed record per version.
    let out = ok(host(
        tmp.path(),
        &plugins,
        &["plugins", "keygen", "publisher"],
    ));
    assert!(out.contains("trust it with: --trusted-key RW"), "{out}");
    let key = tmp.path().join("publisher.key");
    let public = tmp.path().join("publisher.pub");
    let package = |extra: &[&str]| {
        let mut args = vec![
            "plugins",
            "package",
            work.to_str().unwrap(),
            "--git",
            &git_url,
            "--index-file",
            index_file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        ok(host(tmp.path(), &plugins, &args))
    };
    package(&["--key", key.to_str().unwrap()]);
    set_version(&work, "0.1.0", "0.2.0");
    git(&work, &["commit", "--quiet", "-am", "herald 0.2.0"]);
    push(&work, &bare);
    package(&["--key", key.to_str().unwrap()]);
    let index = std::fs::read_to_string(&index_file).unwrap();
    assert!(index.contains("version = \"0.2.0\""), "{index}");
    assert!(index.contains("plugins test: "), "{index}");
    assert!(index.contains("untrusted comment"), "{index}");

    // A user: the index over loopback HTTP, only signed records, the publisher's key.
    let public_s = public.to_str().unwrap().to_string();
    let trust: Vec<&str> = vec![
        "--index",
        &index_url,
        "--allow-http",
        "--only-signed",
        "--trusted-key",
        &public_s,
    ];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(trust.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        host(&elsewhere, &plugins, &a)
    };
    let out = stdout(&run(with(&["plugins", "search", "herald"])));
    assert!(
        out.lines()
            .any(|l| l.starts_with("herald") && l.contains("0.2.0") && l.contains("verified")),
        "{out}"
    );
    // Plain HTTP needs leave.
    refused(
        host(
            &elsewhere,
            &plugins,
            &["plugins", "search", "herald", "--index", &index_url],
        ),
        "is plain HTTP",
    );

    let out = ok(run(with(&["plugins", "install", "herald@0.1.0"])));
    assert!(
        out.contains("signature: verified with the trusted key RW"),
        "{out}"
    );
    assert!(out.contains("installed herald@0.1.0"), "{out}");
    let out = ok(run(with(&["plugins", "install", "herald"])));
    assert!(out.contains("installed herald@0.2.0"), "{out}");
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "test", "herald@0.1.0"],
    ));
    assert!(out.contains(" 0 failed"), "{out}");

    // A run from outside the repository with the installed loss, pinned to the old version;
    // its checkpoint's lockfile names it.
    let o = host_command_home(&elsewhere)
        .env("OPENCLAW_PLUGIN_DIR", &plugins)
        .args(["run", "--plugin", "combine"])
        .args(["--custom-loss-function-path", "herald@0.1.0"])
        .args(["--max-steps", "2", "--port", "0", "--save-dir", "ckpt"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let lock =
        std::fs::read_to_string(elsewhere.join("ckpt/checkpoint-latest/openclaw-plugins.lock"))
            .unwrap();
    assert!(
        lock.contains("name = \"herald\"\nversion = \"0.1.0\""),
        "{lock}"
    );
    assert!(lock.contains(&git_url), "{lock}");

    // Update from the index: a third version, published and yanked, is not taken.
    set_version(&work, "0.2.0", "0.3.0");
    git(&work, &["commit", "--quiet", "-am", "herald 0.3.0"]);
    push(&work, &bare);
    package(&["--key", key.to_str().unwrap()]);
    ok(host(
        tmp.path(),
        &plugins,
        &[
            "plugins",
            "yank",
            "herald@0.3.0",
            "--index-file",
            index_file.to_str().unwrap(),
            "--key",
            key.to_str().unwrap(),
        ],
    ));
    let out = ok(run(with(&["plugins", "update", "herald"])));
    assert!(out.contains("0.2.0 is the newest version"), "{out}");
    refused(
        run(with(&["plugins", "install", "herald@0.3.0"])),
        "herald@0.3.0 is yanked (withdrawn by its publisher); --allow-yanked installs it anyway",
    );
    let out = ok(run(with(&[
        "plugins",
        "install",
        "herald@0.3.0",
        "--allow-yanked",
    ])));
    assert!(out.contains("installed herald@0.3.0"), "{out}");

    // Refusals, each naming why. A record changed after it was signed:
    let signed = std::fs::read_to_string(&index_file).unwrap();
    // What `package` wrote: from the API the library was built against to the next major.
    let api: Vec<u64> = openclaw_plugin_api::API_VERSION
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    let range = format!("plugin_api = \">={}.{}, <{}\"", api[0], api[1], api[0] + 1);
    assert!(signed.contains(&range), "{signed}");
    std::fs::write(
        &index_file,
        signed.replacen(&range, "plugin_api = \">=1.0, <2\"", 1),
    )
    .unwrap();
    refused(
        run(with(&["plugins", "install", "herald@0.1.0", "--force"])),
        "its signature does not verify with any trusted key",
    );
    // An unsigned record under --only-signed, and its checksum tampered without it:
    let mut table: toml::Table = toml::from_str(&signed).unwrap();
    for record in table["plugin"].as_array_mut().unwrap() {
        record.as_table_mut().unwrap().remove("signature");
    }
    let unsigned = toml::to_string(&table).unwrap();
    assert!(!unsigned.contains("untrusted comment"), "{unsigned}");
    std::fs::write(&index_file, &unsigned).unwrap();
    refused(
        run(with(&["plugins", "install", "herald@0.1.0", "--force"])),
        "herald@0.1.0 in the index",
    );
    let first_sum = unsigned
        .lines()
        .find_map(|l| l.strip_prefix("checksum = \""))
        .unwrap()
        .trim_end_matches('"')
        .to_string();
    std::fs::write(
        &index_file,
        unsigned.replacen(&first_sum, &"0".repeat(64), 1),
    )
    .unwrap();
    refused(
        host(
            &elsewhere,
            &plugins,
            &[
                "plugins",
                "install",
                "herald@0.1.0",
                "--force",
                "--index",
                &index_url,
                "--allow-http",
            ],
        ),
        "where the index says 000000000000; nothing was built or installed",
    );
    // A version for another plugin API:
    std::fs::write(
        &index_file,
        unsigned.replacen(&range, "plugin_api = \">=2.0, <3\"", 1),
    )
    .unwrap();
    refused(
        host(
            &elsewhere,
            &plugins,
            &[
                "plugins",
                "install",
                "herald@0.1.0",
                "--force",
                "--index",
                &index_url,
                "--allow-http",
            ],
        ),
        &format!(
            "herald@0.1.0 loads under plugin API >=2.0, <3, and this host has plugin API {}",
            openclaw_plugin_api::API_VERSION
        ),
    );

    // Pinned and removed.
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "info", "herald@0.2.0"],
    ));
    assert!(out.contains("version:     0.2.0"), "{out}");
    ok(host(&elsewhere, &plugins, &["plugins", "remove", "herald"]));
    let out = ok(host(
        &elsewhere,
        &plugins,
        &["plugins", "list", "--installed"],
    ));
    assert!(out.contains("no plugins installed"), "{out}");
    drop(server);
}

/// The repository's own index lists each method, environment and example at the tree this
/// commit holds: its name, version, kinds and permissions as its plugin.toml says, its
/// checksum that of the committed folder, and each passes the contract checks.
#[test]
fn the_repositorys_index_lists_every_plugin_at_its_committed_tree() {
    use openclaw_marketplace::index::Index;
    let ws = workspace();
    let text = std::fs::read_to_string(ws.join("marketplace/index.toml")).unwrap();
    let index = Index::parse(&text, "marketplace/index.toml").unwrap();
    let mut listed: Vec<&str> = index
        .records
        .iter()
        .map(|r| r.source.subdir.as_str())
        .collect();
    listed.sort();
    let mut expected: Vec<String> = ["methods", "envs", "examples"]
        .iter()
        .flat_map(|f| std::fs::read_dir(ws.join(f)).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.join("plugin.toml").is_file())
        .map(|p| p.strip_prefix(&ws).unwrap().display().to_string())
        .collect();
    expected.sort();
    assert_eq!(
        listed, expected,
        "scripts/marketplace-index.sh writes the index"
    );
    let tmp = tempfile::tempdir().unwrap();
    for r in &index.records {
        let dir = ws.join(&r.source.subdir);
        let toml = openclaw_plugins::PluginToml::read(&dir).unwrap();
        assert_eq!((&r.name, &r.version), (&toml.name, &toml.version));
        let kinds: Vec<String> = toml.kinds.iter().map(|k| k.to_string()).collect();
        assert_eq!(r.kinds, kinds, "{}", r.id());
        assert_eq!(r.permissions, toml.permissions, "{}", r.id());
        assert_eq!(
            r.source.git,
            "https://github.com/openclaw-host/openclaw-host.git"
        );
        assert!(r.supports_api(openclaw_plugin_api::API_VERSION).unwrap());
        // The folder as a clone of this commit holds it.
        let sum = openclaw_plugins::install::committed_tree_sha256(
            &ws,
            "HEAD",
            &r.source.subdir,
            tmp.path(),
        )
        .unwrap();
        // The commit the record names holds the same folder, where this clone has it (a
        // shallow clone may not).
        let has_rev = Command::new("git")
            .args(["cat-file", "-e", &format!("{}^{{commit}}", r.source.rev)])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success();
        if has_rev {
            let tree = |rev: &str| {
                let o = Command::new("git")
                    .args(["rev-parse", &format!("{rev}:{}", r.source.subdir)])
                    .current_dir(&ws)
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&o.stdout).trim().to_string()
            };
            assert_eq!(tree(&r.source.rev), tree("HEAD"), "{}", r.id());
        }
        assert_eq!(
            sum, r.checksum,
            "{}: the committed {} differs from the index; run scripts/marketplace-index.sh and commit the index",
            r.id(),
            r.source.subdir
        );
        let out = ok(host_ws(
            &ws,
            &tmp.path().join("none"),
            &["plugins", "test", &r.source.subdir],
        ));
        assert!(out.contains(" 0 failed"), "{}: {out}", r.id());
    }
}

/// The plugin API a library was built against may be an older minor version than the host's:
/// a plugin built against a copy of this API numbered one minor version lower installs, says
/// which version it was built against, and loads.
#[test]
fn a_plugin_built_against_an_older_minor_api_installs_and_loads() {
    let api: Vec<u64> = openclaw_plugin_api::API_VERSION
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(api[1] > 0, "no older minor version to build against");
    let older = format!("{}.{}.0", api[0], api[1] - 1);
    let tmp = tempfile::tempdir().unwrap();
    // The API crate as a release one minor version older would have it (same layout).
    let copy = tmp.path().join("plugin-api");
    std::fs::create_dir_all(copy.join("src")).unwrap();
    for e in std::fs::read_dir(workspace().join("plugin-api/src"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(e.path(), copy.join("src").join(e.file_name())).unwrap();
    }
    let manifest = std::fs::read_to_string(workspace().join("plugin-api/Cargo.toml")).unwrap();
    let root: toml::Table =
        toml::from_str(&std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap()).unwrap();
    let deps = &root["workspace"]["dependencies"];
    let manifest = manifest
        .replacen(
            &format!("version = \"{}\"", openclaw_plugin_api::API_VERSION),
            &format!("version = \"{older}\""),
            1,
        )
        .replace("edition.workspace = true", "edition = \"2021\"")
        .replace("rust-version.workspace = true\n", "")
        .replace("license.workspace = true", "license = \"Apache-2.0\"")
        .lines()
        .map(|l| match l.split_once(".workspace = true") {
            // `name.workspace = true` -> `name = <the workspace's entry>`.
            Some((name, "")) => format!("{name} = {}", deps[name]),
            _ => match l.split_once(" = { workspace = true, optional = true }") {
                Some((name, "")) => {
                    let mut t = deps[name].as_table().cloned().unwrap_or_else(|| {
                        let mut t = toml::Table::new();
                        t.insert("version".into(), deps[name].clone());
                        t
                    });
                    t.insert("optional".into(), true.into());
                    format!("{name} = {}", toml::Value::Table(t))
                }
                _ => l.to_string(),
            },
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(copy.join("Cargo.toml"), manifest).unwrap();

    let plugins = tmp.path().join("installed");
    ok(host(
        tmp.path(),
        &plugins,
        &["plugins", "new", "elder", "--kind", "loss"],
    ));
    let crate_toml = tmp.path().join("elder/Cargo.toml");
    let text = std::fs::read_to_string(&crate_toml).unwrap();
    let start = text.find("openclaw-plugin-api = ").unwrap();
    let end = start + text[start..].find('\n').unwrap();
    let text = format!(
        "{}openclaw-plugin-api = {{ path = {:?} }}{}",
        &text[..start],
        copy.display().to_string(),
        &text[end..]
    );
    std::fs::write(&crate_toml, text).unwrap();

    let out = ok(host(
        tmp.path(),
        &plugins,
        &["plugins", "install", "./elder"],
    ));
    assert!(
        out.contains(&format!("installed elder@0.1.0 (loss; plugin API {older})")),
        "{out}"
    );
    // By version: `elder` alone is the crate folder here.
    let out = ok(host(
        tmp.path(),
        &plugins,
        &["plugins", "info", "elder@0.1.0"],
    ));
    assert!(
        out.contains(&format!(
            "plugin API:  {older} (this host: {})",
            openclaw_plugin_api::API_VERSION
        )),
        "{out}"
    );
}

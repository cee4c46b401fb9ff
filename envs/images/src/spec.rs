//! What an image is: its Debian base, its packages and the steps after them, read from an
//! `[image]` table or a Dockerfile (`dockerfile.rs`), and the cache key that names it.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::ImageError;

/// Bumped when the way an image is built changes, so no older image is taken for a newer one.
const BUILD_FORMAT: u32 = 1;

/// Debian suites an image may start from, with the version number Docker's tags also use.
/// (Older suites' pip lacks options every pip step passes.)
pub(crate) const SUITES: [(&str, &str); 2] = [("bookworm", "12"), ("trixie", "13")];

/// `python:<version>` bases: the Debian suite whose own Python is that version. Only versions
/// a supported suite ships are accepted: the image's Python is Debian's, not python.org's.
const PYTHONS: [(&str, &str); 2] = [("3.11", "bookworm"), ("3.13", "trixie")];

/// What the Python images add to Debian's Python, here as Debian packages: pip, venv and
/// `python` for `python3`.
const PYTHON_PACKAGES: [&str; 4] = [
    "python3",
    "python3-pip",
    "python3-venv",
    "python-is-python3",
];

/// What the full (not `-slim`) Python images carry besides, approximated by Debian packages
/// (Docker's are built on `buildpack-deps`: compilers, version control, download tools).
const PYTHON_FULL_PACKAGES: [&str; 9] = [
    "build-essential",
    "ca-certificates",
    "curl",
    "file",
    "git",
    "procps",
    "unzip",
    "wget",
    "xz-utils",
];

/// `PATH` before any `ENV` changes it (Docker's default), for `$PATH` in an `ENV` value.
pub(crate) const DEFAULT_PATH: &str =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The base an image starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    /// As written (`debian:bookworm-slim`, `python:3.11`).
    pub name: String,
    /// The Debian suite mmdebstrap builds.
    pub suite: String,
    /// Debian packages the base stands for (Python and pip for `python:`).
    pub packages: Vec<String>,
    /// What was approximated, for the image's notes (`python:3.11.9` gets Debian's 3.11).
    pub note: Option<String>,
}

/// The bases accepted, as an error names them.
pub(crate) const BASES: &str =
    "FROM debian:bookworm|trixie[-slim], FROM python:3.11|3.13[-slim][-<suite>]";

impl Base {
    /// Reads an image name (`debian:bookworm`, `debian:12-slim`, `python:3.11-slim-bookworm`,
    /// with or without `docker.io/library/`); why not, when it is none of the bases built.
    pub fn parse(image: &str) -> Result<Base, String> {
        let short = image.strip_prefix("docker.io/").unwrap_or(image);
        let short = short.strip_prefix("library/").unwrap_or(short);
        if short.contains('@') {
            return Err(
                "a digest pins Docker's image, which is not what is built here; name the tag"
                    .into(),
            );
        }
        let Some((repo, tag)) = short.split_once(':') else {
            return Err(format!(
                "`{image}` has no tag; name the release (`debian:bookworm`, `python:3.11`), since `latest` moves"
            ));
        };
        let suite_of = |name: &str| {
            SUITES
                .iter()
                .find(|(suite, number)| name == *suite || name == *number)
                .map(|(suite, _)| suite.to_string())
        };
        let suites = || {
            SUITES
                .iter()
                .map(|(s, n)| format!("{s} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match repo {
            "debian" => {
                let release = tag.strip_suffix("-slim").unwrap_or(tag);
                let suite = suite_of(release).ok_or_else(|| {
                    format!(
                        "Debian `{release}` is not one of the suites images are built from: {}",
                        suites()
                    )
                })?;
                Ok(Base {
                    name: image.to_string(),
                    suite,
                    packages: Vec::new(),
                    note: None,
                })
            }
            "python" => {
                let mut parts = tag.split('-');
                let version = parts.next().unwrap_or_default();
                let mut slim = false;
                let mut named_suite = None;
                for part in parts {
                    match part {
                        "slim" if !slim && named_suite.is_none() => slim = true,
                        p if named_suite.is_none() && suite_of(p).is_some() => named_suite = Some(p),
                        "alpine" => return Err("Alpine is not Debian; images are built from Debian with mmdebstrap".into()),
                        p => return Err(format!("`-{p}` in `{tag}` is not a variant built here (`-slim` and a Debian suite are)")),
                    }
                }
                let minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
                let Some((_, suite)) = PYTHONS.iter().find(|(v, _)| *v == minor) else {
                    return Err(format!(
                        "an image's Python is Debian's own, and no supported suite ships Python {version} (bookworm's is 3.11, trixie's 3.13): use python:3.11 or python:3.13, or FROM debian:<suite> and install what you need"
                    ));
                };
                if let Some(named) = named_suite {
                    if suite_of(named).as_deref() != Some(suite) {
                        return Err(format!(
                            "Debian {named}'s Python is not {minor}; python:{minor} is built on {suite}"
                        ));
                    }
                }
                let mut packages: Vec<String> =
                    PYTHON_PACKAGES.iter().map(|p| p.to_string()).collect();
                if !slim {
                    packages.extend(PYTHON_FULL_PACKAGES.iter().map(|p| p.to_string()));
                }
                let note = (version != minor).then(|| {
                    format!("{image} gets Debian {suite}'s Python {minor}, not the patch release {version}")
                });
                Ok(Base {
                    name: image.to_string(),
                    suite: suite.to_string(),
                    packages,
                    note,
                })
            }
            other => Err(format!(
                "`{other}` is not a base built here: images are built from Debian with mmdebstrap"
            )),
        }
    }
}

/// What follows the Debian packages, in the order written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// `COPY`: files and folders of the context (paths relative to it, checked to stay in it)
    /// to `dest`, an absolute path in the image; into it when `into` (a folder), else as it.
    Copy {
        /// The Dockerfile's line (0 for a table).
        line: usize,
        /// Paths relative to the context.
        sources: Vec<String>,
        /// Absolute path in the image.
        dest: String,
        /// Whether `dest` is a folder the sources go into (several sources, a trailing `/`, a
        /// `WORKDIR` made before).
        into: bool,
    },
    /// `RUN pip install`: pip's arguments after `install`, run in `cwd` with the `ENV` set
    /// before it.
    Pip {
        /// The Dockerfile's line (0 for a table).
        line: usize,
        /// Requirements and the options allowed, as written.
        args: Vec<String>,
        /// The working directory (the `WORKDIR` in effect).
        cwd: String,
        /// The environment set by `ENV` before this step.
        env: Vec<(String, String)>,
    },
    /// `WORKDIR`: a folder made in the image.
    Workdir {
        /// The Dockerfile's line (0 for a table).
        line: usize,
        /// Absolute path in the image.
        path: String,
    },
}

/// An image: a Debian suite with packages, then copies, pip installs and folders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageSpec {
    /// Where it was read, for messages (`tasks/x/Dockerfile`, `[image] table`).
    pub origin: String,
    /// The base.
    pub base: Base,
    /// Debian packages besides the base's, each once, sorted.
    pub apt: Vec<String>,
    /// Whether packages' recommended packages are installed too (a Dockerfile's `apt-get
    /// install` without `--no-install-recommends` installs them).
    pub recommends: bool,
    /// What follows the packages, in order.
    pub steps: Vec<Step>,
    /// Environment variables the image sets, in order (a later one replaces an earlier).
    pub env: Vec<(String, String)>,
    /// The working directory commands start in, absolute (the last `WORKDIR`).
    pub workdir: Option<String>,
    /// What was accepted but does nothing here, one line each (`Dockerfile:9: CMD is
    /// ignored: …`).
    pub notes: Vec<String>,
    /// The folder `COPY` sources are relative to (the Dockerfile's, links resolved).
    pub context: Option<PathBuf>,
}

/// The `[image]` table of a task's TOML: a base with apt and pip packages.
///
/// ```toml
/// [image]
/// base = "debian:bookworm"
/// apt = ["python3", "python3-pip", "git"]
/// pip = ["requests==2.32.3"]
/// ```
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageTable {
    /// The base, as a Dockerfile's `FROM` names it.
    pub base: String,
    /// Debian packages.
    #[serde(default)]
    pub apt: Vec<String>,
    /// pip requirements (`name`, `name==1.2`, `name[extra]>=1`), installed into the system
    /// Python after the Debian packages.
    #[serde(default)]
    pub pip: Vec<String>,
    /// Whether Debian packages' recommended packages are installed too (default no).
    #[serde(default)]
    pub recommends: bool,
    /// Environment variables inside.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The working directory, absolute.
    #[serde(default)]
    pub workdir: Option<String>,
}

impl ImageSpec {
    /// Reads the `[image]` table of a TOML document (other tables are the caller's).
    pub fn from_toml(text: &str) -> Result<ImageSpec, ImageError> {
        #[derive(serde::Deserialize)]
        struct Doc {
            image: Option<ImageTable>,
        }
        let doc: Doc =
            toml::from_str(text).map_err(|e| ImageError::Invalid(format!("[image] table: {e}")))?;
        let table = doc
            .image
            .ok_or_else(|| ImageError::Invalid("the TOML has no [image] table".into()))?;
        ImageSpec::from_table(table)
    }

    /// An image from its table; errors name the key and the value.
    pub fn from_table(table: ImageTable) -> Result<ImageSpec, ImageError> {
        let origin = "[image] table".to_string();
        let invalid = |what: String| ImageError::Invalid(format!("{origin}: {what}"));
        let base = Base::parse(&table.base)
            .map_err(|why| invalid(format!("base = {:?}: {why}", table.base)))?;
        for p in &table.apt {
            check_apt_package(p).map_err(|why| invalid(format!("apt: {why}")))?;
        }
        for r in &table.pip {
            check_pip_word(r).map_err(|why| invalid(format!("pip: {why}")))?;
            if r.starts_with('-') {
                return Err(invalid(format!(
                    "pip: `{r}` is an option; the table lists requirements only"
                )));
            }
        }
        let base_notes = base.note.iter().map(|n| format!("{origin}: {n}")).collect();
        let mut env = Vec::new();
        for (k, v) in &table.env {
            check_env_name(k).map_err(|why| invalid(format!("env: {why}")))?;
            env.push((k.clone(), v.clone()));
        }
        let mut steps = Vec::new();
        if !table.pip.is_empty() {
            steps.push(Step::Pip {
                line: 0,
                args: table.pip.clone(),
                cwd: "/".into(),
                env: env.clone(),
            });
        }
        let mut workdir = None;
        if let Some(w) = &table.workdir {
            let path = normalise_inside("/", w)
                .filter(|_| w.starts_with('/'))
                .ok_or_else(|| invalid(format!("workdir = {w:?}: an absolute path is needed")))?;
            steps.push(Step::Workdir {
                line: 0,
                path: path.clone(),
            });
            workdir = Some(path);
        }
        let spec = ImageSpec {
            origin,
            base,
            apt: sorted(table.apt),
            recommends: table.recommends,
            steps,
            env,
            workdir,
            notes: base_notes,
            context: None,
        };
        spec.check_pip()?;
        Ok(spec)
    }

    /// Reads a Dockerfile of the supported subset; its folder is the context `COPY` reads.
    /// Every instruction outside the subset is refused with its line.
    pub fn from_dockerfile(path: &Path) -> Result<ImageSpec, ImageError> {
        let text = std::fs::read_to_string(path).map_err(|e| ImageError::Io {
            what: format!("reading {}", path.display()),
            source: e,
        })?;
        let context = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let context = std::fs::canonicalize(context).map_err(|e| ImageError::Io {
            what: format!("the folder of {}", path.display()),
            source: e,
        })?;
        ImageSpec::parse_dockerfile(&text, &path.display().to_string(), Some(&context))
    }

    /// Reads a Dockerfile's text; `origin` names it in messages, `context` is the folder
    /// `COPY` reads (links resolved; `None` refuses every `COPY`).
    pub fn parse_dockerfile(
        text: &str,
        origin: &str,
        context: Option<&Path>,
    ) -> Result<ImageSpec, ImageError> {
        let spec = crate::dockerfile::parse(text, origin, context)?;
        spec.check_pip()?;
        Ok(spec)
    }

    /// Every Debian package the image gets: the base's and the spec's, each once, sorted.
    pub fn packages(&self) -> Vec<String> {
        sorted(
            self.base
                .packages
                .iter()
                .chain(&self.apt)
                .cloned()
                .collect(),
        )
    }

    /// The cache key with Debian's default mirrors: what [`crate::ImageCache`] names the
    /// image by when no mirror is set. Reads every copied file.
    pub fn key(&self) -> Result<String, ImageError> {
        self.key_with_mirror(None)
    }

    /// The cache key: SHA-256 (hex, 64 digits) of the normalised spec (what is built, not how
    /// it was written: no line numbers or comments), the mirror, and the names, executable
    /// bits and contents of every copied file.
    pub fn key_with_mirror(&self, mirror: Option<&str>) -> Result<String, ImageError> {
        let mut h = Sha256::new();
        let mut line = |s: String| {
            h.update(s.as_bytes());
            h.update(b"\n");
        };
        line(format!("openclaw-image {BUILD_FORMAT}"));
        line(format!("suite {}", json(&self.base.suite)));
        line(format!("mirror {}", json(&mirror.unwrap_or("default"))));
        line(format!("packages {}", json(&self.packages())));
        line(format!("recommends {}", self.recommends));
        for step in &self.steps {
            match step {
                Step::Copy {
                    sources,
                    dest,
                    into,
                    ..
                } => {
                    line(format!("copy {} into={into} {}", json(sources), json(dest)));
                }
                Step::Pip { args, cwd, env, .. } => {
                    line(format!(
                        "pip {} cwd={} env={}",
                        json(args),
                        json(cwd),
                        json(env)
                    ));
                }
                Step::Workdir { path, .. } => line(format!("workdir {}", json(path))),
            }
        }
        line(format!("env {}", json(&self.env)));
        line(format!("workdir {}", json(&self.workdir)));
        for step in &self.steps {
            if let Step::Copy {
                line: at, sources, ..
            } = step
            {
                for src in sources {
                    let path = self.source(*at, src)?;
                    hash_tree(&mut h, &path, src)?;
                }
            }
        }
        let digest = h.finalize();
        Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A `COPY` source on the host: inside the context, links resolved, and there.
    pub(crate) fn source(&self, line: usize, src: &str) -> Result<PathBuf, ImageError> {
        let context = self.context.as_deref().ok_or_else(|| {
            ImageError::Invalid(format!(
                "{}:{line}: COPY has no folder to copy from",
                self.origin
            ))
        })?;
        resolve_source(context, src).map_err(|why| {
            ImageError::Invalid(format!("{}:{line}: COPY {src}: {why}", self.origin))
        })
    }

    /// pip needs pip in the image: refused before anything is built when nothing brings it.
    fn check_pip(&self) -> Result<(), ImageError> {
        let first_pip = self.steps.iter().find_map(|s| match s {
            Step::Pip { line, .. } => Some(*line),
            _ => None,
        });
        if let Some(line) = first_pip {
            if !self.packages().iter().any(|p| p == "python3-pip") {
                let at = if line > 0 {
                    format!("{}:{line}", self.origin)
                } else {
                    self.origin.clone()
                };
                return Err(ImageError::Invalid(format!(
                    "{at}: pip install needs pip in the image: add python3-pip to the Debian packages (apt-get install python3-pip), or start from python:3.11"
                )));
            }
        }
        Ok(())
    }
}

/// `src` under `context` (both as given; `context` with its links resolved): no absolute
/// path, no `..`, no link that leads out, no wildcard; and it exists.
pub(crate) fn resolve_source(context: &Path, src: &str) -> Result<PathBuf, String> {
    let rel = Path::new(src);
    if rel.is_absolute() {
        return Err("an absolute source; sources are relative to the Dockerfile's folder".into());
    }
    if rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("`..` leads out of the Dockerfile's folder".into());
    }
    let joined = context.join(rel);
    let real = std::fs::canonicalize(&joined)
        .map_err(|e| format!("{e} (looked for {})", joined.display()))?;
    if !real.starts_with(context) {
        return Err("a link that leads out of the Dockerfile's folder".into());
    }
    Ok(real)
}

/// Feeds a copied file or folder into the key: kinds, names relative to `name`, the
/// executable bit (the image's modes are normalised from it) and contents; links by target.
fn hash_tree(h: &mut Sha256, path: &Path, name: &str) -> Result<(), ImageError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e| ImageError::Io {
            what: format!("reading {what}"),
            source: e,
        }
    };
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).map_err(io(path))?;
        h.update(format!("link {} {}\n", json(&name), json(&target.to_string_lossy())).as_bytes());
    } else if meta.is_dir() {
        h.update(format!("dir {}\n", json(&name)).as_bytes());
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(io(path))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(io(path))?;
        entries.sort();
        for e in entries {
            let child = format!("{name}/{}", e.to_string_lossy());
            hash_tree(h, &path.join(&e), &child)?;
        }
    } else if meta.is_file() {
        let exec = meta.permissions().mode() & 0o111 != 0;
        h.update(format!("file {} exec={exec} {}\n", json(&name), meta.len()).as_bytes());
        let mut f = std::fs::File::open(path).map_err(io(path))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = f.read(&mut buf).map_err(io(path))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
    } else {
        return Err(ImageError::Invalid(format!(
            "{}: only files, folders and links can be copied into an image",
            path.display()
        )));
    }
    Ok(())
}

/// `value` as a JSON string or array: unambiguous text for the key.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("strings and lists of them serialise")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// `path` (absolute, or relative to `cwd`) with `.` and `..` resolved, absolute; `None` when
/// `..` would leave `/`.
pub(crate) fn normalise_inside(cwd: &str, path: &str) -> Option<String> {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// A Debian package as `--include` takes it: `name` or `name=version`, nothing a list or a
/// shell could split.
pub(crate) fn check_apt_package(p: &str) -> Result<(), String> {
    let (name, version) = match p.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (p, None),
    };
    let name_ok = name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    let version_ok = version.is_none_or(|v| {
        !v.is_empty()
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".+~:-".contains(c))
    });
    if name_ok && version_ok {
        Ok(())
    } else {
        Err(format!(
            "`{p}` is not a Debian package name (`name` or `name=version`)"
        ))
    }
}

/// A word given to pip as one argument: no spaces or control characters.
pub(crate) fn check_pip_word(w: &str) -> Result<(), String> {
    if w.is_empty() || w.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{w:?} is not a requirement (empty, or with spaces)"
        ));
    }
    Ok(())
}

/// An environment variable's name: letters, digits and `_`, not starting with a digit.
pub(crate) fn check_env_name(k: &str) -> Result<(), String> {
    let ok = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("`{k}` is not a variable name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_are_debian_suites_and_the_python_debian_ships() {
        for (name, suite, python) in [
            ("debian:bookworm", "bookworm", false),
            ("debian:12-slim", "bookworm", false),
            ("docker.io/library/debian:trixie", "trixie", false),
            ("python:3.11", "bookworm", true),
            ("python:3.11-slim-bookworm", "bookworm", true),
            ("python:3.11.9-slim", "bookworm", true),
            ("python:3.13-slim-trixie", "trixie", true),
        ] {
            let b = Base::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(b.suite, suite, "{name}");
            assert_eq!(
                b.packages.iter().any(|p| p == "python3-pip"),
                python,
                "{name}"
            );
        }
        assert!(Base::parse("python:3.11.9-slim")
            .unwrap()
            .note
            .unwrap()
            .contains("3.11.9"));
        for (name, said) in [
            ("python:3.12", "no supported suite ships Python 3.12"),
            ("python:3.11-trixie", "Debian trixie's Python is not 3.11"),
            ("debian:buster", "not one of the suites"),
            ("debian:bookworm@sha256:abc", "digest"),
            ("alpine:3.19", "`alpine` is not a base"),
        ] {
            let err = Base::parse(name).expect_err(name);
            assert!(err.contains(said), "{name}: {err}");
        }
    }

    #[test]
    fn an_image_table_reads_and_refuses_by_key() {
        let spec = ImageSpec::from_toml(
            r#"
            [task]
            name = "other tables are the caller's"

            [image]
            base = "debian:bookworm"
            apt = ["python3-pip", "git", "git"]
            pip = ["requests==2.32.3"]
            env = { MODE = "test" }
            workdir = "/app"
            "#,
        )
        .unwrap();
        assert_eq!(spec.apt, ["git", "python3-pip"]);
        assert_eq!(spec.env, [("MODE".to_string(), "test".to_string())]);
        assert_eq!(spec.workdir.as_deref(), Some("/app"));
        assert!(
            matches!(&spec.steps[0], Step::Pip { args, cwd, .. } if args == &["requests==2.32.3"] && cwd == "/")
        );
        assert_eq!(spec.key().unwrap().len(), 64);
        for (toml, said) in [
            (
                "[image]\nbase = \"debian:bookworm\"\npackages = []",
                "unknown field `packages`",
            ),
            (
                "[image]\nbase = \"ubuntu:24.04\"",
                "base = \"ubuntu:24.04\"",
            ),
            (
                "[image]\nbase = \"debian:bookworm\"\napt = [\"git,curl\"]",
                "`git,curl` is not a Debian package name",
            ),
            (
                "[image]\nbase = \"debian:bookworm\"\npip = [\"x\"]",
                "pip install needs pip",
            ),
            (
                "[image]\nbase = \"python:3.11\"\npip = [\"--index-url=x\"]",
                "is an option",
            ),
            (
                "[image]\nbase = \"debian:bookworm\"\nworkdir = \"app\"",
                "absolute",
            ),
            ("[task]\nname = \"x\"", "no [image] table"),
        ] {
            let err = ImageSpec::from_toml(toml).expect_err(toml).to_string();
            assert!(err.contains(said), "{toml}: {err}");
        }
    }

    #[test]
    fn paths_in_the_image_stay_under_its_root() {
        assert_eq!(
            normalise_inside("/app", "src/./x").as_deref(),
            Some("/app/src/x")
        );
        assert_eq!(normalise_inside("/app", "../etc").as_deref(), Some("/etc"));
        assert_eq!(normalise_inside("/app", "/srv/").as_deref(), Some("/srv"));
        assert_eq!(normalise_inside("/", "."), Some("/".to_string()));
        assert_eq!(normalise_inside("/app", "../../x"), None);
    }
}

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::{ImageError, ImageSpec, Step};

/// A Dockerfile's folder with the files the examples copy.
fn context() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("requirements.txt"), "requests==2.32.3\n").unwrap();
    std::fs::create_dir(d.join("src")).unwrap();
    std::fs::write(d.join("src/app.py"), "print('hi')\n").unwrap();
    std::fs::write(d.join("tool.sh"), "#!/bin/sh\necho tool\n").unwrap();
    std::fs::set_permissions(d.join("tool.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn parse(text: &str, context: &Path) -> Result<ImageSpec, ImageError> {
    let context = std::fs::canonicalize(context).unwrap();
    ImageSpec::parse_dockerfile(text, "Dockerfile", Some(&context))
}

const FULL: &str = r#"# syntax=docker/dockerfile:1
# A task's image.
FROM python:3.11-slim-bookworm AS base

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        git \
        # comments may sit inside a continuation
        jq=1.6-2.1 && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
run pip install --no-cache-dir -r requirements.txt 'numpy>=1.26' "rich[jupyter]"
RUN ["python3", "-m", "pip", "install", "--upgrade", "pip"]
COPY src/ /app/src
COPY tool.sh /usr/local/bin/
ENV A=1 B="two words" PATH=/opt/bin:$PATH
ENV LEGACY some value with ${A}
EXPOSE 8000
CMD ["python3", "src/app.py"]
"#;

#[test]
fn the_supported_subset_reads_into_packages_steps_env_and_workdir() {
    let ctx = context();
    let spec = parse(FULL, ctx.path()).unwrap();
    assert_eq!(spec.base.name, "python:3.11-slim-bookworm");
    assert_eq!(spec.base.suite, "bookworm");
    assert_eq!(spec.apt, ["git", "jq=1.6-2.1"]);
    assert!(
        !spec.recommends,
        "every install said --no-install-recommends"
    );
    let packages = spec.packages();
    for p in ["python3", "python3-pip", "git"] {
        assert!(packages.iter().any(|x| x == p), "{p} in {packages:?}");
    }
    assert!(
        !packages.iter().any(|x| x == "build-essential"),
        "slim has no compilers"
    );
    assert_eq!(
        spec.steps,
        [
            Step::Workdir {
                line: 12,
                path: "/app".into()
            },
            Step::Copy {
                line: 13,
                sources: vec!["requirements.txt".into()],
                dest: "/app".into(),
                into: true
            },
            Step::Pip {
                line: 14,
                args: vec![
                    "--requirement=requirements.txt".into(),
                    "numpy>=1.26".into(),
                    "rich[jupyter]".into()
                ],
                cwd: "/app".into(),
                env: vec![("DEBIAN_FRONTEND".into(), "noninteractive".into())],
            },
            Step::Pip {
                line: 15,
                args: vec!["--upgrade".into(), "pip".into()],
                cwd: "/app".into(),
                env: vec![("DEBIAN_FRONTEND".into(), "noninteractive".into())],
            },
            Step::Copy {
                line: 16,
                sources: vec!["src".into()],
                dest: "/app/src".into(),
                into: false
            },
            Step::Copy {
                line: 17,
                sources: vec!["tool.sh".into()],
                dest: "/usr/local/bin".into(),
                into: true
            },
        ]
    );
    let env: Vec<(&str, &str)> = spec
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("DEBIAN_FRONTEND", "noninteractive"),
            ("A", "1"),
            ("B", "two words"),
            (
                "PATH",
                "/opt/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            ),
            ("LEGACY", "some value with 1"),
        ]
    );
    assert_eq!(spec.workdir.as_deref(), Some("/app"));
    let notes = spec.notes.join("\n");
    assert!(
        notes.contains("Dockerfile:1: the parser directive `syntax` is ignored"),
        "{notes}"
    );
    assert!(
        notes.contains("Dockerfile:20: EXPOSE is ignored"),
        "{notes}"
    );
    assert!(notes.contains("Dockerfile:21: CMD is ignored"), "{notes}");
}

#[test]
fn an_install_without_no_install_recommends_brings_recommends_and_full_python_its_tools() {
    let ctx = context();
    let spec = parse("FROM python:3.11\nRUN apt-get install -y git\n", ctx.path()).unwrap();
    assert!(spec.recommends);
    assert!(spec.packages().iter().any(|p| p == "build-essential"));
    let spec = parse(
        "FROM debian:12-slim\nRUN apt-get -qq update; apt-get -yq install git\n",
        ctx.path(),
    )
    .unwrap();
    assert_eq!(spec.base.suite, "bookworm");
    assert_eq!(spec.packages(), ["git"]);
}

/// Each refused Dockerfile (its last line is the refused one), and a word the refusal must say.
const REFUSED: [(&str, &str); 27] = [
    ("FROM ubuntu:22.04", "`ubuntu` is not a base built here"),
    ("FROM python:3.12-slim", "Python 3.12"),
    ("FROM python:3.11-alpine", "Alpine is not Debian"),
    ("FROM debian:latest", "`latest` is not one of the suites"),
    ("FROM debian", "no tag"),
    (
        "FROM --platform=linux/amd64 debian:bookworm",
        "`--platform`",
    ),
    ("FROM debian:bookworm\nFROM debian:bookworm", "multi-stage"),
    (
        "FROM debian:bookworm\nADD https://x/y.tar.gz /opt/",
        "ADD fetches URLs",
    ),
    ("FROM debian:bookworm\nUSER app", "unprivileged user"),
    ("FROM debian:bookworm\nARG VERSION=1", "build arguments"),
    (
        "FROM debian:bookworm\nSHELL [\"/bin/bash\", \"-c\"]",
        "read as sh",
    ),
    ("FROM debian:bookworm\nVOLUME /data", "writable"),
    ("FROM debian:bookworm\nONBUILD RUN true", "not bases"),
    (
        "FROM debian:bookworm\nFROBNICATE x",
        "`FROBNICATE` is not a Dockerfile instruction",
    ),
    (
        "FROM debian:bookworm\nRUN curl -fsSL https://example.com/install.sh",
        "`curl` is neither apt-get nor pip",
    ),
    (
        "FROM debian:bookworm\nRUN apt-get install -y git | tee log",
        "`|` (a pipeline)",
    ),
    (
        "FROM debian:bookworm\nRUN apt-get remove -y git",
        "`apt-get remove`",
    ),
    (
        "FROM debian:bookworm\nRUN apt-get install -y $PKG",
        "`$PKG`",
    ),
    (
        "FROM debian:bookworm\nRUN --mount=type=cache,target=/root/.cache pip install x",
        "`--mount`",
    ),
    (
        "FROM python:3.11\nRUN pip install -i https://mirror/simple x",
        "`-i` (packages come from PyPI)",
    ),
    ("FROM python:3.11\nRUN pip install --user x", "`--user`"),
    ("FROM python:3.11\nRUN pip uninstall x", "`pip uninstall`"),
    (
        "FROM python:3.11\nRUN rm -rf /usr/lib/python3",
        "rm may only clear",
    ),
    (
        "FROM debian:bookworm\nCOPY --from=builder /x /y",
        "multi-stage",
    ),
    ("FROM debian:bookworm\nCOPY ../secret /x", "without `..`"),
    ("FROM debian:bookworm\nCOPY /etc/passwd /x", "without `..`"),
    ("FROM debian:bookworm\nCOPY *.py /app/", "wildcards"),
];

#[test]
fn every_instruction_outside_the_subset_is_refused_by_name_and_line() {
    let ctx = context();
    for (text, said) in REFUSED {
        let err = parse(text, ctx.path()).expect_err(text);
        let line = text.lines().count();
        let keyword = text
            .lines()
            .last()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        let msg = err.to_string();
        assert!(
            matches!(err, ImageError::Unsupported { .. }),
            "{text}: not refused as outside the subset: {msg}"
        );
        assert!(
            msg.starts_with(&format!("Dockerfile:{line}: {keyword}")),
            "{text}: {msg}"
        );
        assert!(
            msg.contains("is outside the supported subset ("),
            "{text}: {msg}"
        );
        assert!(msg.contains(said), "{text}: wanted {said:?} in {msg}");
    }
}

#[test]
fn a_run_names_the_command_outside_the_subset() {
    let ctx = context();
    let err = parse(
        "FROM debian:bookworm\n\nRUN apt-get update && \\\n  curl -o x https://example.com/x\n",
        ctx.path(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with(
            "Dockerfile:3: RUN apt-get update && curl -o x https://example.com/x is outside the supported subset (RUN apt-get install, RUN pip install): `curl` is neither apt-get nor pip"
        ),
        "{err}"
    );
}

#[test]
fn what_cannot_be_built_as_written_is_refused_with_its_line() {
    let ctx = context();
    for (text, said) in [
        (
            "RUN apt-get install -y git",
            "Dockerfile:1: RUN before FROM",
        ),
        ("# only a comment", "Dockerfile: no FROM"),
        (
            "FROM debian:bookworm\nRUN pip install requests",
            "Dockerfile:2: pip install needs pip in the image",
        ),
        (
            "FROM debian:bookworm\nCOPY missing.txt /x",
            "Dockerfile:2: COPY missing.txt",
        ),
    ] {
        let err = parse(text, ctx.path()).expect_err(text).to_string();
        assert!(err.starts_with(said), "{text}: {err}");
    }
    // pip brought by apt is enough.
    parse(
        "FROM debian:bookworm\nRUN apt-get install -y python3-pip && pip install requests",
        ctx.path(),
    )
    .unwrap();
    // A Dockerfile given as text has no folder to copy from.
    let err = ImageSpec::parse_dockerfile("FROM debian:bookworm\nCOPY a /a", "Dockerfile", None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no folder to copy from"), "{err}");
}

#[test]
fn a_link_out_of_the_dockerfiles_folder_is_refused() {
    let ctx = context();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "x").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ctx.path().join("link")).unwrap();
    let err = parse("FROM debian:bookworm\nCOPY link /x", ctx.path()).unwrap_err();
    assert!(
        matches!(err, ImageError::Unsupported { line: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("leads out"), "{err}");
}

#[test]
fn the_escape_directive_is_refused() {
    let ctx = context();
    let err = parse("# escape=`\nFROM debian:bookworm", ctx.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("Dockerfile:1: # escape=` is outside"),
        "{err}"
    );
}

#[test]
fn the_key_is_the_built_content_not_the_spelling() {
    let ctx = context();
    let a = "FROM python:3.11-slim\nRUN apt-get update && apt-get install -y --no-install-recommends jq git\nWORKDIR /app\nCOPY src/ /app/src\nRUN pip install requests\n";
    let b = "# the same image, written otherwise\nfrom python:3.11-slim\n\nrun apt-get install --no-install-recommends -y git \\\n  && apt-get install --no-install-recommends -y jq\nworkdir /app\ncopy ./src /app/src\nrun python3 -m pip install --no-cache-dir requests\n";
    let key = |text: &str| parse(text, ctx.path()).unwrap().key().unwrap();
    let k = key(a);
    assert_eq!(k.len(), 64);
    assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(k, key(b), "spelling changed the key");
    // Every change to what is built changes it.
    for other in [
        a.replace("jq git", "jq"),
        a.replace("--no-install-recommends ", ""),
        a.replace("requests", "requests==2.32.3"),
        a.replace("WORKDIR /app", "WORKDIR /srv"),
        a.replace("python:3.11-slim", "python:3.11"),
        format!("{a}ENV A=1\n"),
    ] {
        assert_ne!(k, key(&other), "{other}");
    }
    // So do the copied files' contents and executable bits, and the mirror.
    std::fs::write(ctx.path().join("src/app.py"), "print('changed')\n").unwrap();
    let changed = key(a);
    assert_ne!(k, changed);
    std::fs::set_permissions(
        ctx.path().join("src/app.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    assert_ne!(changed, key(a));
    let spec = parse(a, ctx.path()).unwrap();
    assert_ne!(
        spec.key().unwrap(),
        spec.key_with_mirror(Some("http://deb.debian.org/debian"))
            .unwrap()
    );
}

//! The Dockerfile subset: `FROM` a Debian or Python base, `RUN apt-get install` and `RUN pip
//! install` (joined by `&&` or `;`, with `apt-get update` and the usual clean-ups), `COPY`,
//! `WORKDIR` and `ENV`. `CMD`, `ENTRYPOINT`, `EXPOSE`, `LABEL`, `MAINTAINER`, `STOPSIGNAL`
//! and `HEALTHCHECK` are accepted and ignored with a note (nothing here runs an image as a
//! service); every other instruction, option or command is refused with its line and why.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use crate::spec::{
    check_apt_package, check_env_name, check_pip_word, normalise_inside, resolve_source, Base,
    ImageSpec, Step, BASES, DEFAULT_PATH,
};
use crate::ImageError;

/// The instructions built, as a refusal names them.
const INSTRUCTIONS: &str = "FROM, RUN apt-get install, RUN pip install, COPY, WORKDIR, ENV";

/// What `RUN` may do, as a refusal names it.
const RUN_SUBSET: &str = "RUN apt-get install, RUN pip install";

/// What `COPY` may copy, as a refusal names it.
const COPY_SUBSET: &str = "COPY of files in the Dockerfile's folder";

/// Paths `rm -rf` may name in a `RUN`: apt's and pip's caches, which a built image does not
/// keep anyway.
const CLEAN_PATHS: [&str; 4] = [
    "/var/lib/apt/lists",
    "/var/cache/apt",
    "/root/.cache",
    "/tmp/",
];

/// One instruction, its continuation lines joined.
struct Instruction {
    /// Its first line, from 1.
    line: usize,
    /// Its keyword, upper case.
    keyword: String,
    /// What follows the keyword, trimmed.
    args: String,
}

impl Instruction {
    /// The instruction as a message shows it: one line, at most 60 characters.
    fn shown(&self) -> String {
        let text = format!("{} {}", self.keyword, self.args);
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match text.char_indices().nth(60) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    }
}

/// The instructions of `text`: comments and blank lines dropped, `\` continuations joined,
/// parser directives read (`# escape=` is refused: every line would read differently).
fn instructions(text: &str, origin: &str) -> Result<(Vec<Instruction>, Vec<String>), ImageError> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut directives = true;
    let mut current: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim();
        if directives && current.is_none() {
            if let Some((key, value)) = trimmed
                .strip_prefix('#')
                .and_then(|d| d.split_once('='))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
                .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic()))
            {
                match key.as_str() {
                    "escape" => {
                        return Err(ImageError::Unsupported {
                            file: origin.to_string(),
                            line: n,
                            what: format!("# escape={value}"),
                            supported: INSTRUCTIONS,
                            why: "another escape character changes how every line reads".into(),
                        })
                    }
                    _ => notes.push(format!(
                        "{origin}:{n}: the parser directive `{key}` is ignored"
                    )),
                }
                continue;
            }
            directives = false;
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            // Also inside a continuation, as Docker reads it.
            continue;
        }
        let body = raw.trim_end();
        let (body, continues) = match body.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (body, false),
        };
        let (line, mut joined) = current.take().unwrap_or((n, String::new()));
        joined.push_str(body);
        if continues {
            // The backslash and its newline go, and nothing takes their place (as in Docker).
            current = Some((line, joined));
        } else {
            out.push(split(line, &joined));
        }
    }
    if let Some((line, joined)) = current {
        out.push(split(line, &joined));
    }
    Ok((out, notes))
}

fn split(line: usize, text: &str) -> Instruction {
    let text = text.trim();
    let (keyword, args) = text
        .split_once(|c: char| c.is_whitespace())
        .unwrap_or((text, ""));
    Instruction {
        line,
        keyword: keyword.to_ascii_uppercase(),
        args: args.trim().to_string(),
    }
}

/// Reads a Dockerfile of the subset (see the module's comment).
pub(crate) fn parse(
    text: &str,
    origin: &str,
    context: Option<&Path>,
) -> Result<ImageSpec, ImageError> {
    let (instructions, mut notes) = instructions(text, origin)?;
    let unsupported =
        |ins: &Instruction, supported: &'static str, why: String| ImageError::Unsupported {
            file: origin.to_string(),
            line: ins.line,
            what: ins.shown(),
            supported,
            why,
        };
    let mut base: Option<Base> = None;
    let mut apt: Vec<String> = Vec::new();
    let mut recommends = false;
    let mut steps: Vec<Step> = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut cwd = String::from("/");
    let mut workdir: Option<String> = None;
    // Folders known to be folders in the image, for `COPY x /app` after `WORKDIR /app`.
    let mut folders: BTreeSet<String> = BTreeSet::from(["/".to_string()]);
    for ins in &instructions {
        let refused = |why: &str| unsupported(ins, INSTRUCTIONS, why.to_string());
        match ins.keyword.as_str() {
            "ADD" => return Err(refused("ADD fetches URLs and unpacks archives; use COPY for the files beside the Dockerfile")),
            "USER" => return Err(refused("commands run as the sandbox's own unprivileged user")),
            "ARG" => return Err(refused("build arguments are not supported; write the value in place")),
            "SHELL" => return Err(refused("RUN is read as sh")),
            "VOLUME" => return Err(refused("the sandbox's only writable folders are its work directory and /tmp")),
            "ONBUILD" => return Err(refused("images here are not bases of other images")),
            "FROM" | "RUN" | "COPY" | "WORKDIR" | "ENV" | "CMD" | "ENTRYPOINT" | "EXPOSE"
            | "LABEL" | "MAINTAINER" | "STOPSIGNAL" | "HEALTHCHECK" => {}
            other => return Err(refused(&format!("`{other}` is not a Dockerfile instruction"))),
        }
        if base.is_none() && ins.keyword != "FROM" {
            return Err(ImageError::Invalid(format!(
                "{origin}:{}: {} before FROM; a Dockerfile starts with FROM <base>",
                ins.line, ins.keyword
            )));
        }
        let ignored =
            |why: &str| format!("{origin}:{}: {} is ignored: {why}", ins.line, ins.keyword);
        match ins.keyword.as_str() {
            "FROM" => {
                if base.is_some() {
                    return Err(refused("multi-stage builds (a second FROM) are not supported"));
                }
                let words: Vec<&str> = ins.args.split_whitespace().collect();
                if let Some(flag) = words.iter().find(|w| w.starts_with("--")) {
                    let name = flag.split('=').next().unwrap_or(flag);
                    return Err(unsupported(ins, BASES, format!("the FROM option `{name}`")));
                }
                match words.as_slice() {
                    [_] => {}
                    [_, kw, _] if kw.eq_ignore_ascii_case("as") => {}
                    _ => return Err(unsupported(ins, BASES, "FROM takes one image (and `AS name`)".into())),
                }
                let b = Base::parse(words[0]).map_err(|why| unsupported(ins, BASES, why))?;
                if let Some(n) = &b.note {
                    notes.push(format!("{origin}:{}: {n}", ins.line));
                }
                base = Some(b);
            }
            "RUN" => {
                if let Some(flag) = ins.args.split_whitespace().next().filter(|w| w.starts_with("--")) {
                    let name = flag.split('=').next().unwrap_or(flag);
                    return Err(unsupported(ins, RUN_SUBSET, format!("the RUN option `{name}`")));
                }
                let commands = match exec_form(&ins.args) {
                    Some(words) => vec![words],
                    None => crate::shell::commands(&ins.args)
                        .map_err(|why| unsupported(ins, RUN_SUBSET, why))?,
                };
                if commands.is_empty() {
                    return Err(unsupported(ins, RUN_SUBSET, "RUN with no command".into()));
                }
                for words in commands {
                    match command(&words).map_err(|why| unsupported(ins, RUN_SUBSET, why))? {
                        Command::Apt { packages, recommended } => {
                            apt.extend(packages);
                            recommends |= recommended;
                        }
                        Command::Pip(args) => steps.push(Step::Pip {
                            line: ins.line,
                            args,
                            cwd: cwd.clone(),
                            env: env.clone(),
                        }),
                        Command::Nothing => {}
                    }
                }
            }
            "COPY" => {
                let step = copy(ins, &cwd, &folders, context, origin, &unsupported)?;
                steps.push(step);
            }
            "WORKDIR" => {
                let arg = ins.args.trim();
                if arg.is_empty() {
                    return Err(refused("WORKDIR names no folder"));
                }
                if arg.contains('$') {
                    return Err(refused("variables in WORKDIR are not expanded here; write the path"));
                }
                let path = normalise_inside(&cwd, arg)
                    .ok_or_else(|| refused("`..` leads out of /"))?;
                cwd = path.clone();
                workdir = Some(path.clone());
                // Its parents are folders too.
                let mut p = Path::new(&path);
                while let Some(parent) = p.parent() {
                    folders.insert(parent.display().to_string());
                    p = parent;
                }
                folders.insert(path.clone());
                steps.push(Step::Workdir { line: ins.line, path });
            }
            "ENV" => {
                let pairs = env_pairs(&ins.args, &env).map_err(|why| refused(&why))?;
                for (k, v) in pairs {
                    env.retain(|(key, _)| *key != k);
                    env.push((k, v));
                }
            }
            "CMD" | "ENTRYPOINT" => notes.push(ignored(
                "the environment runs its own commands (the agent's shell, the tests), not the image's",
            )),
            "EXPOSE" => notes.push(ignored("the sandbox has no network")),
            "LABEL" | "MAINTAINER" => notes.push(ignored("it is metadata")),
            "STOPSIGNAL" | "HEALTHCHECK" => {
                notes.push(ignored("nothing runs the image as a service"))
            }
            _ => unreachable!("every other keyword was refused above"),
        }
    }
    let base = base.ok_or_else(|| {
        ImageError::Invalid(format!(
            "{origin}: no FROM; a Dockerfile starts with FROM <base> ({BASES})"
        ))
    })?;
    apt.sort();
    apt.dedup();
    Ok(ImageSpec {
        origin: origin.to_string(),
        base,
        apt,
        recommends,
        steps,
        env,
        workdir,
        notes,
        context: context.map(Path::to_path_buf),
    })
}

/// The words of a JSON-array (exec form) instruction; `None` when it is not one (Docker then
/// reads it as shell form too).
fn exec_form(args: &str) -> Option<Vec<String>> {
    if !args.starts_with('[') {
        return None;
    }
    serde_json::from_str(args).ok()
}

/// What one command of a `RUN` does to the image.
enum Command {
    /// `apt-get install`: packages, and whether their recommended packages come too.
    Apt {
        packages: Vec<String>,
        recommended: bool,
    },
    /// `pip install`: its arguments after `install`, less the ones the build always passes.
    Pip(Vec<String>),
    /// `apt-get update` and the clean-ups: nothing to do in an image built fresh.
    Nothing,
}

/// One command of a `RUN`, or why it is outside the subset.
fn command(words: &[String]) -> Result<Command, String> {
    let mut w = words;
    while let Some(first) = w.first().filter(|f| is_assignment(f)) {
        if first != "DEBIAN_FRONTEND=noninteractive" {
            return Err(format!("`{first}` (a variable set for the command)"));
        }
        w = &w[1..];
    }
    let Some(program) = w.first() else {
        return Err("a variable set with no command".into());
    };
    let rest = &w[1..];
    match program.as_str() {
        "export" if rest == ["DEBIAN_FRONTEND=noninteractive"] => Ok(Command::Nothing),
        "apt-get" | "apt" => apt(program, rest),
        p if is_pip(p) => pip(rest),
        p if is_python(p) => match rest {
            [m, pip_word, args @ ..] if m == "-m" && pip_word == "pip" => pip(args),
            _ => Err(format!("`{p}` other than `{p} -m pip install`")),
        },
        "rm" => clean_up(rest),
        other => Err(format!("`{other}` is neither apt-get nor pip")),
    }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(k, _)| check_env_name(k).is_ok())
}

/// `pip`, `pip3`, `pip3.11`.
fn is_pip(p: &str) -> bool {
    p.strip_prefix("pip").is_some_and(version_suffix)
}

/// `python`, `python3`, `python3.11`.
fn is_python(p: &str) -> bool {
    p.strip_prefix("python").is_some_and(version_suffix)
}

fn version_suffix(s: &str) -> bool {
    s.is_empty() || (s.starts_with('3') && s.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// `apt-get` / `apt` and their arguments.
fn apt(program: &str, args: &[String]) -> Result<Command, String> {
    let mut sub: Option<&str> = None;
    let mut packages = Vec::new();
    let mut no_recommends = false;
    for a in args {
        if let Some(opt) = a.strip_prefix('-') {
            match a.as_str() {
                "--yes" | "--assume-yes" | "--quiet" | "--no-install-suggests" | "--purge" => {}
                "--no-install-recommends" => no_recommends = true,
                _ if !opt.is_empty() && opt.chars().all(|c| c == 'y' || c == 'q') => {}
                _ => return Err(format!("the {program} option `{a}`")),
            }
        } else if sub.is_none() {
            sub = Some(a);
        } else {
            packages.push(a.clone());
        }
    }
    match sub {
        None => Err(format!("`{program}` with no command")),
        Some("install") => {
            if packages.is_empty() {
                return Err(format!("`{program} install` names no package"));
            }
            for p in &packages {
                check_apt_package(p)?;
            }
            Ok(Command::Apt {
                packages,
                recommended: !no_recommends,
            })
        }
        // An image is built fresh from the suite with its updates: these change nothing.
        Some(
            s @ ("update" | "upgrade" | "dist-upgrade" | "full-upgrade" | "clean" | "autoclean"
            | "autoremove"),
        ) => {
            if packages.is_empty() {
                Ok(Command::Nothing)
            } else {
                Err(format!("`{program} {s} {}`", packages.join(" ")))
            }
        }
        Some(other) => Err(format!(
            "`{program} {other}` (only update, install and the clean-ups are)"
        )),
    }
}

/// pip options that take no value, kept as written.
const PIP_FLAGS: [&str; 13] = [
    "-U",
    "--upgrade",
    "--no-deps",
    "--pre",
    "--prefer-binary",
    "--no-compile",
    "--force-reinstall",
    "-I",
    "--ignore-installed",
    "--no-warn-script-location",
    "--no-build-isolation",
    "--compile",
    "--no-warn-conflicts",
];

/// pip options the build passes itself: dropped where written.
const PIP_OWN: [&str; 8] = [
    "--no-cache-dir",
    "--break-system-packages",
    "--disable-pip-version-check",
    "--no-input",
    "-q",
    "-qq",
    "-qqq",
    "--quiet",
];

/// pip options that take a value (`--opt value` or `--opt=value`), kept as written.
const PIP_VALUED: [&str; 7] = [
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "--only-binary",
    "--no-binary",
    "--upgrade-strategy",
];

/// pip options taking a value that the build sets itself: dropped with their value.
const PIP_OWN_VALUED: [&str; 2] = ["--root-user-action", "--progress-bar"];

/// pip's arguments after the program (`pip`, `python -m pip`).
fn pip(args: &[String]) -> Result<Command, String> {
    let mut i = 0;
    // Global options may come before `install`.
    while let Some(a) = args.get(i).filter(|a| a.starts_with('-')) {
        let name = a.split('=').next().unwrap_or(a);
        if PIP_OWN.contains(&name) {
            i += 1;
        } else if PIP_OWN_VALUED.contains(&name) {
            i += if a.contains('=') { 1 } else { 2 };
        } else {
            return Err(pip_option(a));
        }
    }
    match args.get(i).map(String::as_str) {
        Some("install") => {}
        Some(other) => return Err(format!("`pip {other}` (only pip install is)")),
        None => return Err("`pip` with no command".into()),
    }
    i += 1;
    let mut kept = Vec::new();
    let mut installs = false;
    while let Some(a) = args.get(i) {
        i += 1;
        if !a.starts_with('-') || a == "-" {
            check_pip_word(a)?;
            if a == "-" {
                return Err("`-` (requirements from stdin)".into());
            }
            kept.push(a.clone());
            installs = true;
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (a.as_str(), None),
        };
        // `-rrequirements.txt`, as pip reads it.
        let (name, inline) = match name {
            n if inline.is_none()
                && n.len() > 2
                && (n.starts_with("-r") || n.starts_with("-c"))
                && !n.starts_with("--") =>
            {
                (&n[..2], Some(&n[2..]))
            }
            n => (n, inline),
        };
        if PIP_OWN.contains(&name) {
            continue;
        }
        if PIP_FLAGS.contains(&name) {
            if inline.is_some() {
                return Err(format!("the pip option `{a}` takes no value"));
            }
            kept.push(a.clone());
            continue;
        }
        let valued = PIP_VALUED.contains(&name);
        if valued || PIP_OWN_VALUED.contains(&name) {
            let value = match inline {
                Some(v) => v.to_string(),
                None => {
                    let v = args
                        .get(i)
                        .ok_or_else(|| format!("the pip option `{name}` needs a value"))?;
                    i += 1;
                    v.clone()
                }
            };
            check_pip_word(&value)?;
            if valued {
                let long = match name {
                    "-r" => "--requirement",
                    "-c" => "--constraint",
                    n => n,
                };
                installs |= long == "--requirement";
                kept.push(format!("{long}={value}"));
            }
            continue;
        }
        return Err(pip_option(a));
    }
    if !installs {
        return Err("`pip install` names nothing to install".into());
    }
    Ok(Command::Pip(kept))
}

/// Why a pip option is refused.
fn pip_option(a: &str) -> String {
    let name = a.split('=').next().unwrap_or(a);
    let why = match name {
        "-i" | "--index-url" | "--extra-index-url" | "-f" | "--find-links" | "--trusted-host" => {
            "packages come from PyPI"
        }
        "-e" | "--editable" => "an editable install points into a folder the image does not keep",
        "--user" => "it installs into root's home, which the sandbox's user does not see",
        "-t" | "--target" | "--prefix" | "--root" => "packages go into the system Python",
        _ => "not one the build passes on",
    };
    format!("the pip option `{name}` ({why})")
}

/// `rm -rf` of apt's lists and caches: nothing to do in an image built here.
fn clean_up(args: &[String]) -> Result<Command, String> {
    let mut paths = 0;
    for a in args {
        if let Some(flags) = a.strip_prefix('-') {
            let ok = matches!(a.as_str(), "--recursive" | "--force")
                || (!flags.is_empty() && flags.chars().all(|c| matches!(c, 'r' | 'R' | 'f')));
            if !ok {
                return Err(format!("the rm option `{a}`"));
            }
        } else if CLEAN_PATHS.iter().any(|p| a.starts_with(p)) && !a.contains("..") {
            paths += 1;
        } else {
            return Err(format!(
                "`rm {a}` (rm may only clear apt's and pip's caches: {})",
                CLEAN_PATHS.join(", ")
            ));
        }
    }
    if paths == 0 {
        return Err("`rm` of nothing".into());
    }
    Ok(Command::Nothing)
}

/// A `COPY`: sources checked to lie in the context, the destination made absolute.
fn copy(
    ins: &Instruction,
    cwd: &str,
    folders: &BTreeSet<String>,
    context: Option<&Path>,
    origin: &str,
    unsupported: &dyn Fn(&Instruction, &'static str, String) -> ImageError,
) -> Result<Step, ImageError> {
    let refused = |why: String| unsupported(ins, COPY_SUBSET, why);
    if let Some(flag) = ins
        .args
        .split_whitespace()
        .next()
        .filter(|w| w.starts_with("--"))
    {
        let name = flag.split('=').next().unwrap_or(flag);
        return Err(refused(match name {
            "--from" => "multi-stage builds (COPY --from) are not supported".into(),
            "--chown" | "--chmod" => format!(
                "`{name}`: copied files are root's, readable by all, executable where the source is"
            ),
            _ => format!("the COPY option `{name}`"),
        }));
    }
    let words: Vec<String> = match exec_form(&ins.args) {
        Some(w) => w,
        None => ins.args.split_whitespace().map(str::to_string).collect(),
    };
    let [sources @ .., dest] = words.as_slice() else {
        return Err(refused("COPY needs a source and a destination".into()));
    };
    if sources.is_empty() {
        return Err(refused("COPY needs a source and a destination".into()));
    }
    let context = context.ok_or_else(|| {
        ImageError::Invalid(format!(
            "{origin}:{}: COPY has no folder to copy from (the Dockerfile was given as text)",
            ins.line
        ))
    })?;
    let mut normal = Vec::new();
    for src in sources {
        if src.contains(&['*', '?', '['][..]) {
            return Err(refused(format!(
                "`{src}`: wildcards are not expanded here; name the files"
            )));
        }
        if src.contains("://") {
            return Err(refused(format!("`{src}`: a URL")));
        }
        if src.starts_with('/')
            || Path::new(src)
                .components()
                .any(|c| c == Component::ParentDir)
        {
            return Err(refused(format!(
                "`{src}`: sources are relative to the Dockerfile's folder, without `..`"
            )));
        }
        let real = resolve_source(context, src).map_err(|why| {
            if why.contains("leads out") {
                refused(format!("`{src}`: {why}"))
            } else {
                ImageError::Invalid(format!("{origin}:{}: COPY {src}: {why}", ins.line))
            }
        })?;
        if real.is_dir() && context.join(".dockerignore").exists() {
            return Err(refused(format!(
                "`{src}` is a folder and the Dockerfile's folder has a .dockerignore, which is not read here"
            )));
        }
        let rel: Vec<String> = Path::new(src)
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        normal.push(if rel.is_empty() {
            ".".to_string()
        } else {
            rel.join("/")
        });
    }
    if dest.contains('$') {
        return Err(refused(
            "variables in the destination are not expanded here".into(),
        ));
    }
    let path = normalise_inside(cwd, dest).ok_or_else(|| refused("`..` leads out of /".into()))?;
    let into = dest.ends_with('/') || dest == "." || sources.len() > 1 || folders.contains(&path);
    Ok(Step::Copy {
        line: ins.line,
        sources: normal,
        dest: path,
        into,
    })
}

/// An `ENV`'s pairs (`k=v k2="v 2"`, or the older `k v`), `$VAR` and `${VAR}` expanded from the
/// environment before it.
fn env_pairs(args: &str, env: &[(String, String)]) -> Result<Vec<(String, String)>, String> {
    let lookup = |name: &str| -> String {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| (name == "PATH").then(|| DEFAULT_PATH.to_string()))
            .unwrap_or_default()
    };
    let first = args.split_whitespace().next().unwrap_or("");
    if first.is_empty() {
        return Err("ENV sets nothing".into());
    }
    if !first.contains('=') {
        // The older form: the name, then everything after it is the value.
        let value = args[first.len()..].trim();
        check_env_name(first)?;
        if value.is_empty() {
            return Err(format!("ENV {first} has no value"));
        }
        return Ok(vec![(first.to_string(), expand(value, &lookup, false)?)]);
    }
    let mut pairs = Vec::new();
    let mut chars = args.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        if chars.next() != Some('=') {
            return Err(format!(
                "`{key}` has no `=value` (write every pair as name=value)"
            ));
        }
        check_env_name(&key)?;
        let mut raw = String::new();
        // The value as written up to unquoted whitespace, quotes kept for `expand`.
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.peek() {
            match (quote, c) {
                (None, c) if c.is_whitespace() => break,
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (_, '\\') => {
                    raw.push(c);
                    chars.next();
                    if let Some(n) = chars.next() {
                        raw.push(n);
                    }
                    continue;
                }
                _ => {}
            }
            raw.push(c);
            chars.next();
        }
        if quote.is_some() {
            return Err(format!("an unterminated quote in the value of `{key}`"));
        }
        pairs.push((key, expand(&raw, &lookup, true)?));
    }
    Ok(pairs)
}

/// A value with `$VAR` / `${VAR}` replaced (unknown ones by nothing, as Docker does), and,
/// with `unquote`, its quotes and backslashes removed as Docker's `ENV k=v` reads them.
fn expand(raw: &str, lookup: &dyn Fn(&str) -> String, unquote: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' if unquote && quote.is_none() => quote = Some(c),
            c if unquote && quote == Some(c) => quote = None,
            '\\' if unquote && quote != Some('\'') => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '$' if quote != Some('\'') => {
                let name: String = if chars.next_if_eq(&'{').is_some() {
                    let inner: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if !inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        return Err(format!("`${{{inner}}}` (only plain ${{NAME}} is expanded)"));
                    }
                    inner
                } else {
                    std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_'))
                        .collect()
                };
                if name.is_empty() {
                    out.push('$');
                } else {
                    out.push_str(&lookup(&name));
                }
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;

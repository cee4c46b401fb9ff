//! Per-task system images without Docker: a task names a Debian base with apt and pip
//! packages (an `[image]` table) or a Dockerfile of a small subset; it is built once, by
//! Debian's `mmdebstrap`, into a root filesystem kept in a cache folder under its key, and
//! the sandbox (`openclaw_sandbox::SystemRoot::Image`) runs the task's commands on it,
//! read-only, with no network.
//!
//! - [`ImageSpec`]: what an image is ([`ImageSpec::from_toml`], [`ImageSpec::from_dockerfile`]);
//!   every Dockerfile instruction outside the subset is refused with its line and why.
//! - [`ImageSpec::key`]: SHA-256 of the normalised spec and the copied files' contents.
//! - [`ImageCache`]: finds an image by its key or builds it (under a lock, in a partial folder
//!   renamed when whole), and gives a [`Built`]: its root, `ENV` and `WORKDIR`.
//!
//! The network is used while building only: mmdebstrap fetches Debian's packages, and pip runs
//! inside the new tree under bubblewrap with the host's network and CA bundle. The README
//! lists what is supported and what was tested.

mod build;
mod dockerfile;
mod shell;
mod spec;

use std::path::PathBuf;

mod sandboxes;

pub use build::{Built, ImageCache};
pub use sandboxes::{sandboxes, OnImage};
pub use spec::{Base, ImageSpec, ImageTable, Step};

/// Why an image could not be read or built.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A Dockerfile instruction, option or command outside the subset: where, what, what is
    /// supported there, and why.
    #[error("{file}:{line}: {what} is outside the supported subset ({supported}): {why}")]
    Unsupported {
        /// The Dockerfile, as named to the parser.
        file: String,
        /// The instruction's first line, from 1.
        line: usize,
        /// The instruction as written (one line, shortened).
        what: String,
        /// What is supported in its place.
        supported: &'static str,
        /// What is outside the subset, and why.
        why: String,
    },
    /// A spec that cannot be built as written (a table's value, a missing `COPY` source, no
    /// `FROM`), worded whole with where it is.
    #[error("{0}")]
    Invalid(String),
    /// A tool the build needs is not installed.
    #[error("{tool} is not installed, and {why}: {install} (Debian, Ubuntu)")]
    Missing {
        /// The binary looked for.
        tool: String,
        /// What it is needed for.
        why: &'static str,
        /// How to install it.
        install: &'static str,
    },
    /// A build step failed for want of the network.
    #[error(
        "building image {key} needs the network (Debian's mirror for packages, PyPI for pip), \
         and {step} could not reach it: {said}\nthe end of its log ({}):\n{tail}",
        .log.display()
    )]
    Network {
        /// The image's key.
        key: String,
        /// The step.
        step: String,
        /// The line of its output that says so.
        said: String,
        /// The build's log.
        log: PathBuf,
        /// The last lines of the step's output.
        tail: String,
    },
    /// A build step failed.
    #[error("building image {key} failed at {step}; the end of its log ({}):\n{tail}", .log.display())]
    Build {
        /// The image's key.
        key: String,
        /// The step and how it ended.
        step: String,
        /// The build's log.
        log: PathBuf,
        /// The last lines of the step's output.
        tail: String,
    },
    /// The host failed (a folder, a file, a process).
    #[error("images: {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

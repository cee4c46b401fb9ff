//! One writer per directory: an exclusive `flock` on a `LOCK` file inside it, held for the life
//! of the process's use and released by the kernel however the process ends (`kill -9`
//! included), so a stale lock never needs clearing by hand.
//!
//! Two processes appending to one buffer each number records from what they read at start and
//! each cut the other's "torn" tail, so answers acknowledged to clients are lost; two trainers
//! in one save directory overwrite each other's checkpoints. Readers (`buffer check`,
//! `export`) take no lock.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// An exclusive hold on a directory, released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes `dir` (created when missing) for this process, or fails at once naming the
    /// process that holds it. `what` names the directory in the error (`buffer directory`,
    /// `save directory`) and the lock file (`buffer directory.lock`: one directory may be both,
    /// with a lock for each), and `flag` the setting that moves it elsewhere.
    pub fn acquire(dir: &Path, what: &str, flag: &str) -> Result<DirLock> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the {what} {}", dir.display()))?;
        let path = dir.join(format!(".{}.lock", what.replace(' ', "-")));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open the {what}'s lock {}", path.display()))?;
        // SAFETY: a valid descriptor this function owns; LOCK_NB makes the call return at once.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if taken != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err).with_context(|| format!("cannot lock {}", path.display()));
            }
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = text
                .trim()
                .parse::<u32>()
                .map(|pid| format!("process {pid}"))
                .unwrap_or_else(|_| "another process".into());
            bail!(
                "the {what} {} is in use by {holder} (another openclaw-host writing to it); two writers would lose each other's records. Stop it, or give this command another {flag}",
                dir.display()
            );
        }
        file.set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .and_then(|_| file.sync_data())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_directory_can_be_both_a_buffer_and_a_save_directory() {
        let dir = tempfile::tempdir().unwrap();
        let _buffer = DirLock::acquire(dir.path(), "buffer directory", "--rl-buffer-dir").unwrap();
        let _save = DirLock::acquire(dir.path(), "save directory", "--save").unwrap();
    }

    #[test]
    fn a_second_hold_is_refused_naming_the_holder_and_a_drop_frees_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(dir.path(), "buffer directory", "--rl-buffer-dir").unwrap();
        let e = DirLock::acquire(dir.path(), "buffer directory", "--rl-buffer-dir")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("process {}", std::process::id()))
                && e.contains("--rl-buffer-dir")
                && e.contains("in use"),
            "{e}"
        );
        drop(first);
        DirLock::acquire(dir.path(), "buffer directory", "--rl-buffer-dir").unwrap();
    }
}

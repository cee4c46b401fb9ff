//! The system calls a sandboxed command is refused (`EPERM`), as a seccomp-BPF program that
//! bubblewrap installs (`--seccomp FD`) after setting the sandbox up: kernel interfaces that
//! untrusted code never needs and that have been the way out of namespaces before (io_uring,
//! keyrings, BPF, ptrace, mounts, new namespaces, module loading, other processes' memory).
//!
//! A denylist rather than an allowlist: interpreters, compilers and test runners use a wide
//! and changing set of calls, and everything a sandbox must stop is named here. The program is
//! compiled by rust-vmm's `seccompiler` (the compiler Firecracker's jailer uses) rather than
//! written as BPF by hand.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

/// The refused calls, by name (for the documentation and the tests) and number.
pub const REFUSED: &[(&str, libc::c_long)] = &[
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kcmp", libc::SYS_kcmp),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("syslog", libc::SYS_syslog),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("adjtimex", libc::SYS_adjtimex),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("vhangup", libc::SYS_vhangup),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("process_madvise", libc::SYS_process_madvise),
];

/// The filter as the bytes bubblewrap reads (an array of `struct sock_filter`), for this
/// machine's architecture.
pub fn program() -> Result<Vec<u8>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp: {e:?} ({})", std::env::consts::ARCH))?;
    // `c_long` is `i64` here but `i32` on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    let rules = REFUSED
        .iter()
        .map(|&(_, nr)| (nr as i64, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| format!("seccomp: {e}"))?;
    let program: BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    let mut bytes = Vec::with_capacity((program.len() + 5) * 8);
    let mut push = |code: u16, jt: u8, jf: u8, k: u32| {
        bytes.extend_from_slice(&code.to_ne_bytes());
        bytes.push(jt);
        bytes.push(jf);
        bytes.extend_from_slice(&k.to_ne_bytes());
    };
    // x32 calls carry x86_64's architecture and their number plus 0x40000000, so they match
    // none of the rules by number: refuse them all before the compiled program runs (its own
    // jumps are relative, so what comes before it does not move them).
    if cfg!(target_arch = "x86_64") {
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const JGE_K: u16 = 0x35;
        const RET_K: u16 = 0x06;
        const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const RET_ERRNO: u32 = 0x0005_0000;
        push(LD_W_ABS, 0, 0, 4); // seccomp_data.arch
        push(JEQ_K, 0, 3, AUDIT_ARCH_X86_64);
        push(LD_W_ABS, 0, 0, 0); // seccomp_data.nr
        push(JGE_K, 0, 1, X32_SYSCALL_BIT);
        push(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32);
    }
    for f in &program {
        push(f.code, f.jt, f.jf, f.k);
    }
    Ok(bytes)
}

/// A file descriptor holding `program` from its start, closed on exec (the spawn clears that
/// flag in the child that hands it to bubblewrap).
pub fn memfd(program: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::{Seek, Write};
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: a valid C string; the result is checked before use.
    let fd = unsafe { libc::memfd_create(c"openclaw-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just created and owned by nothing else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    file.write_all(program)?;
    file.rewind()?;
    Ok(file.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_compiles_to_whole_instructions() {
        let p = program().unwrap();
        assert!(!p.is_empty() && p.len().is_multiple_of(8));
        // One comparison at least for every refused call.
        assert!(p.len() / 8 > REFUSED.len());
    }
}

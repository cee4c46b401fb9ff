//! The `openclaw-host` binary.

use clap::Parser;
use openclaw_host::cli::{run, Cli};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings (`_RJEM_MALLOC_CONF` in the environment still overrides them). Huge
/// pages for its extents: a prompt's activations and the KV cache it grows are tens of MB
/// written once per request, and on 4 KiB pages a turn after a cached 12,000-token prefix spent
/// a third of its time faulting them in (turn 2 of the OpenClaw replay 0.14 -> 0.12 s; idle
/// memory about 40 MB higher).
///
/// Freed pages are kept for reuse, never handed back (`dirty_decay_ms:-1`, `muzzy_decay_ms:-1`),
/// in one arena: a training step frees and reallocates the same few hundred MB every step, and
/// with jemalloc's default ten-second decay (and eight arenas among the threads each step
/// starts) a seventh of the step went to the kernel zeroing pages it had just taken back;
/// `bench train` 8,300 -> 11,000 tok/s (built-in shape) and 2,280 -> 2,900 (4 layers of 256)
/// on the 2-core AVX-512 machine, peak RSS unchanged. The cost is that a process's resident
/// memory stays at its peak.
#[cfg(not(target_env = "msvc"))]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"thp:always,narenas:1,dirty_decay_ms:-1,muzzy_decay_ms:-1\0";

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    // Errors are one line naming what was expected and what was found; no backtrace.
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

//! The `openclaw-host` binary.

use clap::Parser;
use openclaw_host::{run, Cli};

#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings (`_RJEM_MALLOC_CONF` in the environment still overrides them). Huge
/// pages for its extents: a prompt's activations and the KV cache it grows are tens of MB
/// written once per request, and on 4 KiB pages a turn after a cached 12,000-token prefix spent
/// a third of its time faulting them in (turn 2 of the OpenClaw replay 0.14 -> 0.12 s; idle
/// memory about 40 MB higher).
///
/// One arena for all threads (`narenas:1`): a training step starts its data-parallel threads
/// anew, and with jemalloc's default of four arenas per core each new thread could land on an
/// arena whose freed pages it could not reuse, faulting fresh ones in (`bench train` about 10%
/// faster). Freed pages are still handed back after jemalloc's decay: keeping them for good
/// (`dirty_decay_ms:-1`) made the benchmark faster again but let a 50-step SmolLM2 LoRA run grow
/// to 10.7 GB of resident memory instead of 4 GB, its allocations differing in size from step to
/// step.
#[cfg(not(target_env = "msvc"))]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"thp:always,narenas:1\0";

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only where a terminal shows them, not in a pipe or a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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

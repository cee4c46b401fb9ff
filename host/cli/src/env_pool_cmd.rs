//! `env-pool serve`: an environment plugin behind the lease protocol, for runs on other machines.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use openclaw_episodes::pool::server::{router, spawn_reaper, Pool, PoolOptions};
use openclaw_episodes::setup::{open_env, EnvFiles};

/// Flags of `env-pool serve`.
#[derive(clap::Args, Debug)]
pub struct ServeFlags {
    /// The environment: a crate directory, a library, or a name under envs/.
    #[arg(long, env = "ENV_TYPE")]
    pub env: String,
    /// The environment's configuration file (TOML); the plugin's default when not given.
    #[arg(long, env = "ENV_CONFIG")]
    pub env_config: Option<PathBuf>,
    /// The tools and their limits: a TOML file of [tools.<name>] tables.
    #[arg(long, env = "TOOLS_CONFIG")]
    pub tools_config: Option<PathBuf>,
    /// The SWE environment's instances: a SWE-bench JSONL file or a folder of them.
    #[arg(long, env = "SWE_BENCH_PATH")]
    pub swe_bench_path: Option<PathBuf>,
    /// The GUI environment's browser driver: webdriver (the original's playwright and selenium
    /// are refused).
    #[arg(long, env = "SCREENSHOT_BACKEND")]
    pub screenshot_backend: Option<String>,
    /// Address to listen on (a non-loopback one serves other machines: give them a key with
    /// --api-key).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Bearer key every call but /healthz must carry (clients send it from ENV_POOL_API_KEY);
    /// empty: none asked.
    #[arg(
        long,
        env = "ENV_POOL_API_KEY",
        default_value = "",
        hide_env_values = true
    )]
    pub api_key: String,
    /// Port (0: any free one, printed at start).
    #[arg(long, default_value_t = 18081)]
    pub port: u16,
    /// Leases (episodes) at once; more are answered 429 RUN_SLOTS_EXHAUSTED.
    #[arg(long, env = "WORKER_MAX_RUNS", default_value_t = 16)]
    pub max_leases: usize,
    /// Leases of one task at once; more are answered 429 TASK_SLOTS_EXHAUSTED.
    #[arg(long, env = "WORKER_MAX_RUNS_PER_TASK", default_value_t = 8)]
    pub max_leases_per_task: usize,
    /// Leases one client (address) may hold at once; more are answered 429
    /// RUN_SLOTS_EXHAUSTED.
    #[arg(long, env = "WORKER_MAX_RUNS_PER_CLIENT", default_value_t = 8)]
    pub max_leases_per_client: usize,
    /// Seconds a lease may go without a call or heartbeat before it is closed.
    #[arg(long, env = "WORKER_RUN_IDLE_TTL", default_value_t = 600)]
    pub idle_ttl: u64,
    /// Seconds a lease lives at most, heartbeats or not.
    #[arg(long, default_value_t = 4 * 3600)]
    pub max_lease_age: u64,
    /// Seconds each environment call but evaluate may take.
    #[arg(long, default_value_t = 60)]
    pub env_call_timeout: u64,
    /// Seconds evaluate may take.
    #[arg(long, default_value_t = 300)]
    pub evaluate_timeout: u64,
}

/// Runs `env-pool serve` until Ctrl-C or SIGTERM.
pub fn serve(flags: &ServeFlags) -> Result<i32> {
    if flags.max_leases == 0
        || flags.max_leases_per_task == 0
        || flags.max_leases_per_client == 0
        || flags.idle_ttl == 0
        || flags.max_lease_age == 0
    {
        anyhow::bail!("--max-leases, --max-leases-per-task, --max-leases-per-client, --idle-ttl and --max-lease-age must be at least 1");
    }
    let env = open_env(
        &flags.env,
        &EnvFiles {
            config: flags.env_config.clone(),
            tools: flags.tools_config.clone(),
            swe_bench_path: flags.swe_bench_path.clone(),
            screenshot_backend: flags.screenshot_backend.clone(),
            ..EnvFiles::default()
        },
    )?;
    let name = env.plugin().to_string();
    let pool = Pool::new(
        env,
        PoolOptions {
            max_leases: flags.max_leases,
            max_leases_per_task: flags.max_leases_per_task,
            idle_ttl: Duration::from_secs(flags.idle_ttl),
            call_timeout: Duration::from_secs(flags.env_call_timeout.max(1)),
            evaluate_timeout: Duration::from_secs(flags.evaluate_timeout.max(1)),
            max_leases_per_client: flags.max_leases_per_client,
            max_lease_age: Duration::from_secs(flags.max_lease_age),
            api_key: flags.api_key.clone(),
        },
    )?;
    if flags.api_key.is_empty() && !openclaw_config::access::loopback(&flags.host) {
        let why = format!(
            "listening on {} without a key: any machine that reaches this port can run commands in this pool's sandboxes; set --api-key (ENV_POOL_API_KEY) or bind 127.0.0.1",
            flags.host
        );
        tracing::warn!("{why}");
        eprintln!("warning: {why}");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((flags.host.as_str(), flags.port))
            .await
            .with_context(|| format!("binding {}:{}", flags.host, flags.port))?;
        let addr = listener.local_addr()?;
        println!("environment pool `{name}` serving on http://{addr} ({} tasks; {} leases, {} per task, {} per client, idle ones closed after {} s{})",
            pool.task_count(), flags.max_leases, flags.max_leases_per_task, flags.max_leases_per_client, flags.idle_ttl,
            if flags.api_key.is_empty() { "; no key asked" } else { "; a key asked" });
        spawn_reaper(pool.clone());
        axum::serve(
            listener,
            router(pool).into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
            .with_graceful_shutdown(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await?;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(0)
}

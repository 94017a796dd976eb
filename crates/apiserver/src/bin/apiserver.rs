//! The embedded Kubernetes API server as a standalone process.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// mimalloc, as the manager (plan 0016 C4): the server allocates and frees an object's
/// JSON, its watch lines and a request's buffers on every write, and glibc's malloc
/// spent about a fifth of the server's threads' CPU in malloc, free and realloc (plan
/// 0012 S3).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An in-memory Kubernetes API server for development and tests, over HTTPS with one
/// bearer token that grants everything (both written into `--kubeconfig-out`).
#[derive(Debug, Parser)]
#[command(name = "apiserver", version)]
struct Args {
    /// Port to listen on (0: a free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// Allow a non-loopback bind address (anyone who can connect may try the token).
    #[arg(long)]
    allow_non_loopback: bool,
    /// Also accept requests addressed to this host name or address (repeatable); loopback
    /// names are always accepted. It goes into the serving certificate too.
    #[arg(long = "allow-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// Write a kubeconfig for this server here (mode 0600: it holds the token).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Persist objects here (default: memory only); the CA and the token are kept here too.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Read the bearer token from this file; a missing file gets a new random token
    /// (mode 0600). Default: `<data-dir>/token`, or a new token at every start.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS (the token is still required; some clients,
    /// such as @kubernetes/client-node, refuse plain HTTP).
    #[arg(long)]
    plain_http: bool,
    /// Serve the debug endpoints under /debug/: fault injection, forced compaction and
    /// the write history, for chaos tests. They need the token and a loopback client.
    #[arg(long)]
    debug_endpoints: bool,
    /// Keep the history of the writes of this resource (`<plural>.<group>`, or
    /// `<plural>` for a core one; repeatable) for GET /debug/history; with --data-dir it
    /// survives restarts.
    #[arg(
        long = "debug-history",
        value_name = "RESOURCE",
        requires = "debug_endpoints"
    )]
    debug_history: Vec<String>,
}

/// Writes the debug history keeps at most (each keeps its object version in memory).
const DEBUG_HISTORY_CAP: usize = 1_000_000;

/// `computecontracts.socialweb.computer` -> `socialweb.computer/computecontracts`,
/// `secrets` -> `/secrets`: the store's name of a resource.
fn storage_key(resource: &str) -> String {
    let (plural, group) = resource.split_once('.').unwrap_or((resource, ""));
    format!("{group}/{plural}")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs on stderr: stdout carries only the URL, for scripts.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let mut builder = apiserver::ApiServer::builder()
        .port(args.port)
        .bind_address(args.bind_address)
        .allow_non_loopback(args.allow_non_loopback)
        .plain_http(args.plain_http)
        .debug_endpoints(args.debug_endpoints);
    if !args.debug_history.is_empty() {
        builder = builder.options(apiserver::Options {
            history_resources: args.debug_history.iter().map(|r| storage_key(r)).collect(),
            history_cap: DEBUG_HISTORY_CAP,
            ..apiserver::Options::default()
        });
    }
    for host in &args.allowed_hosts {
        builder = builder.allow_host(host);
    }
    if let Some(dir) = &args.data_dir {
        builder = builder.data_dir(dir);
    }
    if let Some(path) = &args.token_file {
        builder = builder.token_file(path);
    }
    let server = builder.serve().await.context("starting the api server")?;
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .context("writing the kubeconfig")?;
        tracing::info!(path = %path.display(), "kubeconfig written");
    } else {
        tracing::warn!(
            "no --kubeconfig-out: clients need the token (--token-file) and, for HTTPS, the CA"
        );
    }
    println!("{}", server.url());
    tokio::select! {
        () = server_wait(server) => {}
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; stopping"),
    }
    Ok(())
}

async fn server_wait(server: apiserver::ApiServer) {
    server.wait().await;
}

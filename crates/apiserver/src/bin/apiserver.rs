//! The embedded Kubernetes API server as a standalone process.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// An in-memory Kubernetes API server for development and tests. It has NO authentication.
#[derive(Debug, Parser)]
#[command(name = "apiserver", version)]
struct Args {
    /// Port to listen on (0: a free port).
    #[arg(long, default_value_t = 6443)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind_address: IpAddr,
    /// Allow a non-loopback bind address (anyone who can connect can do anything).
    #[arg(long)]
    allow_non_loopback: bool,
    /// Write a kubeconfig for this server here.
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Persist objects here (default: memory only).
    #[arg(long)]
    data_dir: Option<PathBuf>,
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
        .allow_non_loopback(args.allow_non_loopback);
    if let Some(dir) = &args.data_dir {
        builder = builder.data_dir(dir);
    }
    let server = builder.serve().await.context("starting the api server")?;
    tracing::warn!(url = %server.url(), "serving with NO authentication and NO authorization");
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(path)
            .context("writing the kubeconfig")?;
        tracing::info!(path = %path.display(), "kubeconfig written");
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

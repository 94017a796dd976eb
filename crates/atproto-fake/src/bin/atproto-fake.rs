//! Runs the fake PLC, PDS and relay standalone and prints their URLs.
//!
//! `atproto-fake --pds 127.0.0.1:2583 --plc 127.0.0.1:2582 --relay 127.0.0.1:2584
//! --account alice.test:password` (every flag optional; ports default to
//! ephemeral ones).

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Parser;

#[derive(Parser)]
#[command(about = "A fake atproto PLC directory, PDS and relay index, in memory")]
struct Args {
    /// The PLC directory's listen address.
    #[arg(long)]
    plc: Option<SocketAddr>,
    /// The PDS's listen address.
    #[arg(long)]
    pds: Option<SocketAddr>,
    /// The relay's listen address.
    #[arg(long)]
    relay: Option<SocketAddr>,
    /// Accounts to create, as handle:password (repeatable).
    #[arg(long = "account")]
    accounts: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let net = atproto_fake::FakeNetwork::start_on(atproto_fake::Addresses {
        plc: args.plc,
        pds: args.pds,
        relay: args.relay,
    })
    .await
    .context("binding the fake services")?;
    println!("plc   {}", net.plc_url);
    println!("pds   {}", net.pds_url);
    println!("relay {}", net.relay_url);
    for account in &args.accounts {
        let (handle, password) = account
            .split_once(':')
            .context("--account is handle:password")?;
        let created = net
            .pds
            .create_account(handle, &password.into())
            .map_err(|e| anyhow::anyhow!("creating {handle}: {}", e.message))?;
        println!("account {} {}", created.handle, created.did);
    }
    tokio::select! {
        () = net.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

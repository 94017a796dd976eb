//! Runs the fake PLC, PDS and relay standalone and prints their URLs.
//!
//! `atproto-fake --pds 127.0.0.1:2583 --plc 127.0.0.1:2582 --relay 127.0.0.1:2584
//! --account alice.test:password --bidder cheap.test:0.05 --bidder free.test:free`
//! (every flag optional; ports default to ephemeral ones).

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
    /// Fake compute bidders, as handle:cost (USD per hour, or `free`)
    /// (repeatable); each serves on its own loopback port.
    #[arg(long = "bidder")]
    bidders: Vec<String>,
}

/// `handle:cost` -> the bidder's options.
fn bidder_options(spec: &str) -> anyhow::Result<atproto_fake::bidder::BidderOptions> {
    use atproto_fake::bidder::{BidderOptions, Offer};
    let (handle, cost) = spec.split_once(':').context("--bidder is handle:cost")?;
    let offer = if cost == "free" {
        Offer::Free
    } else {
        Offer::X402 {
            cost: cost.parse().context("--bidder cost is a number or free")?,
            currency: "USD".to_owned(),
            frequency: "hourly".to_owned(),
        }
    };
    Ok(BidderOptions::new(handle, offer))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let mut net = atproto_fake::FakeNetwork::start_on(atproto_fake::Addresses {
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
    for spec in &args.bidders {
        let bidder = net
            .start_bidder(bidder_options(spec)?)
            .await
            .with_context(|| format!("starting bidder {spec}"))?;
        println!("bidder {} {}", bidder.did(), bidder.url());
    }
    tokio::select! {
        () = net.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}

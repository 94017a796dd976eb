//! A faithful in-process fake of the standard atproto services the market
//! uses (MARKET.md section 8): a PLC directory ([`plc`]), a multi-repo PDS
//! ([`pds`]) and a relay index ([`relay`]), each an axum service on its own
//! loopback port, with shared fault knobs ([`Faults`]).
//!
//! # Expected flow
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let net = atproto_fake::FakeNetwork::start().await?;
//! let alice = net.pds.create_account("alice.test", &"pw".into()).expect("new handle");
//! // point atproto::PdsClient at net.pds_url, atproto::DidResolver at net.plc_url,
//! // discovery at net.relay_url; arm faults with net.faults.
//! net.faults.once(atproto_fake::Service::Pds, "com.atproto.repo.putRecord",
//!                 atproto_fake::Fault::internal());
//! # let _ = alice; Ok(()) }
//! ```
//! The `atproto-fake` binary runs the same services standalone.
//!
//! # Guarantees
//! - Where a client can tell, answers are Bluesky's: error names and
//!   statuses, record CIDs (DAG-CBOR of the record, `$bytes` as bytes), TID
//!   rkeys, newest-first pages with the last rkey as cursor, DID documents as
//!   plc.directory renders them, and PLC operations checked (genesis hash,
//!   rotation-key signature) so Bluesky's own PDS can register accounts here.
//! - Service-auth JWTs are signed with the account's `#atproto` key, which
//!   is in its DID document: a receiver verifies them as it would real ones.
//! - State is in memory and dies with the network; each [`FakeNetwork`] is
//!   independent, so tests run in parallel.
//!
//! # The compute market half
//! Fake bidders ([`bidder`], [`FakeNetwork::start_bidder`]) answer
//! submitRfp, submitAccept and submitEvent as the reference bidder does,
//! read their knobs from [`Faults::bidder`] (or their own) and their
//! failures from [`Faults::take`] with [`Service::Bidder`], and use the PDS
//! and PLC of the same network.

pub mod bidder;
pub mod faults;
pub mod http;
pub mod pds;
pub mod plc;
pub mod relay;
pub mod web;

use std::net::SocketAddr;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use faults::{BidderKnobs, Fault, Faults, Service};

/// The three services, started on ephemeral loopback ports.
#[derive(Debug)]
pub struct FakeNetwork {
    /// The PLC directory's URL (`http://127.0.0.1:<port>`).
    pub plc_url: String,
    /// The PDS's URL.
    pub pds_url: String,
    /// The relay's URL.
    pub relay_url: String,
    /// The PLC (in-process access).
    pub plc: plc::Plc,
    /// The PDS (in-process access: accounts, stored records, token expiry).
    pub pds: pds::Pds,
    /// The relay index.
    pub relay: relay::Relay,
    /// The fault knobs of all three.
    pub faults: Faults,
    tasks: Vec<JoinHandle<()>>,
}

/// Where to listen; `None` for an ephemeral loopback port.
#[derive(Debug, Clone, Copy, Default)]
pub struct Addresses {
    /// The PLC's address.
    pub plc: Option<SocketAddr>,
    /// The PDS's address.
    pub pds: Option<SocketAddr>,
    /// The relay's address.
    pub relay: Option<SocketAddr>,
}

impl FakeNetwork {
    /// Starts PLC, PDS and relay on ephemeral loopback ports.
    ///
    /// # Errors
    /// When a port cannot be bound.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on(Addresses::default()).await
    }

    /// Starts them on the given addresses.
    ///
    /// # Errors
    /// When a port cannot be bound.
    pub async fn start_on(addresses: Addresses) -> std::io::Result<Self> {
        let faults = Faults::default();
        let plc = plc::Plc::default();
        let relay = relay::Relay::new(faults.clone());
        let pds = pds::Pds::new(plc.clone(), relay.clone());
        let mut tasks = Vec::new();
        let plc_url = serve(
            addresses.plc,
            plc.router(),
            &faults,
            Service::Plc,
            &mut tasks,
        )
        .await?;
        let pds_url = serve(
            addresses.pds,
            pds.router(),
            &faults,
            Service::Pds,
            &mut tasks,
        )
        .await?;
        let relay_url = serve(
            addresses.relay,
            relay.router(),
            &faults,
            Service::Relay,
            &mut tasks,
        )
        .await?;
        pds.set_url(&pds_url);
        Ok(Self {
            plc_url,
            pds_url,
            relay_url,
            plc,
            pds,
            relay,
            faults,
            tasks,
        })
    }

    /// Serves a did:web document on its own `localhost` port, under this
    /// network's faults ([`Service::Bidder`]: did:web hosts are the bidders').
    /// The document's `id` is set to the did:web, which is returned.
    ///
    /// # Errors
    /// When the port cannot be bound.
    pub async fn serve_did_web(
        &mut self,
        mut document: atproto::DidDocument,
    ) -> std::io::Result<(String, web::DidWeb)> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let did = web::DidWeb::did_for_port(listener.local_addr()?.port());
        document.id.clone_from(&did);
        let host = web::DidWeb::new(document);
        spawn(
            listener,
            host.router(),
            &self.faults,
            Service::Bidder,
            &mut self.tasks,
        )?;
        Ok((did, host))
    }

    /// Starts a fake bidder ([`bidder`]): its account on this PDS, its
    /// endpoint on its own loopback port behind the [`Service::Bidder`]
    /// faults, and its offering of `compute.vm`.
    ///
    /// # Errors
    /// When the port cannot be bound, the handle is taken, or the offering
    /// cannot be written.
    pub async fn start_bidder(
        &mut self,
        options: bidder::BidderOptions,
    ) -> std::io::Result<bidder::FakeBidder> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let bidder = bidder::FakeBidder::create(self, &url, options).await?;
        spawn(
            listener,
            bidder.router(),
            &self.faults,
            Service::Bidder,
            &mut self.tasks,
        )?;
        bidder.publish_offering().await?;
        Ok(bidder)
    }

    /// Runs until every service stops (they do not, unless a listener fails).
    pub async fn wait(mut self) {
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }
}

impl Drop for FakeNetwork {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn serve(
    address: Option<SocketAddr>,
    router: axum::Router,
    faults: &Faults,
    service: Service,
    tasks: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<String> {
    let listener =
        TcpListener::bind(address.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)))).await?;
    spawn(listener, router, faults, service, tasks)
}

/// Serves `router` behind the fault gate of `service`; returns its URL.
pub(crate) fn spawn(
    listener: TcpListener,
    router: axum::Router,
    faults: &Faults,
    service: Service,
    tasks: &mut Vec<JoinHandle<()>>,
) -> std::io::Result<String> {
    let bound = listener.local_addr()?;
    let gate = http::FaultGate {
        faults: faults.clone(),
        service,
    };
    let router = router.layer(axum::middleware::from_fn_with_state(
        gate,
        http::apply_faults,
    ));
    tasks.push(tokio::spawn(async move {
        // Answers leave at once (TCP_NODELAY): a test's round trips do not wait on Nagle's algorithm.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(%e, "fake atproto service stopped");
        }
    }));
    Ok(format!("http://{bound}"))
}

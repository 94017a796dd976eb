//! Fake bidders of the compute market (MARKET.md sections 3-5 and 8), as
//! faithful as a requester can tell.
//!
//! Each bidder is an account on the fake PDS with an `offering` record and
//! its own loopback endpoint (behind the [`Service::Bidder`] fault gate:
//! 401/403/400/500, stalls, lost answers). Like the reference bidder it:
//! - verifies service-auth JWTs (its `#atproto`-signed, `lxm`, `exp`, `aud`)
//!   and answers 401, 403 when the issuer is not the record's author, 400
//!   for a record whose signatures do not verify, 500 when a fetch fails;
//! - reads the latest version of every record named to it;
//! - on `submitRfp` writes a bid payload and a signed bid, calls the
//!   requester's `submitBid`, and only then answers;
//! - on `submitAccept` mints a signed receipt bound to the accept and starts
//!   a machine, every time (not idempotent); the machine reports
//!   `vm.onNetwork` (no address) and `registerIdentity` to the accept's
//!   `submitEvent`, as records in the bidder's repository pushed there;
//! - on `submitEvent` answers 200 first, then stops the machine of a
//!   `vm.delete`, if it still knows the contract: contracts are kept by
//!   receipt `uri#cid` in memory only, so after [`FakeBidder::restart`] a
//!   delete is ignored and the machine keeps running.
//!
//! Behaviour knobs are [`BidderKnobs`] (the network's, or the bidder's own
//! with [`FakeBidder::set_knobs`]); counters ([`FakeBidder::counters`]) let
//! a test say "never a second machine" and "no lost release".

mod handlers;
mod out;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use atproto::did::DidResolver;
use atproto::market as m;
use atproto::{Algorithm, PdsClient, Secret, SigningKey, StrongRef, xrpc};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::watch;

use crate::faults::{BidderKnobs, Faults};

/// What time it is for a bidder (the `createdAt` of its records): tests
/// pass their manual clock, so "newer than our release" means the same on
/// both sides.
pub type Now = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// What a bidder asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Offer {
    /// `bids.free`, as the reference writes it (`{cost: 0}`, unsigned).
    Free,
    /// `bids.x402`, signed.
    X402 {
        /// The cost, as the JSON number written.
        cost: f64,
        /// The currency, e.g. `USD`.
        currency: String,
        /// `hourly`, `monthly` or `one-time`.
        frequency: String,
    },
}

/// How to start a bidder.
#[derive(Clone)]
pub struct BidderOptions {
    /// Its handle on the fake PDS (must be unused).
    pub handle: String,
    /// What it asks.
    pub offer: Offer,
    /// Its clock.
    pub now: Now,
}

impl BidderOptions {
    /// A bidder asking `offer`, on the system clock.
    #[must_use]
    pub fn new(handle: &str, offer: Offer) -> Self {
        Self {
            handle: handle.to_owned(),
            offer,
            now: Arc::new(SystemTime::now),
        }
    }
}

/// One machine a bidder started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// The receipt it was started for.
    pub receipt: StrongRef,
    /// The requester that accepted.
    pub requester: String,
    /// Where it reports events (the accept's `submitEvent`), if anywhere.
    pub submit_event: Option<String>,
    /// Its node identity.
    pub node_id: String,
    /// Whether it runs.
    pub running: bool,
}

/// What a bidder did, for assertions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// `submitRfp` calls that made a bid.
    pub bids: u64,
    /// Machines started (one per `submitAccept` processed).
    pub machines_started: u64,
    /// Machines stopped by a `vm.delete`.
    pub machines_stopped: u64,
    /// Machines running now.
    pub running: u64,
    /// `vm.delete`s answered 200 but ignored (the contract was forgotten).
    pub deletes_ignored: u64,
}

#[derive(Default)]
struct State {
    /// receipt `uri#cid` -> index in `machines`; forgotten on restart.
    contracts: HashMap<String, usize>,
    /// Survive a restart: the machines keep running.
    machines: Vec<Machine>,
    counters: Counters,
}

pub(crate) struct Inner {
    did: String,
    url: String,
    pds: PdsClient,
    atproto_key: SigningKey,
    attest_key: SigningKey,
    resolver: DidResolver,
    http: reqwest::Client,
    faults: Faults,
    own_knobs: Mutex<Option<BidderKnobs>>,
    offer: Offer,
    now: Now,
    state: Mutex<State>,
    in_flight: watch::Sender<usize>,
}

/// A running fake bidder (cheap to clone).
#[derive(Clone)]
pub struct FakeBidder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FakeBidder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBidder")
            .field("did", &self.inner.did)
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

fn other(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(error.to_string())
}

impl FakeBidder {
    /// Creates the bidder's account on `net`'s PDS and logs in; serve
    /// [`FakeBidder::router`] at `url`, then [`FakeBidder::publish_offering`].
    pub(crate) async fn create(
        net: &crate::FakeNetwork,
        url: &str,
        options: BidderOptions,
    ) -> std::io::Result<Self> {
        let password = Secret::new(format!("bidder-{}", options.handle));
        let account = net
            .pds
            .create_account(&options.handle, &password)
            .map_err(|e| other(e.message))?;
        let http = xrpc::http_client().map_err(other)?;
        let pds = PdsClient::new(http.clone(), &net.pds_url, xrpc::DEFAULT_TIMEOUT);
        pds.login(&account.did, &password).await.map_err(other)?;
        let atproto_key = net
            .pds
            .signing_key(&account.did)
            .ok_or_else(|| other("the new account has no key"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                did: account.did,
                url: url.to_owned(),
                pds,
                atproto_key,
                attest_key: SigningKey::generate(Algorithm::K256),
                resolver: DidResolver::new(http.clone(), &net.plc_url, xrpc::DEFAULT_TIMEOUT),
                http,
                faults: net.faults.clone(),
                own_knobs: Mutex::new(None),
                offer: options.offer,
                now: options.now,
                state: Mutex::new(State::default()),
                in_flight: watch::Sender::new(0),
            }),
        })
    }

    /// Writes the bidder's offering of `compute.vm` at its endpoint.
    ///
    /// # Errors
    /// When the PDS refuses the write.
    pub async fn publish_offering(&self) -> std::io::Result<()> {
        let now = m::datetime((self.inner.now)());
        let offering = json!({
            "$type": m::OFFERING,
            "endpointUrl": self.inner.url,
            "appliesTo": [m::VM],
            "createdAt": now,
            "refreshedAt": now,
        });
        self.inner
            .pds
            .create_record(m::OFFERING, None, &offering)
            .await
            .map_err(other)?;
        Ok(())
    }

    /// The bidder's routes (submitRfp, submitAccept, submitEvent).
    pub fn router(&self) -> axum::Router {
        handlers::router(Arc::clone(&self.inner))
    }

    /// The bidder's DID.
    #[must_use]
    pub fn did(&self) -> &str {
        &self.inner.did
    }

    /// The bidder's endpoint.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// Gives this bidder its own knobs (`None`: the network's again).
    pub fn set_knobs(&self, knobs: Option<BidderKnobs>) {
        *self.inner.own_knobs.lock() = knobs;
    }

    /// What the bidder did so far.
    #[must_use]
    pub fn counters(&self) -> Counters {
        let state = self.inner.state.lock();
        let mut counters = state.counters;
        counters.running = state.machines.iter().filter(|m| m.running).count() as u64;
        counters
    }

    /// The machines it started.
    #[must_use]
    pub fn machines(&self) -> Vec<Machine> {
        self.inner.state.lock().machines.clone()
    }

    /// Restarts the bidder process: it forgets every contract (the
    /// reference keeps them in memory); its machines keep running.
    pub fn restart(&self) {
        self.inner.state.lock().contracts.clear();
    }

    /// Every running machine reports its identity again (a guest's
    /// heartbeat, which goes on after a bidder restart).
    pub async fn heartbeat(&self) {
        let running: Vec<Machine> = self
            .inner
            .state
            .lock()
            .machines
            .iter()
            .filter(|m| m.running)
            .cloned()
            .collect();
        for machine in running {
            out::report_identity(&self.inner, &machine).await;
        }
    }

    /// Waits until the bidder's background work (bids sent late,
    /// provisioning, acting on events) is done.
    pub async fn quiet(&self) {
        let mut in_flight = self.inner.in_flight.subscribe();
        let _ = in_flight.wait_for(|n| *n == 0).await;
    }
}

impl Inner {
    fn knobs(&self) -> BidderKnobs {
        self.own_knobs
            .lock()
            .clone()
            .unwrap_or_else(|| self.faults.bidder())
    }

    fn now(&self) -> SystemTime {
        (self.now)()
    }

    /// Runs `work` after the answer, counted by [`FakeBidder::quiet`].
    fn background(self: &Arc<Self>, work: impl std::future::Future<Output = ()> + Send + 'static) {
        struct Done(watch::Sender<usize>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n = n.saturating_sub(1));
            }
        }
        self.in_flight.send_modify(|n| *n += 1);
        let done = Done(self.in_flight.clone());
        tokio::spawn(async move {
            let _done = done;
            work.await;
        });
    }
}

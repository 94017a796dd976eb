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
//!   delete is ignored and the machine keeps running;
//! - at startup keeps its one offering record: rewritten (its `createdAt`
//!   kept, `refreshedAt` now) only when its endpoint changed, which is every
//!   start of the reference's `hono-bidder` (a new ingress key, so a new
//!   `https://did-key-<key>.<host>` endpoint, per process; the old one stops
//!   answering): [`FakeBidder::restart_on_new_endpoint`].
//!
//! Behaviour knobs are [`BidderKnobs`] (the network's, or the bidder's own
//! with [`FakeBidder::set_knobs`]); counters ([`FakeBidder::counters`]) let
//! a test say "never a second machine" and "no lost release".

mod handlers;
mod out;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The bidder's offering record, as the reference keeps it: one record,
/// rewritten in place.
struct OfferingRecord {
    rkey: String,
    created_at: String,
}

pub(crate) struct Inner {
    did: String,
    /// The endpoint of the running process (receipts name it).
    url: Mutex<String>,
    /// Which process runs: a listener of an earlier one answers 502.
    process: AtomicU64,
    offering: Mutex<Option<OfferingRecord>>,
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
            .field("url", &*self.inner.url.lock())
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
                url: Mutex::new(url.to_owned()),
                process: AtomicU64::new(0),
                offering: Mutex::new(None),
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

    /// Writes the bidder's offering of `compute.vm` at its endpoint, or
    /// rewrites the one it wrote (its `createdAt` kept, `refreshedAt` now),
    /// as the reference's `ensureOffering` corrects an offering whose
    /// endpoint changed.
    ///
    /// # Errors
    /// When the PDS refuses the write.
    pub async fn publish_offering(&self) -> std::io::Result<()> {
        let now = m::datetime((self.inner.now)());
        let kept = self
            .inner
            .offering
            .lock()
            .as_ref()
            .map(|o| (o.rkey.clone(), o.created_at.clone()));
        let created_at = kept
            .as_ref()
            .map_or_else(|| now.clone(), |(_, at)| at.clone());
        let offering = json!({
            "$type": m::OFFERING,
            "endpointUrl": self.inner.url(),
            "appliesTo": [m::VM],
            "createdAt": created_at,
            "refreshedAt": now,
        });
        let pds = &self.inner.pds;
        let written = match &kept {
            Some((rkey, _)) => pds.put_record(m::OFFERING, rkey, &offering, None).await,
            None => pds.create_record(m::OFFERING, None, &offering).await,
        }
        .map_err(other)?;
        let rkey = written.uri.parse::<atproto::AtUri>().map_err(other)?.rkey;
        *self.inner.offering.lock() = Some(OfferingRecord { rkey, created_at });
        Ok(())
    }

    /// The bidder's routes (submitRfp, submitAccept, submitEvent), for the
    /// process running now: once [`FakeBidder::restart_on_new_endpoint`]
    /// moved it, they answer 502, as an ingress with no tunnel behind it.
    pub fn router(&self) -> axum::Router {
        let process = self.inner.process.load(Ordering::SeqCst);
        handlers::router(Arc::clone(&self.inner), process)
    }

    /// The bidder's DID.
    #[must_use]
    pub fn did(&self) -> &str {
        &self.inner.did
    }

    /// The bidder's endpoint (that of its running process).
    #[must_use]
    pub fn url(&self) -> String {
        self.inner.url()
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

    /// Restarts the bidder process at the same endpoint: it forgets every
    /// contract (the reference keeps them in memory); its machines keep
    /// running. Its offering is unchanged, so nothing in its repository
    /// says it restarted (the reference rewrites a matching offering only
    /// on its refresh timer, every 5 minutes by default, restart or not).
    pub fn restart(&self) {
        self.inner.state.lock().contracts.clear();
    }

    /// Restarts the bidder process as the reference's `hono-bidder` does:
    /// it forgets every contract, listens at a new endpoint (a new ingress
    /// per process), the old endpoint answers 502 from then on, and its
    /// offering is rewritten to name the new one (`createdAt` kept,
    /// `refreshedAt` now). Its machines keep running. Returns the new
    /// endpoint.
    ///
    /// # Errors
    /// When no port can be bound or the PDS refuses the offering.
    pub async fn restart_on_new_endpoint(&self) -> std::io::Result<String> {
        let listener =
            tokio::net::TcpListener::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        self.inner.state.lock().contracts.clear();
        self.inner.process.fetch_add(1, Ordering::SeqCst);
        url.clone_into(&mut self.inner.url.lock());
        // The task lives as long as the runtime, as the bidder's first listener.
        let mut tasks = Vec::new();
        crate::spawn(
            listener,
            self.router(),
            &self.inner.faults,
            crate::Service::Bidder,
            &mut tasks,
        )?;
        self.publish_offering().await?;
        Ok(url)
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

    /// The endpoint of the running process.
    fn url(&self) -> String {
        self.url.lock().clone()
    }

    /// Whether `process` is the one running.
    fn runs(&self, process: u64) -> bool {
        self.process.load(Ordering::SeqCst) == process
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

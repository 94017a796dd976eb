//! The atproto market: rents real machines on the publicdomainrelay compute
//! market (`../shared/MARKET.md`) through the [`Market`] port, over
//! [`atproto`].
//!
//! # How each port call maps onto the protocol
//! - `publish_rfp`: writes `compute.vm` then a signed `market.rfp` in our
//!   repository at keys derived from (scope, contract key, round), reading
//!   first, so publishing again finds the same request; then discovers the
//!   bidders (relay index of offerings plus configured DIDs) and sends each
//!   `submitRfp` in the background. A round is closed once its release is
//!   written, so a contract name used again rents a new machine.
//! - `collect_bids`: the bids pushed to [`router`], the `submitRfp`
//!   answers, and each bidder's `market.bid` records; every bid read again
//!   at its latest version, its signature verified, its request ours, its
//!   payload read for the price. A request already accepted has one bid:
//!   the accepted one.
//! - `accept`: writes the signed `market.accept` (key derived from the
//!   request's) BEFORE `submitAccept`; looks for a receipt of it in the
//!   bidder's repository before every send, and sends again only when none
//!   appeared within [`Timeouts::accept_resend_after`] of the last send
//!   (after a restart: of the accept's `createdAt`), because every
//!   `submitAccept` a bidder processes starts a machine. A 400 or 403
//!   withdraws our accept. The receipt is verified: its signature, its
//!   accept ours (uri and cid), its `cid` binding recomputed.
//! - `guest_status`: the provider's events (pushed, or listed in its
//!   repository): `Booting` until `vm.onNetwork`, `Failed` when none came
//!   within [`Timeouts::provisioning`] of our accept.
//! - `release`: a signed `vm.delete` and `market.event`, written at keys
//!   derived from the accept BEFORE `submitEvent`; answered 200 before
//!   teardown, so [`ReleaseOutcome::Acknowledged`].
//! - `lookup`: sends the release again (harmless); `None` once
//!   acknowledged, unless an event of the guest is newer than our
//!   `vm.delete` by more than [`Timeouts::clock_skew`]: a bidder that
//!   restarted forgot the contract and ignored the delete, and the guest
//!   still reports, so it is reported running and the caller keeps
//!   releasing.
//!
//! Nothing is kept only in memory: the process remembers what it asked and
//! sent to save calls, and everything it needs after a restart is derived
//! from the contract key or read back from a repository.
//!
//! # What the atproto market cannot say
//! [`GuestInfo::contract`] is empty and [`GuestInfo::owner_did`] is empty:
//! the published records name no Kubernetes object and no tenant (they are
//! public). Taking a guest over by its owner is therefore refused.

mod accept;
mod bids;
mod config;
mod guest;
mod health;
mod inbound;
mod net;
mod records;
mod release;
mod request;
mod rkeys;
mod tasks;

pub use config::{Algorithm, AtprotoMarketConfig, Secret, Timeouts};
pub use health::{Health, Unhealthy};
pub use inbound::{Inbox, router};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use async_trait::async_trait;
use atproto::{DidResolver, SigningKey, jwt};

use crate::{
    Bid, Clock, GuestInfo, GuestStatus, Market, MarketError, Operation, Receipt, ReleaseOutcome,
    RequestForProposal, RfpId,
};
use net::Net;
use tasks::Tasks;

/// The atproto market. See the [module docs](self).
pub struct AtprotoMarket {
    shared: Arc<Shared>,
}

impl fmt::Debug for AtprotoMarket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AtprotoMarket")
            .field("public_url", &self.shared.public_url)
            .field("scope", &self.shared.scope)
            .finish_non_exhaustive()
    }
}

/// What every call and background task shares.
struct Shared {
    scope: String,
    public_url: String,
    /// `host[:port]` of `public_url`: the `did:web` bidders may name us by.
    public_host: String,
    bidders: Vec<String>,
    relay_url: Option<String>,
    timeouts: Timeouts,
    clock: Arc<dyn Clock>,
    key: SigningKey,
    net: Net,
    inbox: Inbox,
    memory: Mutex<Memory>,
    tasks: Tasks,
}

/// What this process learnt; a cache, never the only copy.
#[derive(Default)]
struct Memory {
    /// rfp uri -> what asking the bidders gave.
    asked: HashMap<String, request::Asking>,
    /// accept uri -> whether and when this process sent it.
    sends: HashMap<String, accept::Sent>,
    /// Verified receipts.
    contracts: HashMap<Receipt, Arc<guest::Contract>>,
    /// receipt uri -> the provider's events seen.
    events: HashMap<String, guest::Events>,
    /// The bidders found, when, and what failed.
    discovered: Option<request::Discovery>,
    /// Bids whose bidder refused our accept: never accepted again here.
    refused: HashSet<String>,
}

impl AtprotoMarket {
    /// Builds the market from its configuration; no I/O (it logs in on the
    /// first call). Pushes reach it through `inbox` (serve [`router`] with
    /// a clone of it at `config.public_url`).
    ///
    /// # Errors
    /// [`MarketError::InvalidConfig`] for a signing key that does not parse,
    /// or a public URL without a host.
    pub fn new(
        config: AtprotoMarketConfig,
        clock: Arc<dyn Clock>,
        inbox: Inbox,
    ) -> Result<Self, MarketError> {
        let invalid = |reason: String| MarketError::InvalidConfig { reason };
        let key = SigningKey::from_hex(config.signing_key_algorithm, &config.signing_key)
            .map_err(|e| invalid(format!("signing key: {e}")))?;
        let public_host = jwt::audience_for_url(&config.public_url)
            .map_err(|e| invalid(format!("public url {}: {e}", config.public_url)))?
            .trim_start_matches("did:web:")
            .to_owned();
        let http = atproto::xrpc::http_client().map_err(|e| invalid(e.to_string()))?;
        let resolver = DidResolver::new(http.clone(), &config.plc_url, config.timeouts.call);
        let net = Net::new(
            http,
            &config.pds_url,
            &config.identifier,
            config.app_password.clone(),
            resolver.clone(),
            config.timeouts.call,
        );
        if config.identifier.starts_with("did:") {
            inbox.attach(
                &config.identifier,
                &public_host,
                resolver,
                Arc::clone(&clock),
            );
        }
        Ok(Self {
            shared: Arc::new(Shared {
                scope: config.scope,
                public_url: config.public_url.trim_end_matches('/').to_owned(),
                public_host,
                bidders: config.bidders,
                relay_url: config.relay_url,
                timeouts: config.timeouts,
                clock,
                key,
                net,
                inbox,
                memory: Mutex::default(),
                tasks: Tasks::default(),
            }),
        })
    }

    /// Waits until the background `submitRfp` calls have finished (tests;
    /// a graceful shutdown).
    pub async fn settled(&self) {
        self.shared.tasks.settled().await;
    }
}

impl Drop for AtprotoMarket {
    fn drop(&mut self) {
        self.shared.tasks.abort_all();
    }
}

impl Shared {
    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Our DID, logging in (and registering with the inbox) when needed.
    async fn did(&self, operation: Operation) -> Result<String, MarketError> {
        let did = self
            .net
            .did()
            .await
            .map_err(|e| unavailable(operation, "logging in to our pds", &e))?;
        self.inbox.attach(
            &did,
            &self.public_host,
            self.net.resolver().clone(),
            Arc::clone(&self.clock),
        );
        Ok(did)
    }
}

/// A retryable failure naming what was being done.
fn unavailable(
    operation: Operation,
    doing: impl fmt::Display,
    error: &atproto::Error,
) -> MarketError {
    MarketError::Unavailable {
        operation,
        reason: format!("{doing}: {error}"),
    }
}

#[async_trait]
impl Market for AtprotoMarket {
    async fn publish_rfp(&self, rfp: RequestForProposal) -> Result<RfpId, MarketError> {
        request::publish(&self.shared, rfp).await
    }

    async fn collect_bids(&self, rfp: &RfpId) -> Result<Vec<Bid>, MarketError> {
        bids::collect(&self.shared, rfp).await
    }

    async fn accept(&self, rfp: &RfpId, bid: &Bid) -> Result<Receipt, MarketError> {
        accept::accept(&self.shared, rfp, bid).await
    }

    async fn guest_status(&self, receipt: &Receipt) -> Result<GuestStatus, MarketError> {
        guest::status(&self.shared, receipt).await
    }

    async fn release(&self, receipt: &Receipt) -> Result<ReleaseOutcome, MarketError> {
        release::release(&self.shared, receipt).await
    }

    async fn lookup(&self, receipt: &Receipt) -> Result<Option<GuestInfo>, MarketError> {
        guest::lookup(&self.shared, receipt).await
    }

    async fn adopt(&self, receipt: &Receipt) -> Result<GuestInfo, MarketError> {
        guest::adopt(&self.shared, receipt).await
    }
}

/// Kept for the bidders map's deterministic order in messages.
type ByBidder<T> = BTreeMap<String, T>;

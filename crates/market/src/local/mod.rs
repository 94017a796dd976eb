//! The local market: an embedded, seeded, deterministic simulation of the
//! compute market, used by default and by every test.
//!
//! # Behaviour
//! - One open RFP per [`ContractKey`]; its id is derived from the key. Once
//!   its guest is released the RFP is closed, and publishing again for the
//!   key (a new object under the same name) opens the next round: a new RFP
//!   and a new machine, never the released one.
//! - Every configured bidder bids on an open RFP if the resources fit its
//!   limits and it runs fewer guests than its capacity; bids come cheapest
//!   first. An accepted RFP's only bid is the accepted one.
//! - A guest's timeline is fixed at acceptance and read off the injected
//!   [`Clock`]: Booting for the first half of the bidder's boot delay, Started
//!   for the second half, then OnNetwork (address `10.x.y.z`), then
//!   NodeRegistered after [`LocalMarketConfig::node_register_delay`] (at once
//!   when it is zero).
//! - Whether a boot fails is a hash of the seed, the contract and the bidder:
//!   the same contract fails the same way after a restart. A failing guest
//!   reports Failed (naming the bidder) instead of OnNetwork and stops taking
//!   capacity then; it still exists until released.
//! - Release frees the capacity at once; the guest then reports Terminated and
//!   [`Market::lookup`] returns `None`.
//! - With a state directory, every change is written atomically before the call
//!   returns, and a new `LocalMarket` on the same directory finds every RFP and
//!   guest again. Only one instance may use a directory at a time. The write is
//!   a small synchronous file write plus fsync inside the call: fine for a
//!   simulation, and it keeps every change ordered under one lock.
//! - Call counters ([`LocalMarket::publish_calls`], [`LocalMarket::release_calls`])
//!   and fault knobs ([`LocalMarket::fail_next`]) belong to one instance: share
//!   the `Arc<LocalMarket>` across simulated manager restarts to keep them.
//! - Bidders are not state: they come from the configuration and can be
//!   replaced at run time with [`LocalMarket::set_bidders`].

mod agreement;
mod bidders;
mod state;

pub use agreement::Agreement;
pub use bidders::{LocalBidder, LocalMarketConfig};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tracing::{debug, info};

use crate::{
    Bid, Clock, ContractKey, GuestInfo, GuestStatus, Market, MarketError, Operation, Price,
    Receipt, ReleaseOutcome, RequestForProposal, RfpId,
};
use state::{GuestRecord, MarketState, RfpRecord, StateStore, duration_ms, unix_ms};

/// The scheme and path every local receipt uri starts with.
const RECEIPT_PREFIX: &str = "local://guests/";

/// The embedded market. See the [module docs](self) for its behaviour.
pub struct LocalMarket {
    seed: u64,
    node_register_delay: Duration,
    clock: Arc<dyn Clock>,
    store: StateStore,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for LocalMarket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("LocalMarket")
            .field("seed", &self.seed)
            .field("bidders", &inner.bidders.len())
            .field("rfps", &inner.state.rfps.len())
            .field("guests", &inner.state.guests.len())
            .finish_non_exhaustive()
    }
}

/// Everything that changes, behind one lock so each call sees and leaves a
/// consistent market.
/// What [`LocalMarket::change_unreleased_guest`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GuestChange {
    /// No guest has the receipt.
    Unknown,
    /// The guest was released before: nothing changes any more.
    AlreadyReleased,
    /// The change is committed.
    Made,
}

struct Inner {
    bidders: Vec<LocalBidder>,
    state: MarketState,
    /// Injected failures still to deliver, per operation.
    faults: BTreeMap<Operation, u32>,
    publish_calls: BTreeMap<ContractKey, u64>,
    /// Release calls per receipt uri.
    release_calls: BTreeMap<String, u64>,
}

impl Inner {
    /// The id of the contract's open RFP, published or not yet: the first
    /// round whose guest was not released. A released guest closes its round,
    /// so a new object under a released contract's name rents a new machine,
    /// while publishing again for the same object (a restart before the
    /// receipt was recorded) finds the RFP it already has. `None` after
    /// `u32::MAX` rounds.
    fn open_round(&self, contract: &ContractKey) -> Option<RfpId> {
        (0..=u32::MAX)
            .map(|round| bidders::rfp_id(contract, round))
            .find(|id| {
                let closed = self.state.rfps.get(id).is_some_and(|record| {
                    record
                        .guest
                        .as_ref()
                        .and_then(|guest| self.state.guests.get(guest))
                        .is_some_and(GuestRecord::is_released)
                });
                !closed
            })
    }

    /// Delivers an injected failure for `operation` if one is pending.
    fn take_fault(&mut self, operation: Operation) -> Result<(), MarketError> {
        match self.faults.get_mut(&operation) {
            Some(left) if *left > 0 => {
                *left -= 1;
                Err(MarketError::Unavailable {
                    operation,
                    reason: "injected fault".to_owned(),
                })
            }
            _ => Ok(()),
        }
    }

    fn running_of(&self, bidder: &str, now_ms: u64) -> usize {
        self.state
            .guests
            .values()
            .filter(|g| g.agreement.bid.bidder == bidder && g.holds_capacity(now_ms))
            .count()
    }

    fn rfp(&self, rfp: &RfpId) -> Result<&RfpRecord, MarketError> {
        self.state
            .rfps
            .get(rfp)
            .ok_or_else(|| MarketError::UnknownRfp { rfp: rfp.clone() })
    }

    /// The guest named by a receipt: `None` when this market never rented it.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`] when the uri is not a local one or the
    /// cid does not match the guest's agreement.
    fn guest(&self, receipt: &Receipt) -> Result<Option<(&String, &GuestRecord)>, MarketError> {
        let Some(id) = receipt.uri.strip_prefix(RECEIPT_PREFIX) else {
            return Err(MarketError::InvalidReceipt {
                uri: receipt.uri.clone(),
                reason: format!("not a local market receipt (expected {RECEIPT_PREFIX}<id>)"),
            });
        };
        let Some((id, guest)) = self.state.guests.get_key_value(id) else {
            return Ok(None);
        };
        guest.agreement.verify(receipt)?;
        Ok(Some((id, guest)))
    }
}

impl LocalMarket {
    /// Opens a local market, loading its state directory if it has one.
    ///
    /// # Errors
    /// [`MarketError::InvalidConfig`] for an unusable bidder list;
    /// [`MarketError::State`] or [`MarketError::CorruptState`] when the state
    /// directory cannot be read.
    pub fn new(config: LocalMarketConfig, clock: Arc<dyn Clock>) -> Result<Self, MarketError> {
        bidders::validate_bidders(&config.bidders)?;
        let store = StateStore::new(config.state_dir);
        let state = store.load()?;
        info!(
            rfps = state.rfps.len(),
            guests = state.guests.len(),
            bidders = config.bidders.len(),
            "local market opened"
        );
        Ok(Self {
            seed: config.seed,
            node_register_delay: config.node_register_delay,
            clock,
            store,
            inner: Mutex::new(Inner {
                bidders: config.bidders,
                state,
                faults: BTreeMap::new(),
                publish_calls: BTreeMap::new(),
                release_calls: BTreeMap::new(),
            }),
        })
    }

    /// Replaces the bidders; guests already rented keep running.
    ///
    /// # Errors
    /// [`MarketError::InvalidConfig`] for an unusable list (nothing changes).
    pub fn set_bidders(&self, bidders: Vec<LocalBidder>) -> Result<(), MarketError> {
        bidders::validate_bidders(&bidders)?;
        self.lock().bidders = bidders;
        Ok(())
    }

    /// The current bidders.
    #[must_use]
    pub fn bidders(&self) -> Vec<LocalBidder> {
        self.lock().bidders.clone()
    }

    /// Makes the next `times` calls of `operation` fail with a retryable
    /// [`MarketError::Unavailable`] before they change anything. Replaces any
    /// failures still pending for that operation.
    pub fn fail_next(&self, operation: Operation, times: u32) {
        self.lock().faults.insert(operation, times);
    }

    /// Simulates a guest's node leaving the cluster (its kubelet stopped): the
    /// guest keeps running on the network but no longer reports a node
    /// identity, as a lost node does. Returns false for an unknown or released guest.
    ///
    /// # Errors
    /// The state directory could not be written.
    pub fn lose_node(&self, receipt: &Receipt) -> Result<bool, MarketError> {
        let mut inner = self.lock();
        let change = self.change_unreleased_guest(&mut inner, receipt, |guest| {
            guest.node_lost = true;
        })?;
        if change == GuestChange::Made {
            info!(uri = %receipt.uri, "node lost (simulated)");
        }
        Ok(change == GuestChange::Made)
    }

    /// How many times `publish_rfp` was called for a contract by this instance
    /// (injected failures included).
    #[must_use]
    pub fn publish_calls(&self, contract: &ContractKey) -> u64 {
        self.lock()
            .publish_calls
            .get(contract)
            .copied()
            .unwrap_or(0)
    }

    /// How many RFPs exist for a contract (0 or 1; kept across restarts).
    #[must_use]
    pub fn rfps_published(&self, contract: &ContractKey) -> usize {
        self.lock()
            .state
            .rfps
            .values()
            .filter(|r| r.request.contract == *contract)
            .count()
    }

    /// How many RFPs exist in total (kept across restarts).
    #[must_use]
    pub fn rfp_count(&self) -> usize {
        self.lock().state.rfps.len()
    }

    /// How many guests were ever rented for a contract, released ones
    /// included (kept across restarts).
    #[must_use]
    pub fn guests_rented(&self, contract: &ContractKey) -> usize {
        self.lock()
            .state
            .guests
            .values()
            .filter(|g| g.agreement.contract == *contract)
            .count()
    }

    /// How many times `release` was called for a receipt by this instance
    /// (injected failures included).
    #[must_use]
    pub fn release_calls(&self, receipt: &Receipt) -> u64 {
        self.lock()
            .release_calls
            .get(&receipt.uri)
            .copied()
            .unwrap_or(0)
    }

    /// Guests that currently take capacity: not released and not failed.
    #[must_use]
    pub fn running_guests(&self) -> usize {
        let now_ms = self.now_ms();
        let inner = self.lock();
        inner
            .state
            .guests
            .values()
            .filter(|g| g.holds_capacity(now_ms))
            .count()
    }

    /// Guests of one bidder that currently take its capacity.
    #[must_use]
    pub fn running_guests_of(&self, bidder: &str) -> usize {
        let now_ms = self.now_ms();
        self.lock().running_of(bidder, now_ms)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the state half-changed:
        // every change is built on a copy and swapped in whole.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        unix_ms(self.clock.now())
    }

    /// Applies `change` to the guest of `receipt` unless it is unknown or
    /// released, and commits the result (on disk first, as every change).
    fn change_unreleased_guest(
        &self,
        inner: &mut Inner,
        receipt: &Receipt,
        change: impl FnOnce(&mut GuestRecord),
    ) -> Result<GuestChange, MarketError> {
        let Some((id, guest)) = inner.guest(receipt)? else {
            return Ok(GuestChange::Unknown);
        };
        if guest.is_released() {
            return Ok(GuestChange::AlreadyReleased);
        }
        let id = id.clone();
        let mut next = inner.state.clone();
        if let Some(guest) = next.guests.get_mut(&id) {
            change(guest);
        }
        self.commit(inner, next)?;
        Ok(GuestChange::Made)
    }

    /// Persists `next` and only then makes it the market's state.
    fn commit(&self, inner: &mut Inner, next: MarketState) -> Result<(), MarketError> {
        self.store.save(&next)?;
        inner.state = next;
        Ok(())
    }

    /// Builds the guest record of an accepted bid.
    fn rent(
        &self,
        request: &RequestForProposal,
        rfp: &RfpId,
        bidder: &LocalBidder,
        now_ms: u64,
    ) -> GuestRecord {
        let agreement = Agreement {
            rfp: rfp.clone(),
            contract: request.contract.clone(),
            owner_did: request.owner_did.clone(),
            resources: request.resources,
            location: request.location.clone(),
            bid: Bid::new(
                bidder.did.clone(),
                Price::hourly(bidder.cost, bidder.currency.clone()),
            ),
        };
        let receipt = Receipt {
            uri: format!("{RECEIPT_PREFIX}{}", bidders::guest_id(rfp)),
            cid: agreement.content_id(),
        };
        let failure = bidders::boot_fails(self.seed, &request.contract, bidder).then(|| {
            format!(
                "bidder {} failed to boot the guest (simulated boot failure)",
                bidder.did
            )
        });
        GuestRecord {
            agreement,
            receipt,
            accepted_at_ms: now_ms,
            boot_delay_ms: duration_ms(bidder.boot_delay),
            register_delay_ms: duration_ms(self.node_register_delay),
            failure,
            address: bidders::guest_address(self.seed, rfp),
            node_id: bidders::node_id(self.seed, rfp),
            node_lost: false,
            released_at_ms: None,
        }
    }
}

/// Rejects requests no bidder could ever answer.
fn validate_request(rfp: &RequestForProposal) -> Result<(), MarketError> {
    let problem = if rfp.contract.namespace.is_empty() || rfp.contract.name.is_empty() {
        Some("the contract key needs a namespace and a name")
    } else if rfp.resources.cpus == 0 {
        Some("cpus must be at least 1")
    } else if rfp.resources.memory_mib == 0 {
        Some("memory must be at least 1 MiB")
    } else if rfp.owner_did.trim().is_empty() {
        Some("the owner did is empty")
    } else {
        None
    };
    problem.map_or(Ok(()), |reason| {
        Err(MarketError::InvalidRequest {
            contract: rfp.contract.clone(),
            reason: reason.to_owned(),
        })
    })
}

#[async_trait]
impl Market for LocalMarket {
    async fn publish_rfp(&self, rfp: RequestForProposal) -> Result<RfpId, MarketError> {
        let mut inner = self.lock();
        *inner.publish_calls.entry(rfp.contract.clone()).or_insert(0) += 1;
        inner.take_fault(Operation::Publish)?;
        validate_request(&rfp)?;
        let Some(id) = inner.open_round(&rfp.contract) else {
            return Err(MarketError::InvalidRequest {
                contract: rfp.contract.clone(),
                reason: "every round of requests for proposal of this name is used".to_owned(),
            });
        };
        if let Some(existing) = inner.state.rfps.get(&id) {
            if existing.request != rfp {
                debug!(contract = %rfp.contract, rfp = %id, "rfp already published; keeping its first terms");
            }
            return Ok(id);
        }
        let mut next = inner.state.clone();
        next.rfps.insert(
            id.clone(),
            RfpRecord {
                request: rfp.clone(),
                guest: None,
            },
        );
        self.commit(&mut inner, next)?;
        info!(contract = %rfp.contract, rfp = %id, "rfp published");
        Ok(id)
    }

    async fn collect_bids(&self, rfp: &RfpId) -> Result<Vec<Bid>, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::CollectBids)?;
        let record = inner.rfp(rfp)?;
        if let Some(guest) = record
            .guest
            .as_ref()
            .and_then(|id| inner.state.guests.get(id))
        {
            return Ok(vec![guest.agreement.bid.clone()]);
        }
        Ok(bidders::offers(
            &inner.bidders,
            &record.request.resources,
            |did| inner.running_of(did, now_ms),
        ))
    }

    async fn accept(&self, rfp: &RfpId, bid: &Bid) -> Result<Receipt, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Accept)?;
        let record = inner.rfp(rfp)?;
        if let Some(guest) = record
            .guest
            .as_ref()
            .and_then(|id| inner.state.guests.get(id))
        {
            let winner = &guest.agreement.bid.bidder;
            return if *winner == bid.bidder {
                Ok(guest.receipt.clone())
            } else {
                Err(MarketError::RfpClosed {
                    rfp: rfp.clone(),
                    winner: winner.clone(),
                })
            };
        }
        let request = record.request.clone();
        let offered = bidders::offers(&inner.bidders, &request.resources, |did| {
            inner.running_of(did, now_ms)
        });
        let bidder = inner
            .bidders
            .iter()
            .find(|b| b.did == bid.bidder)
            .filter(|_| offered.contains(bid))
            .cloned()
            .ok_or_else(|| MarketError::BidWithdrawn {
                rfp: rfp.clone(),
                bidder: bid.bidder.clone(),
            })?;
        let guest = self.rent(&request, rfp, &bidder, now_ms);
        guest.agreement.verify(&guest.receipt)?;
        let receipt = guest.receipt.clone();
        let guest_id = bidders::guest_id(rfp);
        let mut next = inner.state.clone();
        if let Some(open) = next.rfps.get_mut(rfp) {
            open.guest = Some(guest_id.clone());
        }
        next.guests.insert(guest_id, guest);
        self.commit(&mut inner, next)?;
        info!(contract = %request.contract, rfp = %rfp, bidder = %bid.bidder, uri = %receipt.uri, "bid accepted");
        Ok(receipt)
    }

    async fn guest_status(&self, receipt: &Receipt) -> Result<GuestStatus, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::GuestStatus)?;
        match inner.guest(receipt)? {
            Some((_, guest)) => Ok(guest.status_at(now_ms)),
            None => Err(MarketError::GuestNotFound {
                uri: receipt.uri.clone(),
            }),
        }
    }

    async fn release(&self, receipt: &Receipt) -> Result<ReleaseOutcome, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        *inner.release_calls.entry(receipt.uri.clone()).or_insert(0) += 1;
        inner.take_fault(Operation::Release)?;
        match self.change_unreleased_guest(&mut inner, receipt, |guest| {
            guest.released_at_ms = Some(now_ms);
        })? {
            GuestChange::Made => info!(uri = %receipt.uri, "guest released"),
            GuestChange::Unknown => {
                debug!(uri = %receipt.uri, "release of an unknown guest: already gone");
            }
            GuestChange::AlreadyReleased => {}
        }
        Ok(ReleaseOutcome::Confirmed)
    }

    async fn lookup(&self, receipt: &Receipt) -> Result<Option<GuestInfo>, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Lookup)?;
        Ok(inner
            .guest(receipt)?
            .filter(|(_, guest)| !guest.is_released())
            .map(|(_, guest)| guest.info(now_ms)))
    }

    async fn adopt(&self, receipt: &Receipt) -> Result<GuestInfo, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Adopt)?;
        let info = inner
            .guest(receipt)?
            .filter(|(_, guest)| !guest.is_released())
            .map(|(_, guest)| guest.info(now_ms))
            .ok_or_else(|| MarketError::GuestNotFound {
                uri: receipt.uri.clone(),
            })?;
        info!(uri = %receipt.uri, contract = %info.contract, "guest adopted");
        Ok(info)
    }
}

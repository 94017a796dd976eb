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
//! - A call costs the same with ten guests and with ten thousand: each change
//!   is made in place, the guests taking each bidder's capacity are counted as
//!   they come and go, and a released guest shrinks to the little a late call
//!   about it needs (its status is Terminated, its RFP's bid, its receipt's cid).
//! - With a state directory, every change is appended to a journal and fsynced
//!   before the call returns (one line, not the whole state), and a new
//!   `LocalMarket` on the same directory finds every RFP and guest again, after
//!   a kill too. The journal is compacted as it grows; see `journal.rs`. Only
//!   one instance may use a directory at a time. The append is synchronous,
//!   inside the call and under the one lock: it keeps every change ordered.
//! - Call counters ([`LocalMarket::publish_calls`], [`LocalMarket::release_calls`])
//!   and fault knobs ([`LocalMarket::fail_next`]) belong to one instance: share
//!   the `Arc<LocalMarket>` across simulated manager restarts to keep them.
//! - Bidders are not state: they come from the configuration and can be
//!   replaced at run time with [`LocalMarket::set_bidders`].

mod agreement;
mod bidders;
mod ids;
mod journal;
mod records;
mod shared;
mod state;

pub use agreement::Agreement;
pub use bidders::{LocalBidder, LocalMarketConfig};

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tracing::{debug, info};

use crate::{
    Bid, Clock, ContractKey, GuestInfo, GuestStatus, Market, MarketError, Operation, Price,
    Receipt, ReleaseOutcome, RequestForProposal, RfpId,
};
use journal::Journal;
use records::{GuestRecord, duration_ms, unix_ms};
use state::{Change, MarketState, RfpLookup};

/// The scheme and path every local receipt uri starts with.
const RECEIPT_PREFIX: &str = "local://guests/";

/// The embedded market. See the [module docs](self) for its behaviour.
pub struct LocalMarket {
    seed: u64,
    node_register_delay: Duration,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for LocalMarket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("LocalMarket")
            .field("seed", &self.seed)
            .field("bidders", &inner.bidders.len())
            .field("open_rfps", &inner.state.open_rfps())
            .field("guests", &inner.state.unreleased_guests())
            .field("released_guests", &inner.state.released_guests())
            .finish_non_exhaustive()
    }
}

/// What a receipt names.
enum GuestLookup<'a> {
    /// A guest that was not released, and its id.
    Unreleased(&'a str, &'a GuestRecord),
    /// A released guest.
    Released,
    /// No guest this market ever rented.
    Unknown,
}

/// Everything that changes, behind one lock so each call sees and leaves a
/// consistent market.
struct Inner {
    bidders: Vec<LocalBidder>,
    state: MarketState,
    journal: Journal,
    /// Injected failures still to deliver, per operation.
    faults: BTreeMap<Operation, u32>,
    /// Publish calls per contract.
    publish_calls: CallCounts,
    /// Release calls per receipt uri.
    release_calls: CallCounts,
}

/// How many times this instance was called per key (for the tests'
/// idempotency checks: one publish, one release). Keeps a 64-bit hash of each
/// key, never pruned, rather than the key: a contract's key is two strings,
/// ~150 bytes a contract ever rented, 1.5 MiB of the manager at 10,000
/// (plan 0017 P4). Two keys alike in hash (about 1e-11 among 10,000, random
/// keys) would share a count; no decision reads these.
#[derive(Default)]
struct CallCounts {
    hasher: std::hash::RandomState,
    counts: HashMap<u64, u64>,
}

impl CallCounts {
    fn count<K: Hash + ?Sized>(&mut self, key: &K) {
        *self.counts.entry(self.hasher.hash_one(key)).or_default() += 1;
    }

    fn of<K: Hash + ?Sized>(&self, key: &K) -> u64 {
        self.counts
            .get(&self.hasher.hash_one(key))
            .copied()
            .unwrap_or(0)
    }
}

impl Inner {
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

    /// [`Market::guest_status`] under the lock (an injected fault counts per guest).
    fn guest_status(&mut self, receipt: &Receipt, now_ms: u64) -> Result<GuestStatus, MarketError> {
        self.take_fault(Operation::GuestStatus)?;
        match self.guest(receipt)? {
            GuestLookup::Unreleased(_, guest) => Ok(guest.status_at(now_ms)),
            GuestLookup::Released => Ok(GuestStatus::Terminated),
            GuestLookup::Unknown => Err(MarketError::GuestNotFound {
                uri: receipt.uri.clone(),
            }),
        }
    }

    /// The guest named by a receipt.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`] when the uri is not a local one or the
    /// cid is not the one of the guest's agreement.
    fn guest<'a>(&'a self, receipt: &'a Receipt) -> Result<GuestLookup<'a>, MarketError> {
        let Some(id) = receipt.uri.strip_prefix(RECEIPT_PREFIX) else {
            return Err(MarketError::InvalidReceipt {
                uri: receipt.uri.clone(),
                reason: format!("not a local market receipt (expected {RECEIPT_PREFIX}<id>)"),
            });
        };
        // The receipt's cid was computed from the agreement when it was
        // issued: comparing with it is checking the agreement.
        let (cid, found) = if let Some(guest) = self.state.guest(id) {
            (guest.cid(), GuestLookup::Unreleased(id, guest))
        } else if let Some(released) = self.state.released(id) {
            (Cow::Borrowed(released.cid.as_str()), GuestLookup::Released)
        } else {
            return Ok(GuestLookup::Unknown);
        };
        if cid != receipt.cid {
            return Err(MarketError::InvalidReceipt {
                uri: receipt.uri.clone(),
                reason: "cid does not match the agreement".to_owned(),
            });
        }
        Ok(found)
    }

    /// Journals `change`, and only then makes it part of the market.
    fn commit(&mut self, change: Change) -> Result<(), MarketError> {
        self.journal.append(&change)?;
        self.state.apply(change);
        self.journal.compact_if_due(&self.state);
        Ok(())
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
        let (journal, state) = Journal::open(config.state_dir)?;
        info!(
            rfps = state.rfp_count(),
            guests = state.unreleased_guests(),
            bidders = config.bidders.len(),
            "local market opened"
        );
        Ok(Self {
            seed: config.seed,
            node_register_delay: config.node_register_delay,
            clock,
            inner: Mutex::new(Inner {
                bidders: config.bidders,
                state,
                journal,
                faults: BTreeMap::new(),
                publish_calls: CallCounts::default(),
                release_calls: CallCounts::default(),
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
        let GuestLookup::Unreleased(id, _) = inner.guest(receipt)? else {
            return Ok(false);
        };
        let guest = id.to_owned();
        inner.commit(Change::NodeLost { guest })?;
        info!(uri = %receipt.uri, "node lost (simulated)");
        Ok(true)
    }

    /// How many times `publish_rfp` was called for a contract by this instance
    /// (injected failures included).
    #[must_use]
    pub fn publish_calls(&self, contract: &ContractKey) -> u64 {
        self.lock().publish_calls.of(contract)
    }

    /// How many RFPs were published for a contract: one per round (kept
    /// across restarts).
    #[must_use]
    pub fn rfps_published(&self, contract: &ContractKey) -> usize {
        self.lock().state.rfps_published(contract)
    }

    /// How many RFPs exist in total, closed rounds included (kept across restarts).
    #[must_use]
    pub fn rfp_count(&self) -> usize {
        self.lock().state.rfp_count()
    }

    /// How many guests were ever rented for a contract, released ones
    /// included (kept across restarts).
    #[must_use]
    pub fn guests_rented(&self, contract: &ContractKey) -> usize {
        self.lock().state.guests_rented(contract)
    }

    /// How many times `release` was called for a receipt by this instance
    /// (injected failures included).
    #[must_use]
    pub fn release_calls(&self, receipt: &Receipt) -> u64 {
        self.lock().release_calls.of(receipt.uri.as_str())
    }

    /// Guests that currently take capacity: not released and not failed.
    #[must_use]
    pub fn running_guests(&self) -> usize {
        let now_ms = self.now_ms();
        self.lock().state.running(now_ms)
    }

    /// Guests of one bidder that currently take its capacity.
    #[must_use]
    pub fn running_guests_of(&self, bidder: &str) -> usize {
        let now_ms = self.now_ms();
        self.lock().state.running_of(bidder, now_ms)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the state half-changed:
        // `MarketState::apply`, the one place that changes it, cannot panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        unix_ms(self.clock.now())
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
        let failure = bidders::boot_fails(self.seed, &request.contract, bidder).then(|| {
            format!(
                "bidder {} failed to boot the guest (simulated boot failure)",
                bidder.did
            )
        });
        GuestRecord::rented(
            agreement,
            now_ms,
            duration_ms(bidder.boot_delay),
            duration_ms(self.node_register_delay),
            failure,
            bidders::guest_address(self.seed, rfp),
            bidders::node_id(self.seed, rfp),
        )
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

/// The receipt of the guest `guest_id` whose agreement has the content id `cid`.
fn receipt_of(guest_id: &str, cid: String) -> Receipt {
    Receipt {
        uri: format!("{RECEIPT_PREFIX}{guest_id}"),
        cid,
    }
}

/// The accepted bid of an RFP, and its receipt; `None` while it has none.
fn accepted(state: &MarketState, rfp: &RfpId) -> Result<Option<(Bid, Receipt)>, MarketError> {
    match state.rfp(rfp) {
        RfpLookup::Unknown => Err(MarketError::UnknownRfp { rfp: rfp.clone() }),
        RfpLookup::Closed(released) => {
            let guest = bidders::guest_id(rfp);
            Ok(Some((
                released.bid.clone(),
                receipt_of(&guest, released.cid.clone()),
            )))
        }
        RfpLookup::Published(_) => Ok(None),
        RfpLookup::Rented(guest) => Ok(Some((guest.bid().clone(), guest.receipt()))),
    }
}

#[async_trait]
impl Market for LocalMarket {
    async fn publish_rfp(&self, rfp: RequestForProposal) -> Result<RfpId, MarketError> {
        let mut inner = self.lock();
        inner.publish_calls.count(&rfp.contract);
        inner.take_fault(Operation::Publish)?;
        validate_request(&rfp)?;
        let Some(id) = inner.state.open_round(&rfp.contract) else {
            return Err(MarketError::InvalidRequest {
                contract: rfp.contract.clone(),
                reason: "every round of requests for proposal of this name is used".to_owned(),
            });
        };
        let first_terms = match inner.state.rfp(&id) {
            RfpLookup::Published(request) => Some(*request == rfp),
            RfpLookup::Rented(guest) => Some(guest.is_for(&rfp)),
            RfpLookup::Closed(_) | RfpLookup::Unknown => None,
        };
        if let Some(same) = first_terms {
            if !same {
                debug!(contract = %rfp.contract, rfp = %id, "rfp already published; keeping its first terms");
            }
            return Ok(id);
        }
        let contract = rfp.contract.clone();
        inner.commit(Change::Published {
            rfp: id.clone(),
            request: rfp,
        })?;
        info!(%contract, rfp = %id, "rfp published");
        Ok(id)
    }

    async fn collect_bids(&self, rfp: &RfpId) -> Result<Vec<Bid>, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::CollectBids)?;
        if let Some((bid, _)) = accepted(&inner.state, rfp)? {
            return Ok(vec![bid]);
        }
        let RfpLookup::Published(request) = inner.state.rfp(rfp) else {
            return Err(MarketError::UnknownRfp { rfp: rfp.clone() });
        };
        Ok(bidders::offers(&inner.bidders, &request.resources, |did| {
            inner.state.running_of(did, now_ms)
        }))
    }

    async fn accept(&self, rfp: &RfpId, bid: &Bid) -> Result<Receipt, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Accept)?;
        if let Some((winner, receipt)) = accepted(&inner.state, rfp)? {
            return if winner.bidder == bid.bidder {
                Ok(receipt)
            } else {
                Err(MarketError::RfpClosed {
                    rfp: rfp.clone(),
                    winner: winner.bidder,
                })
            };
        }
        let RfpLookup::Published(request) = inner.state.rfp(rfp) else {
            return Err(MarketError::UnknownRfp { rfp: rfp.clone() });
        };
        let request = request.clone();
        let offered = bidders::offers(&inner.bidders, &request.resources, |did| {
            inner.state.running_of(did, now_ms)
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
        let receipt = guest.receipt();
        inner.commit(Change::Accepted {
            guest: bidders::guest_id(rfp),
            record: Box::new(guest),
        })?;
        info!(contract = %request.contract, rfp = %rfp, bidder = %bid.bidder, uri = %receipt.uri, "bid accepted");
        Ok(receipt)
    }

    async fn guest_status(&self, receipt: &Receipt) -> Result<GuestStatus, MarketError> {
        let now_ms = self.now_ms();
        self.lock().guest_status(receipt, now_ms)
    }

    /// One lock for the whole batch: polling 10,000 guests is one call.
    async fn guest_statuses(&self, receipts: &[Receipt]) -> Vec<Result<GuestStatus, MarketError>> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        receipts
            .iter()
            .map(|receipt| inner.guest_status(receipt, now_ms))
            .collect()
    }

    async fn release(&self, receipt: &Receipt) -> Result<ReleaseOutcome, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.release_calls.count(receipt.uri.as_str());
        inner.take_fault(Operation::Release)?;
        match inner.guest(receipt)? {
            GuestLookup::Unreleased(id, _) => {
                let guest = id.to_owned();
                inner.commit(Change::Released {
                    guest,
                    at_ms: now_ms,
                })?;
                info!(uri = %receipt.uri, "guest released");
            }
            GuestLookup::Unknown => {
                debug!(uri = %receipt.uri, "release of an unknown guest: already gone");
            }
            GuestLookup::Released => {}
        }
        Ok(ReleaseOutcome::Confirmed)
    }

    async fn lookup(&self, receipt: &Receipt) -> Result<Option<GuestInfo>, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Lookup)?;
        match inner.guest(receipt)? {
            GuestLookup::Unreleased(_, guest) => Ok(Some(guest.info(now_ms))),
            GuestLookup::Released | GuestLookup::Unknown => Ok(None),
        }
    }

    async fn adopt(&self, receipt: &Receipt) -> Result<GuestInfo, MarketError> {
        let now_ms = self.now_ms();
        let mut inner = self.lock();
        inner.take_fault(Operation::Adopt)?;
        let GuestLookup::Unreleased(_, guest) = inner.guest(receipt)? else {
            return Err(MarketError::GuestNotFound {
                uri: receipt.uri.clone(),
            });
        };
        let info = guest.info(now_ms);
        info!(uri = %receipt.uri, contract = %info.contract, "guest adopted");
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::CallCounts;
    use crate::ContractKey;

    #[test]
    fn call_counts_are_kept_per_key() {
        let mut counts = CallCounts::default();
        let a = ContractKey::new("ns", "a");
        let b = ContractKey::new("ns", "b");
        counts.count(&a);
        counts.count(&a);
        counts.count(&b);
        assert_eq!(counts.of(&a), 2);
        assert_eq!(counts.of(&b), 1);
        assert_eq!(counts.of(&ContractKey::new("other", "a")), 0);
        // A uri counted as a `str` is found by a `String`'s text and the reverse.
        counts.count("at://did:web:x/receipt/1");
        assert_eq!(counts.of(&"at://did:web:x/receipt/1".to_owned()), 1);
    }
}

//! The local market's state, changed in place by one [`Change`] at a time.
//!
//! A change is also what the journal appends, so replaying the journal
//! rebuilds the same state. The state keeps the counts every call needs
//! (guests taking each bidder's capacity, closed rounds per contract), so no
//! call scans the RFPs or the guests: a call costs the same with ten guests
//! and with ten thousand.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use super::bidders;
use super::ids::GuestKey;
use super::records::{GuestRecord, ReleasedGuest};
use crate::{ContractKey, RequestForProposal, RfpId};

/// One change to the market, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub(crate) enum Change {
    /// An RFP of a contract's open round was published.
    Published {
        rfp: RfpId,
        request: RequestForProposal,
    },
    /// A bid on an RFP was accepted: the guest is rented.
    Accepted {
        guest: String,
        record: Box<GuestRecord>,
    },
    /// A guest's node left the cluster.
    NodeLost { guest: String },
    /// A guest was released: its round closes and its capacity is free.
    Released {
        guest: String,
        #[serde(rename = "atMs")]
        at_ms: u64,
    },
    /// A guest released before the journal was last compacted (only a
    /// compacted journal holds these).
    Tombstone {
        guest: String,
        released: ReleasedGuest,
    },
}

/// What a call finds under an RFP id.
pub(crate) enum RfpLookup<'a> {
    /// The RFP of its contract's open round, no bid accepted yet: its request.
    Published(&'a RequestForProposal),
    /// The RFP of its contract's open round, its guest rented and not released.
    Rented(&'a GuestRecord),
    /// A round whose guest was released.
    Closed(&'a ReleasedGuest),
    /// This market never published it.
    Unknown,
}

/// The guests of one bidder that take its capacity.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct BidderLoad {
    /// Unreleased guests that boot: each takes a slot until released.
    booting: usize,
    /// Unreleased guests whose boot fails, by the time they stop taking a
    /// slot (the end of their boot delay).
    failing_until: BTreeMap<u64, usize>,
}

impl BidderLoad {
    fn running(&self, now_ms: u64) -> usize {
        let still_booting = self
            .failing_until
            .range((Bound::Excluded(now_ms), Bound::Unbounded))
            .map(|(_, n)| n)
            .sum::<usize>();
        self.booting + still_booting
    }

    fn add(&mut self, guest: &GuestRecord) {
        match guest.fails_at_ms() {
            None => self.booting += 1,
            Some(at) => *self.failing_until.entry(at).or_default() += 1,
        }
    }

    fn remove(&mut self, guest: &GuestRecord) {
        match guest.fails_at_ms() {
            None => self.booting = self.booting.saturating_sub(1),
            Some(at) => {
                if let Some(n) = self.failing_until.get_mut(&at) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.failing_until.remove(&at);
                    }
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.booting == 0 && self.failing_until.is_empty()
    }
}

/// Everything the local market must find again after a restart, and the
/// counts derived from it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct MarketState {
    /// The requests of the RFPs no bid was accepted on yet, by id. An
    /// accepted RFP leaves: its guest's agreement repeats its request (one
    /// record per guest, not two; plan 0016 C2).
    rfps: HashMap<RfpId, RequestForProposal>,
    /// Unreleased guests by guest id. Boxed: a record is about 400 bytes,
    /// and a map's table keeps up to half its slots empty, so inline records
    /// cost about 250 bytes a guest of empty slots (10,000 guests in 16,384
    /// slots); the journal's accept change brings each record boxed already.
    guests: HashMap<GuestKey, Box<GuestRecord>>,
    /// Released guests by guest id, so a late status poll still says
    /// Terminated and a closed RFP still answers with its bid.
    released: HashMap<GuestKey, ReleasedGuest>,
    /// Per contract, how many of its rounds closed (guests released): the
    /// number of its open round.
    closed_rounds: HashMap<ContractKey, u64>,
    /// Per bidder DID, its guests that take capacity.
    load: HashMap<String, BidderLoad>,
}

impl MarketState {
    /// Applies `change` in place. Total: a change that names something this
    /// state does not hold changes nothing (only a hand-edited journal has
    /// one), so a replay never stops half way.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Published { rfp, request } => {
                if !self.rented(&rfp) {
                    self.rfps.entry(rfp).or_insert(request);
                }
            }
            Change::Accepted { guest, record } => {
                self.rfps.remove(&record.rfp());
                self.load
                    .entry(record.bid().bidder.clone())
                    .or_default()
                    .add(&record);
                if let Some(replaced) = self.guests.insert(GuestKey::of(&guest), record) {
                    self.unload(&replaced);
                }
            }
            Change::NodeLost { guest } => {
                if let Some(record) = self.guests.get_mut(&GuestKey::of(&guest)) {
                    record.node_lost = true;
                }
            }
            Change::Released { guest, at_ms } => {
                let guest = GuestKey::of(&guest);
                if let Some(record) = self.guests.remove(&guest) {
                    self.unload(&record);
                    self.rfps.remove(&record.rfp());
                    self.close(guest, record.tombstone(at_ms));
                }
            }
            Change::Tombstone { guest, released } => {
                let guest = GuestKey::of(&guest);
                if !self.released.contains_key(&guest) {
                    self.close(guest, released);
                }
            }
        }
    }

    fn unload(&mut self, record: &GuestRecord) {
        let bidder = &record.bid().bidder;
        if let Some(load) = self.load.get_mut(bidder) {
            load.remove(record);
            if load.is_empty() {
                self.load.remove(bidder);
            }
        }
    }

    fn close(&mut self, guest: GuestKey, released: ReleasedGuest) {
        *self
            .closed_rounds
            .entry(released.contract.clone())
            .or_default() += 1;
        self.released.insert(guest, released);
    }

    /// The id of the contract's open round's RFP, published or not yet. A
    /// released guest closes its round, so a new object under a released
    /// contract's name rents a new machine, while publishing again for the
    /// same object (a restart before the receipt was recorded) finds the RFP
    /// it already has. Rounds close in order: only the open one can be
    /// published, accepted and released. `None` after `u32::MAX` rounds.
    pub fn open_round(&self, contract: &ContractKey) -> Option<RfpId> {
        let closed = self.closed_rounds.get(contract).copied().unwrap_or(0);
        u32::try_from(closed)
            .ok()
            .map(|round| bidders::rfp_id(contract, round))
    }

    pub fn rfp(&self, id: &RfpId) -> RfpLookup<'_> {
        if let Some(request) = self.rfps.get(id) {
            return RfpLookup::Published(request);
        }
        // One guest per RFP, its id derived from the RFP's.
        let guest = GuestKey::of(&bidders::guest_id(id));
        if let Some(rented) = self.guests.get(&guest).filter(|g| g.is_rented_for(id)) {
            return RfpLookup::Rented(rented);
        }
        match self.released.get(&guest) {
            Some(released) if released.rfp == *id => RfpLookup::Closed(released),
            _ => RfpLookup::Unknown,
        }
    }

    /// Whether the guest of RFP `id` is rented and not released.
    fn rented(&self, id: &RfpId) -> bool {
        self.guests
            .get(&GuestKey::of(&bidders::guest_id(id)))
            .is_some_and(|g| g.is_rented_for(id))
    }

    pub fn guest(&self, id: &str) -> Option<&GuestRecord> {
        self.guests.get(&GuestKey::of(id)).map(AsRef::as_ref)
    }

    pub fn released(&self, id: &str) -> Option<&ReleasedGuest> {
        self.released.get(&GuestKey::of(id))
    }

    /// Guests of `bidder` that take its capacity at `now_ms`.
    pub fn running_of(&self, bidder: &str, now_ms: u64) -> usize {
        self.load.get(bidder).map_or(0, |load| load.running(now_ms))
    }

    /// Guests that take capacity at `now_ms`, of every bidder.
    pub fn running(&self, now_ms: u64) -> usize {
        self.load.values().map(|load| load.running(now_ms)).sum()
    }

    /// RFPs ever published for `contract`: one per closed round, and the
    /// open round's once published.
    pub fn rfps_published(&self, contract: &ContractKey) -> usize {
        let closed = self.closed_rounds.get(contract).copied().unwrap_or(0);
        let open = self
            .open_round(contract)
            .is_some_and(|id| self.rfps.contains_key(&id) || self.rented(&id));
        usize::try_from(closed).unwrap_or(usize::MAX) + usize::from(open)
    }

    /// Guests ever rented for `contract`: one per closed round, and the open
    /// round's once accepted.
    pub fn guests_rented(&self, contract: &ContractKey) -> usize {
        let closed = self.closed_rounds.get(contract).copied().unwrap_or(0);
        let open = self.open_round(contract).is_some_and(|id| self.rented(&id));
        usize::try_from(closed).unwrap_or(usize::MAX) + usize::from(open)
    }

    /// RFPs ever published, closed rounds included.
    pub fn rfp_count(&self) -> usize {
        self.rfps.len() + self.guests.len() + self.released.len()
    }

    /// RFPs published that no bid was accepted on yet.
    pub fn open_rfps(&self) -> usize {
        self.rfps.len()
    }

    pub fn unreleased_guests(&self) -> usize {
        self.guests.len()
    }

    pub fn released_guests(&self) -> usize {
        self.released.len()
    }

    /// How many changes a compacted journal of this state holds.
    pub fn records(&self) -> usize {
        self.rfps.len() + self.guests.len() + self.released.len()
    }

    /// The changes that rebuild this state from nothing: what a compacted
    /// journal holds. RFPs come before the guests accepted on them.
    pub fn snapshot(&self) -> impl Iterator<Item = Change> + '_ {
        let released = self
            .released
            .iter()
            .map(|(guest, released)| Change::Tombstone {
                guest: guest.id(),
                released: released.clone(),
            });
        let published = self.rfps.iter().map(|(rfp, request)| Change::Published {
            rfp: rfp.clone(),
            request: request.clone(),
        });
        let accepted = self.guests.iter().map(|(guest, record)| Change::Accepted {
            guest: guest.id(),
            record: record.clone(),
        });
        released.chain(published).chain(accepted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::local::records::tests::record;
    use crate::{Location, Resources};

    fn request(contract: &str) -> RequestForProposal {
        RequestForProposal {
            contract: ContractKey::new("ns", contract),
            resources: Resources::default(),
            location: Location::default(),
            owner_did: "did:owner".to_owned(),
        }
    }

    /// Publishes and accepts the open round of `contract`; returns the guest id.
    fn rent(state: &mut MarketState, contract: &str, failure: Option<&str>) -> String {
        let rfp = state.open_round(&ContractKey::new("ns", contract)).unwrap();
        state.apply(Change::Published {
            rfp: rfp.clone(),
            request: request(contract),
        });
        let mut guest = record(contract, 1_000, failure);
        guest.set_rfp(rfp.clone());
        let id = bidders::guest_id(&rfp);
        state.apply(Change::Accepted {
            guest: id.clone(),
            record: Box::new(guest),
        });
        id
    }

    #[test]
    fn running_counts_follow_accepts_boot_failures_and_releases() {
        let mut state = MarketState::default();
        let a = rent(&mut state, "a", None);
        rent(&mut state, "b", Some("boom"));
        assert_eq!(state.running_of("did:p", 1_999), 2);
        assert_eq!(state.running_of("did:p", 2_000), 1, "b's boot failed");
        assert_eq!(state.running_of("did:other", 0), 0);
        state.apply(Change::Released {
            guest: a.clone(),
            at_ms: 3_000,
        });
        assert_eq!(state.running(1_500), 1);
        assert!(state.guest(&a).is_none());
        assert_eq!(state.released(&a).unwrap().released_at_ms, 3_000);
        // A second release of the same guest changes nothing.
        let before = state.clone();
        state.apply(Change::Released {
            guest: a,
            at_ms: 4_000,
        });
        assert_eq!(state, before);
    }

    #[test]
    fn a_release_closes_the_round_and_the_next_one_opens() {
        let mut state = MarketState::default();
        let key = ContractKey::new("ns", "a");
        let first_rfp = state.open_round(&key).unwrap();
        let first = rent(&mut state, "a", None);
        assert_eq!(state.open_round(&key).unwrap(), first_rfp);
        assert_eq!(
            (state.rfps_published(&key), state.guests_rented(&key)),
            (1, 1)
        );
        state.apply(Change::Released {
            guest: first,
            at_ms: 2_000,
        });
        let second_rfp = state.open_round(&key).unwrap();
        assert_ne!(second_rfp, first_rfp);
        assert!(matches!(state.rfp(&first_rfp), RfpLookup::Closed(_)));
        assert!(matches!(state.rfp(&second_rfp), RfpLookup::Unknown));
        assert_eq!(
            (state.rfps_published(&key), state.guests_rented(&key)),
            (1, 1)
        );
        rent(&mut state, "a", None);
        assert_eq!(
            (state.rfps_published(&key), state.guests_rented(&key)),
            (2, 2)
        );
        assert_eq!(state.rfp_count(), 2);
        assert!(matches!(state.rfp(&second_rfp), RfpLookup::Rented(_)));
        assert_eq!(
            state.open_rfps(),
            0,
            "an accepted RFP is kept once, in its guest"
        );
    }

    #[test]
    fn the_snapshot_rebuilds_the_same_state() {
        let mut state = MarketState::default();
        for contract in ["a", "b", "c"] {
            rent(&mut state, contract, None);
        }
        let released = rent(&mut state, "d", Some("boom"));
        state.apply(Change::Released {
            guest: released,
            at_ms: 5_000,
        });
        rent(&mut state, "d", None);
        let lost = rent(&mut state, "e", None);
        state.apply(Change::NodeLost { guest: lost });
        state.apply(Change::Published {
            rfp: state.open_round(&ContractKey::new("ns", "f")).unwrap(),
            request: request("f"),
        });
        let mut rebuilt = MarketState::default();
        for change in state.snapshot() {
            rebuilt.apply(change);
        }
        assert_eq!(rebuilt, state);
        assert_eq!(state.snapshot().count(), state.records());
    }
}

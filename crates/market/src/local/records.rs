//! What the local market remembers of one RFP and one guest, alive or released.

use std::borrow::Cow;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::agreement::Terms;
use super::ids::{KeptId, RFP_PREFIX};
use super::{Agreement, bidders, shared};
use crate::{
    Bid, ContractKey, GuestInfo, GuestStatus, Location, Receipt, RequestForProposal, Resources,
    RfpId,
};

/// A published RFP as the legacy state file kept it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RfpRecord {
    pub request: RequestForProposal,
    pub guest: Option<String>,
}

/// A rented guest that was not released. Its timeline is fixed at
/// acceptance, so its status is a pure function of the clock.
///
/// Its receipt is not kept but derived ([`Self::receipt`]): the uri names the
/// guest of its RFP and the cid is its agreement's content id, about 160
/// bytes a guest of a market that holds every guest of the fleet (plan 0017
/// P4). A record whose receipt is not the derived one (one an older market
/// issued) keeps it. The journal's JSON is the same either way: it carries
/// the receipt ([`JournaledGuest`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "JournaledGuest", into = "JournaledGuest")]
pub(crate) struct GuestRecord {
    agreement: KeptAgreement,
    /// The receipt issued, when it is not the derived one; boxed, as it is
    /// normally absent.
    issued: Option<Box<Receipt>>,
    pub accepted_at_ms: u64,
    pub boot_delay_ms: u64,
    pub register_delay_ms: u64,
    /// Why the boot fails, when it does (decided at acceptance). Boxed: rare.
    pub failure: Option<Box<str>>,
    /// Its address and node identity.
    network: GuestNetwork,
    /// The node left the cluster ([`super::LocalMarket::lose_node`]): the
    /// guest still runs on the network but reports no node identity.
    pub node_lost: bool,
}

/// The market holds each guest boxed, and an allocator serves the box from a
/// size class: mimalloc's are 160, 192 and 224 bytes here, so 8 bytes more
/// would cost 32 a guest (plan 0018 R7). What keeps it under: the boxed
/// failure (rare) and what the market's guests share kept once
/// ([`KeptAgreement`]).
const _: () = assert!(size_of::<GuestRecord>() <= 192);

/// An [`Agreement`] as a rented guest keeps it: its contract's namespace,
/// its owner's DID, its location and its bid shared with every guest of
/// equal ones ([`shared`]), its RFP and its contract's name its own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeptAgreement {
    rfp: KeptId,
    name: Box<str>,
    namespace: Arc<str>,
    owner_did: Arc<str>,
    resources: Resources,
    location: Arc<Location>,
    bid: Arc<Bid>,
}

impl From<Agreement> for KeptAgreement {
    fn from(agreement: Agreement) -> Self {
        let Agreement {
            rfp,
            contract: ContractKey { namespace, name },
            owner_did,
            resources,
            location,
            bid,
        } = agreement;
        Self {
            rfp: KeptId::new(rfp.as_str(), RFP_PREFIX),
            name: name.into_boxed_str(),
            namespace: shared::text(&namespace),
            owner_did: shared::text(&owner_did),
            resources,
            location: shared::location(location),
            bid: shared::bid(bid),
        }
    }
}

impl KeptAgreement {
    fn agreement(&self) -> Agreement {
        Agreement {
            rfp: self.rfp(),
            contract: self.contract(),
            owner_did: self.owner_did.to_string(),
            resources: self.resources,
            location: Location::clone(&self.location),
            bid: Bid::clone(&self.bid),
        }
    }

    fn rfp(&self) -> RfpId {
        RfpId::new(self.rfp.text(RFP_PREFIX))
    }

    fn contract(&self) -> ContractKey {
        ContractKey::new(self.namespace.as_ref(), self.name.as_ref())
    }

    fn content_id(&self) -> String {
        let rfp = self.rfp();
        Terms {
            rfp: rfp.as_str(),
            namespace: &self.namespace,
            name: &self.name,
            owner_did: &self.owner_did,
            resources: &self.resources,
            location: &self.location,
            bid: &self.bid,
        }
        .content_id()
    }
}

/// A guest's address and node identity as its record keeps them. The local
/// market gives each guest an IPv4 address and a `guest-` + 12 hex digits
/// id (`bidders::guest_address`, `bidders::node_id`): kept as their 10
/// bytes, where the two strings took 48 bytes and two allocations a guest
/// of a market that holds every guest of the fleet. Any other pair (an
/// older market's, read from its journal) is kept as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GuestNetwork {
    /// `a.b.c.d` and `guest-<hex of node>`.
    Compact { address: [u8; 4], node: [u8; 6] },
    /// Any other.
    Given(Box<(String, String)>),
}

/// The prefix of the node identities the local market gives.
const NODE_ID_PREFIX: &str = "guest-";

impl GuestNetwork {
    fn new(address: String, node_id: String) -> Self {
        let compact = || {
            let ip: Ipv4Addr = address.parse().ok()?;
            let hex_digits = node_id.strip_prefix(NODE_ID_PREFIX)?;
            let node: [u8; 6] = hex::decode(hex_digits).ok()?.try_into().ok()?;
            // Only a form that reads back the same (no leading zeros, no capitals).
            let same = ip.to_string() == address && hex::encode(node) == hex_digits;
            same.then_some(Self::Compact {
                address: ip.octets(),
                node,
            })
        };
        compact().unwrap_or_else(|| Self::Given(Box::new((address, node_id))))
    }

    fn address(&self) -> String {
        match self {
            Self::Compact { address, .. } => Ipv4Addr::from(*address).to_string(),
            Self::Given(given) => given.0.clone(),
        }
    }

    fn node_id(&self) -> String {
        match self {
            Self::Compact { node, .. } => format!("{NODE_ID_PREFIX}{}", hex::encode(node)),
            Self::Given(given) => given.1.clone(),
        }
    }
}

/// A [`GuestRecord`] as the journal (and the legacy state file) keeps it:
/// with its receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JournaledGuest {
    agreement: Agreement,
    receipt: Receipt,
    accepted_at_ms: u64,
    boot_delay_ms: u64,
    register_delay_ms: u64,
    failure: Option<String>,
    address: String,
    node_id: String,
    #[serde(default)]
    node_lost: bool,
}

impl From<JournaledGuest> for GuestRecord {
    fn from(journaled: JournaledGuest) -> Self {
        let mut record = Self::rented(
            journaled.agreement,
            journaled.accepted_at_ms,
            journaled.boot_delay_ms,
            journaled.register_delay_ms,
            journaled.failure,
            journaled.address,
            journaled.node_id,
        );
        record.node_lost = journaled.node_lost;
        if record.receipt() != journaled.receipt {
            record.issued = Some(Box::new(journaled.receipt));
        }
        record
    }
}

impl From<GuestRecord> for JournaledGuest {
    fn from(record: GuestRecord) -> Self {
        let receipt = record.receipt();
        Self {
            agreement: record.agreement.agreement(),
            receipt,
            accepted_at_ms: record.accepted_at_ms,
            boot_delay_ms: record.boot_delay_ms,
            register_delay_ms: record.register_delay_ms,
            failure: record.failure.map(String::from),
            address: record.network.address(),
            node_id: record.network.node_id(),
            node_lost: record.node_lost,
        }
    }
}

impl GuestRecord {
    /// The record of a guest rented now under `agreement`, its receipt the
    /// derived one.
    pub fn rented(
        agreement: Agreement,
        accepted_at_ms: u64,
        boot_delay_ms: u64,
        register_delay_ms: u64,
        failure: Option<String>,
        address: String,
        node_id: String,
    ) -> Self {
        Self {
            agreement: KeptAgreement::from(agreement),
            issued: None,
            accepted_at_ms,
            boot_delay_ms,
            register_delay_ms,
            failure: failure.map(String::into_boxed_str),
            network: GuestNetwork::new(address, node_id),
            node_lost: false,
        }
    }

    /// The RFP it was rented for.
    pub fn rfp(&self) -> RfpId {
        self.agreement.rfp()
    }

    /// Whether it was rented for RFP `id`.
    pub fn is_rented_for(&self, id: &RfpId) -> bool {
        self.agreement.rfp == KeptId::new(id.as_str(), RFP_PREFIX)
    }

    /// The accepted bid.
    pub fn bid(&self) -> &Bid {
        &self.agreement.bid
    }

    /// Whether `request` asks for what its agreement's RFP asked for.
    pub fn is_for(&self, request: &RequestForProposal) -> bool {
        let kept = &self.agreement;
        *kept.namespace == request.contract.namespace
            && *kept.name == request.contract.name
            && *kept.owner_did == request.owner_did
            && kept.resources == request.resources
            && *kept.location == request.location
    }

    /// Rents it for RFP `rfp` instead (a test's record made for another round).
    #[cfg(test)]
    pub fn set_rfp(&mut self, rfp: RfpId) {
        self.agreement.rfp = KeptId::new(rfp.as_str(), RFP_PREFIX);
    }

    /// The receipt issued for the guest: the one kept, else the uri of its
    /// RFP's guest and its agreement's content id.
    pub fn receipt(&self) -> Receipt {
        match &self.issued {
            Some(issued) => issued.as_ref().clone(),
            None => super::receipt_of(&bidders::guest_id(&self.rfp()), self.agreement.content_id()),
        }
    }

    /// The content id of its receipt: the one kept, else its agreement's.
    pub fn cid(&self) -> Cow<'_, str> {
        match &self.issued {
            Some(issued) => Cow::Borrowed(issued.cid.as_str()),
            None => Cow::Owned(self.agreement.content_id()),
        }
    }

    /// The guest's status at `now_ms`: Booting for the first half of the boot
    /// delay, Started for the second, then Failed or OnNetwork, then
    /// NodeRegistered after the register delay.
    pub fn status_at(&self, now_ms: u64) -> GuestStatus {
        let elapsed = now_ms.saturating_sub(self.accepted_at_ms);
        if elapsed < self.boot_delay_ms {
            return if elapsed.saturating_mul(2) < self.boot_delay_ms {
                GuestStatus::Booting
            } else {
                GuestStatus::Started
            };
        }
        if let Some(reason) = &self.failure {
            return GuestStatus::Failed {
                reason: reason.to_string(),
            };
        }
        if self.node_lost || elapsed < self.boot_delay_ms.saturating_add(self.register_delay_ms) {
            GuestStatus::OnNetwork {
                address: Some(self.network.address()),
            }
        } else {
            GuestStatus::NodeRegistered {
                address: Some(self.network.address()),
                node_id: self.network.node_id(),
            }
        }
    }

    /// When a guest that fails to boot stops taking its provider's capacity:
    /// at the end of its boot delay (the provider gave up). `None` for a guest
    /// that boots: it takes capacity until released.
    pub fn fails_at_ms(&self) -> Option<u64> {
        self.failure
            .as_ref()
            .map(|_| self.accepted_at_ms.saturating_add(self.boot_delay_ms))
    }

    /// True while the guest takes one of its provider's capacity slots.
    #[cfg(test)]
    pub fn holds_capacity(&self, now_ms: u64) -> bool {
        self.fails_at_ms().is_none_or(|fails_at| now_ms < fails_at)
    }

    pub fn info(&self, now_ms: u64) -> GuestInfo {
        GuestInfo {
            receipt: self.receipt(),
            rfp: self.rfp(),
            contract: self.agreement.contract(),
            owner_did: self.agreement.owner_did.to_string(),
            provider: self.agreement.bid.bidder.clone(),
            price: self.agreement.bid.price.clone(),
            status: self.status_at(now_ms),
        }
    }

    /// What is kept of the guest once released.
    pub fn tombstone(&self, released_at_ms: u64) -> ReleasedGuest {
        ReleasedGuest {
            rfp: self.rfp(),
            contract: self.agreement.contract(),
            bid: Bid::clone(&self.agreement.bid),
            cid: self.cid().into_owned(),
            released_at_ms,
        }
    }
}

/// A released guest: only what a late call about it needs (its status is
/// Terminated, its RFP is closed with its bid, its receipt is checked, and its
/// contract's next round opens). A fraction of the guest's whole record, and
/// part of no per-bidder count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReleasedGuest {
    pub rfp: RfpId,
    pub contract: ContractKey,
    pub bid: Bid,
    /// The content id of its receipt.
    pub cid: String,
    pub released_at_ms: u64,
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, duration_ms)
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Location, Price, Resources};

    /// A guest of `contract` (round 0), accepted at 1 s.
    pub(crate) fn record(contract: &str, boot_delay_ms: u64, failure: Option<&str>) -> GuestRecord {
        let agreement = Agreement {
            rfp: RfpId::new(format!("rfp-{contract}")),
            contract: ContractKey::new("ns", contract),
            owner_did: "did:owner".to_owned(),
            resources: Resources::default(),
            location: Location::default(),
            bid: Bid::new("did:p", Price::hourly(1, "EUR")),
        };
        let mut record = GuestRecord::rented(
            agreement,
            1_000,
            boot_delay_ms,
            100,
            failure.map(str::to_owned),
            "10.1.2.3".to_owned(),
            "guest-1".to_owned(),
        );
        record.issued = Some(Box::new(Receipt {
            uri: format!("local://guests/g-{contract}"),
            cid: record.agreement.content_id(),
        }));
        record
    }

    /// A guest rented as the market rents it: its receipt derived.
    fn rented() -> GuestRecord {
        let mut guest = record("c", 1_000, None);
        guest.issued = None;
        guest
    }

    #[test]
    fn a_rented_guest_journals_the_receipt_it_derives_and_reads_back_keeping_none() {
        let guest = rented();
        let json = serde_json::to_value(&guest).unwrap();
        assert_eq!(
            json["receipt"]["uri"],
            format!("local://guests/{}", bidders::guest_id(&guest.rfp()))
        );
        assert_eq!(json["receipt"]["cid"], guest.agreement.content_id());
        let read: GuestRecord = serde_json::from_value(json).unwrap();
        assert_eq!(read.issued, None);
        assert_eq!(read, guest);
        assert_eq!(read.info(0).receipt, guest.receipt());
    }

    #[test]
    fn a_journaled_receipt_that_is_not_the_derived_one_is_kept_as_issued() {
        let mut json = serde_json::to_value(rented()).unwrap();
        json["receipt"]["cid"] = "sha256:issued-by-an-older-market".into();
        let read: GuestRecord = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(read.cid(), "sha256:issued-by-an-older-market");
        assert_eq!(read.receipt().cid, "sha256:issued-by-an-older-market");
        assert_eq!(read.tombstone(5).cid, "sha256:issued-by-an-older-market");
        assert_eq!(serde_json::to_value(&read).unwrap(), json);
    }

    #[test]
    fn the_markets_own_address_and_node_id_are_kept_as_bytes_and_read_back() {
        let seed = 7;
        let rfp = RfpId::new("rfp-x");
        let (address, node_id) = (
            bidders::guest_address(seed, &rfp),
            bidders::node_id(seed, &rfp),
        );
        let kept = GuestNetwork::new(address.clone(), node_id.clone());
        assert!(matches!(kept, GuestNetwork::Compact { .. }));
        assert_eq!((kept.address(), kept.node_id()), (address, node_id));
    }

    proptest::proptest! {
        /// Any address and node id read back as they came, compact or not.
        #[test]
        fn an_address_and_node_id_read_back_as_they_came(
            address in "([0-9]{1,3}\\.){3}[0-9]{1,3}|[a-z0-9.:]{0,12}",
            node_id in "guest-[0-9a-fA-F]{11,13}|[a-z0-9-]{0,12}",
        ) {
            let kept = GuestNetwork::new(address.clone(), node_id.clone());
            proptest::prop_assert_eq!((kept.address(), kept.node_id()), (address, node_id));
        }
    }

    proptest::prop_compose! {
        fn an_agreement()(
            rfp in "rfp-[a-z0-9]{0,8}",
            namespace in "[a-z]{1,3}",
            name in "[a-z0-9-]{0,10}",
            owner_did in "did:[a-z]{1,2}",
            cpus in 0u32..3,
            country in "[A-Z]{2}",
            region in proptest::option::of("[A-Z]{0,2}"),
            bidder in "did:[a-z]{1,2}",
            cost in 0u64..3,
            currency in "EUR|USD|",
        ) -> Agreement {
            Agreement {
                rfp: RfpId::new(rfp),
                contract: ContractKey::new(namespace, name),
                owner_did,
                resources: Resources { cpus, ..Resources::default() },
                location: Location { country, region },
                bid: Bid::new(bidder, Price::hourly(cost, currency)),
            }
        }
    }

    proptest::proptest! {
        /// A guest keeps what its market's guests share once, and still
        /// reads back the agreement it was rented on: the same terms, the
        /// same content id (its receipt's cid), the same answer to whether
        /// a request is the one it was rented for.
        #[test]
        fn a_kept_agreement_reads_back_as_it_came(
            agreement in an_agreement(),
            other_terms in an_agreement(),
        ) {
            let rented = |agreement: Agreement| GuestRecord::rented(
                agreement, 0, 0, 0, None, "10.0.0.1".to_owned(), "guest-1".to_owned(),
            );
            let guest = rented(agreement.clone());
            proptest::prop_assert_eq!(&guest.agreement.agreement(), &agreement);
            proptest::prop_assert_eq!(guest.cid(), agreement.content_id());
            let request_of = |terms: &Agreement| RequestForProposal {
                contract: terms.contract.clone(),
                resources: terms.resources,
                location: terms.location.clone(),
                owner_did: terms.owner_did.clone(),
            };
            proptest::prop_assert!(guest.is_for(&request_of(&agreement)));
            let other = request_of(&other_terms);
            let same_terms = other.contract == agreement.contract
                && other.owner_did == agreement.owner_did
                && other.resources == agreement.resources
                && other.location == agreement.location;
            proptest::prop_assert_eq!(guest.is_for(&other), same_terms);
            // Another guest of the same terms shares them.
            let twin = rented(agreement);
            proptest::prop_assert!(Arc::ptr_eq(&guest.agreement.bid, &twin.agreement.bid));
            proptest::prop_assert!(Arc::ptr_eq(&guest.agreement.owner_did, &twin.agreement.owner_did));
        }
    }

    #[test]
    fn a_journaled_address_of_another_form_is_kept_as_it_came() {
        let mut json = serde_json::to_value(rented()).unwrap();
        json["address"] = "10.01.2.3".into();
        json["node_id"] = "guest-ABCDEF012345".into();
        let read: GuestRecord = serde_json::from_value(json.clone()).unwrap();
        assert!(matches!(read.network, GuestNetwork::Given(_)));
        assert_eq!(read.status_at(10_000).address(), Some("10.01.2.3"));
        assert_eq!(serde_json::to_value(&read).unwrap(), json);
    }

    #[test]
    fn status_follows_the_timeline() {
        let guest = record("c", 1_000, None);
        assert_eq!(guest.status_at(500), GuestStatus::Booting);
        assert_eq!(guest.status_at(1_499), GuestStatus::Booting);
        assert_eq!(guest.status_at(1_500), GuestStatus::Started);
        assert_eq!(guest.status_at(2_000).address(), Some("10.1.2.3"));
        assert!(matches!(
            guest.status_at(2_050),
            GuestStatus::OnNetwork { .. }
        ));
        assert!(matches!(
            guest.status_at(2_100),
            GuestStatus::NodeRegistered { .. }
        ));
        assert!(guest.holds_capacity(5_000));
        assert_eq!(guest.fails_at_ms(), None);
    }

    #[test]
    fn a_failed_boot_frees_capacity_when_it_fails() {
        let guest = record("c", 1_000, Some("boom"));
        assert!(guest.holds_capacity(1_999));
        assert_eq!(guest.status_at(1_999), GuestStatus::Started);
        assert!(!guest.holds_capacity(2_000));
        assert_eq!(guest.fails_at_ms(), Some(2_000));
        assert!(matches!(guest.status_at(2_000), GuestStatus::Failed { .. }));
    }
}

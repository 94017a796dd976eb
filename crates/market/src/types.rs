//! The plain data the market port speaks: requests, bids, receipts, guests.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Price;

/// The stable identity of one contract, used as the idempotency key of
/// [`crate::Market::publish_rfp`].
///
/// The controller builds it from the ComputeContract's namespace and name; a
/// caller that needs a fresh RFP for the same object (a retry after a failure)
/// must use a new key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ContractKey {
    /// Namespace of the contract.
    pub namespace: String,
    /// Name of the contract.
    pub name: String,
}

impl ContractKey {
    /// Builds a key from a namespace and a name.
    #[must_use]
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ContractKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a guest must offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Resources {
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Disk in GiB.
    pub disk_gib: u64,
    /// Network bandwidth in Mbit/s.
    pub network_mbps: u32,
}

/// Where a guest must run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Location {
    /// ISO 3166 country code.
    pub country: String,
    /// Optional region inside the country.
    pub region: Option<String>,
}

/// A request for proposal: what one contract asks the market for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestForProposal {
    /// The contract this RFP is for; publishing is idempotent per key.
    pub contract: ContractKey,
    /// What the guest must offer.
    pub resources: Resources,
    /// Where the guest must run.
    pub location: Location,
    /// DID of the tenant that will own the guest.
    pub owner_did: String,
}

/// The market's id of a published RFP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RfpId(String);

impl RfpId {
    /// Wraps an id issued by a market (e.g. read back from a status).
    #[must_use]
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RfpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a market keeps a record: its address and the content id of the
/// version meant (an atproto strongRef).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordRef {
    /// The record's address, e.g. `at://did:plc:.../com.publicdomainrelay.temp.market.bid/<rkey>`.
    pub uri: String,
    /// The content id of the version meant.
    pub cid: String,
}

/// A bidder's offer for an RFP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bid {
    /// DID of the bidder (the provider that would run the guest).
    pub bidder: String,
    /// What it asks.
    #[serde(flatten)]
    pub price: Price,
    /// The bid's record, for a market that publishes bids as records (the
    /// atproto market); `None` for the local market, and for a bid rebuilt
    /// from a status that kept only the bidder and price (the market then
    /// finds the bidder's bid itself). Boxed: the local market keeps a bid
    /// in each of its 10,000 guests' agreements and never has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Box<RecordRef>>,
}

impl Bid {
    /// A bid without a record.
    #[must_use]
    pub fn new(bidder: impl Into<String>, price: Price) -> Self {
        Self {
            bidder: bidder.into(),
            price,
            record: None,
        }
    }
}

/// Proof that a bid was accepted, naming the guest. It is the one market
/// identifier that cannot be derived again, so the controller keeps it in
/// status and in an annotation.
///
/// What `uri` and `cid` are, and how the market checks them, is the market's
/// own: the local market's `cid` is the content id of its agreement
/// ([`crate::local::Agreement`]); the atproto market's receipt is the
/// bidder's `market.receipt` record, whose signature and binding to our
/// accept it verifies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Receipt {
    /// Where the market serves the guest, e.g. `local://guests/<id>` or the
    /// receipt record's `at://` URI.
    pub uri: String,
    /// The content id the market checks the receipt by.
    pub cid: String,
}

/// What the provider reports about a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum GuestStatus {
    /// The machine is being prepared. A market with no status query (the
    /// atproto market) reports this from its receipt until the provider's
    /// first event arrives: "accepted, not reported on the network yet".
    Booting,
    /// The machine runs but is not reachable yet.
    Started,
    /// The machine is on the network (the atproto market's `vm.onNetwork`).
    OnNetwork {
        /// IP address of the guest, when the provider reports one (the
        /// atproto market's providers usually do not).
        address: Option<String>,
    },
    /// The machine is on the network and reported its node identity.
    NodeRegistered {
        /// IP address of the guest, when the provider reports one.
        address: Option<String>,
        /// The node identity the guest reported.
        node_id: String,
    },
    /// The guest was released and is gone.
    Terminated,
    /// The provider gave up on the guest.
    Failed {
        /// Why, naming the provider.
        reason: String,
    },
}

impl GuestStatus {
    /// The guest's address, once it is on the network and if the provider
    /// reported one.
    #[must_use]
    pub fn address(&self) -> Option<&str> {
        match self {
            Self::OnNetwork { address } | Self::NodeRegistered { address, .. } => {
                address.as_deref()
            }
            _ => None,
        }
    }

    /// True once the guest is on the network (the contract is Deployed).
    #[must_use]
    pub const fn is_on_network(&self) -> bool {
        matches!(self, Self::OnNetwork { .. } | Self::NodeRegistered { .. })
    }

    /// True when the status will not change any more.
    #[must_use]
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Terminated | Self::Failed { .. })
    }
}

/// What [`crate::Market::release`] could establish.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReleaseOutcome {
    /// The market confirmed the guest is stopped (the local market).
    Confirmed,
    /// The provider acknowledged the release request, and the protocol has
    /// no way to confirm the machine stopped (the atproto market's
    /// `vm.delete`, answered before teardown). A later
    /// [`crate::Market::lookup`] reports the guest again if the market sees
    /// it still running.
    Acknowledged,
    /// The provider acknowledged the release, but the market sees that it
    /// was lost: the provider restarted since it started the guest and
    /// keeps no record of it, or the guest still reports after the release
    /// (the atproto market). Sending it again changes nothing; a person has
    /// to ask the provider to stop the machine.
    Unconfirmed {
        /// What was seen, naming the provider and the receipt.
        reason: String,
    },
}

/// What the market knows about a live guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestInfo {
    /// The receipt naming the guest.
    pub receipt: Receipt,
    /// The RFP the guest was rented through.
    pub rfp: RfpId,
    /// The contract the guest was rented for.
    pub contract: ContractKey,
    /// DID of the tenant that owns the guest (the agreement's owner): only
    /// that tenant's contracts may take the guest over.
    pub owner_did: String,
    /// DID of the provider running the guest (the winning bidder).
    pub provider: String,
    /// What the provider asks (the accepted bid's price).
    pub price: Price,
    /// The guest's current status.
    pub status: GuestStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_statuses_on_the_network_are_deployed_and_may_have_an_address() {
        let on = GuestStatus::OnNetwork {
            address: Some("10.0.0.1".to_owned()),
        };
        assert_eq!(on.address(), Some("10.0.0.1"));
        let without = GuestStatus::OnNetwork { address: None };
        assert!(without.is_on_network());
        assert_eq!(without.address(), None);
        assert!(!GuestStatus::Started.is_on_network());
        assert!(GuestStatus::Terminated.is_final());
        assert!(!on.is_final());
    }

    #[test]
    fn a_bid_written_before_records_and_frequencies_reads_back() {
        let bid: Bid = serde_json::from_str(r#"{"bidder":"did:a","cost":7,"currency":"EUR"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(bid, Bid::new("did:a", Price::hourly(7, "EUR")));
        let json = serde_json::to_value(&bid).unwrap_or_default();
        assert_eq!(json["cost"], 7);
        assert!(json.get("record").is_none());
    }
}

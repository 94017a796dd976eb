//! The plain data the market port speaks: requests, bids, receipts, guests.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::MarketError;

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

/// A bidder's offer for an RFP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bid {
    /// DID of the bidder (the provider that would run the guest).
    pub bidder: String,
    /// Cost in minor units of `currency` per hour.
    pub cost: u64,
    /// Currency code, e.g. `EUR`.
    pub currency: String,
}

/// The terms both sides agreed to when a bid was accepted; its content hash is
/// the receipt's `cid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agreement {
    /// The RFP that was accepted.
    pub rfp: RfpId,
    /// The contract the RFP was for.
    pub contract: ContractKey,
    /// DID of the tenant that owns the guest.
    pub owner_did: String,
    /// What the guest offers.
    pub resources: Resources,
    /// Where the guest runs.
    pub location: Location,
    /// The accepted bid.
    pub bid: Bid,
}

impl Agreement {
    /// The content id of the agreement: `sha256:` and the hex digest of a
    /// canonical, length-prefixed encoding of every field.
    #[must_use]
    pub fn content_id(&self) -> String {
        let mut hasher = Sha256::new();
        let region = self.location.region.as_deref().unwrap_or("");
        let numbers = [
            u64::from(self.resources.cpus),
            self.resources.memory_mib,
            self.resources.disk_gib,
            u64::from(self.resources.network_mbps),
            self.bid.cost,
            u64::from(self.location.region.is_some()),
        ];
        let texts = [
            "socialweb.computer/agreement/v1",
            self.rfp.as_str(),
            &self.contract.namespace,
            &self.contract.name,
            &self.owner_did,
            &self.location.country,
            region,
            &self.bid.bidder,
            &self.bid.currency,
        ];
        for text in texts {
            hasher.update((text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
        }
        for number in numbers {
            hasher.update(number.to_le_bytes());
        }
        format!("sha256:{}", hex::encode(hasher.finalize()))
    }
}

/// Proof that a bid was accepted: where the guest is and the content id of the
/// agreement. It is the one market identifier that cannot be derived again,
/// so the controller keeps it in status and in an annotation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Receipt {
    /// Where the market serves the guest, e.g. `local://guests/<id>`.
    pub uri: String,
    /// Content id of the [`Agreement`].
    pub cid: String,
}

impl Receipt {
    /// Checks that this receipt's `cid` is the content id of `agreement`.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`] when it is not.
    pub fn verify(&self, agreement: &Agreement) -> Result<(), MarketError> {
        if self.cid == agreement.content_id() {
            Ok(())
        } else {
            Err(MarketError::InvalidReceipt {
                uri: self.uri.clone(),
                reason: "cid does not match the agreement".to_owned(),
            })
        }
    }
}

/// What the provider reports about a guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum GuestStatus {
    /// The machine is being prepared.
    Booting,
    /// The machine runs but is not reachable yet.
    Started,
    /// The machine is reachable at `address`.
    OnNetwork {
        /// IP address of the guest.
        address: String,
    },
    /// The machine is reachable and reported its node identity.
    NodeRegistered {
        /// IP address of the guest.
        address: String,
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
    /// The guest's address once it is on the network.
    #[must_use]
    pub fn address(&self) -> Option<&str> {
        match self {
            Self::OnNetwork { address } | Self::NodeRegistered { address, .. } => Some(address),
            _ => None,
        }
    }

    /// True once the guest is reachable (the contract is Deployed).
    #[must_use]
    pub fn is_on_network(&self) -> bool {
        self.address().is_some()
    }

    /// True when the status will not change any more.
    #[must_use]
    pub fn is_final(&self) -> bool {
        matches!(self, Self::Terminated | Self::Failed { .. })
    }
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
    /// Cost in minor units of `currency` per hour.
    pub cost: u64,
    /// Currency code.
    pub currency: String,
    /// The guest's current status.
    pub status: GuestStatus,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn agreement() -> Agreement {
        Agreement {
            rfp: RfpId::new("rfp-1"),
            contract: ContractKey::new("ns", "c"),
            owner_did: "did:owner".to_owned(),
            resources: Resources {
                cpus: 2,
                memory_mib: 2048,
                disk_gib: 20,
                network_mbps: 100,
            },
            location: Location {
                country: "DE".to_owned(),
                region: None,
            },
            bid: Bid {
                bidder: "did:bidder".to_owned(),
                cost: 10,
                currency: "EUR".to_owned(),
            },
        }
    }

    #[test]
    fn content_id_changes_with_every_term() {
        let base = agreement();
        let mut cheaper = base.clone();
        cheaper.bid.cost = 9;
        let mut empty_region = base.clone();
        empty_region.location.region = Some(String::new());
        let mut shifted = base.clone();
        // Moving text between adjacent fields must change the hash.
        shifted.contract = ContractKey::new("n", "sc");
        let ids = [&base, &cheaper, &empty_region, &shifted].map(Agreement::content_id);
        for (i, a) in ids.iter().enumerate() {
            assert!(a.starts_with("sha256:"));
            for b in &ids[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(base.content_id(), agreement().content_id());
    }

    #[test]
    fn receipt_verifies_only_its_own_agreement() {
        let good = Receipt {
            uri: "local://guests/x".to_owned(),
            cid: agreement().content_id(),
        };
        good.verify(&agreement()).unwrap();
        let mut other = agreement();
        other.owner_did = "did:someone-else".to_owned();
        let err = good.verify(&other).unwrap_err();
        assert!(matches!(err, MarketError::InvalidReceipt { .. }));
        assert!(!err.is_retryable());
    }

    #[test]
    fn only_reachable_statuses_have_an_address() {
        let on = GuestStatus::OnNetwork {
            address: "10.0.0.1".to_owned(),
        };
        assert_eq!(on.address(), Some("10.0.0.1"));
        assert!(!GuestStatus::Started.is_on_network());
        assert!(GuestStatus::Terminated.is_final());
        assert!(!on.is_final());
    }
}

//! What the local market remembers of one RFP and one guest, alive or released.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::Agreement;
use crate::{Bid, ContractKey, GuestInfo, GuestStatus, Receipt, RequestForProposal, RfpId};

/// A published RFP as the legacy state file kept it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RfpRecord {
    pub request: RequestForProposal,
    pub guest: Option<String>,
}

/// A rented guest that was not released. Its timeline is fixed at
/// acceptance, so its status is a pure function of the clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GuestRecord {
    pub agreement: Agreement,
    pub receipt: Receipt,
    pub accepted_at_ms: u64,
    pub boot_delay_ms: u64,
    pub register_delay_ms: u64,
    /// Why the boot fails, when it does (decided at acceptance).
    pub failure: Option<String>,
    pub address: String,
    pub node_id: String,
    /// The node left the cluster ([`super::LocalMarket::lose_node`]): the
    /// guest still runs on the network but reports no node identity.
    #[serde(default)]
    pub node_lost: bool,
}

impl GuestRecord {
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
                reason: reason.clone(),
            };
        }
        if self.node_lost || elapsed < self.boot_delay_ms.saturating_add(self.register_delay_ms) {
            GuestStatus::OnNetwork {
                address: Some(self.address.clone()),
            }
        } else {
            GuestStatus::NodeRegistered {
                address: Some(self.address.clone()),
                node_id: self.node_id.clone(),
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
            receipt: self.receipt.clone(),
            rfp: self.agreement.rfp.clone(),
            contract: self.agreement.contract.clone(),
            owner_did: self.agreement.owner_did.clone(),
            provider: self.agreement.bid.bidder.clone(),
            price: self.agreement.bid.price.clone(),
            status: self.status_at(now_ms),
        }
    }

    /// What is kept of the guest once released.
    pub fn tombstone(&self, released_at_ms: u64) -> ReleasedGuest {
        ReleasedGuest {
            rfp: self.agreement.rfp.clone(),
            contract: self.agreement.contract.clone(),
            bid: self.agreement.bid.clone(),
            cid: self.receipt.cid.clone(),
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
        GuestRecord {
            receipt: Receipt {
                uri: format!("local://guests/g-{contract}"),
                cid: agreement.content_id(),
            },
            agreement,
            accepted_at_ms: 1_000,
            boot_delay_ms,
            register_delay_ms: 100,
            failure: failure.map(str::to_owned),
            address: "10.1.2.3".to_owned(),
            node_id: "guest-1".to_owned(),
            node_lost: false,
        }
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

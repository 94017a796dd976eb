//! The local market's receipts: the content id of the agreement a receipt
//! names, and the check that a receipt is the one of its agreement.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Bid, ContractKey, Frequency, Location, MarketError, Receipt, Resources, RfpId};

/// The terms both sides agreed to when a bid was accepted; its content id is
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
    ///
    /// An integer hourly price (all the local market quotes) hashes as it did
    /// before prices had decimals and frequencies, so receipts kept in
    /// statuses and annotations still verify; any other price adds its scale
    /// and frequency.
    #[must_use]
    pub fn content_id(&self) -> String {
        Terms {
            rfp: self.rfp.as_str(),
            namespace: &self.contract.namespace,
            name: &self.contract.name,
            owner_did: &self.owner_did,
            resources: &self.resources,
            location: &self.location,
            bid: &self.bid,
        }
        .content_id()
    }

    /// Checks that `receipt`'s `cid` is this agreement's content id.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`] when it is not.
    pub fn verify(&self, receipt: &Receipt) -> Result<(), MarketError> {
        if receipt.cid == self.content_id() {
            Ok(())
        } else {
            Err(MarketError::InvalidReceipt {
                uri: receipt.uri.clone(),
                reason: "cid does not match the agreement".to_owned(),
            })
        }
    }
}

/// The terms an agreement's content id is computed from: an [`Agreement`]'s,
/// or a rented guest's, which keeps what its market's guests share once
/// (`records::KeptAgreement`).
pub(crate) struct Terms<'a> {
    pub rfp: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub owner_did: &'a str,
    pub resources: &'a Resources,
    pub location: &'a Location,
    pub bid: &'a Bid,
}

impl Terms<'_> {
    /// The content id of the agreement of these terms: see
    /// [`Agreement::content_id`].
    pub fn content_id(&self) -> String {
        let mut hasher = Sha256::new();
        let region = self.location.region.as_deref().unwrap_or("");
        let price = &self.bid.price;
        let numbers = [
            u64::from(self.resources.cpus),
            self.resources.memory_mib,
            self.resources.disk_gib,
            u64::from(self.resources.network_mbps),
            price.cost.units(),
            u64::from(self.location.region.is_some()),
        ];
        let texts = [
            "socialweb.computer/agreement/v1",
            self.rfp,
            self.namespace,
            self.name,
            self.owner_did,
            &self.location.country,
            region,
            &self.bid.bidder,
            &price.currency,
        ];
        for text in texts {
            hasher.update((text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
        }
        for number in numbers {
            hasher.update(number.to_le_bytes());
        }
        if price.cost.scale() != 0 || price.frequency != Frequency::Hourly {
            let frequency = price.frequency.as_str();
            hasher.update((frequency.len() as u64).to_le_bytes());
            hasher.update(frequency.as_bytes());
            hasher.update(u64::from(price.cost.scale()).to_le_bytes());
        }
        format!("sha256:{}", hex::encode(hasher.finalize()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Amount, Price};

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
            bid: Bid::new("did:bidder", Price::hourly(10, "EUR")),
        }
    }

    #[test]
    fn content_id_of_an_integer_hourly_price_is_the_one_receipts_already_carry() {
        // Computed before prices had decimals and frequencies: kept receipts must verify.
        assert_eq!(
            agreement().content_id(),
            "sha256:1f6def06c8537d1ff0e9d5b4d095263e3757658bea9f2f482db3a2b96c26882b"
        );
    }

    #[test]
    fn content_id_changes_with_every_term() {
        let base = agreement();
        let mut cheaper = base.clone();
        cheaper.bid.price.cost = Amount::from_units(9);
        let mut empty_region = base.clone();
        empty_region.location.region = Some(String::new());
        let mut shifted = base.clone();
        // Moving text between adjacent fields must change the hash.
        shifted.contract = ContractKey::new("n", "sc");
        let mut monthly = base.clone();
        monthly.bid.price.frequency = Frequency::Monthly;
        let mut decimal = base.clone();
        decimal.bid.price.cost = Amount::new(100, 1).unwrap_or_default();
        assert_eq!(decimal.bid.price.cost, Amount::from_units(10), "10.0 is 10");
        decimal.bid.price.cost = Amount::new(101, 1).unwrap_or_default();
        let ids = [&base, &cheaper, &empty_region, &shifted, &monthly, &decimal]
            .map(Agreement::content_id);
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
        agreement().verify(&good).unwrap();
        let mut other = agreement();
        other.owner_did = "did:someone-else".to_owned();
        let err = other.verify(&good).unwrap_err();
        assert!(matches!(err, MarketError::InvalidReceipt { .. }));
        assert!(!err.is_retryable());
    }
}

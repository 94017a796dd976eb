//! The local market's configuration and its pure, seeded decisions: who bids,
//! whose boot fails, which address a guest gets.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::ids::{GUEST_PREFIX, RFP_PREFIX};
use crate::{Bid, ContractKey, MarketError, Price, Resources, RfpId};

/// One simulated provider of the local market.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalBidder {
    /// The bidder's DID; unique within a market.
    pub did: String,
    /// What it asks, in minor units of `currency` per hour.
    pub cost: u64,
    /// Currency code, e.g. `EUR`.
    pub currency: String,
    /// How many guests it runs at once; at capacity it does not bid.
    pub capacity: u32,
    /// Time from acceptance until its guests are on the network.
    #[serde(default)]
    pub boot_delay: Duration,
    /// Share of its boots that fail, in 1/1000 (values above 1000 mean always).
    #[serde(default)]
    pub failure_rate_per_mille: u32,
    /// Largest cpu count it accepts; `None` = unlimited.
    #[serde(default)]
    pub max_cpus: Option<u32>,
    /// Largest memory in MiB it accepts; `None` = unlimited.
    #[serde(default)]
    pub max_memory_mib: Option<u64>,
}

impl LocalBidder {
    /// A bidder with capacity 1, no boot delay, no failures and no limits.
    #[must_use]
    pub fn new(did: impl Into<String>, cost: u64, currency: impl Into<String>) -> Self {
        Self {
            did: did.into(),
            cost,
            currency: currency.into(),
            capacity: 1,
            boot_delay: Duration::ZERO,
            failure_rate_per_mille: 0,
            max_cpus: None,
            max_memory_mib: None,
        }
    }

    /// Sets how many guests it runs at once.
    #[must_use]
    pub const fn with_capacity(mut self, capacity: u32) -> Self {
        self.capacity = capacity;
        self
    }

    /// Sets the time from acceptance until its guests are on the network.
    #[must_use]
    pub const fn with_boot_delay(mut self, boot_delay: Duration) -> Self {
        self.boot_delay = boot_delay;
        self
    }

    /// Sets the share of failing boots, in 1/1000.
    #[must_use]
    pub const fn with_failure_rate_per_mille(mut self, rate: u32) -> Self {
        self.failure_rate_per_mille = rate;
        self
    }

    /// Sets the largest cpu count it accepts.
    #[must_use]
    pub const fn with_max_cpus(mut self, max_cpus: u32) -> Self {
        self.max_cpus = Some(max_cpus);
        self
    }

    /// True when a guest of `resources` is within this bidder's limits.
    #[must_use]
    pub fn fits(&self, resources: &Resources) -> bool {
        self.max_cpus.is_none_or(|max| resources.cpus <= max)
            && self
                .max_memory_mib
                .is_none_or(|max| resources.memory_mib <= max)
    }
}

/// Configuration of a [`super::LocalMarket`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalMarketConfig {
    /// Seeds every simulated decision (boot failures, addresses).
    pub seed: u64,
    /// The simulated providers; replaceable at run time.
    pub bidders: Vec<LocalBidder>,
    /// Where the market keeps its state across restarts; `None` = memory only.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// Time from on-network until the guest reports its node identity; zero
    /// means it reports it as soon as it is on the network.
    #[serde(default)]
    pub node_register_delay: Duration,
}

/// Checks that every bidder has a DID and a currency and that DIDs are unique.
pub(crate) fn validate_bidders(bidders: &[LocalBidder]) -> Result<(), MarketError> {
    let mut seen = BTreeSet::new();
    for bidder in bidders {
        if bidder.did.trim().is_empty() {
            return Err(MarketError::InvalidConfig {
                reason: "a bidder has an empty did".to_owned(),
            });
        }
        if bidder.currency.trim().is_empty() {
            return Err(MarketError::InvalidConfig {
                reason: format!("bidder {} has an empty currency", bidder.did),
            });
        }
        if !seen.insert(bidder.did.as_str()) {
            return Err(MarketError::InvalidConfig {
                reason: format!("bidder {} is listed twice", bidder.did),
            });
        }
    }
    Ok(())
}

/// The bids for `resources`, cheapest first: one per bidder that fits them and
/// whose running guests (`running(did)`) are below its capacity.
pub(crate) fn offers(
    bidders: &[LocalBidder],
    resources: &Resources,
    running: impl Fn(&str) -> usize,
) -> Vec<Bid> {
    let mut bids: Vec<Bid> = bidders
        .iter()
        .filter(|b| b.fits(resources))
        .filter(|b| running(&b.did) < usize::try_from(b.capacity).unwrap_or(usize::MAX))
        .map(|b| Bid::new(b.did.clone(), Price::hourly(b.cost, b.currency.clone())))
        .collect();
    bids.sort_by(|a, b| {
        a.price
            .cmp_per_hour(&b.price)
            .then_with(|| a.bidder.cmp(&b.bidder))
    });
    bids
}

/// SHA-256 over length-prefixed parts, so no two part lists collide by
/// shifting bytes between parts.
fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// The id of a contract's RFP of this round: derived from the key and the
/// round alone, so it is the same after a restart and across markets. Round 0
/// is the key's first RFP; a new round starts once the previous one's guest
/// was released (the same name used again by a new object).
pub(crate) fn rfp_id(contract: &ContractKey, round: u32) -> RfpId {
    let round_bytes = round.to_be_bytes();
    let mut parts: Vec<&[u8]> = vec![
        b"rfp",
        contract.namespace.as_bytes(),
        contract.name.as_bytes(),
    ];
    // Round 0 hashes as before rounds existed, so a kept state directory still matches.
    if round > 0 {
        parts.push(&round_bytes);
    }
    let hash = digest(&parts);
    RfpId::new(format!("{RFP_PREFIX}{}", &hex::encode(hash)[..20]))
}

/// The guest id of an RFP's guest (one guest per RFP).
pub(crate) fn guest_id(rfp: &RfpId) -> String {
    let hash = digest(&[b"guest", rfp.as_str().as_bytes()]);
    format!("{GUEST_PREFIX}{}", &hex::encode(hash)[..20])
}

/// Whether `bidder` fails to boot the guest of `contract`: a hash of the seed,
/// the contract and the bidder, so the same contract fails the same way after
/// a restart, independent of call order.
pub(crate) fn boot_fails(seed: u64, contract: &ContractKey, bidder: &LocalBidder) -> bool {
    let hash = digest(&[
        b"boot",
        &seed.to_le_bytes(),
        contract.namespace.as_bytes(),
        contract.name.as_bytes(),
        bidder.did.as_bytes(),
    ]);
    let mut first = [0_u8; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_le_bytes(first) % 1000 < u64::from(bidder.failure_rate_per_mille)
}

/// The guest's address, `10.x.y.z` with `z` in 1..=254.
pub(crate) fn guest_address(seed: u64, rfp: &RfpId) -> String {
    let hash = digest(&[b"address", &seed.to_le_bytes(), rfp.as_str().as_bytes()]);
    format!("10.{}.{}.{}", hash[0], hash[1], 1 + hash[2] % 254)
}

/// The node identity the guest reports once registered.
pub(crate) fn node_id(seed: u64, rfp: &RfpId) -> String {
    let hash = digest(&[b"node", &seed.to_le_bytes(), rfp.as_str().as_bytes()]);
    format!("guest-{}", &hex::encode(hash)[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(cpus: u32) -> Resources {
        Resources {
            cpus,
            memory_mib: 1024,
            disk_gib: 10,
            network_mbps: 100,
        }
    }

    #[test]
    fn offers_skip_full_and_too_small_bidders_and_sort_by_cost() {
        let bidders = vec![
            LocalBidder::new("did:full", 1, "EUR"),
            LocalBidder::new("did:small", 2, "EUR").with_max_cpus(2),
            LocalBidder::new("did:b", 7, "EUR"),
            LocalBidder::new("did:a", 7, "EUR"),
        ];
        let running = |did: &str| usize::from(did == "did:full");
        let names = |bids: Vec<Bid>| bids.into_iter().map(|b| b.bidder).collect::<Vec<_>>();
        assert_eq!(
            names(offers(&bidders, &resources(2), running)),
            ["did:small", "did:a", "did:b"]
        );
        assert_eq!(
            names(offers(&bidders, &resources(4), running)),
            ["did:a", "did:b"]
        );
    }

    #[test]
    fn invalid_bidder_lists_are_rejected() {
        let twice = vec![
            LocalBidder::new("did:a", 1, "EUR"),
            LocalBidder::new("did:a", 2, "EUR"),
        ];
        assert!(validate_bidders(&twice).is_err());
        assert!(validate_bidders(&[LocalBidder::new(" ", 1, "EUR")]).is_err());
        assert!(validate_bidders(&[LocalBidder::new("did:a", 1, "")]).is_err());
        assert!(validate_bidders(&[LocalBidder::new("did:a", 1, "EUR")]).is_ok());
    }

    #[test]
    fn boot_failures_follow_the_rate_and_the_seed() {
        let sometimes = LocalBidder::new("did:a", 1, "EUR").with_failure_rate_per_mille(500);
        let keys: Vec<_> = (0..400)
            .map(|i| ContractKey::new("ns", format!("c{i}")))
            .collect();
        let fails = |seed| {
            keys.iter()
                .map(|k| boot_fails(seed, k, &sometimes))
                .collect::<Vec<_>>()
        };
        let count = fails(1).iter().filter(|f| **f).count();
        assert!((120..280).contains(&count), "{count} of 400 failed at 50%");
        assert_eq!(fails(1), fails(1));
        assert_ne!(fails(1), fails(2));
        let never = sometimes.clone().with_failure_rate_per_mille(0);
        let always = sometimes.with_failure_rate_per_mille(1000);
        assert!(keys.iter().all(|k| !boot_fails(1, k, &never)));
        assert!(keys.iter().all(|k| boot_fails(1, k, &always)));
    }

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let a = rfp_id(&ContractKey::new("ns", "a"), 0);
        let b = rfp_id(&ContractKey::new("ns", "b"), 0);
        assert_eq!(a, rfp_id(&ContractKey::new("ns", "a"), 0));
        assert_ne!(a, b);
        assert_ne!(rfp_id(&ContractKey::new("n", "sa"), 0), a);
        let next_round = rfp_id(&ContractKey::new("ns", "a"), 1);
        assert_ne!(next_round, a);
        assert_eq!(next_round, rfp_id(&ContractKey::new("ns", "a"), 1));
        let address = guest_address(3, &a);
        let octets: Vec<u8> = address.split('.').filter_map(|o| o.parse().ok()).collect();
        assert_eq!(octets.len(), 4);
        assert_eq!(octets[0], 10);
        assert!((1..=254).contains(&octets[3]));
        assert_ne!(guest_address(4, &a), address);
        assert_ne!(node_id(3, &a), node_id(3, &b));
        assert_ne!(guest_id(&a), guest_id(&b));
    }
}

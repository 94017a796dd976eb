//! One market per Requester: built from `spec.market`, reconfigured when the
//! bidders change, and found again by the contracts of its namespace.
//!
//! # Which Requester runs a namespace
//!
//! The oldest Requester of the namespace (by creationTimestamp, then name) that
//! is not [superseded](select_requester); any other Requester there gets a
//! `Ready=False, reason=Superseded` condition and runs nothing.
//!
//! # Assumptions
//!
//! - `seed` and `stateDir` of a local market are read when its market is first
//!   built; changing them later needs a manager restart (bidders are applied at
//!   once with `set_bidders`).
//! - Tests inject one shared [`LocalMarket`] ([`Markets::with_local_market`]) so
//!   that a restarted controller finds the same RFPs, guests and counters.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use api::Requester;
use kube::ResourceExt;
use market::{ContractKey, LocalMarket, LocalMarketConfig, Market, RfpId};

use crate::{Clock, Error, Result};

/// The controllers' [`Clock`] as a [`market::Clock`], so the market and the
/// reconcilers step together under a [`crate::ManualClock`].
#[derive(Debug, Clone)]
pub struct MarketClock(pub Arc<dyn Clock>);

impl market::Clock for MarketClock {
    fn now(&self) -> SystemTime {
        SystemTime::from(self.0.now())
    }
}

/// A market and the RFP ids this process learnt from it.
#[derive(Clone)]
pub struct MarketHandle {
    /// The market.
    pub market: Arc<dyn Market>,
    /// RFP ids by contract: the market's publish is idempotent, so an id that
    /// is missing here (after a restart) is asked for again without a second RFP.
    rfps: Arc<Mutex<HashMap<ContractKey, RfpId>>>,
}

impl std::fmt::Debug for MarketHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarketHandle").finish_non_exhaustive()
    }
}

impl MarketHandle {
    /// The RFP id of a contract, if this process published (or re-learnt) it.
    #[must_use]
    pub fn rfp(&self, contract: &ContractKey) -> Option<RfpId> {
        self.rfps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(contract)
            .cloned()
    }

    /// Remembers the RFP id of a contract.
    pub fn remember_rfp(&self, contract: ContractKey, rfp: RfpId) {
        self.rfps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(contract, rfp);
    }
}

struct Entry {
    spec: api::LocalMarket,
    local: Arc<LocalMarket>,
    handle: MarketHandle,
}

/// The markets of the Requesters this process runs.
pub struct Markets {
    clock: Arc<dyn Clock>,
    injected: Option<Arc<LocalMarket>>,
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Markets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Markets")
            .field("injected", &self.injected.is_some())
            .finish_non_exhaustive()
    }
}

impl Markets {
    /// Markets built from each Requester's spec, on the given clock.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            injected: None,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Every Requester uses `market` (its bidders still follow the Requester's
    /// spec); for tests and restarts that must keep one market.
    #[must_use]
    pub fn with_local_market(clock: Arc<dyn Clock>, market: Arc<LocalMarket>) -> Self {
        Self {
            clock,
            injected: Some(market),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The market of `requester`, built on first use and reconfigured when its
    /// bidders changed.
    ///
    /// # Errors
    /// [`Error::NoMarket`] when the spec sets no market or the local market
    /// cannot be built from it (the message says what to fix).
    pub fn for_requester(&self, requester: &Requester) -> Result<MarketHandle> {
        let key = requester_key(requester);
        let no_market = |reason: String| Error::NoMarket {
            requester: key.clone(),
            reason,
        };
        let Some(spec) = requester.spec.market.local.clone() else {
            return Err(no_market(
                "spec.market sets no market; set spec.market.local".to_owned(),
            ));
        };
        let bidders: Vec<market::LocalBidder> = spec.bidders.iter().map(local_bidder).collect();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get_mut(&key) {
            if entry.spec.bidders != spec.bidders {
                entry
                    .local
                    .set_bidders(bidders)
                    .map_err(|e| no_market(e.to_string()))?;
                tracing::info!(requester = %key, bidders = spec.bidders.len(), "market bidders reconfigured");
            }
            if entry.spec.seed != spec.seed || entry.spec.state_dir != spec.state_dir {
                tracing::warn!(requester = %key, "seed and stateDir of a running market change only after a restart");
            }
            entry.spec = spec;
            return Ok(entry.handle.clone());
        }
        let local = match &self.injected {
            Some(local) => {
                local
                    .set_bidders(bidders)
                    .map_err(|e| no_market(e.to_string()))?;
                Arc::clone(local)
            }
            None => {
                let config = LocalMarketConfig {
                    seed: spec.seed,
                    bidders,
                    state_dir: spec.state_dir.as_ref().map(PathBuf::from),
                    node_register_delay: Duration::ZERO,
                };
                let clock = Arc::new(MarketClock(Arc::clone(&self.clock)));
                Arc::new(LocalMarket::new(config, clock).map_err(|e| no_market(e.to_string()))?)
            }
        };
        let handle = MarketHandle {
            market: Arc::clone(&local) as Arc<dyn Market>,
            rfps: Arc::default(),
        };
        entries.insert(
            key,
            Entry {
                spec,
                local,
                handle: handle.clone(),
            },
        );
        Ok(handle)
    }

    /// The market already built for `requester`, if any (no reconfiguration).
    #[must_use]
    pub fn existing(&self, requester: &Requester) -> Option<MarketHandle> {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&requester_key(requester))
            .map(|e| e.handle.clone())
    }

    /// Forgets the market of a Requester that is gone.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&format!("{namespace}/{name}"));
    }
}

fn requester_key(requester: &Requester) -> String {
    format!(
        "{}/{}",
        requester.namespace().unwrap_or_default(),
        requester.name_any()
    )
}

/// Maps a bidder of the Requester's spec onto the local market's bidder.
#[must_use]
pub fn local_bidder(bidder: &api::LocalBidder) -> market::LocalBidder {
    market::LocalBidder::new(bidder.did.clone(), bidder.cost, bidder.currency.clone())
        .with_capacity(bidder.capacity)
        .with_boot_delay(Duration::from_millis(u64::from(bidder.boot_delay_millis)))
        .with_failure_rate_per_mille(bidder.failure_rate)
}

/// The Requester that runs `namespace`: the oldest by creationTimestamp, then
/// by name. A Requester being deleted still runs its namespace until it is
/// gone (the root delete order needs its releases), unless another Requester
/// that is not being deleted exists: that one takes over.
#[must_use]
pub fn select_requester<'a>(
    requesters: impl IntoIterator<Item = &'a Requester>,
    namespace: &str,
) -> Option<&'a Requester> {
    requesters
        .into_iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace))
        .min_by(|a, b| {
            let deleting = |r: &Requester| r.metadata.deletion_timestamp.is_some();
            deleting(a)
                .cmp(&deleting(b))
                .then_with(|| {
                    let created = |r: &Requester| {
                        r.metadata
                            .creation_timestamp
                            .as_ref()
                            .map(|t| t.0.as_second())
                    };
                    created(a).cmp(&created(b))
                })
                .then_with(|| a.name_any().cmp(&b.name_any()))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use api::{RequesterSpec, requester::LocalMarket as LocalSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn requester(name: &str, created: i64, deleting: bool) -> Requester {
        let mut r = Requester::new(
            name,
            RequesterSpec {
                market: api::Market {
                    local: Some(LocalSpec::default()),
                    atproto: None,
                },
                bid_window_seconds: 1,
                max_in_flight: 1,
            },
        );
        r.metadata.namespace = Some("ns".to_owned());
        r.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        if deleting {
            r.metadata.deletion_timestamp =
                Some(Time(Timestamp::from_second(created + 5).unwrap()));
        }
        r
    }

    #[test]
    fn the_oldest_live_requester_runs_the_namespace() {
        let a = requester("a", 20, false);
        let b = requester("b", 10, false);
        let c = requester("c", 5, true);
        let pick = |list: Vec<&Requester>| select_requester(list, "ns").map(ResourceExt::name_any);
        assert_eq!(pick(vec![&a, &b]), Some("b".to_owned()));
        assert_eq!(pick(vec![&a, &b, &c]), Some("b".to_owned()));
        assert_eq!(pick(vec![&c]), Some("c".to_owned()));
        assert!(select_requester(vec![&a], "other").is_none());
    }

    #[test]
    fn bidders_map_onto_the_local_market() {
        let bidder = api::LocalBidder {
            did: "did:web:a".to_owned(),
            cost: 7,
            currency: "EUR".to_owned(),
            capacity: 3,
            boot_delay_millis: 250,
            failure_rate: 1000,
        };
        let mapped = local_bidder(&bidder);
        assert_eq!(mapped.capacity, 3);
        assert_eq!(mapped.boot_delay, Duration::from_millis(250));
        assert_eq!(mapped.failure_rate_per_mille, 1000);
        assert_eq!((mapped.cost, mapped.currency.as_str()), (7, "EUR"));
    }

    #[test]
    fn a_market_is_built_once_and_its_bidders_follow_the_spec() {
        let clock: Arc<dyn Clock> = Arc::new(crate::SystemClock);
        let local = Arc::new(
            LocalMarket::new(
                LocalMarketConfig::default(),
                Arc::new(MarketClock(clock.clone())),
            )
            .unwrap(),
        );
        let markets = Markets::with_local_market(clock, Arc::clone(&local));
        let mut r = requester("a", 1, false);
        let first = markets.for_requester(&r).unwrap();
        assert!(local.bidders().is_empty());
        r.spec
            .market
            .local
            .as_mut()
            .unwrap()
            .bidders
            .push(api::LocalBidder {
                did: "did:web:a".to_owned(),
                cost: 1,
                currency: "EUR".to_owned(),
                capacity: 1,
                boot_delay_millis: 0,
                failure_rate: 0,
            });
        let second = markets.for_requester(&r).unwrap();
        assert!(Arc::ptr_eq(&first.market, &second.market));
        assert_eq!(
            local.bidders().len(),
            1,
            "the spec change reached the market"
        );
        r.spec.market.local = None;
        assert!(matches!(
            markets.for_requester(&r),
            Err(Error::NoMarket { .. })
        ));
    }
}

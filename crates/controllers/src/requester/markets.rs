//! One market per Requester: built from `spec.market` through the
//! [`market_adapter`](crate::market_adapter) seam, reconfigured when the spec
//! changes, and found again by the contracts of its namespace.
//!
//! # Which Requester runs a namespace
//!
//! The oldest Requester of the namespace (by creationTimestamp, then name) that
//! is not [superseded](select_requester); any other Requester there gets a
//! `Ready=False, reason=Superseded` condition and runs nothing.
//!
//! # Assumptions
//!
//! Tests inject one shared market ([`Markets::with_injected`]) so that a
//! restarted controller finds the same RFPs, guests and counters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use api::Requester;
use kube::ResourceExt;
use market::{ContractKey, Market, RfpId};

use market::atproto::Inbox;

use crate::market_adapter::atproto::{self, Credentials, CredentialsError};
use crate::market_adapter::{BuildContext, Injected, MarketAdapter, Readiness, Reconfigured};
use crate::{Clock, Error, Result};

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
        self.rfps().get(contract).cloned()
    }

    /// Remembers the RFP id of a contract.
    pub fn remember_rfp(&self, contract: ContractKey, rfp: RfpId) {
        self.rfps().insert(contract, rfp);
    }

    /// Forgets the RFP id of a contract past its bidding (a bid accepted, or
    /// its finalizer removed): a map of every contract ever rented grew with
    /// the fleet's whole history. Asked for again, it is published again,
    /// idempotently.
    pub fn forget_rfp(&self, contract: &ContractKey) {
        self.rfps().remove(contract);
    }

    /// How many contracts' RFP ids it remembers.
    #[must_use]
    pub fn remembered_rfps(&self) -> usize {
        self.rfps().len()
    }

    fn rfps(&self) -> MutexGuard<'_, HashMap<ContractKey, RfpId>> {
        // The map stays consistent whatever panicked while holding it.
        self.rfps.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Entry {
    spec: api::Market,
    /// The credentials the market was built with (atproto), to see them change.
    credentials: Option<Credentials>,
    adapter: MarketAdapter,
    handle: MarketHandle,
}

/// The markets of the Requesters this process runs.
pub struct Markets {
    clock: Arc<dyn Clock>,
    injected: Option<Injected>,
    entries: Mutex<HashMap<String, Entry>>,
    /// The atproto credentials last read per Requester (`namespace/name`).
    credentials: Mutex<HashMap<String, Credentials>>,
    /// Where bidders' pushes arrive, for every atproto market of the process.
    inbox: Inbox,
}

impl std::fmt::Debug for Markets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Markets")
            .field("injected", &self.injected)
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
            credentials: Mutex::default(),
            inbox: Inbox::default(),
        }
    }

    /// Every Requester whose spec asks for the kind of `injected` uses it (its
    /// configuration still follows the Requester's spec); for tests and
    /// restarts that must keep one market.
    #[must_use]
    pub fn with_injected(clock: Arc<dyn Clock>, injected: Injected) -> Self {
        Self {
            injected: Some(injected),
            ..Self::new(clock)
        }
    }

    /// The inbox of every atproto market of this process: serve
    /// [`market::atproto::router`] with it where `spec.market.atproto.publicUrl` points.
    #[must_use]
    pub fn inbox(&self) -> Inbox {
        self.inbox.clone()
    }

    /// Reads the atproto credentials `requester` names, when it uses the
    /// atproto market and they were not read yet (or always, with
    /// `again`: the Requester reconciler re-reads them, so a rotated Secret
    /// rebuilds the market). A local market needs none.
    ///
    /// # Errors
    /// [`CredentialsError`] saying which Secret or key is missing or wrong;
    /// credentials read before are kept.
    pub async fn read_credentials(
        &self,
        client: &kube::Client,
        requester: &Requester,
        again: bool,
    ) -> std::result::Result<(), CredentialsError> {
        let Some(spec) = requester.spec.market.atproto.as_ref() else {
            return Ok(());
        };
        let key = requester_key(requester);
        let known = self
            .credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&key);
        if known && !again {
            return Ok(());
        }
        let namespace = requester.namespace().unwrap_or_default();
        let read = atproto::read_credentials(client, &namespace, spec).await?;
        self.credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, read);
        Ok(())
    }

    /// What the Requester's Ready condition says about its built market.
    pub async fn readiness(&self, requester: &Requester) -> Readiness {
        let adapter = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&requester_key(requester))
            .map(|entry| entry.adapter.clone());
        match adapter {
            Some(adapter) => adapter.readiness(&requester.spec.market).await,
            None => Readiness::NoMarket("the market is not built yet".to_owned()),
        }
    }

    /// The market of `requester`, built on first use and reconfigured when its
    /// spec changed.
    ///
    /// # Errors
    /// [`Error::NoMarket`] when the spec sets no market or its market cannot
    /// be built from it (the message says what to fix).
    pub fn for_requester(&self, requester: &Requester) -> Result<MarketHandle> {
        let key = requester_key(requester);
        let no_market = |reason: String| Error::NoMarket {
            requester: key.clone(),
            reason,
        };
        let spec = &requester.spec.market;
        let credentials = spec.atproto.as_ref().and_then(|_| {
            self.credentials
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .cloned()
        });
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get_mut(&key) {
            let same_credentials = match (&entry.credentials, &credentials) {
                (Some(built), Some(read)) => built.same_as(read),
                (None, None) => true,
                _ => false,
            };
            if entry.spec == *spec && same_credentials {
                return Ok(entry.handle.clone());
            }
            if !same_credentials {
                tracing::info!(requester = %key, "the market's Secrets changed; building it anew");
            }
            match entry
                .adapter
                .reconfigure(&entry.spec, spec, &key)
                .map_err(no_market)?
            {
                Reconfigured::InPlace => {
                    entry.spec = spec.clone();
                    return Ok(entry.handle.clone());
                }
                Reconfigured::Rebuild => {}
            }
        }
        let context = BuildContext {
            injected: self.injected.as_ref(),
            credentials: credentials.as_ref(),
            inbox: &self.inbox,
        };
        let adapter = MarketAdapter::build(spec, &self.clock, context).map_err(no_market)?;
        let handle = MarketHandle {
            market: adapter.market(),
            rfps: Arc::default(),
        };
        entries.insert(
            key,
            Entry {
                spec: spec.clone(),
                credentials,
                adapter,
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
        let key = format!("{namespace}/{name}");
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        self.credentials
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
    }
}

fn requester_key(requester: &Requester) -> String {
    format!(
        "{}/{}",
        requester.namespace().unwrap_or_default(),
        requester.name_any()
    )
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
    fn a_market_is_built_once_and_its_bidders_follow_the_spec() {
        let clock: Arc<dyn Clock> = Arc::new(crate::SystemClock);
        let local = Arc::new(
            market::LocalMarket::new(market::LocalMarketConfig::default(), clock.clone()).unwrap(),
        );
        let markets = Markets::with_injected(clock, Injected::Local(Arc::clone(&local)));
        let mut r = requester("a", 1, false);
        let first = markets.for_requester(&r).unwrap();
        assert!(local.bidders().is_empty());
        r.spec
            .market
            .local
            .as_mut()
            .unwrap()
            .bidders
            .push(crate::requester::test_fixtures::bidder("did:web:a"));
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

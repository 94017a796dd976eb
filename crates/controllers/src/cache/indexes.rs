//! [`Indexes`]: the indexes the shared caches keep, and what they answer.

use std::sync::Arc;

use api::{ComputeContractPhase, names};
use kube::Resource as _;
use kube::runtime::reflector::ObjectRef;

use super::{CachedContract, Index, Labelled};

/// The indexes of the shared caches: what a reconcile or a mapper would
/// otherwise find by scanning a store. Clones share the indexes.
#[derive(Clone)]
pub struct Indexes {
    /// ComputeContracts by the Infra their label names.
    pub contracts_by_infra: Arc<Index<CachedContract, String>>,
    /// ComputeContracts by (namespace, phase): how many there are, how many
    /// are in flight (Bidding or Accepted), the phase gauge.
    pub contracts_by_phase: Arc<Index<CachedContract, (String, Option<ComputeContractPhase>)>>,
}

impl Indexes {
    pub(super) fn new() -> Self {
        fn infra_label<K: Labelled>(object: &K) -> Option<String> {
            object.label(names::INFRA_NAME_LABEL).map(str::to_owned)
        }
        Self {
            contracts_by_infra: Arc::new(Index::new(infra_label::<CachedContract>)),
            contracts_by_phase: Arc::new(Index::new(|contract: &CachedContract| {
                Some((
                    contract.meta().namespace.clone().unwrap_or_default(),
                    contract.status.as_ref().and_then(|s| s.phase),
                ))
            })),
        }
    }

    /// The contracts of `namespace` in a phase where they hold a bid window
    /// or a booting machine (Bidding or Accepted): what `maxInFlight` bounds.
    #[must_use]
    pub fn contracts_in_flight(&self, namespace: &str) -> usize {
        [
            ComputeContractPhase::Bidding,
            ComputeContractPhase::Accepted,
        ]
        .into_iter()
        .map(|phase| {
            self.contracts_by_phase
                .len(&(namespace.to_owned(), Some(phase)))
        })
        .sum()
    }

    /// [`Self::contracts_in_flight`] without `contract`.
    #[must_use]
    pub fn contracts_in_flight_besides(
        &self,
        namespace: &str,
        contract: &ObjectRef<CachedContract>,
    ) -> usize {
        let itself = [
            ComputeContractPhase::Bidding,
            ComputeContractPhase::Accepted,
        ]
        .into_iter()
        .any(|phase| {
            self.contracts_by_phase
                .contains(&(namespace.to_owned(), Some(phase)), contract)
        });
        self.contracts_in_flight(namespace) - usize::from(itself)
    }

    /// How many contracts `namespace` has, by phase (`None`: no phase yet).
    #[must_use]
    pub fn contract_phases(&self, namespace: &str) -> Vec<(Option<ComputeContractPhase>, usize)> {
        self.contracts_by_phase
            .counts()
            .into_iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|((_, phase), count)| (phase, count))
            .collect()
    }
}

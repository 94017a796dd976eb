//! Whether a live Requester runs the contract namespace: the NodeClaim
//! controller composes only then.
//!
//! A Requester (the root of the contract namespace) is the component that
//! rents and releases machines. While it is being deleted its finalizer
//! deletes every Infra of the namespace and releases every guest; composing
//! claims then would re-apply the Infras it deletes and keep join Secrets of
//! deployments that no longer exist (DESIGN.md invariant 4). So claims stop
//! composing until a live Requester runs the namespace again.

use api::{Condition, NodeClaimPhase, Requester};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::compose::Problem;
use super::conditions::{deployed, joined, reason};
use super::status_write::StatusWrite;
use crate::cache::CachedContract;

/// The state of the root of the contract namespace, as the NodeClaim controller sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootState {
    /// A Requester that is not being deleted runs the namespace: claims compose.
    Running,
    /// Requesters exist but every one is being deleted: nothing composes, and
    /// what is left goes in the root delete order.
    Deleting,
    /// No Requester: nothing composes until one is applied.
    Missing,
}

impl RootState {
    /// The root state of `contract_namespace` from the Requesters in the cache.
    #[must_use]
    pub fn of<'a>(
        requesters: impl IntoIterator<Item = &'a Requester>,
        contract_namespace: &str,
    ) -> Self {
        let mut state = Self::Missing;
        for requester in requesters
            .into_iter()
            .filter(|r| r.namespace().as_deref() == Some(contract_namespace))
        {
            if requester.metadata.deletion_timestamp.is_none() {
                return Self::Running;
            }
            state = Self::Deleting;
        }
        state
    }

    /// Whether claims may be composed.
    #[must_use]
    pub fn is_running(self) -> bool {
        self == Self::Running
    }

    /// Why a claim is not composed, when the root does not run (`None` when it does).
    #[must_use]
    pub fn problem(self, contract_namespace: &str) -> Option<Problem> {
        match self {
            Self::Running => None,
            Self::Deleting => Some(Problem {
                reason: reason::REQUESTER_DELETING,
                message: format!(
                    "the Requester of namespace {contract_namespace} is being deleted: every machine it rented is released and nothing is composed; apply a new Requester (see examples/requester.yaml) and the claim composes again"
                ),
            }),
            Self::Missing => Some(Problem {
                reason: reason::NO_REQUESTER,
                message: format!(
                    "no Requester runs namespace {contract_namespace}: apply one (see examples/requester.yaml); the claim composes again then"
                ),
            }),
        }
    }
}

/// The status of a live claim while no live Requester runs the contract
/// namespace: once its contract is gone nothing is rented for it (Pending, no
/// guest), and once the Infra is gone the claim names none. Returns the
/// Deployed and Joined conditions that say so (none while the contract is there).
pub(super) fn stopped_status(
    status: &mut StatusWrite,
    infra_gone: bool,
    contract: Option<&CachedContract>,
    generation: Option<i64>,
    stamp: &Time,
) -> Vec<Condition> {
    if infra_gone {
        status.infra = None;
    }
    if contract.is_some() {
        return Vec::new();
    }
    status.phase = Some(NodeClaimPhase::Pending);
    status.guest = None;
    status.grant_expires_at = None;
    vec![
        deployed::not_rented(generation, stamp),
        joined::not_deployed(generation, stamp),
    ]
}

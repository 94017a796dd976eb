//! What the NodeClaims say about an Infra's entries, read from the shared
//! NodeClaims cache before [`super::decide`] (which stays pure).
//!
//! An Infra is the deployment of one Cluster's NodeClaims (DESIGN.md 1,
//! invariant 1: one contract per live claim). Two questions need the claims:
//! - may a node entry be rented: only for a claim that exists (with the uid
//!   its `nodeClaimRef` names) and whose own Infra this is ([`UnservedNode`]);
//! - may a contract whose entry left `spec.contracts` be released: not while
//!   the claim it serves still uses it (a hand edit of the Infra must never
//!   cost a running machine; the NodeClaim controller puts the entry back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::names::{entry_name, infra_name};
use api::{ConditionStatus, Infra, NodeClaimPhase};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::cache::keep::Kept;
use crate::cache::{CachedClaim, CachedInfra, Claims};
use crate::nodeclaim::conditions::INFRA_COMPOSED;

/// Why a node entry gets no ComputeContract.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnservedNode {
    /// No NodeClaim `claim` (namespace/name) with uid `uid` exists.
    NotFound {
        /// `namespace/name` of the claim the entry names.
        claim: String,
        /// The uid the entry names.
        uid: String,
    },
    /// The claim exists, but its machine is rented by its own Cluster's Infra.
    OfAnotherInfra {
        /// `namespace/name` of the claim.
        claim: String,
        /// The Infra that rents the claim's machine.
        infra: String,
    },
}

/// What the NodeClaims cache says about one Infra.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimsSeen {
    /// Node entries (by entry name) that must not be rented, and why.
    pub unserved: BTreeMap<String, UnservedNode>,
    /// Entries (by name) whose contract a live claim still uses, with that
    /// claim's `namespace/name`: such a contract is not released.
    pub in_use: BTreeMap<String, String>,
}

/// Reads what [`ClaimsSeen`] holds for `infra` from `claims`. `leaving` are
/// the entries of contracts that left `spec.contracts` and are not released
/// yet: only for those is every claim looked at (and only those whose
/// status names this Infra built, [`Claims::composed_into`]).
#[must_use]
pub fn observe(infra: &Infra, leaving: &BTreeSet<String>, claims: &Claims) -> ClaimsSeen {
    let unserved = unserved_nodes(infra, |namespace, name| {
        claims.get(&ObjectRef::new(name).within(namespace))
    });
    let in_use = if leaving.is_empty() {
        BTreeMap::new()
    } else {
        let composed = claims.composed_into(
            infra.namespace().as_deref().unwrap_or_default(),
            &infra.name_any(),
        );
        in_use(infra, leaving, composed.iter().map(Arc::as_ref))
    };
    ClaimsSeen { unserved, in_use }
}

/// The node entries of `infra` whose claim (looked up by namespace and name)
/// does not exist with the uid the entry names, or is another Infra's.
#[must_use]
pub fn unserved_nodes(
    infra: &Infra,
    lookup: impl Fn(&str, &str) -> Option<Arc<CachedClaim>>,
) -> BTreeMap<String, UnservedNode> {
    let this_infra = infra.name_any();
    infra
        .spec
        .nodes
        .iter()
        .filter_map(|node| {
            let wanted = &node.node_claim_ref;
            let claim = format!("{}/{}", wanted.namespace, wanted.name);
            let found = lookup(&wanted.namespace, &wanted.name)
                .filter(|c| c.uid().as_deref() == Some(wanted.uid.as_str()));
            let why = match found {
                None => UnservedNode::NotFound {
                    claim,
                    uid: wanted.uid.clone(),
                },
                Some(found) => {
                    let its_infra = infra_name(&wanted.namespace, &found.spec.cluster_name);
                    if its_infra == this_infra {
                        return None;
                    }
                    UnservedNode::OfAnotherInfra {
                        claim,
                        infra: its_infra,
                    }
                }
            };
            Some((node.contract.clone(), why))
        })
        .collect()
}

/// Of `entries`, those a live claim still uses: the claim's status says it
/// is composed as that entry of `infra`, its uid gives that entry name, and
/// it is neither being deleted nor Failed. A claim the NodeClaim controller
/// stopped composing says so (InfraComposed False) in the same reconcile
/// that removes its entry, and then lets its contract go.
#[must_use]
pub fn in_use<'a>(
    infra: &Infra,
    entries: &BTreeSet<String>,
    claims: impl IntoIterator<Item = &'a CachedClaim>,
) -> BTreeMap<String, String> {
    let name = infra.name_any();
    let namespace = infra.namespace().unwrap_or_default();
    claims
        .into_iter()
        .filter_map(|claim| {
            let status = claim.status.as_ref()?;
            let at = status.infra.as_ref()?;
            let live = claim.metadata.deletion_timestamp.is_none()
                && status.phase != Some(NodeClaimPhase::Failed)
                && status
                    .condition(INFRA_COMPOSED)
                    .is_some_and(|c| c.status == ConditionStatus::True);
            let ours = at.name == name
                && at.namespace == namespace
                && entries.contains(&at.contract)
                && claim
                    .uid()
                    .is_some_and(|uid| entry_name(&uid) == at.contract);
            (live && ours).then(|| {
                (
                    at.contract.clone(),
                    format!(
                        "{}/{}",
                        claim.namespace().unwrap_or_default(),
                        claim.name_any()
                    ),
                )
            })
        })
        .collect()
}

/// The Infra a claim's changes concern. A claim its Infra does not list
/// yet (no `status.infra`: new, or never composed) wakes the Infra its
/// Cluster's claims are composed into (`contract_namespace`/[`infra_name`]):
/// that Infra may name it already and have been decided before the claim
/// reached the cache (its entry then waits, NodeClaimNotFound, and nothing
/// else would wake it). A listed claim wakes the Infra its status names, and
/// only when it may let a held contract go (being deleted, Failed, or no
/// longer composed): a healthy claim's status writes change nothing for the
/// Infra controller.
#[must_use]
pub fn infra_to_wake(
    claim: &CachedClaim,
    contract_namespace: &str,
) -> Option<ObjectRef<CachedInfra>> {
    let Some(at) = claim.status.as_ref().and_then(|s| s.infra.as_ref()) else {
        let namespace = claim.namespace()?;
        let cluster = &claim.spec.cluster_name;
        return Some(ObjectRef::new(&infra_name(&namespace, cluster)).within(contract_namespace));
    };
    let status = claim.status.as_ref()?;
    let composed = status
        .condition(INFRA_COMPOSED)
        .is_some_and(|c| c.status == ConditionStatus::True);
    let may_let_go = claim.metadata.deletion_timestamp.is_some()
        || status.phase == Some(NodeClaimPhase::Failed)
        || !composed;
    may_let_go.then(|| ObjectRef::new(&at.name).within(&at.namespace))
}

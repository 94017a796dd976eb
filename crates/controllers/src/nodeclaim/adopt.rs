//! Adoption (`spec.adopt`): a claim may take over a running guest only if no
//! other contract holds it.
//!
//! A receipt is all it takes to name a guest, and receipts are not secret
//! (they are in every contract's status). Without this check a tenant's claim
//! naming the receipt of another tenant's guest made two contracts hold one
//! machine, and deleting the claim released the other tenant's node. The
//! NodeClaim controller refuses to compose a claim whose guest another
//! contract holds; the Requester, which asks the market, also refuses a guest
//! whose owner is not the contract's ownerDid (`requester::contract::observe`).
//!
//! # Guarantees
//! Pure. Only a claim that has no entry yet is refused, so a holder found
//! later never costs an already composed claim its machine.

use std::collections::BTreeSet;

use api::ComputeContractPhase;
use api::names::{CONTRACT_LABEL, compute_contract_name};
use kube::ResourceExt;

use super::compose::Problem;
use super::conditions::reason;
use crate::cache::{CachedClaim, CachedContract, CachedInfra, Labelled};

/// A contract entry that holds a guest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestHolder {
    /// The guest's receipt URI.
    pub uri: String,
    /// The contract entry that holds it.
    pub entry: String,
}

/// The receipt URIs the claims want to adopt.
#[must_use]
pub fn wanted<'a>(claims: impl IntoIterator<Item = &'a CachedClaim>) -> BTreeSet<String> {
    claims
        .into_iter()
        .filter_map(|c| c.spec.adopt.as_ref().map(|r| r.uri.clone()))
        .collect()
}

/// Who holds the guests of `uris`: every contract that recorded one's receipt
/// or is taking one over, and every Infra entry adopting one whose contract
/// does not exist yet. A Released contract holds nothing (its guest is gone),
/// nor does a failed adoption.
#[must_use]
pub fn holders<'a>(
    uris: &BTreeSet<String>,
    contracts: impl IntoIterator<Item = &'a CachedContract>,
    infras: impl IntoIterator<Item = &'a CachedInfra>,
) -> Vec<GuestHolder> {
    if uris.is_empty() {
        return Vec::new();
    }
    let mut holders = Vec::new();
    let mut existing = BTreeSet::new();
    for contract in contracts {
        existing.insert(contract.name_any());
        let phase = contract.phase();
        let Some(entry) = contract.label(CONTRACT_LABEL) else {
            continue;
        };
        let recorded = contract.receipt.as_ref().map(|r| r.uri().to_owned());
        let adopting = contract
            .adopt()
            .filter(|_| !phase.is_some_and(ComputeContractPhase::is_finished))
            .map(|r| r.uri.clone());
        let held = [recorded, adopting]
            .into_iter()
            .flatten()
            .filter(|uri| uris.contains(uri))
            .collect::<BTreeSet<_>>();
        if phase != Some(ComputeContractPhase::Released) {
            holders.extend(held.into_iter().map(|uri| GuestHolder {
                uri,
                entry: entry.to_owned(),
            }));
        }
    }
    for infra in infras {
        if infra.is_deleting() {
            continue;
        }
        for (entry, adopt) in infra.adopted() {
            let contract = compute_contract_name(&infra.name_any(), entry);
            if uris.contains(&adopt.uri) && !existing.contains(&contract) {
                holders.push(GuestHolder {
                    uri: adopt.uri.clone(),
                    entry: entry.to_owned(),
                });
            }
        }
    }
    holders
}

/// Why a claim that has no entry yet may not adopt its guest: another entry
/// than its own (`entry`) holds it. `None` when the claim adopts nothing or
/// nobody else holds the guest.
#[must_use]
pub fn problem<'a>(
    claim: &CachedClaim,
    entry: &str,
    holders: impl IntoIterator<Item = &'a GuestHolder>,
) -> Option<Problem> {
    let uri = &claim.spec.adopt.as_ref()?.uri;
    holders
        .into_iter()
        .any(|h| &h.uri == uri && h.entry != entry)
        .then(|| Problem {
            reason: reason::GUEST_HELD,
            message: format!(
                "the guest {uri} in spec.adopt is held by another contract: a guest can be taken over only when no contract holds it. \
                 Nothing is rented or released for this claim; remove spec.adopt to rent a new machine"
            ),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::super::test_fixtures::{location, resources};
    use super::*;
    use api::{ComputeContractStatus, Receipt};

    const URI: &str = "local://guests/7";

    fn receipt() -> Receipt {
        Receipt {
            uri: URI.into(),
            cid: "sha256:x".into(),
        }
    }

    fn contract(
        entry: &str,
        phase: ComputeContractPhase,
        holds: bool,
        adopts: bool,
    ) -> CachedContract {
        let spec = api::compute_contract_spec(
            &api::ContractEntry {
                name: entry.into(),
                resources: resources(),
                location: location(),
                role: api::Role::Worker,
            },
            None,
            None,
        );
        let mut c = api::ComputeContract::new(&compute_contract_name("nodes-x", entry), spec);
        c.metadata.labels = Some([(CONTRACT_LABEL.to_owned(), entry.to_owned())].into());
        c.spec.adopt = adopts.then(|| Box::new(receipt()));
        c.status = Some(ComputeContractStatus {
            phase: Some(phase),
            receipt: holds.then(receipt),
            ..ComputeContractStatus::default()
        });
        c.into()
    }

    fn claim() -> CachedClaim {
        let mut c = super::super::test_fixtures::claim("uid-b");
        c.spec.adopt = Some(Box::new(receipt()));
        c
    }

    #[test]
    fn a_contract_holds_its_guest_until_released() {
        let uris = wanted([&claim()]);
        let running = contract("node-a", ComputeContractPhase::Deployed, true, false);
        let taking_over = contract("node-t", ComputeContractPhase::Pending, false, true);
        let refused = contract("node-r", ComputeContractPhase::Failed, false, true);
        let released = contract("node-g", ComputeContractPhase::Released, true, false);
        let found = holders(&uris, [&running, &taking_over, &refused, &released], []);
        let entries: Vec<&str> = found.iter().map(|h| h.entry.as_str()).collect();
        assert_eq!(entries, ["node-a", "node-t"]);
        assert!(problem(&claim(), "node-b", &found).is_some());
        // Its own entry never stands in a claim's way.
        let own = holders(&uris, [&taking_over], []);
        assert!(problem(&claim(), "node-t", &own).is_none());
    }

    #[test]
    fn an_infra_entry_holds_its_guest_before_its_contract_exists() {
        let uris = wanted([&claim()]);
        let mut infra = api::Infra::new(
            "nodes-x",
            api::InfraSpec {
                description: String::new(),
                contracts: Vec::new(),
                secrets: Vec::new(),
                record: None,
                cluster_ref: None,
                nodes: Vec::new(),
            },
        );
        infra.spec.nodes.push(api::NodeEntry {
            contract: "node-a".into(),
            owner_did: "did:plc:a".into(),
            adopt: Some(Box::new(receipt())),
            node_join: None,
            node_claim_ref: api::NodeClaimRef {
                namespace: "tenant-a".into(),
                name: "a".into(),
                uid: "uid-a".into(),
            },
        });
        let infra = CachedInfra::from(infra);
        let found = holders(&uris, [], [&infra]);
        assert_eq!(found.len(), 1);
        // Once its contract exists, the contract says whether it holds the guest.
        let refused = contract("node-a", ComputeContractPhase::Failed, false, true);
        assert!(holders(&uris, [&refused], [&infra]).is_empty());
    }
}

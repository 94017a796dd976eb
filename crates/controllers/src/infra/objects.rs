//! The ComputeContract objects the Infra controller applies: one built from
//! an entry, or an existing contract with `spec.release` set. Pure.

use std::collections::BTreeMap;

use api::names::{
    CONTRACT_LABEL, CONTRACT_RELEASE_FINALIZER, INFRA_NAME_LABEL, INFRA_RELEASED_ANNOTATION,
};
use api::{ComputeContract, ComputeContractSpec, Infra};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::cache::contract::spec_digest;
use crate::cache::{CachedContract, Labelled};

/// The ComputeContract object the Infra controller applies: name, namespace,
/// the two labels, the controller ownerReference (blockOwnerDeletion), the
/// release finalizer and `spec`.
///
/// The finalizer is in the applied object, so the contract has it from its
/// creation on, before the Requester publishes anything for it; the Requester
/// removes it once the contract is Released.
#[must_use]
pub fn contract_object(
    infra: &Infra,
    object_name: &str,
    entry: &str,
    spec: ComputeContractSpec,
) -> ComputeContract {
    let mut contract = ComputeContract::new(object_name, spec);
    contract.metadata.namespace = infra.metadata.namespace.clone();
    contract.metadata.labels = Some(BTreeMap::from([
        (
            INFRA_NAME_LABEL.to_owned(),
            infra.metadata.name.clone().unwrap_or_default(),
        ),
        (CONTRACT_LABEL.to_owned(), entry.to_owned()),
    ]));
    contract.metadata.owner_references = owner_reference(infra).map(|o| vec![o]);
    contract.metadata.finalizers = Some(vec![CONTRACT_RELEASE_FINALIZER.to_owned()]);
    contract
}

/// Whether `contract` carries the release finalizer.
pub fn has_release_finalizer<K: Resource>(contract: &K) -> bool {
    contract
        .meta()
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == CONTRACT_RELEASE_FINALIZER)
}

/// A contract being deleted without the release finalizer (created before it
/// existed, or the Requester already removed it) must not get it again: the API
/// server refuses a new finalizer on a deleting object. Omitting it from the
/// apply removes nothing, since the object does not have it.
pub(super) fn keep_finalizer_as_is_when_deleting<K: Resource>(
    existing: &K,
    desired: &mut ComputeContract,
) {
    if existing.meta().deletion_timestamp.is_some() && !has_release_finalizer(existing) {
        desired.metadata.finalizers = None;
    }
}

/// The contract `existing` (read whole from the API server: a server-side
/// apply that left out a field of the spec would remove it) with
/// `spec.release` set, as the Infra applies it.
#[must_use]
pub fn released_object(
    infra: &Infra,
    existing: &ComputeContract,
    object_name: &str,
    entry: &str,
) -> ComputeContract {
    let spec = ComputeContractSpec {
        release: true,
        ..existing.spec.clone()
    };
    let mut released = contract_object(infra, object_name, entry, spec);
    released.metadata.annotations = Some(BTreeMap::from([(
        INFRA_RELEASED_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    keep_finalizer_as_is_when_deleting(existing, &mut released);
    released
}

/// The controller ownerReference to `infra`, blocking its deletion until the contract is gone.
fn owner_reference(infra: &Infra) -> Option<OwnerReference> {
    infra.controller_owner_ref(&()).map(|o| OwnerReference {
        block_owner_deletion: Some(true),
        ..o
    })
}

/// Keeps the resources and location `existing` was rented with in
/// `desired`: a rented machine does not change (the ComputeContract CRD
/// refuses it too). Returns whether the entry asked for another one.
pub(super) fn keep_machine(existing: &CachedContract, desired: &mut ComputeContract) -> bool {
    let rented = &existing.spec.machine;
    let differs =
        desired.spec.resources != rented.resources || desired.spec.location != rented.location;
    desired.spec.resources = rented.resources.clone();
    desired.spec.location = rented.location.clone();
    differs
}

/// Whether `existing` already carries everything `desired` applies.
pub(super) fn is_current(existing: &CachedContract, desired: &ComputeContract) -> bool {
    let labels_ok = desired
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| existing.label(k) == Some(v.as_str()));
    let owners_ok = desired
        .metadata
        .owner_references
        .iter()
        .flatten()
        .all(|o| existing.owned_by(o));
    let finalizer_ok = !has_release_finalizer(desired) || has_release_finalizer(existing);
    existing.spec.digest == spec_digest(&desired.spec) && labels_ok && owners_ok && finalizer_ok
}

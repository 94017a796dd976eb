//! [`KeptClaim`]: a claim as the keeper holds it, and what it is built
//! back into at each read.
//!
//! Of a claim's read model it keeps neither the name and namespace (the
//! keys it is held under) nor an `ObjectMeta` (360 bytes inline whatever it
//! holds), and two parts more compactly than their API types (heaptrack of
//! a 10,000-node scale-up, plan 0018):
//! - each ownerReference ([`KeptOwner`]) with its `apiVersion` and `kind`
//!   interned (every claim's owner is a Cluster: one text each for all)
//!   and its name and uid as boxed strings: 104 bytes inline and 4
//!   allocations an owner in `OwnerReference`, 72 and 2 here;
//! - `status.infra` ([`KeptInfraRef`]) without the names the NodeClaim
//!   controller derives (always so when it wrote them): its entry's (from
//!   the claim's uid) and its contract's (`<infra>-<entry>`), its namespace
//!   interned: 96 bytes inline and 4 allocations in `InfraRef`, 64 and one
//!   here. Its Infra's name is kept: [`Claims::composed_into`] compares it
//!   with every claim's, and deriving it is a SHA-256;
//! - `status.guest` as a [`CachedGuest`] (its provider interned);
//! - its uid and its owners' as 16 bytes each ([`KeptUid`]) when they are
//!   UUIDs, as the API server makes them;
//! - its Cluster's name as the keeper's group key, and its Infra's name
//!   and location as another claim of the Cluster holds them (one
//!   allocation each for the Cluster's claims).
//!
//! # Guarantees
//! - [`KeptClaim::claim`] gives back the claim [`KeptClaim::keep`] took,
//!   equal in every field (the keeper's property test against a
//!   kube-runtime store varies each).

use std::sync::Arc;

use api::names::{compute_contract_name, entry_name};
use api::{Guest, InfraRef, Location, NodeClaimPhase, NodeClaimSpec, Receipt, Resources, Text};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::cache::derived::{DerivedName, name_or, unless_derived};
use crate::cache::keep::equal_shared;
use crate::cache::uid::KeptUid;
use crate::cache::{CachedClaim, CachedClaimStatus, CachedCondition, CachedGuest};

/// A claim as the keeper holds it: its read model less the name and
/// namespace (the keys it is held under) and with its other metadata
/// fields apart. Every field of [`CachedClaim::from`]'s `metadata` is here.
pub(super) struct KeptClaim {
    uid: Option<KeptUid>,
    resource_version: Option<Box<str>>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    /// Boxed: set only while the claim is deleted.
    deletion_timestamp: Option<Box<Time>>,
    /// Interned: every claim holds the same one or none.
    finalizers: Option<Box<[Text]>>,
    owner_references: Option<Box<[KeptOwner]>>,
    /// `spec.clusterName`: the keeper's group key, shared.
    pub(super) cluster: Arc<str>,
    /// The rest of its spec.
    spec: KeptSpec,
    status: Option<KeptStatus>,
}

/// The keeper boxes each claim, and an allocator serves it from a size class:
/// mimalloc's are 384 and 448 bytes here, so 8 bytes more would cost 64 a
/// claim (the boxed deletion time, the boxed owner DID and conditions keep
/// it under).
const _: () = assert!(size_of::<KeptClaim>() <= 384);

/// A claim's spec as kept: without its Cluster's name (the group key), its
/// location shared with another claim of the Cluster when it is the same.
struct KeptSpec {
    resources: Resources,
    location: Arc<Location>,
    owner_did: Option<Box<str>>,
    adopt: Option<Box<Receipt>>,
    join_grace_seconds: u32,
    loss_grace_seconds: u32,
}

impl KeptSpec {
    fn new(spec: NodeClaimSpec, sibling: Option<&Self>) -> Self {
        let NodeClaimSpec {
            cluster_name: _,
            resources,
            location,
            owner_did,
            adopt,
            join_grace_seconds,
            loss_grace_seconds,
        } = spec;
        let location = equal_shared(sibling.map(|s| &s.location), &location)
            .unwrap_or_else(|| Arc::new(location));
        Self {
            resources,
            location,
            owner_did: owner_did.map(String::into_boxed_str),
            adopt,
            join_grace_seconds,
            loss_grace_seconds,
        }
    }

    fn spec(&self, cluster: &str) -> NodeClaimSpec {
        NodeClaimSpec {
            cluster_name: cluster.to_owned(),
            resources: self.resources.clone(),
            location: Location::clone(&self.location),
            owner_did: self.owner_did.as_deref().map(str::to_owned),
            adopt: self.adopt.clone(),
            join_grace_seconds: self.join_grace_seconds,
            loss_grace_seconds: self.loss_grace_seconds,
        }
    }
}

/// A claim's [`CachedClaimStatus`] as kept: its Infra entry compact.
struct KeptStatus {
    phase: Option<NodeClaimPhase>,
    infra: Option<KeptInfraRef>,
    conditions: Box<[CachedCondition]>,
    guest: Option<CachedGuest>,
    grant_expires_at: Option<Time>,
    observed_generation: Option<i64>,
}

impl KeptStatus {
    fn new(status: CachedClaimStatus, derived: &Derived<'_>, sibling: Option<&Self>) -> Self {
        let CachedClaimStatus {
            phase,
            infra,
            conditions,
            guest,
            grant_expires_at,
            observed_generation,
        } = status;
        Self {
            phase,
            infra: infra
                .map(|at| KeptInfraRef::new(at, derived, sibling.and_then(|s| s.infra.as_ref()))),
            conditions: conditions.into_boxed_slice(),
            guest: guest.map(CachedGuest::from),
            grant_expires_at,
            observed_generation,
        }
    }

    fn status(&self, derived: &Derived<'_>) -> CachedClaimStatus {
        CachedClaimStatus {
            phase: self.phase,
            infra: self.infra.as_ref().map(|at| at.reference(derived)),
            conditions: self.conditions.to_vec(),
            guest: self.guest.as_ref().map(Guest::from),
            grant_expires_at: self.grant_expires_at.clone(),
            observed_generation: self.observed_generation,
        }
    }
}

impl KeptClaim {
    /// `claim` as kept under its Cluster's group key `cluster`, sharing
    /// what `sibling` (another claim of the group) holds.
    pub(super) fn keep(claim: CachedClaim, cluster: Arc<str>, sibling: Option<&Self>) -> Self {
        let CachedClaim {
            metadata,
            spec,
            status,
        } = claim;
        let derived = Derived {
            uid: metadata.uid.as_deref().unwrap_or_default(),
        };
        let sibling_status = sibling.and_then(|s| s.status.as_ref());
        let status = status.map(|status| KeptStatus::new(status, &derived, sibling_status));
        Self {
            uid: metadata.uid.map(KeptUid::from),
            resource_version: metadata.resource_version.map(String::into_boxed_str),
            generation: metadata.generation,
            creation_timestamp: metadata.creation_timestamp,
            deletion_timestamp: metadata.deletion_timestamp.map(Box::new),
            finalizers: metadata
                .finalizers
                .map(|f| f.iter().map(|f| api::intern(f)).collect()),
            owner_references: metadata
                .owner_references
                .map(|owners| owners.into_iter().map(KeptOwner::from).collect()),
            cluster,
            spec: KeptSpec::new(spec, sibling.map(|s| &s.spec)),
            status,
        }
    }

    /// Whether its Infra entry's Infra name is `other`'s allocation.
    #[cfg(test)]
    pub(super) fn shares_infra_name_with(&self, other: &Self) -> bool {
        let name = |claim: &Self| {
            (claim.status.as_ref())
                .and_then(|status| status.infra.as_ref())
                .map(|at| Arc::clone(&at.name))
        };
        matches!((name(self), name(other)), (Some(a), Some(b)) if Arc::ptr_eq(&a, &b))
    }

    /// Whether its location is `other`'s allocation.
    #[cfg(test)]
    pub(super) fn shares_location_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.spec.location, &other.spec.location)
    }

    /// Whether `status.infra` names Infra `namespace`/`name`.
    pub(super) fn composed_into(&self, namespace: &str, name: &str) -> bool {
        (self.status.as_ref())
            .and_then(|status| status.infra.as_ref())
            .is_some_and(|at| *at.namespace == *namespace && *at.name == *name)
    }

    /// The claim `namespace`/`name` as it was decoded.
    pub(super) fn claim(&self, namespace: &str, name: &str) -> CachedClaim {
        let uid = self.uid.as_ref().map(KeptUid::to_string);
        let derived = Derived {
            uid: uid.as_deref().unwrap_or_default(),
        };
        let status = self.status.as_ref().map(|status| status.status(&derived));
        CachedClaim {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                uid,
                resource_version: self.resource_version.as_deref().map(str::to_owned),
                generation: self.generation,
                creation_timestamp: self.creation_timestamp.clone(),
                deletion_timestamp: self.deletion_timestamp.as_deref().cloned(),
                finalizers: (self.finalizers.as_deref())
                    .map(|f| f.iter().map(|f| f.as_str().to_owned()).collect()),
                owner_references: (self.owner_references.as_deref())
                    .map(|owners| owners.iter().map(OwnerReference::from).collect()),
                ..ObjectMeta::default()
            },
            spec: self.spec.spec(&self.cluster),
            status,
        }
    }
}

/// An ownerReference as kept. See the [module docs](self).
struct KeptOwner {
    /// Interned.
    api_version: Text,
    /// Interned.
    kind: Text,
    name: Box<str>,
    uid: KeptUid,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

impl From<OwnerReference> for KeptOwner {
    fn from(owner: OwnerReference) -> Self {
        let OwnerReference {
            api_version,
            block_owner_deletion,
            controller,
            kind,
            name,
            uid,
        } = owner;
        Self {
            api_version: api::intern(&api_version),
            kind: api::intern(&kind),
            name: name.into_boxed_str(),
            uid: KeptUid::from(uid),
            controller,
            block_owner_deletion,
        }
    }
}

impl From<&KeptOwner> for OwnerReference {
    fn from(owner: &KeptOwner) -> Self {
        Self {
            api_version: owner.api_version.as_str().to_owned(),
            block_owner_deletion: owner.block_owner_deletion,
            controller: owner.controller,
            kind: owner.kind.as_str().to_owned(),
            name: owner.name.to_string(),
            uid: owner.uid.to_string(),
        }
    }
}

/// What the NodeClaim controller derives a claim's Infra entry from: the
/// claim's uid.
struct Derived<'a> {
    uid: &'a str,
}

impl Derived<'_> {
    /// The claim's entry.
    fn entry(&self) -> String {
        entry_name(self.uid)
    }
}

/// A claim's `status.infra` as kept. See the [module docs](self).
struct KeptInfraRef {
    /// Interned: the contract namespace, one for every claim.
    namespace: Text,
    /// Shared with another claim of its Cluster (one Infra a Cluster).
    name: Arc<str>,
    /// `None` when it is the claim's entry.
    contract: DerivedName,
    /// `None` when it is `<name>-<contract>`, the name the Infra gives it.
    compute_contract: DerivedName,
}

impl KeptInfraRef {
    fn new(at: InfraRef, derived: &Derived<'_>, sibling: Option<&Self>) -> Self {
        let InfraRef {
            namespace,
            name,
            contract,
            compute_contract,
        } = at;
        let compute_contract =
            unless_derived(compute_contract, &compute_contract_name(&name, &contract));
        Self {
            namespace: api::intern(&namespace),
            name: equal_shared(sibling.map(|s| &s.name), name.as_str())
                .unwrap_or_else(|| Arc::from(name)),
            contract: unless_derived(contract, &derived.entry()),
            compute_contract,
        }
    }

    fn reference(&self, derived: &Derived<'_>) -> InfraRef {
        let name = self.name.to_string();
        let contract = name_or(&self.contract, || derived.entry());
        InfraRef {
            namespace: self.namespace.to_string(),
            compute_contract: name_or(&self.compute_contract, || {
                compute_contract_name(&name, &contract)
            }),
            name,
            contract,
        }
    }
}

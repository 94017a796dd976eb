//! [`Claims`]: the NodeClaims as the shared cache keeps them (their read
//! model, [`CachedClaim`]), grouped by the Cluster each names (its
//! namespace and `spec.clusterName`).
//!
//! A reconcile reads the claims of one Cluster ([`Claims::of_cluster`]), so
//! they are kept by that group: this is both the store and the index. A
//! kube-runtime store beside an `Index` kept each claim under an `ObjectRef`
//! key (four strings), its index key, a group entry and a reverse entry:
//! about 450 bytes a claim before the claim itself; here its name once, a
//! slot and a set entry, about 90 (plan 0017 P4). No `Controller` has claims
//! as its primary kind: the orphans controller keeps a store of its own of
//! the few claims whose Cluster is missing (`nodeclaim::orphans`).
//!
//! Nor does it keep a claim's `ObjectMeta` (360 bytes inline whatever it
//! holds, and a copy of the name and namespace its maps hold already): a
//! [`KeptClaim`] holds the fields the read model keeps of it, and each read
//! builds the [`CachedClaim`] again (a reconcile reads its Cluster's ten or
//! so; the readers keep none past their reconcile).
//!
//! # Guarantees
//! - It takes watch events as a kube-runtime store does: an object applied
//!   replaces the one of its namespace and name, a re-list is read in full
//!   and replaces everything only when it is done (readers see the old state
//!   until then).
//! - A claim is read back exactly as decoded ([`CachedClaim`]), in every
//!   field (tested against a kube-runtime store for any events).
//! - Clones share what is kept; a reader never sees half of one event.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use api::{NodeClaimSpec, Text};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::keep::{Held, Holding, Keep, Kept, shared_key};
use super::{CachedClaim, CachedClaimStatus};

/// The NodeClaims the shared cache keeps. Clones share them.
#[derive(Default, Clone)]
pub struct Claims {
    held: Held<Namespaces>,
}

/// The claims by namespace.
#[derive(Default)]
struct Namespaces(HashMap<Arc<str>, Namespace>);

/// A claim as the keeper holds it: its read model less the name and
/// namespace (the keys it is held under) and with its other metadata
/// fields apart. Every field of [`CachedClaim::from`]'s `metadata` is here.
struct KeptClaim {
    uid: Option<Box<str>>,
    resource_version: Option<Box<str>>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    /// Interned: every claim holds the same one or none.
    finalizers: Option<Box<[Text]>>,
    owner_references: Option<Box<[OwnerReference]>>,
    spec: NodeClaimSpec,
    status: Option<CachedClaimStatus>,
}

impl KeptClaim {
    fn keep(claim: CachedClaim) -> Self {
        let CachedClaim {
            metadata,
            spec,
            status,
        } = claim;
        Self {
            uid: metadata.uid.map(String::into_boxed_str),
            resource_version: metadata.resource_version.map(String::into_boxed_str),
            generation: metadata.generation,
            creation_timestamp: metadata.creation_timestamp,
            deletion_timestamp: metadata.deletion_timestamp,
            finalizers: metadata
                .finalizers
                .map(|f| f.iter().map(|f| api::intern(f)).collect()),
            owner_references: metadata.owner_references.map(Vec::into_boxed_slice),
            spec,
            status,
        }
    }

    /// The claim `namespace`/`name` as it was decoded.
    fn claim(&self, namespace: &str, name: &str) -> CachedClaim {
        CachedClaim {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                uid: self.uid.as_deref().map(str::to_owned),
                resource_version: self.resource_version.as_deref().map(str::to_owned),
                generation: self.generation,
                creation_timestamp: self.creation_timestamp.clone(),
                deletion_timestamp: self.deletion_timestamp.clone(),
                finalizers: (self.finalizers.as_deref())
                    .map(|f| f.iter().map(|f| f.as_str().to_owned()).collect()),
                owner_references: self.owner_references.as_deref().map(<[_]>::to_vec),
                ..ObjectMeta::default()
            },
            spec: self.spec.clone(),
            status: self.status.clone(),
        }
    }
}

/// The claims of one namespace: by name, and the names by Cluster.
#[derive(Default)]
struct Namespace {
    /// Boxed: a map's table holds room for more entries than it has.
    by_name: HashMap<Arc<str>, Box<KeptClaim>>,
    /// Each Cluster name's claims, sharing the names of `by_name`.
    by_cluster: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
}

impl Namespace {
    fn insert(&mut self, claim: CachedClaim) {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        // The name and the group keep the allocations they already have.
        let name = shared_key(&self.by_name, name);
        self.remove(&name);
        let cluster = shared_key(&self.by_cluster, &claim.spec.cluster_name);
        self.by_cluster
            .entry(cluster)
            .or_default()
            .insert(name.clone());
        self.by_name.insert(name, Box::new(KeptClaim::keep(claim)));
    }

    fn remove(&mut self, name: &str) {
        let Some(claim) = self.by_name.remove(name) else {
            return;
        };
        let cluster = claim.spec.cluster_name.as_str();
        if let Some(group) = self.by_cluster.get_mut(cluster) {
            group.remove(name);
            if group.is_empty() {
                self.by_cluster.remove(cluster);
            }
        }
    }
}

impl Holding<CachedClaim> for Namespaces {
    fn insert(&mut self, claim: CachedClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        match self.0.get_mut(namespace) {
            Some(kept) => kept.insert(claim),
            None => {
                let namespace = Arc::from(namespace);
                self.0.entry(namespace).or_default().insert(claim);
            }
        }
    }

    fn remove(&mut self, claim: &CachedClaim) {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(kept) = self.0.get_mut(namespace) {
            kept.remove(claim.metadata.name.as_deref().unwrap_or_default());
            if kept.by_name.is_empty() {
                self.0.remove(namespace);
            }
        }
    }
}

impl Namespaces {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedClaim>> {
        let kept = self.0.get(namespace)?.by_name.get(name)?;
        Some(Arc::new(kept.claim(namespace, name)))
    }
}

impl Claims {
    /// The claims of namespace `namespace` whose `spec.clusterName` is
    /// `cluster`, in name order.
    #[must_use]
    pub fn of_cluster(&self, namespace: &str, cluster: &str) -> Vec<Arc<CachedClaim>> {
        let kept = self.held.read();
        let Some(held) = kept.0.get(namespace) else {
            return Vec::new();
        };
        held.by_cluster
            .get(cluster)
            .into_iter()
            .flatten()
            .filter_map(|name| {
                let claim = held.by_name.get(name)?;
                Some(Arc::new(claim.claim(namespace, name)))
            })
            .collect()
    }

    /// The claims whose `status.infra` names Infra `namespace`/`name`: every
    /// claim is looked at, only those are built.
    #[must_use]
    pub fn composed_into(&self, namespace: &str, name: &str) -> Vec<Arc<CachedClaim>> {
        let names_infra = |claim: &KeptClaim| {
            (claim.status.as_ref())
                .and_then(|s| s.infra.as_ref())
                .is_some_and(|at| at.namespace == namespace && at.name == name)
        };
        self.held
            .read()
            .0
            .iter()
            .flat_map(|(claims_namespace, kept)| {
                (kept.by_name.iter())
                    .filter(|(_, claim)| names_infra(claim))
                    .map(|(claim_name, claim)| Arc::new(claim.claim(claims_namespace, claim_name)))
            })
            .collect()
    }

    /// Every (namespace, Cluster name) some claim names.
    #[must_use]
    pub fn cluster_keys(&self) -> Vec<(String, String)> {
        self.held
            .read()
            .0
            .iter()
            .flat_map(|(namespace, kept)| {
                kept.by_cluster
                    .keys()
                    .map(|cluster| (namespace.to_string(), cluster.to_string()))
            })
            .collect()
    }
}

impl Kept<CachedClaim> for Claims {
    fn get(&self, key: &ObjectRef<CachedClaim>) -> Option<Arc<CachedClaim>> {
        self.held
            .read()
            .get(key.namespace.as_deref().unwrap_or_default(), &key.name)
    }

    fn state(&self) -> Vec<Arc<CachedClaim>> {
        self.held
            .read()
            .0
            .iter()
            .flat_map(|(namespace, kept)| {
                (kept.by_name.iter()).map(|(name, claim)| Arc::new(claim.claim(namespace, name)))
            })
            .collect()
    }

    /// The subscribers get the decoded claim itself: what is kept is built
    /// again at each read.
    fn for_subscribers(&self, object: CachedClaim) -> Arc<CachedClaim> {
        Arc::new(object)
    }
}

impl Keep<CachedClaim> for Claims {
    type Reader = Self;

    fn reader(&self) -> Self {
        self.clone()
    }

    fn apply(&mut self, event: &watcher::Event<CachedClaim>) {
        self.held.apply(event);
    }
}

#[cfg(test)]
mod tests;

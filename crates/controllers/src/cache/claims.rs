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
//! so; the readers keep none past their reconcile). Its owners and Infra
//! entry are held more compactly than their API types (`kept`'s docs).
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

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::CachedClaim;
use super::index::{Key, key_of};
use super::keep::{Held, Holding, Keep, Kept, shared_key};

mod kept;

use kept::KeptClaim;

/// The NodeClaims the shared cache keeps. Clones share them.
#[derive(Default, Clone)]
pub struct Claims {
    held: Held<Namespaces>,
}

/// The claims by namespace.
#[derive(Default)]
struct Namespaces(HashMap<Arc<str>, Namespace>);

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
        // Another claim of its Cluster, to share its Infra's name.
        let sibling = (self.by_cluster.get(&cluster))
            .and_then(|names| names.first())
            .and_then(|sibling| self.by_name.get(sibling));
        let kept = KeptClaim::keep(claim, cluster.clone(), sibling.map(AsRef::as_ref));
        self.by_cluster
            .entry(cluster)
            .or_default()
            .insert(name.clone());
        self.by_name.insert(name, Box::new(kept));
    }

    fn remove(&mut self, name: &str) {
        let Some(claim) = self.by_name.remove(name) else {
            return;
        };
        let cluster = &*claim.cluster;
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
        self.held
            .read()
            .0
            .iter()
            .flat_map(|(claims_namespace, kept)| {
                (kept.by_name.iter())
                    .filter(|(_, claim)| claim.composed_into(namespace, name))
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

    fn is_empty(&self) -> bool {
        (self.held.read().0.values()).all(|kept| kept.by_name.is_empty())
    }

    /// From the names kept, no claim built.
    fn keys(&self) -> Vec<Key> {
        (self.held.read().0.iter())
            .flat_map(|(namespace, kept)| {
                (kept.by_name.keys()).map(|name| key_of(name, Some(namespace)))
            })
            .collect()
    }

    /// Each claim built when it is reached, from the names kept when the
    /// iteration began (two shared pointers a claim).
    fn each(&self) -> Box<dyn Iterator<Item = Arc<CachedClaim>> + Send> {
        let names: Vec<(Arc<str>, Arc<str>)> = (self.held.read().0.iter())
            .flat_map(|(namespace, kept)| {
                (kept.by_name.keys()).map(|name| (namespace.clone(), name.clone()))
            })
            .collect();
        let claims = self.clone();
        Box::new(
            names
                .into_iter()
                .filter_map(move |(namespace, name)| claims.held.read().get(&namespace, &name)),
        )
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

//! [`JoinSecrets`]: the join Secrets as the shared cache keeps them, grouped
//! by the Infra their label names.
//!
//! A reconcile reads the Secrets of one Infra ([`JoinSecrets::of_infra`]), so
//! they are kept by that group, each group in name order: this is both the
//! store and the index (a kube-runtime store beside an `Index` kept each
//! Secret's name in four more places).
//!
//! # Guarantees
//! - It takes watch events as a kube-runtime store does: an object applied
//!   replaces the one of its name, a re-list is read in full and replaces
//!   everything only when it is done (readers see the old state until then).
//! - Clones share what is kept; a reader never sees half of one event.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use api::names::INFRA_NAME_LABEL;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::{CachedJoinSecret, WatchedJoinSecret};
use crate::cache::Labelled;
use crate::cache::index::{Key, key_of};
use crate::cache::keep::{Held, Holding, Keep, Kept, shared_key};

/// The join Secrets the shared cache keeps. Clones share them.
#[derive(Default, Clone)]
pub struct JoinSecrets {
    held: Held<Groups>,
}

/// Secrets by name.
type Group = BTreeMap<Arc<str>, Arc<CachedJoinSecret>>;

/// The Secrets by the Infra their label names, then by name.
#[derive(Default)]
struct Groups {
    by_infra: HashMap<Arc<str>, Group>,
    /// Those without an Infra label.
    unlabelled: Group,
    /// Each Secret's Infra, to move or remove it.
    infra_of: HashMap<Arc<str>, Option<Arc<str>>>,
    /// The namespaces met, so each Secret shares its namespace's one allocation
    /// (a cache watches one namespace: this holds one or two).
    namespaces: Vec<Arc<str>>,
}

impl Holding<WatchedJoinSecret> for Groups {
    fn insert(&mut self, watched: WatchedJoinSecret) {
        let namespace = watched
            .metadata
            .namespace
            .as_deref()
            .map(|ns| self.shared_namespace(ns));
        // The group's key, shared by its members' reverse entries.
        let infra: Option<Arc<str>> = watched
            .label(INFRA_NAME_LABEL)
            .map(|infra| shared_key(&self.by_infra, infra));
        // Another Secret of its Infra, to share its Cluster's texts.
        let sibling = infra
            .as_ref()
            .and_then(|infra| self.by_infra.get(infra)?.values().next().cloned());
        let secret =
            CachedJoinSecret::kept_in(watched, namespace, infra.as_ref(), sibling.as_deref());
        self.remove_named(secret.name());
        let name = secret.name.clone();
        self.infra_of.insert(name.clone(), infra.clone());
        let group = match infra {
            Some(infra) => self.by_infra.entry(infra).or_default(),
            None => &mut self.unlabelled,
        };
        group.insert(name, Arc::new(secret));
    }

    fn remove(&mut self, secret: &WatchedJoinSecret) {
        self.remove_named(secret.metadata.name.as_deref().unwrap_or_default());
    }
}

impl Groups {
    fn remove_named(&mut self, name: &str) {
        let Some(infra) = self.infra_of.remove(name) else {
            return;
        };
        match infra {
            Some(infra) => {
                if let Some(group) = self.by_infra.get_mut(&infra) {
                    group.remove(name);
                    if group.is_empty() {
                        self.by_infra.remove(&infra);
                    }
                }
            }
            None => {
                self.unlabelled.remove(name);
            }
        }
    }

    fn get(&self, name: &str) -> Option<&Arc<CachedJoinSecret>> {
        match self.infra_of.get(name)? {
            Some(infra) => self.by_infra.get(infra)?.get(name),
            None => self.unlabelled.get(name),
        }
    }

    fn all(&self) -> impl Iterator<Item = &Arc<CachedJoinSecret>> {
        self.by_infra
            .values()
            .flat_map(Group::values)
            .chain(self.unlabelled.values())
    }

    fn shared_namespace(&mut self, namespace: &str) -> Arc<str> {
        if let Some(shared) = self.namespaces.iter().find(|ns| ***ns == *namespace) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(namespace);
        self.namespaces.push(shared.clone());
        shared
    }
}

impl JoinSecrets {
    /// The Secrets labelled with Infra `infra`, in name order.
    #[must_use]
    pub fn of_infra(&self, infra: &str) -> Vec<Arc<CachedJoinSecret>> {
        self.held
            .read()
            .by_infra
            .get(infra)
            .map(|group| group.values().cloned().collect())
            .unwrap_or_default()
    }
}

impl Kept<WatchedJoinSecret> for JoinSecrets {
    fn get(&self, key: &ObjectRef<WatchedJoinSecret>) -> Option<Arc<WatchedJoinSecret>> {
        let kept = self.held.read();
        let secret = kept.get(&key.name)?;
        (secret.namespace.as_deref() == key.namespace.as_deref())
            .then(|| Arc::new(WatchedJoinSecret::from(secret.as_ref())))
    }

    fn state(&self) -> Vec<Arc<WatchedJoinSecret>> {
        self.held
            .read()
            .all()
            .map(|secret| Arc::new(WatchedJoinSecret::from(secret.as_ref())))
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.held.read().all().next().is_none()
    }

    /// From the names kept, no Secret built.
    fn keys(&self) -> Vec<Key> {
        (self.held.read().all())
            .map(|secret| key_of(&secret.name, secret.namespace.as_deref()))
            .collect()
    }

    /// Each Secret built when it is reached, from what was kept when the
    /// iteration began.
    fn each(&self) -> Box<dyn Iterator<Item = Arc<WatchedJoinSecret>> + Send> {
        let kept: Vec<Arc<CachedJoinSecret>> = self.held.read().all().cloned().collect();
        Box::new(
            kept.into_iter()
                .map(|secret| Arc::new(WatchedJoinSecret::from(secret.as_ref()))),
        )
    }

    /// The subscribers get the decoded Secret itself: nothing here is a
    /// copy of it to share.
    fn for_subscribers(&self, object: WatchedJoinSecret) -> Arc<WatchedJoinSecret> {
        Arc::new(object)
    }
}

impl Keep<WatchedJoinSecret> for JoinSecrets {
    type Reader = Self;

    fn reader(&self) -> Self {
        self.clone()
    }

    fn apply(&mut self, event: &watcher::Event<WatchedJoinSecret>) {
        self.held.apply(event);
    }
}

#[cfg(test)]
mod tests;

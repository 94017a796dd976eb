//! Indexes kept beside a shared cache's store, so no reconcile or mapper
//! scans a whole store: `Store::state()` copies every object, and a reconcile
//! per object that does so makes a fleet of n nodes cost n^2.
//!
//! # Guarantees
//!
//! The reflector updates an index right after its store took the same event
//! and before any subscriber hears of it: a reconcile started by an event
//! finds that event in the index. Between two events the index and the store
//! agree; a reader that holds refs from the index looks each one up in the
//! store, and one deleted in between is skipped.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The objects of one kind grouped by a key of each (an object in at most
/// one group): a namespace, a phase, an owner.
///
/// # Why the keys are strings
///
/// An index holds every object of its kind twice (in its group and in the
/// reverse map that moves it): as `ObjectRef`s (four strings, 96 bytes before
/// their text) with a copy of the group beside each, that was about 550 bytes
/// per object and 2.4 KiB per node over the four indexes (heaptrack, plan
/// 0016 C2). Here an object's key is one shared `namespace/name` string and
/// each group one shared allocation, so an object costs its name once and a
/// few pointers.
pub struct Index<K, G>
where
    K: Resource<DynamicType = ()>,
{
    key: fn(&K) -> Option<G>,
    groups: Mutex<Groups<G>>,
    kind: PhantomData<fn() -> K>,
}

/// An object's key: `namespace/name`, or `name` for a cluster-scoped object
/// (a Kubernetes name never holds a `/`).
type Key = Arc<str>;

struct Groups<G> {
    members: HashMap<Arc<G>, HashSet<Key>>,
    /// Each object's group, to move it when its key changes.
    group_of: HashMap<Key, Arc<G>>,
}

fn key_of(name: &str, namespace: Option<&str>) -> Key {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}").into(),
        None => name.into(),
    }
}

fn object_key<K: Resource<DynamicType = ()>>(object: &K) -> Key {
    let meta = object.meta();
    key_of(
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref(),
    )
}

fn ref_key<K: Resource<DynamicType = ()>>(object: &ObjectRef<K>) -> Key {
    key_of(&object.name, object.namespace.as_deref())
}

/// The reference a store is read with: name and namespace, as
/// `ObjectRef`s compare.
fn object_ref<K: Resource<DynamicType = ()>>(key: &str) -> ObjectRef<K> {
    match key.split_once('/') {
        Some((namespace, name)) => ObjectRef::new(name).within(namespace),
        None => ObjectRef::new(key),
    }
}

impl<K, G> Index<K, G>
where
    K: Resource<DynamicType = ()>,
    G: Eq + Hash,
{
    /// An empty index grouping objects by `key`; `None` leaves an object out.
    #[must_use]
    pub fn new(key: fn(&K) -> Option<G>) -> Self {
        Self {
            key,
            groups: Mutex::new(Groups {
                members: HashMap::new(),
                group_of: HashMap::new(),
            }),
            kind: PhantomData,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Groups<G>> {
        // Every change below completes or does nothing: a panic cannot leave half of one.
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many objects are in `group`.
    #[must_use]
    pub fn len(&self, group: &G) -> usize {
        self.lock().members.get(group).map_or(0, HashSet::len)
    }

    /// Whether `object` is in `group`.
    #[must_use]
    pub fn contains(&self, group: &G, object: &ObjectRef<K>) -> bool {
        self.lock()
            .group_of
            .get(&ref_key(object))
            .is_some_and(|g| **g == *group)
    }

    /// The objects of `group`, as keys.
    #[must_use]
    pub fn refs(&self, group: &G) -> Vec<ObjectRef<K>> {
        self.lock()
            .members
            .get(group)
            .map(|members| members.iter().map(|key| object_ref(key)).collect())
            .unwrap_or_default()
    }

    /// The objects of `group` as `store` holds them.
    #[must_use]
    pub fn objects(&self, group: &G, store: &Store<K>) -> Vec<Arc<K>>
    where
        K: Clone,
    {
        self.refs(group)
            .iter()
            .filter_map(|key| store.get(key))
            .collect()
    }

    /// Counts of every group, for gauges.
    #[must_use]
    pub fn counts(&self) -> Vec<(G, usize)>
    where
        G: Clone,
    {
        self.lock()
            .members
            .iter()
            .map(|(group, members)| (G::clone(group), members.len()))
            .collect()
    }
}

/// What the reflector does with an index of its kind.
pub(crate) trait Indexer<K>: Send + Sync {
    /// `object` was created or changed.
    fn applied(&self, object: &K);
    /// `object` was deleted.
    fn deleted(&self, object: &K);
    /// The store was listed again: these are all its objects now.
    fn relisted(&self, objects: &[Arc<K>]);
}

impl<G: Eq + Hash> Groups<G> {
    fn remove(&mut self, key: &str) {
        if let Some(group) = self.group_of.remove(key)
            && let Some(members) = self.members.get_mut(&group)
        {
            members.remove(key);
            if members.is_empty() {
                self.members.remove(&group);
            }
        }
    }

    fn insert(&mut self, key: Key, group: Option<G>) {
        if let Some(group) = &group
            && self.group_of.get(&key).is_some_and(|g| **g == *group)
        {
            // Most changes (a status write) keep the group: nothing to move.
            return;
        }
        self.remove(&key);
        let Some(group) = group else { return };
        // The group's one allocation, shared by every member's reverse entry.
        let shared = match self.members.get_key_value(&group) {
            Some((shared, _)) => shared.clone(),
            None => Arc::new(group),
        };
        self.members
            .entry(shared.clone())
            .or_default()
            .insert(key.clone());
        self.group_of.insert(key, shared);
    }
}

impl<K, G> Indexer<K> for Index<K, G>
where
    K: Resource<DynamicType = ()> + Send + Sync,
    G: Eq + Hash + Send + Sync,
{
    fn applied(&self, object: &K) {
        let group = (self.key)(object);
        self.lock().insert(object_key(object), group);
    }

    fn deleted(&self, object: &K) {
        self.lock().remove(&object_key(object));
    }

    fn relisted(&self, objects: &[Arc<K>]) {
        let mut groups = self.lock();
        groups.members.clear();
        groups.group_of.clear();
        for object in objects {
            let group = (self.key)(object);
            groups.insert(object_key(object.as_ref()), group);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::ObjectMeta;

    fn map(name: &str, color: Option<&str>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: color.map(|c| [("color".to_owned(), c.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn color(object: &ConfigMap) -> Option<String> {
        object.metadata.labels.as_ref()?.get("color").cloned()
    }

    #[test]
    fn objects_move_between_groups_as_they_change_and_leave_when_deleted() {
        let index = Index::new(color);
        let red = "red".to_owned();
        index.applied(&map("a", Some("red")));
        index.applied(&map("b", Some("red")));
        index.applied(&map("c", None));
        assert_eq!(index.len(&red), 2);
        index.applied(&map("a", Some("blue")));
        assert_eq!(index.len(&red), 1);
        assert!(index.contains(&"blue".to_owned(), &ObjectRef::new("a").within("ns")));
        index.applied(&map("b", None));
        index.deleted(&map("a", Some("blue")));
        assert_eq!(index.counts(), Vec::new(), "empty groups are dropped");
    }

    #[test]
    fn refs_name_objects_as_their_store_keys_them() {
        let index = Index::new(|_: &Namespace| Some(()));
        let cluster_scoped = Namespace {
            metadata: ObjectMeta {
                name: Some("tenant".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        index.applied(&cluster_scoped);
        assert_eq!(index.refs(&()), [ObjectRef::new("tenant")]);
        let namespaced = Index::new(color);
        namespaced.applied(&map("a", Some("red")));
        assert_eq!(
            namespaced.refs(&"red".to_owned()),
            [ObjectRef::new("a").within("ns")]
        );
        assert!(!namespaced.contains(&"red".to_owned(), &ObjectRef::new("a").within("other")));
    }

    #[test]
    fn a_relist_replaces_everything() {
        let index = Index::new(color);
        index.applied(&map("gone", Some("red")));
        index.relisted(&[
            Arc::new(map("kept", Some("red"))),
            Arc::new(map("new", Some("blue"))),
        ]);
        let mut refs = index.refs(&"red".to_owned());
        refs.extend(index.refs(&"blue".to_owned()));
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        assert_eq!(names, ["kept", "new"]);
    }
}

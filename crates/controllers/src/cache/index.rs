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
//!
//! # Assumptions
//!
//! An index's key is a function of the object alone (a `fn`, reading no
//! clock or other state): an object leaves its group by the group its
//! store's previous version gives, which must be the group it was put in.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The objects of one kind grouped by a key of each (an object in at most
/// one group): a namespace, a phase, an owner.
///
/// # Why the keys are strings, shared, and nothing maps back
///
/// An index holds every object of its kind in its group. As `ObjectRef`s
/// (four strings, 96 bytes before their text) with a copy of the group
/// beside each, that was about 550 bytes per object and 2.4 KiB per node
/// over the four indexes (heaptrack, plan 0016 C2). Here an object's key is
/// one `namespace/name` string, made once per event by the reflector and
/// shared by every index of its kind, and an object moves out of its old
/// group by the version its store held before the event (which the
/// reflector hands over), so no map from each object back to its group is
/// kept: a contract costs its name once and a set slot per index (plan
/// 0017 P4).
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
pub(crate) type Key = Arc<str>;

struct Groups<G> {
    members: HashMap<G, HashSet<Key>>,
}

pub(crate) fn key_of(name: &str, namespace: Option<&str>) -> Key {
    match namespace {
        Some(namespace) => format!("{namespace}/{name}").into(),
        None => name.into(),
    }
}

/// The key of `object` in every index of its kind.
pub(crate) fn object_key<K: Resource<DynamicType = ()>>(object: &K) -> Key {
    let meta = object.meta();
    key_of(
        meta.name.as_deref().unwrap_or_default(),
        meta.namespace.as_deref(),
    )
}

pub(crate) fn ref_key<K: Resource<DynamicType = ()>>(object: &ObjectRef<K>) -> Key {
    key_of(&object.name, object.namespace.as_deref())
}

/// The reference a store is read with: name and namespace, as
/// `ObjectRef`s compare.
pub(crate) fn key_ref<K: Resource<DynamicType = ()>>(key: &str) -> ObjectRef<K> {
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
            .members
            .get(group)
            .is_some_and(|members| members.contains(&*ref_key(object)))
    }

    /// The objects of `group`, as keys.
    #[must_use]
    pub fn refs(&self, group: &G) -> Vec<ObjectRef<K>> {
        self.lock()
            .members
            .get(group)
            .map(|members| members.iter().map(|key| key_ref(key)).collect())
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

    /// The keys of `group`'s objects, as this index holds them.
    #[cfg(test)]
    pub(crate) fn keys(&self, group: &G) -> Vec<Key> {
        self.lock()
            .members
            .get(group)
            .map(|members| members.iter().cloned().collect())
            .unwrap_or_default()
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
            .map(|(group, members)| (group.clone(), members.len()))
            .collect()
    }
}

/// What the reflector does with an index of its kind. It hands over each
/// object's key (one allocation for every index) and, for a change, the
/// version its store held before.
pub(crate) trait Indexer<K>: Send + Sync {
    /// `object`, keyed `key`, was created or changed; its store held `previous` before.
    fn applied(&self, key: &Key, previous: Option<&K>, object: &K);
    /// `previous`, keyed `key`, the version its store held, was deleted.
    fn deleted(&self, key: &Key, previous: &K);
    /// The store was listed again: these are all its objects now, each with its key.
    fn relisted(&self, objects: &[(Key, Arc<K>)]);
}

impl<G: Eq + Hash> Groups<G> {
    /// Moves `key` from group `from` to group `to` (`None`: in no group).
    fn moved(&mut self, key: &Key, from: Option<G>, to: Option<G>) {
        if from == to {
            // Most changes (a status write) keep the group: nothing to move.
            return;
        }
        // The allocation this index already holds for the object, if any.
        let held = from.and_then(|from| self.take(&from, key));
        if let Some(to) = to {
            self.members
                .entry(to)
                .or_default()
                .insert(held.unwrap_or_else(|| key.clone()));
        }
    }

    fn take(&mut self, group: &G, key: &str) -> Option<Key> {
        let members = self.members.get_mut(group)?;
        let held = members.take(key);
        if members.is_empty() {
            self.members.remove(group);
        }
        held
    }
}

impl<K, G> Indexer<K> for Index<K, G>
where
    K: Resource<DynamicType = ()> + Send + Sync,
    G: Eq + Hash + Send + Sync,
{
    fn applied(&self, key: &Key, previous: Option<&K>, object: &K) {
        let from = previous.and_then(self.key);
        let to = (self.key)(object);
        self.lock().moved(key, from, to);
    }

    fn deleted(&self, key: &Key, previous: &K) {
        let from = (self.key)(previous);
        self.lock().moved(key, from, None);
    }

    fn relisted(&self, objects: &[(Key, Arc<K>)]) {
        let mut groups = self.lock();
        groups.members.clear();
        for (key, object) in objects {
            let group = (self.key)(object);
            groups.moved(key, None, group);
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

    /// A store of one kind beside `index`, fed as the reflector feeds both.
    struct Fed<'a, K: Resource<DynamicType = ()> + Clone, G> {
        index: &'a Index<K, G>,
        held: HashMap<Key, K>,
    }

    impl<'a, K, G> Fed<'a, K, G>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync,
        G: Eq + Hash + Send + Sync,
    {
        fn new(index: &'a Index<K, G>) -> Self {
            Self {
                index,
                held: HashMap::new(),
            }
        }

        fn apply(&mut self, object: K) {
            let key = object_key(&object);
            self.index.applied(&key, self.held.get(&key), &object);
            self.held.insert(key, object);
        }

        fn delete(&mut self, object: &K) {
            let key = object_key(object);
            if let Some(previous) = self.held.remove(&key) {
                self.index.deleted(&key, &previous);
            }
        }
    }

    #[test]
    fn objects_move_between_groups_as_they_change_and_leave_when_deleted() {
        let index = Index::new(color);
        let mut fed = Fed::new(&index);
        let red = "red".to_owned();
        fed.apply(map("a", Some("red")));
        fed.apply(map("b", Some("red")));
        fed.apply(map("c", None));
        assert_eq!(index.len(&red), 2);
        fed.apply(map("a", Some("blue")));
        assert_eq!(index.len(&red), 1);
        assert!(index.contains(&"blue".to_owned(), &ObjectRef::new("a").within("ns")));
        assert!(!index.contains(&red, &ObjectRef::new("a").within("ns")));
        fed.apply(map("b", None));
        fed.delete(&map("a", Some("red")));
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
        Fed::new(&index).apply(cluster_scoped);
        assert_eq!(index.refs(&()), [ObjectRef::new("tenant")]);
        let namespaced = Index::new(color);
        Fed::new(&namespaced).apply(map("a", Some("red")));
        assert_eq!(
            namespaced.refs(&"red".to_owned()),
            [ObjectRef::new("a").within("ns")]
        );
        assert!(!namespaced.contains(&"red".to_owned(), &ObjectRef::new("a").within("other")));
    }

    #[test]
    fn a_relist_replaces_everything() {
        let index = Index::new(color);
        Fed::new(&index).apply(map("gone", Some("red")));
        let keyed = |object: ConfigMap| (object_key(&object), Arc::new(object));
        index.relisted(&[
            keyed(map("kept", Some("red"))),
            keyed(map("new", Some("blue"))),
        ]);
        let mut refs = index.refs(&"red".to_owned());
        refs.extend(index.refs(&"blue".to_owned()));
        let mut names: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        names.sort();
        assert_eq!(names, ["kept", "new"]);
    }
}

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
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

/// The objects of one kind grouped by a key of each (an object in at most
/// one group): a namespace, a phase, an owner.
pub struct Index<K, G>
where
    K: Resource<DynamicType = ()>,
{
    key: fn(&K) -> Option<G>,
    groups: Mutex<Groups<K, G>>,
}

struct Groups<K: Resource<DynamicType = ()>, G> {
    members: HashMap<G, HashSet<ObjectRef<K>>>,
    /// Each object's group, to move it when its key changes.
    group_of: HashMap<ObjectRef<K>, G>,
}

impl<K, G> Index<K, G>
where
    K: Resource<DynamicType = ()>,
    G: Eq + Hash + Clone,
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
        }
    }

    fn lock(&self) -> MutexGuard<'_, Groups<K, G>> {
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
        self.lock().group_of.get(object) == Some(group)
    }

    /// The objects of `group`, as keys.
    #[must_use]
    pub fn refs(&self, group: &G) -> Vec<ObjectRef<K>> {
        self.lock()
            .members
            .get(group)
            .map(|members| members.iter().cloned().collect())
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
    pub fn counts(&self) -> Vec<(G, usize)> {
        self.lock()
            .members
            .iter()
            .map(|(group, members)| (group.clone(), members.len()))
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

impl<K, G> Groups<K, G>
where
    K: Resource<DynamicType = ()>,
    G: Eq + Hash + Clone,
{
    fn remove(&mut self, key: &ObjectRef<K>) {
        if let Some(group) = self.group_of.remove(key)
            && let Some(members) = self.members.get_mut(&group)
        {
            members.remove(key);
            if members.is_empty() {
                self.members.remove(&group);
            }
        }
    }

    fn insert(&mut self, key: ObjectRef<K>, group: Option<G>) {
        if group.is_some() && self.group_of.get(&key) == group.as_ref() {
            // Most changes (a status write) keep the group: nothing to move.
            return;
        }
        self.remove(&key);
        if let Some(group) = group {
            self.members
                .entry(group.clone())
                .or_default()
                .insert(key.clone());
            self.group_of.insert(key, group);
        }
    }
}

/// The key of `object` without the uid and resourceVersion `ObjectRef::from_obj`
/// copies in: keys compare by name and namespace only, and an index holds two
/// keys per object (about 100 bytes of copies each, for 10,000 contracts in
/// two indexes 4 MiB that no reader looks at).
fn bare_ref<K: Resource<DynamicType = ()>>(object: &K) -> ObjectRef<K> {
    let meta = object.meta();
    let key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    match meta.namespace.as_deref() {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

impl<K, G> Indexer<K> for Index<K, G>
where
    K: Resource<DynamicType = ()> + Send + Sync,
    G: Eq + Hash + Clone + Send + Sync,
{
    fn applied(&self, object: &K) {
        let group = (self.key)(object);
        self.lock().insert(bare_ref(object), group);
    }

    fn deleted(&self, object: &K) {
        self.lock().remove(&bare_ref(object));
    }

    fn relisted(&self, objects: &[Arc<K>]) {
        let mut groups = self.lock();
        groups.members.clear();
        groups.group_of.clear();
        for object in objects {
            let group = (self.key)(object);
            groups.insert(bare_ref(object.as_ref()), group);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
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

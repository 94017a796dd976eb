//! What the garbage collector needs, kept by every write under the store's lock so a
//! collector pass never scans the store: which objects name an owner uid, which owners
//! wait for their dependents (an `orphan` or `foregroundDeletion` finalizer), and the work
//! the writes since the last pass made.
//!
//! Events take no part, as in kube-controller-manager (its garbage collector ignores
//! `events` by default): they never own anything and nothing collects them but their TTL.

use std::collections::{BTreeSet, HashMap};

use super::object::{ObjKey, OwnerLink, StoredObject};
use crate::registry::StorageKey;

/// The finalizer of a Foreground deletion: the owner waits for its blocking dependents.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer of an Orphan deletion: the dependents lose their reference to the owner.
pub const ORPHAN: &str = "orphan";
/// Where Events are stored (core/v1 and events.k8s.io/v1 share it).
pub const EVENTS_STORAGE: &str = "/events";

/// Where an object is.
pub type Location = (StorageKey, ObjKey);

/// Something the garbage collector must look at again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GcWork {
    /// An object with ownerReferences: are its owners gone, or going in the foreground?
    Dependent(Location),
    /// An object being deleted with an `orphan` or `foregroundDeletion` finalizer: may it
    /// drop the finalizer now?
    Owner(Location),
}

/// The index and the pending work.
#[derive(Debug, Default)]
pub struct GcIndex {
    /// Owner uid -> the objects whose ownerReferences name it.
    dependents: HashMap<String, BTreeSet<Location>>,
    /// Owner uid -> where an owner waiting for its dependents is.
    waiting: HashMap<String, Location>,
    pending: BTreeSet<GcWork>,
}

fn waits_for_dependents(object: &StoredObject) -> bool {
    object.deleting && (object.has_finalizer(ORPHAN) || object.has_finalizer(FOREGROUND))
}

impl GcIndex {
    /// Records one write: `before` and `after` are the object's states around it (`after`
    /// is None when the write removed it).
    pub fn record(
        &mut self,
        storage: &StorageKey,
        key: &ObjKey,
        before: Option<&StoredObject>,
        after: Option<&StoredObject>,
    ) {
        if &**storage == EVENTS_STORAGE {
            return;
        }
        let Some(object) = after.or(before) else {
            return;
        };
        let location = || (storage.clone(), key.clone());
        let links_before = before.map_or(&[][..], StoredObject::owners);
        let links_after = after.map_or(&[][..], StoredObject::owners);
        let links_changed = links_before != links_after;
        if links_changed {
            self.relink(links_before, links_after, &location());
        }
        // The object as a dependent: its owners may be gone already.
        if let Some(now) = after
            && !now.owners().is_empty()
            && !now.deleting
            && (before.is_none() || links_changed)
        {
            self.pending.insert(GcWork::Dependent(location()));
        }
        // The object as an owner: gone or going, its dependents must be looked at.
        if (after.is_none() || object.deleting)
            && let Some(dependents) = self.dependents.get(object.uid())
        {
            self.pending
                .extend(dependents.iter().cloned().map(GcWork::Dependent));
        }
        if after.is_some_and(waits_for_dependents) {
            self.waiting.insert(object.uid().to_owned(), location());
            self.pending.insert(GcWork::Owner(location()));
        } else if !self.waiting.is_empty() {
            self.waiting.remove(object.uid());
        }
        // A dependent left (or changed its reference to) an owner that waits for it.
        if links_changed {
            for link in links_before {
                if let Some(owner) = self.waiting.get(&link.uid) {
                    self.pending.insert(GcWork::Owner(owner.clone()));
                }
            }
        }
    }

    fn relink(&mut self, before: &[OwnerLink], after: &[OwnerLink], location: &Location) {
        for link in before {
            if after.iter().any(|l| l.uid == link.uid) {
                continue;
            }
            if let Some(set) = self.dependents.get_mut(&link.uid) {
                set.remove(location);
                if set.is_empty() {
                    self.dependents.remove(&link.uid);
                }
            }
        }
        for link in after {
            self.dependents
                .entry(link.uid.clone())
                .or_default()
                .insert(location.clone());
        }
    }

    /// The objects whose ownerReferences name `uid`.
    #[must_use]
    pub fn dependents_of(&self, uid: &str) -> Vec<Location> {
        self.dependents
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The work recorded since the last call.
    pub fn take(&mut self) -> BTreeSet<GcWork> {
        std::mem::take(&mut self.pending)
    }

    /// Puts work back (it failed and must be tried again).
    pub fn requeue(&mut self, work: GcWork) {
        self.pending.insert(work);
    }

    /// Whether work is pending.
    #[must_use]
    pub fn has_work(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly
mod tests {
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;

    fn object(name: &str, uid: &str, owners: &[(&str, bool)], meta: &Value) -> StoredObject {
        let mut value = json!({"metadata": {"namespace": "ns", "name": name, "uid": uid}});
        if !owners.is_empty() {
            value["metadata"]["ownerReferences"] = owners
                .iter()
                .map(|(uid, block)| json!({"uid": uid, "blockOwnerDeletion": block}))
                .collect();
        }
        if let Some(extra) = meta.as_object() {
            for (k, v) in extra {
                value["metadata"][k] = v.clone();
            }
        }
        StoredObject::new(&value, 1).unwrap()
    }

    fn at(name: &str) -> Location {
        (Arc::from("/configmaps"), ("ns".to_owned(), name.to_owned()))
    }

    fn write(index: &mut GcIndex, before: Option<&StoredObject>, after: Option<&StoredObject>) {
        let name = after.or(before).unwrap().name().to_owned();
        let (storage, key) = at(&name);
        index.record(&storage, &key, before, after);
    }

    #[test]
    fn a_new_dependent_is_checked_and_indexed_and_its_owners_deletion_rechecks_it() {
        let mut index = GcIndex::default();
        let owner = object("owner", "o", &[], &json!({}));
        write(&mut index, None, Some(&owner));
        assert!(index.take().is_empty(), "a plain object is no work");
        let child = object("child", "c", &[("o", false)], &json!({}));
        write(&mut index, None, Some(&child));
        assert_eq!(
            index.take().into_iter().collect::<Vec<_>>(),
            [GcWork::Dependent(at("child"))]
        );
        assert_eq!(index.dependents_of("o"), [at("child")]);
        write(&mut index, Some(&child), Some(&child));
        assert!(index.take().is_empty(), "an unchanged reference is no work");
        write(&mut index, Some(&owner), None);
        assert_eq!(
            index.take().into_iter().collect::<Vec<_>>(),
            [GcWork::Dependent(at("child"))]
        );
        write(&mut index, Some(&child), None);
        assert!(index.dependents_of("o").is_empty(), "the index forgets it");
    }

    #[test]
    fn a_foreground_owner_is_rechecked_when_a_dependent_goes() {
        let mut index = GcIndex::default();
        let child = object("child", "c", &[("o", true)], &json!({}));
        write(&mut index, None, Some(&child));
        let owner = object(
            "owner",
            "o",
            &[],
            &json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": [FOREGROUND]}),
        );
        write(&mut index, None, Some(&owner));
        let work: Vec<_> = index.take().into_iter().collect();
        assert_eq!(
            work,
            [GcWork::Dependent(at("child")), GcWork::Owner(at("owner"))]
        );
        write(&mut index, Some(&child), None);
        assert_eq!(
            index.take().into_iter().collect::<Vec<_>>(),
            [GcWork::Owner(at("owner"))]
        );
        let released = object(
            "owner",
            "o",
            &[],
            &json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["other"]}),
        );
        write(&mut index, Some(&owner), Some(&released));
        let unrelated = object("x", "x", &[("o", false)], &json!({}));
        write(&mut index, None, Some(&unrelated));
        write(&mut index, Some(&unrelated), None);
        assert!(
            !index.take().contains(&GcWork::Owner(at("owner"))),
            "an owner that stopped waiting is not looked at for its dependents"
        );
    }

    #[test]
    fn events_take_no_part() {
        let mut index = GcIndex::default();
        let event = object("e", "e", &[("o", false)], &json!({}));
        index.record(
            &Arc::from(EVENTS_STORAGE),
            &("ns".to_owned(), "e".to_owned()),
            None,
            Some(&event),
        );
        assert!(!index.has_work() && index.dependents_of("o").is_empty());
    }
}

//! The versions a controller's own writes replaced, so that a reconcile
//! started from a cached copy its own last write already replaced waits for
//! the cache instead of deciding from it.
//!
//! A write's watch event reaches the cache a moment after the write returns.
//! A reconcile started meanwhile (woken by another object's event) reads the
//! copy from before the write, decides the same step again, and its guarded
//! write is refused: a 409 and a retry. In `bench_scale` that was 2.7 of
//! every node's ~28 writes, each a controller conflicting with itself (plan
//! 0012 S6). Kubernetes' own controllers keep the same kind of record
//! ("expectations") of their writes.
//!
//! # Guarantees
//! - Only versions this controller's writes replaced are recorded: a copy
//!   another writer changed since is never taken for stale (resourceVersions
//!   are compared for equality only, never ordered).
//! - An object's record is forgotten once the cache shows it at a version
//!   that is not recorded; the record is cleared when it grows past
//!   [`MOST_OBJECTS`] (objects deleted before their cache caught up), which
//!   costs at most a 409 each, never a lost write.
//! - The caller still requeues shortly when it skips: the event of its own
//!   write wakes it anyway, the requeue only covers a watch that broke.
//! - [`OwnWrites::is_own_event`] tells a watch event that only carries this
//!   controller's own writes (a version they replaced, or the one the last
//!   made) from any other, for a controller whose reconcile decides on from
//!   what its writes answered: such an event need not wake the object (the
//!   Requester's contracts, plan 0016 C4). The event of the last write
//!   forgets the object (the events of the versions before it came first).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::object_uid::ObjectUid;

/// Objects recorded at most; past it the record starts over.
pub const MOST_OBJECTS: usize = 4096;

/// What this controller's writes did to one object.
#[derive(Debug, Default)]
struct Record {
    /// The resourceVersions they replaced.
    replaced: HashSet<String>,
    /// The resourceVersion the last one made.
    written: Option<String>,
}

/// Replaced and written resourceVersions by object uid.
#[derive(Debug, Default)]
pub struct OwnWrites {
    records: Mutex<HashMap<String, Record>>,
}

impl OwnWrites {
    /// This controller wrote `written` over the version `read` (as
    /// [`crate::write::Seen`] or a cached copy had it).
    pub fn wrote<K: ObjectUid>(&self, read_version: Option<&str>, written: &K) {
        let (Some(uid), Some(read)) = (written.object_uid(), read_version) else {
            return;
        };
        if written.meta().resource_version.as_deref() == Some(read) {
            return;
        }
        let mut records = self.lock();
        if records.len() >= MOST_OBJECTS && !records.contains_key(&*uid) {
            records.clear();
        }
        let record = records.entry(uid.into_owned()).or_default();
        record.replaced.insert(read.to_owned());
        record.written.clone_from(&written.meta().resource_version);
    }

    /// Whether `cached` is a version one of this controller's writes already
    /// replaced (the cache has not caught up). Forgets the object once it is not.
    pub fn is_behind<K: ObjectUid>(&self, cached: &K) -> bool {
        let (Some(uid), Some(version)) = (
            cached.object_uid(),
            cached.meta().resource_version.as_deref(),
        ) else {
            return false;
        };
        let mut records = self.lock();
        let behind = records
            .get(&*uid)
            .is_some_and(|record| record.replaced.contains(version));
        if !behind {
            records.remove(&*uid);
        }
        behind
    }

    /// Whether a watch event's `object` only tells of this controller's own
    /// writes: its version is one they replaced, or the one the last of them
    /// made. A reconcile that decides on from what its writes answered has
    /// seen that version already and scheduled what follows it, so waking the
    /// object again would decide the same (or wait for the cache, from a
    /// replaced one). The event of the last write forgets the object; another
    /// writer's version is never taken for one (equality only).
    pub fn is_own_event<K: ObjectUid>(&self, object: &K) -> bool {
        let (Some(uid), Some(version)) = (
            object.object_uid(),
            object.meta().resource_version.as_deref(),
        ) else {
            return false;
        };
        let mut records = self.lock();
        let Some(record) = records.get(&*uid) else {
            return false;
        };
        if record.written.as_deref() == Some(version) {
            records.remove(&*uid);
            return true;
        }
        record.replaced.contains(version)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Record>> {
        // The map stays consistent whatever panicked while holding it.
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::Secret;

    fn at(uid: &str, version: &str) -> Secret {
        let mut object = Secret::default();
        object.metadata.uid = Some(uid.to_owned());
        object.metadata.resource_version = Some(version.to_owned());
        object
    }

    #[test]
    fn a_copy_an_own_write_replaced_is_behind_until_the_cache_catches_up() {
        let own = OwnWrites::default();
        own.wrote(Some("1"), &at("a", "2"));
        own.wrote(Some("2"), &at("a", "3"));
        assert!(own.is_behind(&at("a", "1")));
        assert!(own.is_behind(&at("a", "2")), "every replaced version");
        assert!(!own.is_behind(&at("b", "1")), "another object");
        assert!(!own.is_behind(&at("a", "3")), "the version written");
        assert!(
            !own.is_behind(&at("a", "1")),
            "forgotten once the cache showed a version not replaced"
        );
        // Another writer's version (not recorded) is never behind.
        own.wrote(Some("4"), &at("a", "5"));
        assert!(!own.is_behind(&at("a", "7")));
    }

    #[test]
    fn only_the_events_of_own_writes_are_own_events() {
        let own = OwnWrites::default();
        // Read at 1, wrote 2 (a status), then read 2 and wrote 3 (a finalizer).
        own.wrote(Some("1"), &at("a", "2"));
        own.wrote(Some("2"), &at("a", "3"));
        assert!(!own.is_own_event(&at("b", "2")), "another object");
        assert!(
            own.is_own_event(&at("a", "1")),
            "a version an own write replaced"
        );
        assert!(
            own.is_own_event(&at("a", "2")),
            "the first write's own event"
        );
        assert!(
            !own.is_own_event(&at("a", "9")),
            "another writer's version, whatever it is"
        );
        assert!(
            own.is_own_event(&at("a", "3")),
            "the last write's own event"
        );
        assert!(
            !own.is_own_event(&at("a", "2")),
            "forgotten at the event of the last write: nothing of it is left to come"
        );
        assert!(!own.is_behind(&at("a", "2")));
        // A write that changed nothing (the version read is the one answered) is no event.
        own.wrote(Some("5"), &at("c", "5"));
        assert!(!own.is_own_event(&at("c", "5")));
    }

    #[test]
    fn an_own_event_seen_first_leaves_the_reconcile_its_cache_check() {
        let own = OwnWrites::default();
        own.wrote(Some("1"), &at("a", "2"));
        own.wrote(Some("2"), &at("a", "3"));
        assert!(own.is_own_event(&at("a", "2")));
        assert!(
            own.is_behind(&at("a", "2")),
            "a replaced version is still behind for a reconcile that reads it"
        );
    }

    #[test]
    fn the_record_starts_over_when_it_grows_past_its_bound() {
        let own = OwnWrites::default();
        for i in 0..MOST_OBJECTS {
            own.wrote(Some("1"), &at(&i.to_string(), "2"));
        }
        assert!(own.is_behind(&at("0", "1")));
        own.wrote(Some("1"), &at("new", "2"));
        assert!(!own.is_behind(&at("1", "1")), "cleared");
        assert!(own.is_behind(&at("new", "1")));
    }
}

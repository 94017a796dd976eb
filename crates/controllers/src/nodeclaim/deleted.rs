//! Join Secrets this controller deleted, remembered until its cache drops them.
//!
//! A join Secret has no finalizer: a delete that the server answered removed
//! it. But the cache hears of that a moment later, and every reconcile of the
//! Cluster in between (the contract's own deletion wakes one) would decide
//! the delete again and send it to a Secret that is gone (a 404 each, about
//! one extra write per node in `bench_scale`). As [`super::failed`] does for
//! Failed claims, `act` records the uid of each Secret it deleted, and until
//! the cache drops it no delete is sent again.
//!
//! # Guarantees
//! A uid is forgotten as soon as a reconcile of its Cluster no longer finds
//! it in the cache, so the record holds only deletes the cache has not caught
//! up with. The record names uids, never names: a new Secret of the same name
//! is a new uid and is decided afresh. A restarted controller needs none: its
//! first list does not hold a deleted Secret.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::compose::ClusterKey;

/// The uids of join Secrets deleted whose deletion the cache may not show yet.
#[derive(Debug, Default)]
pub struct DeletedSecrets {
    uids: Mutex<BTreeMap<String, ClusterKey>>,
}

impl DeletedSecrets {
    /// Records that the Secret `uid` of Cluster `key` was deleted (or found gone).
    pub fn record(&self, uid: &str, key: &ClusterKey) {
        self.lock().insert(uid.to_owned(), key.clone());
    }

    /// The uids of `key`'s Secrets deleted already that the cache (`cached`:
    /// every join Secret of the key's Infra) still holds; forgets the key's
    /// others.
    #[must_use]
    pub fn still_cached(&self, key: &ClusterKey, cached: &[&Secret]) -> BTreeSet<String> {
        let present: BTreeSet<String> = cached.iter().filter_map(|s| s.uid()).collect();
        let mut uids = self.lock();
        uids.retain(|uid, of| of != key || present.contains(uid));
        uids.iter()
            .filter(|(_, of)| *of == key)
            .map(|(uid, _)| uid.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ClusterKey>> {
        // The map stays consistent whatever panicked while holding it.
        self.uids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn key(name: &str) -> ClusterKey {
        ClusterKey {
            namespace: "tenant-a".into(),
            name: name.into(),
        }
    }

    fn secret(uid: &str) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some(format!("join-{uid}"));
        secret.metadata.uid = Some(uid.to_owned());
        secret
    }

    #[test]
    fn a_delete_is_remembered_until_the_cache_drops_the_secret() {
        let deleted = DeletedSecrets::default();
        deleted.record("a", &key("c1"));
        deleted.record("z", &key("c2"));
        let (a, b) = (secret("a"), secret("b"));
        assert_eq!(
            deleted.still_cached(&key("c1"), &[&a, &b]),
            ["a".to_owned()].into(),
            "the cache still shows the deleted Secret: no second delete"
        );
        assert!(deleted.still_cached(&key("c1"), &[&b]).is_empty());
        assert!(
            deleted.still_cached(&key("c1"), &[&a]).is_empty(),
            "forgotten once the cache dropped it: a Secret seen again is decided afresh"
        );
        // Another Cluster's record is kept until that Cluster's reconcile.
        assert!(deleted.lock().contains_key("z"));
        assert!(deleted.still_cached(&key("c2"), &[]).is_empty());
        assert!(deleted.lock().is_empty());
    }
}

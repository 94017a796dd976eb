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

use std::collections::BTreeSet;

use crate::cache::CachedJoinSecret;

use super::awaited::AwaitedUids;
use super::compose::ClusterKey;

/// The uids of join Secrets deleted whose deletion the cache may not show yet.
#[derive(Debug, Default)]
pub struct DeletedSecrets {
    uids: AwaitedUids,
}

impl DeletedSecrets {
    /// Records that the Secret `uid` of Cluster `key` was deleted (or found gone).
    pub fn record(&self, uid: &str, key: &ClusterKey) {
        self.uids.record(uid, key);
    }

    /// The uids of `key`'s Secrets deleted already that the cache (`cached`:
    /// every join Secret of the key's Infra) still holds; forgets the key's
    /// others.
    #[must_use]
    pub fn still_cached(&self, key: &ClusterKey, cached: &[&CachedJoinSecret]) -> BTreeSet<String> {
        let present: BTreeSet<String> = cached.iter().filter_map(|s| s.uid()).collect();
        self.uids.still_lagging(key, &present)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::nodeclaim::test_fixtures::cluster_key as key;

    fn secret(uid: &str) -> CachedJoinSecret {
        let mut secret = k8s_openapi::api::core::v1::Secret::default();
        secret.metadata.name = Some(format!("join-{uid}"));
        secret.metadata.uid = Some(uid.to_owned());
        secret.into()
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
        assert!(deleted.uids.contains("z"));
        assert!(deleted.still_cached(&key("c2"), &[]).is_empty());
        assert!(deleted.uids.is_empty());
    }
}

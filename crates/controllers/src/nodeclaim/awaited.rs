//! What this controller's own writes did that its cache does not show yet:
//! [`Awaited`], the records [`super::failed`] (claims written Failed),
//! [`super::deleted`] (join Secrets deleted) and [`super::created`] (join
//! Secrets created) keep, and [`AwaitedUids`], the uids of a Cluster's objects
//! the first two keep.
//!
//! # Guarantees
//! A reconcile of a Cluster says which of its recorded uids the cache still
//! lags on; every other uid of that Cluster is forgotten then, so the record
//! holds only writes the cache has not caught up with. Other Clusters' uids
//! are kept until their own reconcile.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::compose::ClusterKey;
use super::created::CreatedSecrets;
use super::deleted::DeletedSecrets;
use super::failed::FailedClaims;

/// The writes `act` records until the cache shows them.
#[derive(Debug, Default)]
pub struct Awaited {
    /// Claims written Failed.
    pub failed: FailedClaims,
    /// Join Secrets deleted.
    pub deleted: DeletedSecrets,
    /// Join Secrets created.
    pub created: CreatedSecrets,
}

/// Recorded uids, each with the Cluster whose reconcile forgets it.
#[derive(Debug, Default)]
pub struct AwaitedUids {
    uids: Mutex<BTreeMap<String, ClusterKey>>,
}

impl AwaitedUids {
    /// Records `uid`, an object of Cluster `key`.
    pub fn record(&self, uid: &str, key: &ClusterKey) {
        self.lock().insert(uid.to_owned(), key.clone());
    }

    /// The recorded uids of `key` that are in `lagging` (the cache still
    /// shows them from before the write); forgets the key's others.
    #[must_use]
    pub fn still_lagging(&self, key: &ClusterKey, lagging: &BTreeSet<String>) -> BTreeSet<String> {
        let mut uids = self.lock();
        uids.retain(|uid, of| of != key || lagging.contains(uid));
        uids.iter()
            .filter(|(_, of)| *of == key)
            .map(|(uid, _)| uid.clone())
            .collect()
    }

    /// Whether `uid` is recorded.
    #[cfg(test)]
    pub fn contains(&self, uid: &str) -> bool {
        self.lock().contains_key(uid)
    }

    /// Whether nothing is recorded.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ClusterKey>> {
        // The map stays consistent whatever panicked while holding it.
        self.uids.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

//! Infras whose release finalizer this controller removed, remembered until
//! its cache shows them gone or changed.
//!
//! Removing the last finalizer of a deleting Infra lets the server delete
//! it, but the cache hears of that a moment later. A reconcile woken
//! meanwhile (a contract's or a claim's event) starts from the cached copy,
//! still finalized and deleting, and kube-runtime's finalizer helper patches
//! the finalizer away again: a 404 (0.04-0.05 writes per node in
//! `bench_scale`'s scale-downs, plan 0016 C4). As the NodeClaim controller
//! remembers the join Secrets it deleted ([`crate::nodeclaim::deleted`]),
//! this records the removal by uid, and a reconcile of a copy that still
//! shows the finalizer on the deleting Infra does nothing.
//!
//! # Guarantees
//! - A deleting object takes no new finalizer, so a copy of a recorded uid
//!   that still lists the finalizer predates its removal: the cache is
//!   behind (the status written just before the removal is such a copy).
//!   Any other copy of the uid (the finalizer gone, another kept the Infra)
//!   is decided afresh and forgets the record; a new Infra of the same name
//!   is a new uid.
//! - The record is cleared past [`MOST_INFRAS`] (Infras deleted whose
//!   reconcile never came back): forgetting costs at most one 404, never a
//!   finalizer left on or removed early.
//! - A restarted controller needs none: its first list does not hold a
//!   deleted Infra.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kube::Resource;

/// Infras recorded at most; past it the record starts over.
pub const MOST_INFRAS: usize = 4096;

/// The uids of the Infras whose finalizer was removed.
#[derive(Debug, Default)]
pub struct Finalized {
    removed: Mutex<HashSet<String>>,
}

impl Finalized {
    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.removed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The finalizer of `infra` was removed.
    pub fn record<K: Resource>(&self, infra: &K) {
        let Some(uid) = infra.meta().uid.as_deref() else {
            return;
        };
        let mut removed = self.lock();
        if removed.len() >= MOST_INFRAS && !removed.contains(uid) {
            removed.clear();
        }
        removed.insert(uid.to_owned());
    }

    /// Whether `cached` is a copy from before this controller removed its
    /// `finalizer` (deleting, the finalizer still listed). Forgets the
    /// Infra once a copy is not.
    pub fn is_done<K: Resource>(&self, cached: &K, finalizer: &str) -> bool {
        let meta = cached.meta();
        let Some(uid) = meta.uid.as_deref() else {
            return false;
        };
        let mut removed = self.lock();
        if !removed.contains(uid) {
            return false;
        }
        let before_removal = meta.deletion_timestamp.is_some()
            && meta
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|f| f == finalizer));
        if !before_removal {
            removed.remove(uid);
        }
        before_removal
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    const F: &str = "infra.socialweb.computer/release";

    /// Any object: only its uid, deletionTimestamp and finalizers count.
    fn copy(uid: &str, deleting: bool, finalizers: &[&str]) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.uid = Some(uid.to_owned());
        if deleting {
            object.metadata.deletion_timestamp = Some(crate::time::to_time(chrono::Utc::now()));
        }
        object.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        object
    }

    #[test]
    fn a_copy_from_before_the_removal_is_not_finalized_again() {
        let finalized = Finalized::default();
        finalized.record(&copy("u1", true, &[F]));
        assert!(
            finalized.is_done(&copy("u1", true, &[F]), F),
            "the cache still shows the finalizer: no second patch (a 404)"
        );
        assert!(
            finalized.is_done(&copy("u1", true, &[F]), F),
            "until the cache moves on"
        );
        assert!(
            !finalized.is_done(&copy("u2", true, &[F]), F),
            "another Infra"
        );
        assert!(
            !finalized.is_done(&copy("u1", true, &["other"]), F),
            "another finalizer keeps it: decided afresh"
        );
        assert!(
            !finalized.is_done(&copy("u1", true, &[F]), F),
            "and forgotten"
        );
    }

    #[test]
    fn past_the_limit_the_record_starts_over() {
        let finalized = Finalized::default();
        for n in 0..MOST_INFRAS {
            finalized.record(&copy(&format!("u{n}"), true, &[F]));
        }
        finalized.record(&copy("last", true, &[F]));
        assert!(finalized.is_done(&copy("last", true, &[F]), F));
        assert!(
            !finalized.is_done(&copy("u0", true, &[F]), F),
            "forgotten: one 404 at most"
        );
    }
}

//! Contracts the cache showed Released or being deleted (the ones about to
//! go), so that their disappearance from the cache is taken as gone without
//! a direct read.
//!
//! The Infra's status lists each contract until a reconcile sees it gone, and
//! a contract the status lists that the cache lacks is read directly first
//! (`read_unseen`: the cache may lag behind a create). In a scale-down every
//! contract went that way: one GET answered 404 per node (`bench_scale`'s
//! scale-down printed `gets computecontracts 1.00`), after the contract's
//! DELETED event had already told the cache.
//!
//! # Guarantees
//! - A watch cache drops an object it held only on its DELETED event or on a
//!   relist that no longer holds it: either way the object is gone at a later
//!   revision. So a contract the cache showed Released or with a
//!   deletionTimestamp (it held that copy) and no longer holds is gone; only
//!   such names skip the read. Released is noted too because this controller
//!   deletes a contract only once it saw it Released, and the contract may be
//!   gone before any reconcile sees its deletionTimestamp.
//! - The record keeps the uid seen; a contract of the same name seen again
//!   neither Released nor deleted (a new object) removes it. A name found
//!   gone ([`Vanished::is_gone`]) stays recorded until a reconcile writes the
//!   status without it or with it created anew ([`Vanished::forget`]): a
//!   status the pace holds back still lists it, and is not read again; a
//!   later lag behind a new create is read directly.
//! - Past [`MOST_NAMES`] the record starts over: forgetting costs one read,
//!   never a wrong answer.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use api::ComputeContractPhase;
use kube::ResourceExt;

use crate::cache::CachedContract;

/// Names recorded at most; past it the record starts over.
pub const MOST_NAMES: usize = 4096;

/// `namespace/name` -> uid of the contracts the cache showed Released or being deleted.
#[derive(Debug, Default)]
pub struct Vanished {
    deleting: Mutex<HashMap<String, String>>,
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

impl Vanished {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.deleting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes the cached `contracts` (of `namespace`): those Released or being
    /// deleted are recorded; any other of a recorded name is a new object.
    pub fn note<'a>(
        &self,
        namespace: &str,
        contracts: impl IntoIterator<Item = &'a CachedContract>,
    ) {
        let mut deleting = self.lock();
        for contract in contracts {
            let key = key(namespace, &contract.name_any());
            let going = contract.is_deleting()
                || contract.status.as_ref().and_then(|s| s.phase)
                    == Some(ComputeContractPhase::Released);
            match (going, contract.uid()) {
                (true, Some(uid)) => {
                    if deleting.len() >= MOST_NAMES && !deleting.contains_key(&key) {
                        deleting.clear();
                    }
                    deleting.insert(key, uid);
                }
                _ => {
                    deleting.remove(&key);
                }
            }
        }
    }

    /// Whether the contract `name`, which the cache no longer holds, was seen
    /// there Released or being deleted (so it is gone). It stays recorded
    /// until [`Vanished::forget`]: a status held back by the pace still
    /// lists it, and the next reconcile must not read it either.
    #[must_use]
    pub fn is_gone(&self, namespace: &str, name: &str) -> bool {
        self.lock().contains_key(&key(namespace, name))
    }

    /// Forgets `names` (of `namespace`): the status that no longer lists
    /// them (or lists them created anew) is being written, and a later miss
    /// (a lag behind a new create) is read directly.
    pub fn forget<'a>(&self, namespace: &str, names: impl IntoIterator<Item = &'a String>) {
        let mut deleting = self.lock();
        for name in names {
            deleting.remove(&key(namespace, name));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::requester::test_fixtures::contract;

    fn cached(name: &str, uid: &str, deleting: bool) -> CachedContract {
        let mut copy = contract();
        copy.metadata.name = Some(name.to_owned());
        copy.metadata.uid = Some(uid.to_owned());
        if deleting {
            copy.metadata.deletion_timestamp = Some(crate::time::to_time(chrono::Utc::now()));
        }
        CachedContract::from(&copy)
    }

    fn released(name: &str, uid: &str) -> CachedContract {
        let mut copy = cached(name, uid, false);
        copy.status = Some(crate::cache::CachedContractStatus {
            phase: Some(ComputeContractPhase::Released),
            ..Default::default()
        });
        copy
    }

    #[test]
    fn a_contract_seen_being_deleted_then_missing_is_gone_without_a_read() {
        let vanished = Vanished::default();
        vanished.note("ns", &[cached("a", "a-1", true), cached("b", "b-1", false)]);
        assert!(vanished.is_gone("ns", "a"), "seen deleting: gone, no GET");
        assert!(
            vanished.is_gone("ns", "a"),
            "a status the pace held back still lists it: still gone, no GET"
        );
        vanished.forget("ns", &["a".to_owned()]);
        assert!(
            !vanished.is_gone("ns", "a"),
            "once the status is written: a later miss (a lag behind its new create) is read"
        );
        assert!(
            !vanished.is_gone("ns", "b"),
            "never seen deleting: the cache may lag its create, read it"
        );
        assert!(!vanished.is_gone("other", "a"), "another namespace");
    }

    #[test]
    fn a_contract_seen_released_then_missing_is_gone_without_a_read() {
        // Deleted on that Released copy, its finalizer removed before any
        // reconcile saw the deletionTimestamp.
        let vanished = Vanished::default();
        vanished.note("ns", &[released("a", "a-1")]);
        assert!(vanished.is_gone("ns", "a"));
    }

    #[test]
    fn a_new_object_of_a_recorded_name_is_not_taken_for_gone() {
        let vanished = Vanished::default();
        vanished.note("ns", &[cached("a", "a-1", true)]);
        vanished.note("ns", &[cached("a", "a-2", false)]);
        assert!(!vanished.is_gone("ns", "a"));
    }
}

//! When this controller first saw each claim that a status hold applies to
//! (a new claim never written, a deleted claim) at the step its way is at,
//! so that the hold ([`super::status::held_until`]) counts from when the
//! controller could act on that step, not from the claim's creation or
//! deletion.
//!
//! A hold keeps a step that is over before a person could look out of the
//! claim's status (plan 0012 S6). Counted from the claim's timestamps, it
//! ran out while the claim waited in the queues at scale (3,000 claims
//! deleted at once are gone 20 s later, p50), and the claim was then written
//! Requesting or Releasing although nothing of it was stuck: 0.78 writes per
//! node in a 3,000-node scale-down (plan 0016 C4). A new claim's hold counts
//! from its first reconcile; a deleted claim's from when this controller
//! first saw its release at the step it is at (the claim deleted, its
//! contract marked for release, Released or being deleted, gone), so a
//! release that makes no step for a hold (a slow or failing market, no
//! Requester, an Infra that does not mark it) is shown Releasing and why,
//! however long it queued before.
//!
//! # Guarantees
//! - A claim's instant is taken at the first reconcile of its Cluster that
//!   sees it at its step, and kept while it stays there; a claim written
//!   since, or gone, is forgotten at the next reconcile of its Cluster, and
//!   a Cluster without such claims keeps none.
//! - A step is only ever seen later than it happened, never earlier: no
//!   hold ends sooner than one counted from the claim's timestamps would.
//! - A restarted controller remembers none: its first reconcile takes its own
//!   time, so a hold after a restart is at most one hold longer, never skipped.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use api::ComputeContractPhase;
use api::names::entry_name;
use chrono::{DateTime, Utc};
use kube::ResourceExt;

use super::compose::ClusterKey;
use crate::cache::{CachedClaim, CachedContract};

/// A claim as first seen: the step of its way ([`step`]), and when.
type Seen = (u8, DateTime<Utc>);

/// How far a claim a hold applies to has come, as this controller sees it:
/// a new claim never written 0; a deleted claim 1 while its contract is not
/// marked for release, 2 once marked, 3 once Released or being deleted, 4
/// once gone. `None`: no hold applies (a live claim written before).
fn step(claim: &CachedClaim, contract: Option<&CachedContract>) -> Option<u8> {
    if claim.metadata.deletion_timestamp.is_none() {
        let never_written = claim.status.as_ref().is_none_or(|s| s.phase.is_none());
        return never_written.then_some(0);
    }
    Some(match contract {
        None => 4,
        Some(c)
            if c.is_deleting()
                || c.status.as_ref().and_then(|s| s.phase)
                    == Some(ComputeContractPhase::Released) =>
        {
            3
        }
        Some(c) if c.spec.release => 2,
        Some(_) => 1,
    })
}

/// When each held claim of each Cluster was first seen, by claim uid.
#[derive(Debug, Default)]
pub struct FirstSeen {
    by_cluster: Mutex<BTreeMap<ClusterKey, BTreeMap<String, Seen>>>,
}

impl FirstSeen {
    /// When this controller first saw each of `claims` (all of `key`'s) that
    /// a hold applies to at the step it is at now ([`step`], from its
    /// contract among `contracts`), by uid: `now` for one seen there for the
    /// first time. Forgets the key's other claims.
    pub fn since(
        &self,
        key: &ClusterKey,
        claims: &[&CachedClaim],
        contracts: &[&CachedContract],
        now: DateTime<Utc>,
    ) -> BTreeMap<String, DateTime<Utc>> {
        let by_entry = super::decide::by_entry(contracts.iter().copied());
        let mut by_cluster = self.lock();
        let before = by_cluster.remove(key).unwrap_or_default();
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        for claim in claims {
            let Some(uid) = claim.uid() else {
                continue;
            };
            let contract = by_entry.get(entry_name(&uid).as_str()).copied();
            let Some(step) = step(claim, contract) else {
                continue;
            };
            let at = match before.get(&uid) {
                Some((was, at)) if *was == step => *at,
                _ => now,
            };
            seen.insert(uid, (step, at));
        }
        let since = seen
            .iter()
            .map(|(uid, (_, at))| (uid.clone(), *at))
            .collect();
        if !seen.is_empty() {
            by_cluster.insert(key.clone(), seen);
        }
        since
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<ClusterKey, BTreeMap<String, Seen>>> {
        // The map stays consistent whatever panicked while holding it.
        self.by_cluster
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::cache::CachedClaimStatus;
    use api::NodeClaimPhase;
    use api::names::CONTRACT_LABEL;
    use chrono::TimeZone;

    use crate::nodeclaim::test_fixtures::{self, cluster_key as key};

    fn t(seconds: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + seconds, 0).unwrap()
    }

    fn claim(uid: &str, written: bool, deleted: bool) -> CachedClaim {
        let mut claim = test_fixtures::claim(uid);
        if written {
            claim.status = Some(CachedClaimStatus {
                phase: Some(NodeClaimPhase::Joined),
                ..CachedClaimStatus::default()
            });
        }
        if deleted {
            claim.metadata.deletion_timestamp = Some(crate::time::to_time(t(0)));
        }
        claim
    }

    fn contract_of(uid: &str, release: bool, released: bool) -> CachedContract {
        let mut contract = crate::requester::test_fixtures::contract();
        contract.labels = [(CONTRACT_LABEL.to_owned(), entry_name(uid))].into();
        contract.spec.release = release;
        if released {
            contract.status = Some(api::ComputeContractStatus {
                phase: Some(ComputeContractPhase::Released),
                ..api::ComputeContractStatus::default()
            });
        }
        CachedContract::from(&contract)
    }

    #[test]
    fn a_held_claim_keeps_the_instant_it_was_first_seen_at_its_step() {
        let seen = FirstSeen::default();
        let new = claim("a", false, false);
        let joined = claim("b", true, false);
        let since = seen.since(&key("c1"), &[&new, &joined], &[], t(30));
        assert_eq!(
            since.get("a"),
            Some(&t(30)),
            "new: from its first reconcile"
        );
        assert!(
            !since.contains_key("b"),
            "written and live: no hold applies"
        );
        let since = seen.since(&key("c1"), &[&new, &joined], &[], t(35));
        assert_eq!(since.get("a"), Some(&t(30)), "kept");
        // Deleted (its deletionTimestamp long before): from the reconcile that saw it so.
        let (gone_a, gone_b) = (claim("a", true, true), claim("b", true, true));
        let (held_a, held_b) = (
            contract_of("a", false, false),
            contract_of("b", false, false),
        );
        let since = seen.since(&key("c1"), &[&gone_a, &gone_b], &[&held_a, &held_b], t(60));
        assert_eq!(since.get("a"), Some(&t(60)));
        assert_eq!(since.get("b"), Some(&t(60)));
        let since = seen.since(&key("c1"), &[&gone_a, &gone_b], &[&held_a, &held_b], t(65));
        assert_eq!(since.get("b"), Some(&t(60)), "no step: kept");
        // Each step of the release counts anew: marked, Released, gone.
        let marked = contract_of("b", true, false);
        let since = seen.since(&key("c1"), &[&gone_b], &[&marked], t(66));
        assert!(!since.contains_key("a"), "gone: forgotten");
        assert_eq!(since.get("b"), Some(&t(66)));
        let released = contract_of("b", true, true);
        let since = seen.since(&key("c1"), &[&gone_b], &[&released], t(67));
        assert_eq!(since.get("b"), Some(&t(67)));
        let since = seen.since(&key("c1"), &[&gone_b], &[&released], t(90));
        assert_eq!(
            since.get("b"),
            Some(&t(67)),
            "a release stuck at a step keeps its instant"
        );
        let since = seen.since(&key("c1"), &[&gone_b], &[], t(91));
        assert_eq!(since.get("b"), Some(&t(91)));
        // Another Cluster's claims are its own; a Cluster with none held keeps nothing.
        let other = claim("z", false, false);
        assert_eq!(
            seen.since(&key("c2"), &[&other], &[], t(70)).get("z"),
            Some(&t(70))
        );
        assert!(seen.since(&key("c1"), &[], &[], t(70)).is_empty());
        assert!(!seen.lock().contains_key(&key("c1")));
        assert_eq!(
            seen.since(&key("c2"), &[&other], &[], t(80)).get("z"),
            Some(&t(70))
        );
    }
}

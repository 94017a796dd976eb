//! Claims this controller wrote Failed, remembered until its cache shows it.
//!
//! Failed is final, and [`super::decide::decide`] reads "Failed" from the
//! claim's cached status. The cache lags the controller's own writes: the
//! Infra and contract events its failure caused can arrive before the claim's
//! own Failed status does, and a reconcile in between would see a claim whose
//! machine just went away and compose its entry again (a second machine for a
//! Failed claim). This is the expectations record Kubernetes' own
//! controllers keep for their writes: after `act` wrote a Failed status it
//! records the claim's uid here, and until the cache shows that status the
//! claim is left alone (no entry, no status write).
//!
//! # Guarantees
//! A uid is forgotten once its claim's cached status says Failed or the
//! claim left the cache (deleted): the record holds only claims whose write
//! the cache has not caught up with. A restarted controller needs none: its
//! first list already holds every status written before (the Failed status is
//! written before the entry is removed, see [`super::act`]).

use std::collections::BTreeSet;

use api::NodeClaimPhase;
use kube::ResourceExt;

use super::awaited::AwaitedUids;
use super::compose::ClusterKey;
use crate::cache::CachedClaim;

/// The uids of claims written Failed whose cached status may not say so yet.
#[derive(Debug, Default)]
pub struct FailedClaims {
    uids: AwaitedUids,
}

impl FailedClaims {
    /// Records that the claim `uid` of Cluster `key` was written Failed.
    pub fn record(&self, uid: &str, key: &ClusterKey) {
        self.uids.record(uid, key);
    }

    /// The uids of `key`'s claims written Failed that the cache (`cached`: every
    /// claim of the key) does not show Failed yet; forgets the others of the key.
    #[must_use]
    pub fn unseen(&self, key: &ClusterKey, cached: &[&CachedClaim]) -> BTreeSet<String> {
        let lagging: BTreeSet<String> = cached
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(NodeClaimPhase::Failed))
            .filter_map(|c| c.uid())
            .collect();
        self.uids.still_lagging(key, &lagging)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::cache::CachedClaimStatus;
    use crate::nodeclaim::test_fixtures::cluster_key as key;

    fn claim(uid: &str, phase: Option<NodeClaimPhase>) -> CachedClaim {
        let mut claim = super::super::test_fixtures::claim(uid);
        claim.status = Some(CachedClaimStatus {
            phase,
            ..CachedClaimStatus::default()
        });
        claim
    }

    #[test]
    fn a_failed_write_is_remembered_until_the_cache_shows_it() {
        let failed = FailedClaims::default();
        failed.record("a", &key("c1"));
        failed.record("z", &key("c2"));
        let stale = claim("a", Some(NodeClaimPhase::Deployed));
        assert_eq!(
            failed.unseen(&key("c1"), &[&stale]),
            ["a".to_owned()].into()
        );
        let caught_up = claim("a", Some(NodeClaimPhase::Failed));
        assert!(failed.unseen(&key("c1"), &[&caught_up]).is_empty());
        assert!(
            failed.unseen(&key("c1"), &[&stale]).is_empty(),
            "forgotten once seen"
        );
        // Another Cluster's record is kept until that Cluster's reconcile.
        assert!(failed.uids.contains("z"));
        assert_eq!(failed.unseen(&key("c2"), &[]), BTreeSet::new());
        assert!(
            failed.uids.is_empty(),
            "a claim gone from the cache is forgotten"
        );
    }
}

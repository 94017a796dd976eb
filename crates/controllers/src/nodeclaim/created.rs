//! Join Secrets this controller created, remembered until its cache shows them.
//!
//! A new join Secret is created, never applied (a stale cache must never
//! replace a token), when the cache shows none. The cache hears of the create
//! a moment later, and a reconcile of the Cluster in between (the events of
//! the Infra applied in the same pass wake one) would decide the create again:
//! an AlreadyExists (409), a failed reconcile and a retry (0.07 writes per node
//! in `bench_scale`). As [`super::deleted`] does for deletes, `act` records
//! each Secret it created, and until the cache shows it no create of that
//! name is sent again.
//!
//! # Guarantees
//! The record names Secrets, not uids: a create conflicts by name. A name is
//! forgotten as soon as a reconcile of its Cluster finds a Secret of that name
//! in the cache (then decided from what the cache shows, as without the
//! record), or [`SHOWN_WITHIN`] after its create, so a Secret deleted before
//! the cache ever showed it is created again then, not never. A reconcile
//! that holds a create back looks again soon (a missed watch event). A
//! restarted controller needs none: its first list holds every Secret created
//! before.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};

use super::compose::ClusterKey;
use super::secrets::JoinSecret;
use crate::cache::CachedJoinSecret;

/// How long a create is held back for a cache that does not show it yet; a
/// watch event takes milliseconds, so past this the Secret is taken as gone.
pub const SHOWN_WITHIN: chrono::Duration = chrono::Duration::seconds(10);

/// A create the cache may not show yet.
#[derive(Debug)]
struct Created {
    cluster: ClusterKey,
    at: DateTime<Utc>,
}

/// The names of join Secrets created whose creation the cache may not show yet.
#[derive(Debug, Default)]
pub struct CreatedSecrets {
    names: Mutex<BTreeMap<String, Created>>,
}

impl CreatedSecrets {
    /// Records that the Secret `name` of Cluster `key` was created at `at`.
    pub fn record(&self, name: &str, key: &ClusterKey, at: DateTime<Utc>) {
        self.lock().insert(
            name.to_owned(),
            Created {
                cluster: key.clone(),
                at,
            },
        );
    }

    /// Takes out of `writes` the creates (no token kept) of `key`'s Secrets
    /// created already that the cache (`cached`: every join Secret of the
    /// key's Infra) does not show yet; forgets the key's others. Whether a
    /// create was held back.
    pub fn hold_back(
        &self,
        key: &ClusterKey,
        cached: &[&CachedJoinSecret],
        now: DateTime<Utc>,
        writes: &mut Vec<JoinSecret>,
    ) -> bool {
        let mut names = self.lock();
        names.retain(|name, created| {
            created.cluster != *key
                || (now < created.at + SHOWN_WITHIN && !cached.iter().any(|s| s.name() == name))
        });
        let before = writes.len();
        writes.retain(|w| {
            w.token.is_some()
                || names
                    .get(&w.name)
                    .is_none_or(|created| created.cluster != *key)
        });
        writes.len() < before
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Created>> {
        // The map stays consistent whatever panicked while holding it.
        self.names.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::nodeclaim::test_fixtures::cluster_key as key;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-03T22:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn cached(name: &str) -> CachedJoinSecret {
        let mut secret = k8s_openapi::api::core::v1::Secret::default();
        secret.metadata.name = Some(name.to_owned());
        secret.metadata.uid = Some(format!("uid-{name}"));
        secret.into()
    }

    /// A write of join Secret `name`: a create, or an apply keeping `token`.
    fn write(name: &str, token: Option<&str>) -> JoinSecret {
        JoinSecret {
            name: name.to_owned(),
            namespace: "socialweb-system".to_owned(),
            infra: key("c1").infra_name(),
            cluster: key("c1"),
            entry: name.trim_start_matches("join-").to_owned(),
            api_server: "https://c1.example:6443".to_owned(),
            ca_data: None,
            node_name: "n".to_owned(),
            token: token.map(str::to_owned),
        }
    }

    fn names(writes: &[JoinSecret]) -> Vec<&str> {
        writes.iter().map(|w| w.name.as_str()).collect()
    }

    #[test]
    fn a_create_is_not_sent_again_until_the_cache_shows_the_secret() {
        let created = CreatedSecrets::default();
        created.record("join-a", &key("c1"), t0());
        // The next pass decides from a cache without it: both Secrets look new.
        let mut writes = vec![write("join-a", None), write("join-b", None)];
        let soon = t0() + chrono::Duration::milliseconds(50);
        assert!(created.hold_back(&key("c1"), &[], soon, &mut writes));
        assert_eq!(
            names(&writes),
            ["join-b"],
            "a second create of join-a would be an AlreadyExists (409)"
        );

        // Once the cache shows it, the record is gone and the cache decides.
        let shown = cached("join-a");
        let mut writes = vec![write("join-a", Some("kept"))];
        assert!(!created.hold_back(&key("c1"), &[&shown], soon, &mut writes));
        assert_eq!(names(&writes), ["join-a"], "an apply is never held back");
        let mut writes = vec![write("join-a", None)];
        assert!(!created.hold_back(&key("c1"), &[], soon, &mut writes));
        assert_eq!(
            names(&writes),
            ["join-a"],
            "forgotten: a Secret gone from the cache later is created again"
        );
    }

    #[test]
    fn a_secret_the_cache_never_shows_is_created_again_after_a_while() {
        let created = CreatedSecrets::default();
        created.record("join-a", &key("c1"), t0());
        let mut writes = vec![write("join-a", None)];
        let late = t0() + SHOWN_WITHIN;
        assert!(!created.hold_back(&key("c1"), &[], late, &mut writes));
        assert_eq!(names(&writes), ["join-a"]);
    }

    #[test]
    fn another_clusters_record_is_kept_until_its_own_reconcile() {
        let created = CreatedSecrets::default();
        created.record("join-z", &key("c2"), t0());
        let shown = cached("join-z");
        let mut writes = Vec::new();
        assert!(!created.hold_back(&key("c1"), &[&shown], t0(), &mut writes));
        let mut writes = vec![write("join-z", None)];
        assert!(
            created.hold_back(&key("c2"), &[], t0(), &mut writes),
            "c1's reconcile did not forget c2's create"
        );
        assert!(writes.is_empty());
    }
}

//! The second NodeClaim controller, keyed by claim, for claims whose Cluster
//! does not exist. A kube-runtime controller only reconciles objects in its
//! store, so without it nobody would report ClusterNotFound on such a claim
//! or release what it still holds (its Cluster removed without its
//! finalizer). It runs the Cluster controller's reconcile
//! ([`super::reconcile_key`]) for the missing Cluster's key.
//!
//! # Why it keeps a store of its own
//! The shared cache keeps the claims grouped by Cluster (`cache::Claims`),
//! not in a kube-runtime store, and a `Controller` reads each reconcile's
//! object from one. So this controller keeps one of its own, [`Orphans`],
//! holding only the claims whose Cluster is missing: normally none, where a
//! store of every claim cost about 450 bytes a claim beside the claim
//! (plan 0017 P4). Each event that concerns a Cluster key brings that key's
//! held claims up to date before it wakes them ([`Orphans::observe`]).
//!
//! # Why its events are filtered before the queue
//! Every event of a Cluster's Infra, contracts and join Secrets maps to all
//! of that Cluster's claims. Unfiltered, a scale-up of Clusters of ten claims
//! scheduled this controller some seventy times per node (ten claims for
//! each step of each contract), and nearly every one of those reconciles
//! found the Cluster and returned: in a whole-run profile of
//! `bench_scale --throughput --external`, kube-runtime's scheduling and
//! running of reconciles was 13 % of the manager's CPU (plan 0016 C3). An
//! event wakes a claim here only while its Cluster is missing from the
//! cache ([`orphaned`]).
//!
//! # Guarantees
//! No claim whose Cluster is missing goes unheard: a Cluster leaves the
//! cache before its delete event fans out (`cache::Shared::subscribe`), and
//! that event wakes every claim of its key. Until every cache holds its
//! initial list a Cluster may look missing, so nothing is held then; once
//! they do, every Cluster key the claims name is looked at once.

use std::collections::{BTreeSet, HashMap};
use std::future::{Future, ready};
use std::sync::{Arc, Mutex, PoisonError};

use api::Cluster;
use futures::StreamExt;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;

use super::compose::ClusterKey;
use super::{
    METRICS_LABEL, Runtime, cluster_ref, infra_cluster_key, labelled_cluster_key, reconcile_key,
};
use crate::Result;
use crate::cache::{
    CacheReadiness, CachedClaim, CachedContract, CachedInfra, Claims, SharedCaches,
    WatchedJoinSecret,
};
use crate::reconciler;

/// Whether claims of `key` are this controller's: its Cluster is not in the
/// cache, or `key` names no Cluster at all (an empty name or one with a `/`,
/// which no Cluster can have).
pub(super) fn orphaned(clusters: &Store<Cluster>, key: &ClusterKey) -> bool {
    key.name.is_empty() || key.name.contains('/') || clusters.get(&cluster_ref(key)).is_none()
}

/// The claims whose Cluster is missing, in the kube-runtime store this
/// controller reads its reconciles' objects from. Clones share it.
#[derive(Clone)]
struct Orphans {
    held: Arc<Mutex<HeldClaims>>,
    store: Store<CachedClaim>,
    claims: Claims,
    clusters: Store<Cluster>,
    ready: CacheReadiness,
}

/// The store's writer, and the names it holds by Cluster key.
struct HeldClaims {
    writer: Writer<CachedClaim>,
    by_key: HashMap<ClusterKey, BTreeSet<String>>,
}

impl Orphans {
    fn new(claims: Claims, clusters: Store<Cluster>, ready: CacheReadiness) -> Self {
        let mut writer = Writer::default();
        // Ready from the start (the controller's runner waits for it): what
        // it holds is decided here, from caches whose own readiness each
        // observation checks.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        Self {
            store: writer.as_reader(),
            held: Arc::new(Mutex::new(HeldClaims {
                writer,
                by_key: HashMap::new(),
            })),
            claims,
            clusters,
            ready,
        }
    }

    /// Brings the held claims of `key` up to date (all of them while its
    /// Cluster is missing, none otherwise) and returns those to wake.
    fn observe(&self, key: &ClusterKey) -> Vec<ObjectRef<CachedClaim>> {
        // Before every initial list a Cluster may look missing: hold nothing
        // yet (`sweep` looks at every key once they are in).
        if !self.ready.is_ready() {
            return Vec::new();
        }
        // Read under the lock: an older reading cannot replace a newer one.
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let orphans = if orphaned(&self.clusters, key) {
            self.claims.of_cluster(&key.namespace, &key.name)
        } else {
            Vec::new()
        };
        held.hold(key, &orphans, &self.store);
        orphans
            .iter()
            .map(|claim| ObjectRef::from_obj(claim.as_ref()))
            .collect()
    }

    /// Every Cluster key the claims name, observed once every cache holds
    /// its initial list: the claims whose Cluster was missing all along.
    fn sweep(&self) -> impl futures::Stream<Item = ObjectRef<CachedClaim>> + Send + 'static {
        let orphans = self.clone();
        futures::stream::once(async move {
            orphans.ready.wait().await;
            orphans
                .claims
                .cluster_keys()
                .into_iter()
                .flat_map(|(namespace, name)| orphans.observe(&ClusterKey { namespace, name }))
                .collect::<Vec<_>>()
        })
        .flat_map(futures::stream::iter)
    }
}

impl HeldClaims {
    /// Holds exactly `claims` for `key`, each at its version in the cache.
    fn hold(&mut self, key: &ClusterKey, claims: &[Arc<CachedClaim>], store: &Store<CachedClaim>) {
        let before = self.by_key.remove(key).unwrap_or_default();
        if before.is_empty() && claims.is_empty() {
            return;
        }
        let mut now = BTreeSet::new();
        for claim in claims {
            let reference = ObjectRef::from_obj(claim.as_ref());
            let current = store.get(&reference).is_some_and(|held| {
                held.metadata.resource_version == claim.metadata.resource_version
            });
            if !current {
                self.writer
                    .apply_watcher_event(&Event::Apply(claim.as_ref().clone()));
            }
            now.insert(reference.name);
        }
        for gone in before.difference(&now) {
            // Only as a claim of this key (a claim's Cluster name is immutable,
            // but a claim held for another key is that key's to let go).
            if let Some(claim) = store
                .get(&ObjectRef::new(gone).within(&key.namespace))
                .filter(|claim| claim.spec.cluster_name == key.name)
            {
                self.writer
                    .apply_watcher_event(&Event::Delete(claim.as_ref().clone()));
            }
        }
        if !now.is_empty() {
            self.by_key.insert(key.clone(), now);
        }
    }
}

/// The controller of claims whose Cluster is missing; subscribes to the
/// caches when called, like [`super::controller`], which runs it.
pub(super) fn controller(
    caches: &SharedCaches,
    runtime: Arc<Runtime>,
) -> impl Future<Output = ()> + Send + 'static {
    let stores = &runtime.stores;
    let concurrency = runtime.ctx.concurrency;
    let ns = runtime.ctx.contract_namespace.clone();
    let orphans = Orphans::new(
        stores.claims.clone(),
        stores.clusters.clone(),
        stores.ready.clone(),
    );
    // A claim's own event wakes only itself, once it is held.
    let claims = caches.nodeclaims.subscribe().filter({
        let orphans = orphans.clone();
        move |claim| {
            let woken = orphans.observe(&ClusterKey::of_claim(claim));
            ready(woken.contains(&ObjectRef::from_obj(claim.as_ref())))
        }
    });
    let held = orphans.store.clone();
    let sweep = orphans.sweep();
    let wake = move |key: Option<ClusterKey>| -> Vec<ObjectRef<CachedClaim>> {
        key.map(|key| orphans.observe(&key)).unwrap_or_default()
    };
    let controller = Controller::for_shared_stream(claims, held)
        .reconcile_on(sweep)
        .watches_shared_stream(caches.clusters.subscribe(), {
            let wake = wake.clone();
            move |cluster: Arc<Cluster>| wake(Some(ClusterKey::of_cluster(&cluster)))
        })
        .watches_shared_stream(caches.infras.subscribe(), {
            let wake = wake.clone();
            move |infra: Arc<CachedInfra>| wake(infra_cluster_key(&infra))
        })
        .watches_shared_stream(caches.contracts.subscribe(), {
            let wake = wake.clone();
            let infras = stores.infras.clone();
            let ns = ns.clone();
            move |contract: Arc<CachedContract>| {
                wake(labelled_cluster_key(&infras, &ns, contract.as_ref()))
            }
        })
        .watches_shared_stream(caches.join_secrets.subscribe(), {
            let infras = stores.infras.clone();
            move |secret: Arc<WatchedJoinSecret>| {
                wake(labelled_cluster_key(&infras, &ns, secret.as_ref()))
            }
        });
    reconciler::run(
        controller,
        METRICS_LABEL,
        reconciler::queue(concurrency),
        reconcile,
        runtime,
        None,
    )
}

/// Claims whose Cluster exists are the Cluster controller's; the rest are reconciled here.
async fn reconcile(claim: Arc<CachedClaim>, runtime: Arc<Runtime>) -> Result<Action> {
    // Before the Clusters' cache is listed every claim would look orphaned,
    // lose its entry, and have its running machine released.
    runtime.stores.wait_until_ready().await;
    let key = ClusterKey::of_claim(&claim);
    if !orphaned(&runtime.stores.clusters, &key) {
        return Ok(Action::await_change());
    }
    reconcile_key(&runtime, &key).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn key(namespace: &str, name: &str) -> ClusterKey {
        ClusterKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    fn cluster(namespace: &str, name: &str) -> Cluster {
        let mut cluster = Cluster::new(
            name,
            api::ClusterSpec {
                account: "acct".to_owned(),
                running: true,
            },
        );
        cluster.metadata.namespace = Some(namespace.to_owned());
        cluster
    }

    #[test]
    fn a_claim_is_orphaned_only_while_its_cluster_is_missing_from_the_cache() {
        let mut writer = Writer::<Cluster>::default();
        let clusters = writer.as_reader();
        writer.apply_watcher_event(&Event::Apply(cluster("tenant-a", "c1")));
        assert!(!orphaned(&clusters, &key("tenant-a", "c1")));
        assert!(
            orphaned(&clusters, &key("tenant-b", "c1")),
            "a Cluster of the same name in another namespace is not the claim's"
        );
        assert!(orphaned(&clusters, &key("tenant-a", "c2")));
        assert!(orphaned(&clusters, &key("tenant-a", "")), "no name");
        assert!(orphaned(&clusters, &key("tenant-a", "c1/x")), "not a name");
        writer.apply_watcher_event(&Event::Delete(cluster("tenant-a", "c1")));
        assert!(
            orphaned(&clusters, &key("tenant-a", "c1")),
            "once its Cluster left the cache, the claim is this controller's"
        );
    }

    /// Claim `name` of Cluster `cluster` in `tenant-a`, at version `version`.
    fn claim(name: &str, cluster: &str, version: &str) -> CachedClaim {
        let mut claim = crate::nodeclaim::test_fixtures::claim(name);
        claim.metadata.namespace = Some("tenant-a".to_owned());
        claim.metadata.resource_version = Some(version.to_owned());
        claim.spec.cluster_name = cluster.to_owned();
        claim
    }

    /// Orphans over a claims keeper and a Clusters store, with the caches'
    /// readiness in the caller's hand.
    struct World {
        claims: Claims,
        clusters: Writer<Cluster>,
        ready: tokio::sync::watch::Sender<bool>,
        orphans: Orphans,
    }

    fn world() -> World {
        use crate::cache::keep::Keep as _;
        let claims = Claims::default();
        let clusters = Writer::<Cluster>::default();
        let ready = tokio::sync::watch::Sender::new(false);
        let orphans = Orphans::new(
            claims.reader(),
            clusters.as_reader(),
            CacheReadiness::of(vec![ready.subscribe()]),
        );
        World {
            claims,
            clusters,
            ready,
            orphans,
        }
    }

    fn held(orphans: &Orphans) -> Vec<String> {
        let mut names: Vec<String> = orphans
            .store
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}@{}",
                    c.metadata.name.clone().unwrap(),
                    c.metadata.resource_version.clone().unwrap()
                )
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_claims_of_a_missing_cluster_are_held_and_woken_and_let_go_when_it_appears() {
        use crate::cache::keep::Keep as _;
        let mut w = world();
        w.ready.send_replace(true);
        w.clusters
            .apply_watcher_event(&Event::Apply(cluster("tenant-a", "c1")));
        for name in ["a", "b"] {
            w.claims.apply(&Event::Apply(claim(name, "c2", "1")));
        }
        w.claims.apply(&Event::Apply(claim("x", "c1", "1")));

        assert!(
            w.orphans.observe(&key("tenant-a", "c1")).is_empty(),
            "c1 exists"
        );
        let woken = w.orphans.observe(&key("tenant-a", "c2"));
        assert_eq!(
            woken,
            [
                ObjectRef::new("a").within("tenant-a"),
                ObjectRef::new("b").within("tenant-a")
            ]
        );
        assert_eq!(
            held(&w.orphans),
            ["a@1", "b@1"],
            "held where the controller reads them"
        );

        // A new version is held; a deleted claim is let go.
        w.claims.apply(&Event::Apply(claim("a", "c2", "2")));
        w.claims.apply(&Event::Delete(claim("b", "c2", "1")));
        w.orphans.observe(&key("tenant-a", "c2"));
        assert_eq!(held(&w.orphans), ["a@2"]);

        // Its Cluster appears: nothing of it is held or woken any more.
        w.clusters
            .apply_watcher_event(&Event::Apply(cluster("tenant-a", "c2")));
        assert!(w.orphans.observe(&key("tenant-a", "c2")).is_empty());
        assert!(held(&w.orphans).is_empty());

        // And when a Cluster goes, its claims are this controller's.
        w.clusters
            .apply_watcher_event(&Event::Delete(cluster("tenant-a", "c1")));
        assert_eq!(w.orphans.observe(&key("tenant-a", "c1")).len(), 1);
        assert_eq!(held(&w.orphans), ["x@1"]);
    }

    #[tokio::test]
    async fn nothing_is_held_before_the_initial_lists_and_every_orphan_is_woken_after() {
        use crate::cache::keep::Keep as _;
        let mut w = world();
        w.claims.apply(&Event::Apply(claim("a", "gone", "1")));
        w.claims.apply(&Event::Apply(claim("b", "c1", "1")));
        assert!(
            w.orphans.observe(&key("tenant-a", "gone")).is_empty(),
            "before the Clusters are listed every Cluster looks missing"
        );
        assert!(held(&w.orphans).is_empty());

        let sweep = w.orphans.sweep();
        w.clusters
            .apply_watcher_event(&Event::Apply(cluster("tenant-a", "c1")));
        w.ready.send_replace(true);
        let woken: Vec<ObjectRef<CachedClaim>> = sweep.collect().await;
        assert_eq!(woken, [ObjectRef::new("a").within("tenant-a")]);
        assert_eq!(held(&w.orphans), ["a@1"]);
    }
}

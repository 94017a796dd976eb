//! The second NodeClaim controller, keyed by claim, for claims whose Cluster
//! does not exist. A kube-runtime controller only reconciles objects in its
//! store, so without it nobody would report ClusterNotFound on such a claim
//! or release what it still holds (its Cluster removed without its
//! finalizer). It runs the Cluster controller's reconcile
//! ([`super::reconcile_key`]) for the missing Cluster's key.
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
//! that event wakes every claim of its key; until the caches hold their
//! initial lists a Cluster may look missing, and then the event passes (the
//! reconcile waits for the caches and looks again).

use std::future::{Future, ready};
use std::sync::Arc;

use api::{Cluster, Infra, NodeClaim};
use futures::StreamExt;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};

use super::compose::ClusterKey;
use super::{
    METRICS_LABEL, Runtime, cluster_ref, infra_cluster_key, labelled_cluster_key, reconcile_key,
};
use crate::Result;
use crate::cache::{CachedContract, Indexes, SharedCaches, WatchedJoinSecret};
use crate::reconciler;

/// Whether claims of `key` are this controller's: its Cluster is not in the
/// cache, or `key` names no Cluster at all (an empty name or one with a `/`,
/// which no Cluster can have).
pub(super) fn orphaned(clusters: &Store<Cluster>, key: &ClusterKey) -> bool {
    key.name.is_empty() || key.name.contains('/') || clusters.get(&cluster_ref(key)).is_none()
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
    let claims_of = |indexes: Indexes, clusters: Store<Cluster>| {
        move |key: Option<ClusterKey>| -> Vec<ObjectRef<NodeClaim>> {
            key.filter(|key| orphaned(&clusters, key))
                .map(|key| indexes.claims_by_cluster.refs(&(key.namespace, key.name)))
                .unwrap_or_default()
        }
    };
    let claims = caches.nodeclaims.subscribe().filter({
        let clusters = stores.clusters.clone();
        move |claim| ready(orphaned(&clusters, &ClusterKey::of_claim(claim)))
    });
    let orphans = Controller::for_shared_stream(claims, stores.claims.clone())
        .watches_shared_stream(caches.clusters.subscribe(), {
            let claims_of = claims_of(stores.indexes.clone(), stores.clusters.clone());
            move |cluster: Arc<Cluster>| claims_of(Some(ClusterKey::of_cluster(&cluster)))
        })
        .watches_shared_stream(caches.infras.subscribe(), {
            let claims_of = claims_of(stores.indexes.clone(), stores.clusters.clone());
            move |infra: Arc<Infra>| claims_of(infra_cluster_key(&infra))
        })
        .watches_shared_stream(caches.contracts.subscribe(), {
            let claims_of = claims_of(stores.indexes.clone(), stores.clusters.clone());
            let infras = stores.infras.clone();
            let ns = ns.clone();
            move |contract: Arc<CachedContract>| {
                claims_of(labelled_cluster_key(&infras, &ns, contract.as_ref()))
            }
        })
        .watches_shared_stream(caches.join_secrets.subscribe(), {
            let claims_of = claims_of(stores.indexes.clone(), stores.clusters.clone());
            let infras = stores.infras.clone();
            move |secret: Arc<WatchedJoinSecret>| {
                claims_of(labelled_cluster_key(&infras, &ns, secret.as_ref()))
            }
        });
    reconciler::run(orphans, METRICS_LABEL, concurrency, reconcile, runtime)
}

/// Claims whose Cluster exists are the Cluster controller's; the rest are reconciled here.
async fn reconcile(claim: Arc<NodeClaim>, runtime: Arc<Runtime>) -> Result<Action> {
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
}

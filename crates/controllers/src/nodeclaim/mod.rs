//! The NodeClaim reconciler: composes all NodeClaims of a Cluster into that
//! Cluster's one Infra, and keeps what only a tenant cluster has (the join
//! Secrets with the grant token, adoption, the join and loss graces).
//!
//! Watches (shared cache): Clusters and NodeClaims (all namespaces); Infras,
//! ComputeContracts, join Secrets and Requesters (contract namespace). Writes: the Infra
//! (server-side apply, field manager `socialweb/nodeclaim`), join Secrets,
//! NodeClaim status and finalizers, the Cluster's finalizer and
//! `status.nodes`. It never writes a ComputeContract.
//!
//! # Expected flow
//! One reconcile per Cluster key (namespace/name): every event of a claim
//! (by `spec.clusterName` in its namespace), an Infra (by its cluster labels
//! or `spec.clusterRef`), a contract or join Secret (by its Infra name label ->
//! Infra -> Cluster) maps to its Cluster; a Requester event maps to every
//! Cluster (claims compose only while a live Requester runs the namespace,
//! see [`root`]). The key's objects are read from the
//! cache, [`decide::decide`] turns them into a plan and [`act::act`] writes it.
//!
//! A kube-runtime controller only reconciles objects in its store, so claims
//! whose Cluster does not exist get a second, small controller keyed by
//! NodeClaim that runs the same reconcile for the missing Cluster's key (it
//! reports ClusterNotFound, and releases whatever such claims still hold):
//! [`orphans`].
//!
//! # Guarantees
//! Converged inputs write nothing. Time comes from the injected clock; a
//! running grace requeues at `deadline - now`, nothing polls.

pub mod act;
pub mod adopt;
pub mod awaited;
pub mod compose;
pub mod conditions;
pub mod created;
pub mod decide;
pub mod deleted;
pub mod events;
pub mod failed;
pub mod first_seen;
mod orphans;
pub mod root;
pub mod secrets;
mod status;
pub mod status_write;
#[cfg(test)]
mod test_fixtures;

pub use status::{RELEASING_SHOWN_AFTER, REQUESTING_SHOWN_AFTER};

use std::sync::Arc;
use std::time::Duration;

use api::names::INFRA_NAME_LABEL;
use api::{Cluster, Requester};
use kube::ResourceExt;
use kube::runtime::Controller;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::Result;
use crate::cache::{
    CacheReadiness, CachedClaim, CachedContract, CachedInfra, CachedJoinSecret, Claims, Indexes,
    JoinSecrets, Labelled, SharedCaches, WatchedJoinSecret,
};
use crate::reconciler::{self, Identity, Shell};
use compose::ClusterKey;

/// The name the controller reports Events under.
pub const REPORTER: &str = "socialweb-nodeclaim";

/// What this reconciler needs from the manager.
pub type Context = crate::reconciler::ReconcilerContext;

/// The names the NodeClaim reconciler reports and writes under.
pub const IDENTITY: Identity = Identity {
    reporter: REPORTER,
    manager: api::names::NODECLAIM_MANAGER,
};

/// How soon a reconcile whose cache has not shown its own last write yet
/// (or a join Secret it created) looks again: that write's event wakes it
/// anyway, this only covers a watch that broke meanwhile.
const OWN_WRITE_UNSEEN_RECHECK: Duration = Duration::from_secs(1);

/// How soon a reconcile that waits for an object to disappear (a contract,
/// a join Secret, the Infra, a claim's or the Cluster's finalizer) looks
/// again if no event woke it first. The shared caches tell of every
/// deletion, a re-list's too (`controllers::cache`), and each wakes the
/// Cluster; the one deletion that maps to no Cluster is a contract's whose
/// Infra left the cache before it (no live Requester). So this is a safety
/// net, not a poll: at 1 s every Cluster of a 3,000-node scale-down was
/// reconciled once a second while its release queued (0.39 of its 2.34
/// reconciles per node; plan 0016 C4).
const REMOVAL_SAFETY_NET: Duration = Duration::from_secs(10);

/// The controller label of this reconciler's metrics.
const METRICS_LABEL: &str = "nodeclaim";

/// The caches one reconcile reads.
#[derive(Clone)]
struct Stores {
    clusters: Store<Cluster>,
    claims: Claims,
    infras: Store<CachedInfra>,
    contracts: Store<CachedContract>,
    secrets: JoinSecrets,
    requesters: Store<Requester>,
    indexes: Indexes,
    ready: CacheReadiness,
}

impl Stores {
    /// Resolves once every store holds its initial list (at once afterwards).
    async fn wait_until_ready(&self) {
        self.ready.wait().await;
    }
}

struct Runtime {
    ctx: Arc<Context>,
    stores: Stores,
    /// Claims written Failed, join Secrets deleted or created, that the
    /// cache may not show so yet.
    awaited: awaited::Awaited,
    /// The claim and Cluster versions this controller's own writes replaced.
    own_writes: crate::own_writes::OwnWrites,
    /// When each Cluster's `status.nodes` was last written: a count waits.
    pace: crate::status_pace::StatusPace,
    /// When each new or deleted claim was first seen at its step: its status hold counts from then.
    first_seen: first_seen::FirstSeen,
}

impl Shell for Runtime {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// The NodeClaim controller over the shared caches.
///
/// Subscribes to the caches when called (so call it before
/// [`SharedCaches::run`]); the returned future runs both controllers (by
/// Cluster, and by claim for claims whose Cluster is missing) with
/// `ctx.concurrency` each, and ends on SIGTERM/Ctrl+C or when the caches'
/// streams end.
pub fn controller(
    ctx: Arc<Context>,
    caches: &SharedCaches,
) -> impl Future<Output = ()> + Send + 'static {
    let stores = Stores {
        clusters: caches.clusters.store(),
        claims: caches.nodeclaims.kept(),
        infras: caches.infras.store(),
        contracts: caches.contracts.store(),
        secrets: caches.join_secrets.kept(),
        requesters: caches.requesters.store(),
        indexes: caches.indexes.clone(),
        ready: caches.readiness(),
    };
    let concurrency = ctx.concurrency;
    let runtime = Arc::new(Runtime {
        ctx: ctx.clone(),
        stores: stores.clone(),
        awaited: awaited::Awaited::default(),
        own_writes: crate::own_writes::OwnWrites::default(),
        pace: crate::status_pace::StatusPace::default(),
        first_seen: first_seen::FirstSeen::default(),
    });

    let by_cluster =
        Controller::for_shared_stream(caches.clusters.subscribe(), stores.clusters.clone())
            .watches_shared_stream(caches.nodeclaims.subscribe(), |claim: Arc<CachedClaim>| {
                Some(cluster_ref(&ClusterKey::of_claim(&claim)))
            })
            .watches_shared_stream(caches.infras.subscribe(), |infra: Arc<CachedInfra>| {
                infra_cluster_key(&infra).map(|k| cluster_ref(&k))
            })
            .watches_shared_stream(caches.contracts.subscribe(), {
                let infras = stores.infras.clone();
                let ns = ctx.contract_namespace.clone();
                move |contract: Arc<CachedContract>| {
                    labelled_cluster_key(&infras, &ns, contract.as_ref()).map(|k| cluster_ref(&k))
                }
            })
            .watches_shared_stream(caches.join_secrets.subscribe(), {
                let infras = stores.infras.clone();
                let ns = ctx.contract_namespace.clone();
                move |secret: Arc<WatchedJoinSecret>| {
                    labelled_cluster_key(&infras, &ns, secret.as_ref()).map(|k| cluster_ref(&k))
                }
            })
            // Claims compose only while a live Requester runs the contract
            // namespace, so a Requester change concerns every Cluster.
            .watches_shared_stream(caches.requesters.subscribe_spec_changes(), {
                let clusters = stores.clusters.clone();
                move |_: Arc<Requester>| {
                    clusters
                        .state()
                        .iter()
                        .map(|c| ObjectRef::from_obj(c.as_ref()))
                        .collect::<Vec<_>>()
                }
            });
    let by_cluster = reconciler::run(
        by_cluster,
        METRICS_LABEL,
        reconciler::fan_in_queue(concurrency),
        reconcile_cluster,
        runtime.clone(),
        None,
    );

    // Claims whose Cluster does not exist: keyed by claim, same reconcile.
    let orphans = orphans::controller(caches, runtime);

    async move {
        futures::join!(by_cluster, orphans);
    }
}

/// `objects` in the order of their names, as a store's scan never promised
/// but a decision is easier to read in.
fn by_name<K: ResourceExt>(mut objects: Vec<Arc<K>>) -> Vec<Arc<K>> {
    objects.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    objects
}

fn cluster_ref(key: &ClusterKey) -> ObjectRef<Cluster> {
    ObjectRef::new(&key.name).within(&key.namespace)
}

/// The Cluster an Infra serves: its cluster labels, else its `spec.clusterRef`.
fn infra_cluster_key(infra: &CachedInfra) -> Option<ClusterKey> {
    labels_cluster_key(infra).or_else(|| {
        infra.cluster_ref().map(|r| ClusterKey {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        })
    })
}

/// The Cluster named by an object's cluster labels (an Infra, a join Secret).
fn labels_cluster_key<K: Labelled>(object: &K) -> Option<ClusterKey> {
    let name = object.label(api::names::CLUSTER_LABEL)?;
    let namespace = object.label(api::names::CLUSTER_NAMESPACE_LABEL)?;
    Some(ClusterKey {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// The Cluster of an object labelled with an Infra name (a contract or join
/// Secret): its own cluster labels, else through its Infra in the cache.
fn labelled_cluster_key<K: Labelled>(
    infras: &Store<CachedInfra>,
    contract_namespace: &str,
    object: &K,
) -> Option<ClusterKey> {
    if let Some(key) = labels_cluster_key(object) {
        return Some(key);
    }
    let infra_name = object.label(INFRA_NAME_LABEL)?;
    let infra = infras.get(&ObjectRef::new(infra_name).within(contract_namespace))?;
    infra_cluster_key(&infra)
}

async fn reconcile_cluster(cluster: Arc<Cluster>, runtime: Arc<Runtime>) -> Result<Action> {
    reconcile_key(&runtime, &ClusterKey::of_cluster(&cluster)).await
}

/// One reconcile of a Cluster key: read the cache, decide, act.
#[tracing::instrument(skip_all, fields(cluster = %key))]
async fn reconcile_key(runtime: &Runtime, key: &ClusterKey) -> Result<Action> {
    let ctx = &runtime.ctx;
    let _timer = ctx.metrics.reconcile_started(METRICS_LABEL);
    let stores = &runtime.stores;
    // A cache without its initial list would look like claims were deleted,
    // and the Infra composed from it would release their machines.
    stores.wait_until_ready().await;
    // Read from the cache after readiness, like everything else this reconcile decides from.
    let cluster = stores.clusters.get(&cluster_ref(key));
    // From the indexes and keepers, by name: no scan of every claim, contract and Secret.
    let claims = stores.claims.of_cluster(&key.namespace, &key.name);
    let infra_name = key.infra_name();
    let cached_infra = stores
        .infras
        .get(&ObjectRef::new(&infra_name).within(&ctx.contract_namespace));
    let contracts = by_name(
        stores
            .indexes
            .contracts_by_infra
            .objects(&infra_name, &stores.contracts),
    );
    // Kept by Infra, in name order.
    let secrets = stores.secrets.of_infra(&infra_name);
    let claim_refs: Vec<&CachedClaim> = claims.iter().map(AsRef::as_ref).collect();
    let own = &runtime.own_writes;
    if claim_refs.iter().any(|c| own.is_behind(*c))
        || cluster.as_deref().is_some_and(|c| own.is_behind(c))
        || cached_infra.as_deref().is_some_and(|i| own.is_behind(i))
    {
        // Its own last write replaced one of these copies: deciding from it
        // would write that step again (a 409). That write's event wakes the key.
        return Ok(Action::requeue(OWN_WRITE_UNSEEN_RECHECK));
    }
    // Decided from whole: the cache keeps it compactly, not in part.
    let infra = cached_infra.map(|cached| cached.infra());
    let contract_refs: Vec<&CachedContract> = contracts.iter().map(AsRef::as_ref).collect();
    let secret_refs: Vec<&CachedJoinSecret> = secrets.iter().map(AsRef::as_ref).collect();
    let now = ctx.now();
    let first_seen = runtime
        .first_seen
        .since(key, &claim_refs, &contract_refs, now);
    let requesters = stores.requesters.state();
    let root = root::RootState::of(
        requesters.iter().map(AsRef::as_ref),
        &ctx.contract_namespace,
    );
    let written_failed = runtime.awaited.failed.unseen(key, &claim_refs);
    let owner_clusters = owner_clusters(
        &stores.clusters,
        compose::foreign_owner_uids(claim_refs.iter().copied(), cluster.as_deref()),
    );
    // Only claims that adopt a guest need to know who holds it.
    let wanted = adopt::wanted(claim_refs.iter().copied());
    let guest_holders = if wanted.is_empty() {
        Vec::new()
    } else {
        adopt::holders(
            &wanted,
            stores.contracts.state().iter().map(AsRef::as_ref),
            stores.infras.state().iter().map(AsRef::as_ref),
        )
    };
    let observed = decide::Observed {
        key,
        cluster: cluster.as_deref(),
        claims: &claim_refs,
        infra: infra.as_ref(),
        contracts: &contract_refs,
        secrets: &secret_refs,
        contract_namespace: &ctx.contract_namespace,
        root,
        written_failed: &written_failed,
        owner_clusters: &owner_clusters,
        guest_holders: &guest_holders,
        first_seen: &first_seen,
        now,
    };
    let mut plan = decide::decide(&observed);
    // A Secret this controller deleted and the cache still shows is gone:
    // deleting it again would only get a 404.
    let deleted = runtime.awaited.deleted.still_cached(key, &secret_refs);
    plan.delete_secrets
        .retain(|s| s.uid.as_ref().is_none_or(|uid| !deleted.contains(uid)));
    // One this controller created and the cache does not show yet exists:
    // creating it again would only get an AlreadyExists (409).
    let held_back =
        runtime
            .awaited
            .created
            .hold_back(key, &secret_refs, now, &mut plan.write_secrets);
    let paced = pace_cluster_nodes(runtime, &mut plan);
    if !plan.is_empty() {
        tracing::debug!(
            infra = ?plan.infra.as_ref().map(std::mem::discriminant),
            secrets_written = plan.write_secrets.len(),
            secrets_deleted = plan.delete_secrets.len(),
            statuses = plan.claim_statuses.len(),
            "acting"
        );
        let infra_read = infra
            .as_ref()
            .and_then(|i| i.metadata.resource_version.as_deref());
        act::act(
            ctx,
            key,
            &plan,
            &claim_refs,
            &runtime.awaited,
            own,
            infra_read,
        )
        .await?;
    }
    Ok(match look_again_after(&plan, held_back, paced, now) {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// When a reconcile that decided `plan` at `now` looks again without an
/// event: at its earliest grace deadline, its paced Cluster count, 1 s for a
/// created join Secret its cache does not show yet ([`OWN_WRITE_UNSEEN_RECHECK`]),
/// [`REMOVAL_SAFETY_NET`] while it waits for something to disappear (its
/// event wakes it sooner); `None` when converged.
fn look_again_after(
    plan: &decide::Plan,
    held_back: bool,
    paced: Option<Duration>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let until_deadline = plan
        .requeue_at
        .map(|at| (at - now).to_std().unwrap_or(Duration::ZERO));
    let created_unseen = held_back.then_some(OWN_WRITE_UNSEEN_RECHECK);
    let removal = plan.awaiting_removal.then_some(REMOVAL_SAFETY_NET);
    until_deadline
        .into_iter()
        .chain(created_unseen)
        .chain(removal)
        .chain(paced)
        .min()
        .map(|after| after.max(Duration::from_millis(10)))
}

/// Holds back a Cluster's node count when its last write is under
/// [`crate::status_pace::WRITE_EVERY`] old (a scale-up of n claims writes it
/// a few times, not n times: plan 0012 S6); returns when to look again. A
/// Cluster that lets go is forgotten.
fn pace_cluster_nodes(runtime: &Runtime, plan: &mut decide::Plan) -> Option<Duration> {
    if let Some(cluster) = &plan.remove_cluster_finalizer {
        runtime
            .pace
            .forget(cluster.uid.as_deref().unwrap_or_default());
    }
    let change = plan.cluster_nodes.as_ref()?;
    let uid = change.cluster.uid().unwrap_or_default();
    let wait = runtime
        .pace
        .wait_before_writing(&uid, true, runtime.ctx.clock.now())?;
    plan.cluster_nodes = None;
    Some(wait)
}

/// Where the Clusters of `uids` are (only those that exist), read from the cache.
fn owner_clusters(
    clusters: &Store<Cluster>,
    uids: std::collections::BTreeSet<String>,
) -> compose::OwnerClusters {
    if uids.is_empty() {
        return compose::OwnerClusters::new();
    }
    clusters
        .state()
        .iter()
        .filter_map(|c| {
            let uid = c.uid().filter(|uid| uids.contains(uid))?;
            Some((uid, ClusterKey::of_cluster(c)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use api::{ClusterKind, ClusterRef, InfraSpec};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;

    fn key(ns: &str, name: &str) -> ClusterKey {
        ClusterKey {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn infra(labelled: bool) -> api::Infra {
        let k = key("tenant-a", "c1");
        let mut infra = compose::infra_object(&k, "socialweb-system", &[]);
        if !labelled {
            infra.metadata.labels = None;
            infra.spec = InfraSpec {
                description: String::new(),
                contracts: Vec::new(),
                secrets: Vec::new(),
                record: None,
                cluster_ref: Some(ClusterRef {
                    namespace: "tenant-a".into(),
                    name: "c1".into(),
                    kind: ClusterKind::Cluster,
                }),
                nodes: Vec::new(),
            };
        }
        infra
    }

    #[test]
    fn a_wait_for_removal_is_a_safety_net_not_a_one_second_poll() {
        let now = chrono::Utc::now();
        let converged = decide::Plan::default();
        assert_eq!(look_again_after(&converged, false, None, now), None);
        let waiting = decide::Plan {
            awaiting_removal: true,
            ..decide::Plan::default()
        };
        // The removal's own event wakes the Cluster: no reconcile a second
        // while a scale-down queues (plan 0016 C4).
        assert_eq!(
            look_again_after(&waiting, false, None, now),
            Some(REMOVAL_SAFETY_NET)
        );
        assert!(REMOVAL_SAFETY_NET >= Duration::from_secs(10));
        // A created Secret the cache does not show yet is looked at again soon,
        assert_eq!(
            look_again_after(&waiting, true, None, now),
            Some(OWN_WRITE_UNSEEN_RECHECK)
        );
        // and a grace deadline or a paced count sooner than either comes first.
        let graced = decide::Plan {
            requeue_at: Some(now + chrono::Duration::milliseconds(300)),
            ..waiting
        };
        assert_eq!(
            look_again_after(&graced, false, None, now),
            Some(Duration::from_millis(300))
        );
        assert_eq!(
            look_again_after(&graced, false, Some(Duration::from_millis(200)), now),
            Some(Duration::from_millis(200))
        );
        let overdue = decide::Plan {
            requeue_at: Some(now - chrono::Duration::seconds(1)),
            ..decide::Plan::default()
        };
        assert_eq!(
            look_again_after(&overdue, false, None, now),
            Some(Duration::from_millis(10))
        );
    }

    #[test]
    fn an_infra_maps_to_its_cluster_by_labels_or_cluster_ref() {
        let cached = |infra: api::Infra| CachedInfra::from(infra);
        assert_eq!(
            infra_cluster_key(&cached(infra(true))),
            Some(key("tenant-a", "c1"))
        );
        assert_eq!(
            infra_cluster_key(&cached(infra(false))),
            Some(key("tenant-a", "c1"))
        );
        let mut stray = infra(false);
        stray.spec.cluster_ref = None;
        assert_eq!(infra_cluster_key(&cached(stray)), None);
    }

    #[test]
    fn a_contract_maps_through_its_infra_and_a_secret_by_its_own_labels() {
        let mut writer: Writer<CachedInfra> = Writer::default();
        let store = writer.as_reader();
        let the_infra = infra(true);
        writer.apply_watcher_event(&watcher::Event::Apply(CachedInfra::from(&the_infra)));
        let mut contract = api::ComputeContract::new(
            "x",
            api::compute_contract_spec(
                &api::ContractEntry {
                    name: "node-1".into(),
                    resources: api::Resources {
                        cpus: 1,
                        memory: 1,
                        disk: 1,
                        network: 1,
                    },
                    location: api::Location {
                        country: "DE".into(),
                        region: None,
                    },
                    role: api::Role::Worker,
                },
                None,
                None,
            ),
        );
        contract.metadata.labels = Some(
            [(INFRA_NAME_LABEL.to_owned(), the_infra.name_any())]
                .into_iter()
                .collect(),
        );
        // The mappers see contracts as the cache keeps them.
        let contract = CachedContract::from(contract);
        assert_eq!(
            labelled_cluster_key(&store, "socialweb-system", &contract),
            Some(key("tenant-a", "c1"))
        );
        assert_eq!(labelled_cluster_key(&store, "elsewhere", &contract), None);
        // A join Secret names its Cluster itself, so it maps even with no Infra cached.
        let empty: Store<CachedInfra> = Writer::default().as_reader();
        let secret = secrets::JoinSecret {
            name: "join-node-1".into(),
            namespace: "socialweb-system".into(),
            infra: the_infra.name_any(),
            cluster: key("tenant-a", "c1"),
            entry: "node-1".into(),
            api_server: "https://x".into(),
            ca_data: None,
            node_name: "n".into(),
            token: None,
        }
        .to_secret("t");
        assert_eq!(
            labelled_cluster_key(&empty, "socialweb-system", &CachedJoinSecret::from(secret)),
            Some(key("tenant-a", "c1"))
        );
    }
}

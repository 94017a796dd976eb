//! The benchmark's side of the API: Clusters and NodeClaims as a tenant's
//! node pools would write them, and a watch on claims and contracts that
//! says how far they got (no list of every claim while it waits).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use api::{
    Cluster, ComputeContract, ComputeContractPhase, Infra, NodeClaim, NodeClaimPhase, names,
};
use controllers::cache::decode::Decoded;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, Resource as _, ResourceExt as _};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::departures::{Departure, Departures};
use crate::stages::{Stage, Stages};
use crate::{BENCH_MANAGER, DRIVER_CONCURRENCY, PHASE_LIMIT, TENANT};

/// How far the claims and contracts got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub claims: usize,
    pub joined: usize,
    pub contracts: usize,
    pub deployed: usize,
}

/// The objects of one kind by name, and how many of them are done.
#[derive(Default)]
struct Done {
    objects: HashMap<String, bool>,
    done: usize,
    /// The objects of a re-list in progress.
    relisting: Option<HashMap<String, bool>>,
}

impl Done {
    /// Applies a watch event; returns the names seen for the first time.
    fn apply<K: kube::Resource>(
        &mut self,
        event: watcher::Event<K>,
        is_done: impl Fn(&K) -> bool,
    ) -> Vec<String> {
        let mut new = Vec::new();
        match event {
            watcher::Event::Apply(object) => {
                let name = object.meta().name.clone().unwrap_or_default();
                let done = is_done(&object);
                match self.objects.insert(name.clone(), done) {
                    None => new.push(name),
                    Some(was) => self.done -= usize::from(was),
                }
                self.done += usize::from(done);
            }
            watcher::Event::Delete(object) => {
                let name = object.meta().name.clone().unwrap_or_default();
                if let Some(was) = self.objects.remove(&name) {
                    self.done -= usize::from(was);
                }
            }
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let name = object.meta().name.clone().unwrap_or_default();
                if !self.objects.contains_key(&name) {
                    new.push(name.clone());
                }
                let done = is_done(&object);
                self.relisting.get_or_insert_default().insert(name, done);
            }
            watcher::Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                self.done = self.objects.values().filter(|d| **d).count();
            }
        }
        new
    }
}

enum Seen {
    Claim(watcher::Event<NodeClaim>),
    Contract(watcher::Event<ComputeContract>),
    Infra(watcher::Event<Infra>),
    Secret(watcher::Event<Secret>),
}

/// The object a watch event carries, if any.
fn object_of<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Apply(object) | watcher::Event::InitApply(object) => Some(object),
        _ => None,
    }
}

/// A watch of `K` in `namespace` whose objects are read as the manager's
/// caches read them, without managedFields: a watch that decoded them whole
/// took the driver some 0.5 ms of CPU per node in `--throughput`, on the
/// cores the manager and the API server need (the floor's plain client
/// watches nothing). An object that does not decode is not one of the
/// benchmark's and is passed over.
fn trimmed_watch<K>(
    client: &Client,
    namespace: &str,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
{
    let api: Api<Decoded<K>> = Api::namespaced(client.clone(), namespace);
    watcher(api, config).try_filter_map(|event| futures::future::ready(Ok(readable(event))))
}

/// `event` with its readable object, or `None` for one that did not decode.
fn readable<K>(event: watcher::Event<Decoded<K>>) -> Option<watcher::Event<K>> {
    let object = |decoded| match decoded {
        Decoded::Object(object) => Some(object),
        Decoded::Undecodable(_) => None,
    };
    Some(match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(decoded) => watcher::Event::InitApply(object(decoded)?),
        watcher::Event::Apply(decoded) => watcher::Event::Apply(object(decoded)?),
        watcher::Event::Delete(decoded) => watcher::Event::Delete(object(decoded)?),
    })
}

/// Watches the tenant's claims and the contracts as they go.
pub struct Tracker {
    tally: watch::Receiver<Tally>,
    /// When each claim's entry reached each stage, by its entry name (the
    /// last part of its contract's name, derived from its claim's uid).
    stages: Arc<Mutex<Stages>>,
    /// How far each deleted claim got on its way out, by its entry name.
    departures: Arc<Mutex<Departures>>,
    task: JoinHandle<()>,
}

/// The entry part of a contract's name: `node-` and 20 hex digits.
fn entry_of(contract: &str) -> String {
    let len = names::entry_name("").len();
    contract[contract.len().saturating_sub(len)..].to_owned()
}

/// What a watch event says is gone: the object of a `Delete`.
fn deleted<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Delete(object) => Some(object),
        _ => None,
    }
}

impl Tracker {
    /// Watches claims, contracts and join Secrets, and with `infras` the
    /// Infras too (for [`Stage::InfraEntry`]; the other modes leave the
    /// server that watch less).
    pub async fn start(
        client: &Client,
        contract_namespace: &str,
        infras: bool,
    ) -> anyhow::Result<Self> {
        let join_secrets = watcher::Config::default().labels(names::INFRA_NAME_LABEL);
        let everything = watcher::Config::default;
        let mut watches = vec![
            trimmed_watch::<NodeClaim>(client, TENANT, everything())
                .map_ok(Seen::Claim)
                .boxed(),
            trimmed_watch::<ComputeContract>(client, contract_namespace, everything())
                .map_ok(Seen::Contract)
                .boxed(),
            trimmed_watch::<Secret>(client, contract_namespace, join_secrets)
                .map_ok(Seen::Secret)
                .boxed(),
        ];
        if infras {
            watches.push(
                trimmed_watch::<Infra>(client, contract_namespace, everything())
                    .map_ok(Seen::Infra)
                    .boxed(),
            );
        }
        let events = futures::stream::select_all(watches);
        let (sender, mut tally) = watch::channel(Tally::default());
        let stages = Arc::new(Mutex::new(Stages::default()));
        let seen = Arc::clone(&stages);
        let departures = Arc::new(Mutex::new(Departures::default()));
        let left = Arc::clone(&departures);
        let secret_prefix = names::join_secret_name("");
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            let (mut claims, mut contracts) = (Done::default(), Done::default());
            let mut listed = (false, false);
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                match event {
                    Seen::Claim(event) => {
                        listed.0 |= matches!(event, watcher::Event::InitDone);
                        if let Some(uid) = deleted(&event).and_then(|claim| claim.uid()) {
                            left.lock().unwrap_or_else(PoisonError::into_inner).gone(
                                &names::entry_name(&uid),
                                Departure::ClaimGone,
                                Instant::now(),
                            );
                        }
                        claims.apply(event, |claim| {
                            claim.status.as_ref().and_then(|s| s.phase)
                                == Some(NodeClaimPhase::Joined)
                        });
                    }
                    Seen::Contract(event) => {
                        listed.1 |= matches!(event, watcher::Event::InitDone);
                        if let Some(contract) = object_of(&event) {
                            let entry = entry_of(&contract.name_any());
                            seen.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .contract(&entry, contract, Instant::now());
                            left.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .contract(&entry, contract, Instant::now());
                        }
                        if let Some(contract) = deleted(&event) {
                            left.lock().unwrap_or_else(PoisonError::into_inner).gone(
                                &entry_of(&contract.name_any()),
                                Departure::ContractGone,
                                Instant::now(),
                            );
                        }
                        contracts.apply(event, |contract| {
                            contract.status.as_ref().and_then(|s| s.phase)
                                == Some(ComputeContractPhase::Deployed)
                        });
                    }
                    Seen::Infra(event) => {
                        if let Some(infra) = object_of(&event) {
                            seen.lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .infra(infra, Instant::now());
                        }
                        continue;
                    }
                    Seen::Secret(event) => {
                        let name = deleted(&event).map(|secret| secret.name_any());
                        let entry = name.as_deref().and_then(|n| n.strip_prefix(&secret_prefix));
                        if let Some(entry) = entry {
                            left.lock().unwrap_or_else(PoisonError::into_inner).gone(
                                entry,
                                Departure::SecretGone,
                                Instant::now(),
                            );
                        }
                        continue;
                    }
                }
                if listed.0 && listed.1 {
                    sender.send_replace(Tally {
                        claims: claims.objects.len(),
                        joined: claims.done,
                        contracts: contracts.objects.len(),
                        deployed: contracts.done,
                    });
                }
            }
        });
        // The first tally comes once both kinds are listed.
        tally
            .changed()
            .await
            .context("the benchmark's watch stopped")?;
        Ok(Self {
            tally,
            stages,
            departures,
            task,
        })
    }

    /// Waits until `done` holds of the tally, or fails with `what` after [`PHASE_LIMIT`].
    pub async fn wait(&mut self, what: &str, done: impl Fn(&Tally) -> bool) -> anyhow::Result<()> {
        tokio::time::timeout(PHASE_LIMIT, self.tally.wait_for(|tally| done(tally)))
            .await
            .with_context(|| format!("timed out after {PHASE_LIMIT:?}: {what}"))?
            .context("the benchmark's watch stopped")?;
        Ok(())
    }

    /// How far the claims and contracts are now.
    pub fn tally(&self) -> Tally {
        *self.tally.borrow()
    }

    /// When the contract of entry `entry` was first seen.
    pub fn contract_seen(&self, entry: &str) -> Option<Instant> {
        self.stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reached(entry, Stage::ContractCreated)
    }

    /// Prints the stages of the claims `created` (entry, create answered).
    pub fn print_stages(&self, created: &[(String, Instant)], started: Instant) {
        self.stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .print(created, started);
    }

    /// The way out of the claims `deleted` (entry, delete answered), as printed.
    pub fn departures(&self, deleted: &[(String, Instant)], started: Instant) -> String {
        self.departures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .report(deleted, started)
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// Creates a Cluster and reports it Ready, as the Cluster's own runner would.
pub async fn ready_cluster(clusters: &Api<Cluster>, name: &str) -> anyhow::Result<Cluster> {
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": TENANT},
        "spec": {"account": "did:plc:bench", "running": true},
    }))?;
    let created = clusters
        .create(&post_params(), &cluster)
        .await
        .with_context(|| format!("create Cluster {name}"))?;
    clusters
        .patch_status(
            name,
            &PatchParams::apply(BENCH_MANAGER).force(),
            &Patch::Apply(json!({
                "apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
                "metadata": {"name": name},
                "status": {"phase": "Ready", "url": format!("https://{name}.bench.example:6443"),
                           "caData": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
            })),
        )
        .await
        .with_context(|| format!("report Cluster {name} Ready"))?;
    Ok(created)
}

pub fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(BENCH_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// The claim `name` of `cluster`, owned by it as a Cluster's node pool would own it.
pub fn claim(cluster: &Cluster, name: &str) -> anyhow::Result<NodeClaim> {
    let mut claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
        "metadata": {"name": name, "namespace": TENANT},
        "spec": {
            "clusterName": cluster.metadata.name,
            "resources": {"cpus": 2, "memory": 2048, "disk": 10, "network": 100},
            "location": {"country": "DE"},
        },
    }))?;
    let owner = cluster
        .controller_owner_ref(&())
        .context("a created Cluster has a uid")?;
    claim.metadata.owner_references = Some(vec![owner]);
    Ok(claim)
}

/// `clusters` Ready Clusters named `<prefix><i>` with `nodes` claims each (not created yet).
pub async fn node_pools(
    client: &Client,
    prefix: &str,
    clusters: usize,
    nodes: usize,
) -> anyhow::Result<Vec<NodeClaim>> {
    let api: Api<Cluster> = Api::namespaced(client.clone(), TENANT);
    let mut claims = Vec::with_capacity(clusters * nodes);
    for c in 0..clusters {
        let cluster = ready_cluster(&api, &format!("{prefix}{c}")).await?;
        for n in 0..nodes {
            claims.push(claim(&cluster, &format!("{prefix}{c}-n{n}"))?);
        }
    }
    Ok(claims)
}

/// Creates the claims, [`DRIVER_CONCURRENCY`] at once as node pools would;
/// returns each one's contract entry and when its create was answered.
pub async fn create_claims(
    client: &Client,
    claims: &[NodeClaim],
) -> anyhow::Result<Vec<(String, Instant)>> {
    let api: Api<NodeClaim> = Api::namespaced(client.clone(), TENANT);
    let params = post_params();
    futures::stream::iter(claims.iter().map(|claim| {
        let (api, params) = (&api, &params);
        async move {
            let created = api.create(params, claim).await?;
            Ok::<_, kube::Error>((
                names::entry_name(&created.uid().unwrap_or_default()),
                Instant::now(),
            ))
        }
    }))
    .buffer_unordered(DRIVER_CONCURRENCY)
    .try_collect()
    .await
    .context("create the NodeClaims")
}

/// Deletes the claims, [`DRIVER_CONCURRENCY`] at once; returns each one's
/// contract entry and when its delete was answered (a claim the server
/// removed at once, without a finalizer, has no entry to follow).
pub async fn delete_claims(
    client: &Client,
    claims: &[NodeClaim],
) -> anyhow::Result<Vec<(String, Instant)>> {
    let api: Api<NodeClaim> = Api::namespaced(client.clone(), TENANT);
    let deleted: Vec<Option<(String, Instant)>> =
        futures::stream::iter(claims.iter().map(|claim| {
            let api = &api;
            async move {
                let name = claim.metadata.name.as_deref().unwrap_or_default();
                let answer = api.delete(name, &DeleteParams::default()).await?;
                let uid = answer.left().and_then(|claim| claim.uid());
                Ok::<_, kube::Error>(uid.map(|uid| (names::entry_name(&uid), Instant::now())))
            }
        }))
        .buffer_unordered(DRIVER_CONCURRENCY)
        .try_collect()
        .await
        .context("delete the NodeClaims")?;
    Ok(deleted.into_iter().flatten().collect())
}

/// How long a plain client takes to create `count` small objects,
/// [`DRIVER_CONCURRENCY`] at once: the floor of any controller's throughput.
pub async fn plain_creates(client: &Client, count: usize) -> anyhow::Result<Duration> {
    use k8s_openapi::api::core::v1::ConfigMap;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), TENANT);
    let params = post_params();
    let started = Instant::now();
    futures::stream::iter((0..count).map(|i| {
        let (api, params) = (&api, &params);
        async move {
            let object: ConfigMap = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("plain-{i}"), "namespace": TENANT},
                "data": {"cpus": "2", "memory": "2048", "country": "DE"},
            }))
            .map_err(kube::Error::SerdeError)?;
            api.create(params, &object).await.map(drop)
        }
    }))
    .buffer_unordered(DRIVER_CONCURRENCY)
    .try_collect::<()>()
    .await
    .context("create the plain objects")?;
    Ok(started.elapsed())
}

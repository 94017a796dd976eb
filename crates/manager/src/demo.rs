//! The scripted demo: a Cluster with 3 nodes, scaled to 5, down to 2, then deleted.
//!
//! The script plays the tenant (it writes the Cluster, its status as a tenant
//! cluster's runner would, and NodeClaims) and watches the controllers do the
//! rest, printing the tree Cluster -> Infra -> contracts whenever it changes.

use std::{
    collections::BTreeSet,
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context as _, bail};
use api::{
    Cluster, ClusterSpec, ComputeContract, ComputeContractPhase, Infra, NodeClaim, NodeClaimPhase,
    names,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use tokio::time::Instant;

use crate::tree::{self, Snapshot};

/// The field manager the script writes with.
const DEMO_MANAGER: &str = "socialweb/demo";

/// What the demo works on.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Namespace of the tenant's Cluster and NodeClaims.
    pub tenant_namespace: String,
    /// Namespace of Infras and ComputeContracts.
    pub contract_namespace: String,
    /// Name of the demo Cluster.
    pub cluster: String,
    /// How long one step may take before the demo gives up.
    pub step_timeout: Duration,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            tenant_namespace: "tenant-demo".into(),
            contract_namespace: names::DEFAULT_CONTRACT_NAMESPACE.into(),
            cluster: "demo".into(),
            step_timeout: Duration::from_secs(45),
        }
    }
}

/// What the demo saw, for the final summary and for tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DemoSummary {
    /// Every ComputeContract that existed during the run.
    pub contracts_seen: BTreeSet<String>,
    /// Those seen Released (or already gone) at the end.
    pub contracts_released: BTreeSet<String>,
    /// The most nodes Joined at once.
    pub peak_joined: usize,
}

/// Runs the script; fails when a step does not converge within its timeout.
///
/// # Errors
///
/// When a write is refused or a step times out; the error names the step.
pub async fn run_script(
    client: Client,
    options: &DemoOptions,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<DemoSummary> {
    let started = Instant::now();
    let mut watch = Watch::new(client.clone(), options);
    crate::dev::ensure_namespace(&client, &options.tenant_namespace, DEMO_MANAGER).await?;

    let clusters: Api<Cluster> = Api::namespaced(client.clone(), &options.tenant_namespace);
    let mut cluster = Cluster::new(
        &options.cluster,
        ClusterSpec {
            account: "did:plc:demo-tenant".into(),
            running: true,
        },
    );
    cluster = clusters
        .create(&PostParams::default(), &cluster)
        .await
        .context("create the demo Cluster")?;
    // The script is the tenant: it reports its cluster Ready with an endpoint
    // (the tenant side of `dev` would too, with the same status, a moment later).
    let status = serde_json::json!({"status": crate::tenant_side::reported_status(
        &options.tenant_namespace,
        &options.cluster,
    )});
    clusters
        .patch_status(
            &options.cluster,
            &PatchParams::apply(DEMO_MANAGER),
            &Patch::Merge(&status),
        )
        .await
        .context("report the demo Cluster Ready")?;

    writeln!(out, "== scale up to 3 nodes")?;
    for index in 1..=3 {
        create_claim(&client, options, &cluster, index).await?;
    }
    watch
        .until(out, "3 nodes joined", |s| joined(s) == 3)
        .await?;

    writeln!(out, "== scale up to 5 nodes")?;
    for index in 4..=5 {
        create_claim(&client, options, &cluster, index).await?;
    }
    watch
        .until(out, "5 nodes joined", |s| joined(s) == 5)
        .await?;

    writeln!(out, "== scale down to 2 nodes")?;
    let claims: Api<NodeClaim> = Api::namespaced(client.clone(), &options.tenant_namespace);
    for index in 3..=5 {
        claims
            .delete(&claim_name(options, index), &DeleteParams::default())
            .await
            .with_context(|| format!("delete NodeClaim {}", claim_name(options, index)))?;
    }
    watch
        .until(out, "2 nodes left, the others released", |s| {
            s.claims.len() == 2 && joined(s) == 2 && s.contracts.len() == 2
        })
        .await?;

    writeln!(out, "== delete the Cluster")?;
    clusters
        .delete(&options.cluster, &DeleteParams::background())
        .await
        .context("delete the demo Cluster")?;
    watch
        .until(out, "everything released and gone", |s| {
            s.clusters.is_empty()
                && s.claims.is_empty()
                && s.infras.is_empty()
                && s.contracts.is_empty()
        })
        .await?;
    let secrets: Api<Secret> = Api::namespaced(client, &options.contract_namespace);
    let left = secrets
        .list(&ListParams::default().labels(names::CONTRACT_LABEL))
        .await
        .context("list join Secrets")?;
    if !left.items.is_empty() {
        bail!(
            "{} join Secret(s) left after the Cluster was deleted",
            left.items.len()
        );
    }

    let mut summary = watch.summary();
    // Everything is gone now: a contract never seen Released was deleted without release.
    let unreleased: Vec<&String> = summary
        .contracts_seen
        .difference(&summary.contracts_released)
        .collect();
    if !unreleased.is_empty() {
        bail!("contracts deleted without being seen Released: {unreleased:?}");
    }
    summary.contracts_released = summary.contracts_seen.clone();
    writeln!(
        out,
        "== done in {:.1}s: {} machines rented, {} released, at most {} nodes joined at once, nothing left",
        started.elapsed().as_secs_f64(),
        summary.contracts_seen.len(),
        summary.contracts_released.len(),
        summary.peak_joined
    )?;
    Ok(summary)
}

fn claim_name(options: &DemoOptions, index: usize) -> String {
    format!("{}-node-{index}", options.cluster)
}

async fn create_claim(
    client: &Client,
    options: &DemoOptions,
    cluster: &Cluster,
    index: usize,
) -> anyhow::Result<()> {
    let name = claim_name(options, index);
    let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "namespace": options.tenant_namespace},
        "spec": {
            "clusterName": options.cluster,
            "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 1000},
            "location": {"country": "DE"},
        },
    }))
    .context("build a NodeClaim")?;
    claim.metadata.owner_references = cluster.controller_owner_ref(&()).map(|owner| vec![owner]);
    Api::<NodeClaim>::namespaced(client.clone(), &options.tenant_namespace)
        .create(&PostParams::default(), &claim)
        .await
        .with_context(|| format!("create NodeClaim {name}"))?;
    Ok(())
}

fn joined(snapshot: &Snapshot) -> usize {
    snapshot
        .claims
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase) == Some(NodeClaimPhase::Joined))
        .count()
}

/// Polls the objects the tree shows and prints the tree when it changes.
struct Watch {
    clusters: Api<Cluster>,
    claims: Api<NodeClaim>,
    infras: Api<Infra>,
    contracts: Api<ComputeContract>,
    step_timeout: Duration,
    last: String,
    /// Filled from a watch, not from the polls: a contract can be Released and
    /// deleted between two polls, and the summary must still see it Released.
    summary: Arc<Mutex<DemoSummary>>,
    recorder: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.recorder.abort();
    }
}

impl Watch {
    fn new(client: Client, options: &DemoOptions) -> Self {
        let contracts: Api<ComputeContract> =
            Api::namespaced(client.clone(), &options.contract_namespace);
        let summary = Arc::new(Mutex::new(DemoSummary::default()));
        let recorder = tokio::spawn(record_contracts(contracts.clone(), Arc::clone(&summary)));
        Self {
            clusters: Api::namespaced(client.clone(), &options.tenant_namespace),
            claims: Api::namespaced(client.clone(), &options.tenant_namespace),
            infras: Api::namespaced(client, &options.contract_namespace),
            contracts,
            step_timeout: options.step_timeout,
            last: String::new(),
            summary,
            recorder,
        }
    }

    fn summary(&self) -> DemoSummary {
        self.summary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let all = ListParams::default();
        Ok(Snapshot {
            clusters: self
                .clusters
                .list(&all)
                .await
                .context("list Clusters")?
                .items,
            claims: self
                .claims
                .list(&all)
                .await
                .context("list NodeClaims")?
                .items,
            infras: self.infras.list(&all).await.context("list Infras")?.items,
            contracts: self
                .contracts
                .list(&all)
                .await
                .context("list ComputeContracts")?
                .items,
        })
    }

    async fn until(
        &mut self,
        out: &mut (dyn Write + Send),
        step: &str,
        done: impl Fn(&Snapshot) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.step_timeout;
        loop {
            let snapshot = self.snapshot().await?;
            self.record(&snapshot);
            let text = tree::render(&snapshot);
            if text != self.last {
                writeln!(out, "{text}")?;
                self.last = text;
            }
            if done(&snapshot) {
                writeln!(out, "-- {step}")?;
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "step '{step}' did not finish within {}s; last state:\n{}",
                    self.step_timeout.as_secs(),
                    self.last
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn record(&mut self, snapshot: &Snapshot) {
        let mut summary = self
            .summary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        summary.peak_joined = summary.peak_joined.max(joined(snapshot));
    }
}

/// Records every ComputeContract state the API server reports, until aborted.
async fn record_contracts(contracts: Api<ComputeContract>, summary: Arc<Mutex<DemoSummary>>) {
    let mut events = watcher(contracts, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(contract) = event else { continue };
        let mut summary = summary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        summary.contracts_seen.insert(contract.name_any());
        if contract.status.as_ref().and_then(|s| s.phase) == Some(ComputeContractPhase::Released) {
            summary.contracts_released.insert(contract.name_any());
        }
    }
}

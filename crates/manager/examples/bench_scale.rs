//! Benchmark of the three controllers on the embedded API server and the
//! local market (`just bench`, in release).
//!
//! Runs the real wiring (`Controllers::start`) and prints, without asserting on
//! timings (the machine is shared; compare the ratios, not the seconds):
//! 1. scale-up: `--clusters` Clusters x `--nodes` NodeClaims, the wall time
//!    from creating the claims until every claim is Joined, and claims Joined/s;
//! 2. API writes per node to converge, by controller (field manager), and
//!    reconciles per node, by controller (from the manager's metrics);
//! 3. invariant 8: writes in the 5 s after everything is Joined; anything but
//!    0 is a hot loop, so the benchmark then exits non-zero after printing;
//! 4. scale-down to zero: from deleting every claim until every
//!    ComputeContract is gone and the market runs no guest;
//! 5. resident memory before and after the scale-up (the API server runs in
//!    this process, so its objects count too).
//!
//! `cargo run --release -p manager --example bench_scale -- --clusters 10 --nodes 10`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use api::{Cluster, ComputeContract, NodeClaim, NodeClaimPhase, Requester, names};
use apiserver::audit::RequestRecord;
use apiserver::testing::TestServer;
use controllers::market_adapter::Injected;
use controllers::requester::Markets;
use controllers::{Clock, StopSignal, SystemClock, metrics::Metrics};
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource as _};
use manager::wiring::{ControllerOptions, Controllers};
use prometheus_client::registry::Registry;
use serde_json::json;

/// The tenant namespace of every Cluster and NodeClaim.
const TENANT: &str = "bench-tenant";
/// The field manager of the benchmark's own writes, so they are told apart.
const BENCH_MANAGER: &str = "bench/driver";
/// The controllers' field managers: listed even when they wrote nothing.
const CONTROLLERS: [&str; 3] = [
    names::NODECLAIM_MANAGER,
    names::INFRA_MANAGER,
    names::REQUESTER_MANAGER,
];
/// How long the manager must stay silent once converged (invariant 8).
const QUIET: Duration = Duration::from_secs(5);
/// A phase that takes longer than this is a failure, not a figure.
const PHASE_LIMIT: Duration = Duration::from_secs(600);
const POLL: Duration = Duration::from_millis(50);
/// Claims created (and deleted) at once by the benchmark.
const DRIVER_CONCURRENCY: usize = 8;
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The value of `--name N` (a positive number), or `default`.
fn flag(name: &str, default: usize) -> anyhow::Result<usize> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .with_context(|| format!("{name} takes a positive number")),
    }
}

/// VmRSS of this process, in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let vm_rss = status.lines().find_map(|line| line.strip_prefix("VmRSS:"));
    vm_rss
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A client whose requests the server logs under the user agent [`BENCH_MANAGER`], so the
/// benchmark's own deletes (which carry no field manager) are not counted as the manager's.
fn driver_client(server: &TestServer) -> anyhow::Result<Client> {
    let mut config = server.config();
    config.headers = vec![(
        http::header::USER_AGENT,
        http::HeaderValue::from_static(BENCH_MANAGER),
    )];
    Client::try_from(config).context("build the benchmark's client")
}

/// The Requester: bidders that boot at once and have room for every node, a
/// 1 s bid window, and every contract allowed in flight at once.
fn requester(namespace: &str, total: usize) -> anyhow::Result<Requester> {
    let capacity = total + 1;
    let bidder = |did: &str, cost: u64| {
        json!({"did": did, "cost": cost, "currency": "EUR",
               "capacity": capacity, "bootDelayMillis": 0})
    };
    serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Requester",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {
            "bidWindowSeconds": 1,
            "maxInFlight": total,
            "market": {"local": {"seed": 7, "bidders": [
                bidder("did:web:cheap.example", 90),
                bidder("did:web:fast.example", 120),
            ]}},
        },
    }))
    .context("build the Requester")
}

/// Creates a Cluster and reports it Ready, as the Cluster's own runner would.
async fn ready_cluster(
    clusters: &Api<Cluster>,
    params: &PostParams,
    name: &str,
) -> anyhow::Result<Cluster> {
    let cluster: Cluster = serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": TENANT},
        "spec": {"account": "did:plc:bench", "running": true},
    }))?;
    let created = clusters
        .create(params, &cluster)
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

/// The claim `name` of `cluster`, owned by it as a Cluster's node pool would own it.
fn claim(cluster: &Cluster, name: &str) -> anyhow::Result<NodeClaim> {
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

/// Polls `done` until it holds, or fails with `what` after [`PHASE_LIMIT`].
async fn wait_for<F, Fut>(what: &str, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + PHASE_LIMIT;
    while !done().await? {
        if Instant::now() > deadline {
            bail!("timed out after {PHASE_LIMIT:?}: {what}");
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Reconciles started so far, by controller, read from the registry's text exposition.
fn reconciles(registry: &Registry) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).context("encode metrics")?;
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("socialweb_reconcile_total{controller=\"") else {
            continue;
        };
        if let Some((controller, value)) = rest.split_once("\"} ") {
            counts.insert(controller.to_owned(), value.trim().parse().unwrap_or(0));
        }
    }
    Ok(counts)
}

/// Where a phase starts: the length of the server's request log and the reconcile counts.
struct Mark {
    requests: usize,
    reconciles: BTreeMap<String, u64>,
}

/// What happened since a [`Mark`]: the write requests (attempts, refused ones
/// included) and the reconciles started, by controller.
struct Span {
    writes: Vec<RequestRecord>,
    reconciles: BTreeMap<String, u64>,
}

fn mark(server: &TestServer, registry: &Registry) -> anyhow::Result<Mark> {
    Ok(Mark {
        requests: server.requests().len(),
        reconciles: reconciles(registry)?,
    })
}

/// Fails if the server's request log filled up: the figures would be short.
fn since(server: &TestServer, registry: &Registry, mark: &Mark) -> anyhow::Result<Span> {
    let log = server.requests();
    let counted: u64 = server.counters().by_verb.values().sum();
    if log.iter().filter(|r| !r.verb.is_empty()).count() as u64 != counted {
        bail!(
            "the server's request log is full ({} records): fewer nodes",
            log.len()
        );
    }
    let writes = log
        .into_iter()
        .skip(mark.requests)
        .filter(|r| WRITE_VERBS.contains(&r.verb.as_str()))
        .collect();
    let mut reconciles = reconciles(registry)?;
    for (controller, n) in &mut reconciles {
        *n = n.saturating_sub(mark.reconciles.get(controller).copied().unwrap_or(0));
    }
    Ok(Span { writes, reconciles })
}

/// Prints the writes of `span` by field manager (deletes, Events and the finalizer
/// patches carry none: those are keyed by verb and resource), then the reconciles.
fn print_span(span: &Span, nodes: usize) {
    let per_node = |n: u64| n as f64 / nodes as f64;
    let mut by_writer: BTreeMap<String, u64> =
        CONTROLLERS.iter().map(|m| ((*m).to_owned(), 0)).collect();
    for r in &span.writes {
        let writer = if r.user_agent == BENCH_MANAGER || r.field_manager == BENCH_MANAGER {
            format!("{BENCH_MANAGER} (this benchmark)")
        } else if r.field_manager.is_empty() {
            format!("{} {} (no field manager)", r.verb, r.resource)
        } else {
            r.field_manager.clone()
        };
        *by_writer.entry(writer).or_default() += 1;
    }
    let refused = span.writes.iter().filter(|r| r.status == 409).count();
    println!(
        "  {} write requests, {refused} answered 409 Conflict; writes per node by writer:",
        span.writes.len()
    );
    for (writer, n) in &by_writer {
        println!("    {writer:<48} {n:>6}  {:>6.2}/node", per_node(*n));
    }
    let all: u64 = span.reconciles.values().sum();
    println!(
        "  {all} reconciles ({:.2}/node) by controller:",
        per_node(all)
    );
    for (controller, n) in &span.reconciles {
        println!("    {controller:<48} {n:>6}  {:>6.2}/node", per_node(*n));
    }
}

/// Runs `write` for every claim, [`DRIVER_CONCURRENCY`] at once, as a node pool would.
async fn for_each_claim<'a, F, Fut>(claims: &'a [NodeClaim], write: F) -> kube::Result<()>
where
    F: Fn(&'a NodeClaim) -> Fut,
    Fut: Future<Output = kube::Result<()>>,
{
    futures::stream::iter(claims.iter().map(write))
        .buffer_unordered(DRIVER_CONCURRENCY)
        .try_collect()
        .await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (cluster_count, nodes_per_cluster) = (flag("--clusters", 10)?, flag("--nodes", 10)?);
    let total = cluster_count * nodes_per_cluster;
    let options = ControllerOptions::default();
    let contract_ns = options.contract_namespace.clone();

    let server = TestServer::start().await.context("start the API server")?;
    let client = driver_client(&server)?;
    manager::dev::install_crds(&client).await?;
    testkit::create_namespaces(&client, &[TENANT, &contract_ns]).await;
    let bench_post = PostParams {
        field_manager: Some(BENCH_MANAGER.to_owned()),
        ..PostParams::default()
    };
    Api::<Requester>::namespaced(client.clone(), &contract_ns)
        .create(&bench_post, &requester(&contract_ns, total)?)
        .await
        .context("create the Requester")?;

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let market = testkit::local_market(7, Arc::clone(&clock));
    let mut registry = Registry::default();
    let mut running = Controllers {
        client: server.client(),
        markets: Arc::new(Markets::with_injected(
            Arc::clone(&clock),
            Injected::Local(Arc::clone(&market)),
        )),
        clock,
        metrics: Metrics::register(&mut registry),
        options,
        stop: StopSignal::never(),
    }
    .start();
    let manager = tokio::spawn(running.done);
    running
        .ready
        .wait_for(|ready| *ready)
        .await
        .context("the caches never synced")?;

    let clusters_api: Api<Cluster> = Api::namespaced(client.clone(), TENANT);
    let claims_api: Api<NodeClaim> = Api::namespaced(client.clone(), TENANT);
    let contracts_api: Api<ComputeContract> = Api::namespaced(client.clone(), &contract_ns);
    let mut claims = Vec::with_capacity(total);
    for c in 0..cluster_count {
        let cluster = ready_cluster(&clusters_api, &bench_post, &format!("c{c}")).await?;
        for n in 0..nodes_per_cluster {
            claims.push(claim(&cluster, &format!("c{c}-n{n}"))?);
        }
    }
    // Let the Clusters' writes settle so the figures below are the claims' alone.
    tokio::time::sleep(Duration::from_secs(1)).await;

    // 1. Scale-up, with 2. its writes and reconciles.
    let rss_before = resident_kib();
    let up_mark = mark(&server, &registry)?;
    let started = Instant::now();
    for_each_claim(&claims, |claim| async {
        claims_api.create(&bench_post, claim).await.map(drop)
    })
    .await
    .context("create the NodeClaims")?;
    let created_in = started.elapsed();
    wait_for("every NodeClaim Joined", || async {
        let listed = claims_api.list(&ListParams::default()).await?;
        let phase = |c: &NodeClaim| c.status.as_ref().and_then(|s| s.phase);
        let joined = listed
            .items
            .iter()
            .filter(|c| phase(c) == Some(NodeClaimPhase::Joined));
        Ok(joined.count() == total)
    })
    .await?;
    let scale_up = started.elapsed();
    let rss_after = resident_kib();
    let quiet_mark = mark(&server, &registry)?;
    let up = since(&server, &registry, &up_mark)?;

    // 3. Quiet after convergence.
    tokio::time::sleep(QUIET).await;
    let quiet = since(&server, &registry, &quiet_mark)?;

    // 4. Scale-down to zero.
    let down_mark = mark(&server, &registry)?;
    let started = Instant::now();
    for_each_claim(&claims, |claim| async {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        claims_api
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
    })
    .await
    .context("delete the NodeClaims")?;
    wait_for(
        "every ComputeContract gone and every guest released",
        || async {
            let contracts = contracts_api.list(&ListParams::default()).await?.items;
            let claims = claims_api.list(&ListParams::default()).await?.items;
            Ok(contracts.is_empty() && claims.is_empty() && market.running_guests() == 0)
        },
    )
    .await?;
    let scale_down = started.elapsed();
    let down = since(&server, &registry, &down_mark)?;
    manager.abort();

    // 5. The table.
    let per_second = |d: Duration| total as f64 / d.as_secs_f64();
    println!(
        "bench-scale: {cluster_count} Clusters x {nodes_per_cluster} NodeClaims = {total} nodes \
         (debug build: {}); local market: 2 bidders, boot delay 0, bid window 1 s, maxInFlight {total}",
        cfg!(debug_assertions),
    );
    println!(
        "scale-up:   {total} claims created in {created_in:.2?}; all Joined after {scale_up:.2?} \
         = {:.1} claims Joined/s",
        per_second(scale_up),
    );
    print_span(&up, total);
    println!(
        "quiet:      {} writes in the {QUIET:?} after every claim Joined (invariant 8: must be 0)",
        quiet.writes.len(),
    );
    for r in &quiet.writes {
        println!(
            "    {} {} by {:?}: {}",
            r.method, r.uri, r.field_manager, r.status
        );
    }
    let idle: u64 = quiet.reconciles.values().sum();
    println!("  {idle} reconciles in that window (reconciles that write nothing are allowed)");
    println!(
        "scale-down: every claim deleted; contracts gone and guests released after {scale_down:.2?} \
         = {:.1} nodes/s",
        per_second(scale_down),
    );
    print_span(&down, total);
    let grown = rss_after.saturating_sub(rss_before);
    println!(
        "memory:     VmRSS {:.1} MiB before the scale-up, {:.1} MiB after: +{:.1} MiB = {:.1} KiB/node \
         (the API server and its objects share this process with the controllers)",
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
        grown as f64 / 1024.0,
        grown as f64 / total as f64,
    );
    if !quiet.writes.is_empty() {
        bail!("the manager kept writing after convergence: a hot loop (invariant 8)");
    }
    Ok(())
}

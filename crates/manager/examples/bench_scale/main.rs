//! Benchmark of the three controllers on the embedded API server and the
//! local market (`just bench`, in release).
//!
//! Runs the real wiring (`Controllers::start`, on a runtime of its own, or in
//! a process of its own with `--external`) and prints figures beside their
//! targets, measured as ratios in one run: nothing asserts on time (the
//! machine is shared; compare the ratios, not the seconds). Modes:
//!
//! - default, `--clusters C --nodes N` (10 x 10): one life of C x N nodes.
//!   Scale-up until every claim is Joined; an idle window (writes, lists and
//!   the manager's CPU while everything is Deployed); scale-down until no
//!   claim and no contract is left. Prints the API writes per node of the
//!   whole life by writer, verb and resource, reconciles per node, CPU per
//!   node of the manager and of the API server, scale-down against scale-up
//!   per node, the CPU of each phase, the way out of the deleted claims (as
//!   `--throughput` gives the way in: each claim's contract marked for
//!   release, Releasing, Released, deleted, gone, its join Secret gone, the
//!   claim gone, p50 / p99 from its delete), and memory. Exits non-zero when the manager writes while idle
//!   (a hot loop).
//! - `--curve [--sizes 100,300,1000,3000]`: one life per size; the manager's
//!   and the API server's CPU per node, and the ratio of the largest size's
//!   figure to the smallest's, each size's CPU per node up and down, and
//!   each size's way out. Exits non-zero past [`CURVE_LIMIT`] or when any
//!   size's scale-down took longer per node than its scale-up (naming it).
//! - `--throughput [--clusters 100 --nodes 10]`: the claims to Deployed,
//!   beside what a plain client needs to create as many objects plus one
//!   bid window (the floor), and where the time went: each stage of a claim
//!   (its Infra entry, contract, Bidding, winner, receipt, Deployed) as the
//!   driver's watch first saw it, p50 and p99 from the claim's create and
//!   when the last claim reached it.
//! - `--latency [--batches 1,100,1000]`: claim created -> contract created,
//!   p50 and p99, for batches of claims created at once.
//! - `--restart [--clusters 1000 --nodes 10]` (with `--external`): the
//!   manager's memory with the fleet Joined, then after its process is
//!   killed and started again on the same fleet (the local market keeps
//!   its journal in a temporary directory, so the guests outlive it): what
//!   a manager holds of the fleet without a scale-up's churn behind it.
//! - `--external` (any mode): the manager runs as a process of its own
//!   (this executable again) against the API server, so its resident memory
//!   is its own: it is printed per contract and projected to 10,000, and
//!   split into anonymous (heap) and file-backed (code). It runs as the Helm
//!   chart deploys it: with the chart's `MIMALLOC_` variables and as many
//!   tokio workers as the chart's CPU limit gives (one for 500m); this
//!   process's environment overrides each (`TOKIO_WORKER_THREADS=2`).
//! - `BENCH_CONCURRENCY=INFRA,NODECLAIM,REQUESTER` (any mode): the
//!   controllers' concurrency instead of the manager's defaults.
//!
//! The driver waits on a watch of claims and contracts, never by listing.
//!
//! `cargo run --release -p manager --example bench_scale -- --clusters 10 --nodes 10`

mod chart;
mod departures;
mod fleet;
mod probe;
mod report;
mod restart;
mod stages;
mod world;

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use fleet::Tracker;
use report::{Life, Reading};
use world::{World, WorldOptions};

/// The manager binary's allocator (see `src/main.rs`), so the in-process
/// manager and the `--external` one (this executable again) measure it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The tenant namespace of every Cluster and NodeClaim.
const TENANT: &str = "bench-tenant";
/// The field manager and user agent of the benchmark's own requests, so they are told apart.
const BENCH_MANAGER: &str = "bench/driver";
/// A phase that takes longer than this is a failure, not a figure.
const PHASE_LIMIT: Duration = Duration::from_secs(1800);
/// Claims created (and deleted) at once by the benchmark.
const DRIVER_CONCURRENCY: usize = 8;
/// Runs this executable as the manager of `--external` (internal).
const CHILD_FLAG: &str = "--manager-child";
/// Largest size's CPU per node over the smallest's beyond which `--curve` fails.
const CURVE_LIMIT: f64 = 1.3;
/// How long the server must take no write for the manager to count as settled.
const SETTLED: Duration = Duration::from_secs(1);
/// The longest wait for the manager to settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(30);
/// Every Requester's bid window.
const BID_WINDOW: Duration = Duration::from_secs(1);

/// The command line.
struct Args {
    raw: Vec<String>,
}

impl Args {
    fn has(&self, name: &str) -> bool {
        self.raw.iter().any(|a| a == name)
    }

    fn value(&self, name: &str) -> Option<&str> {
        let i = self.raw.iter().position(|a| a == name)?;
        self.raw.get(i + 1).map(String::as_str)
    }

    /// `--name N` (a positive number), or `default`.
    fn number(&self, name: &str, default: usize) -> anyhow::Result<usize> {
        match self.value(name) {
            None if !self.has(name) => Ok(default),
            value => value
                .and_then(|v| v.parse().ok())
                .filter(|n| *n > 0)
                .with_context(|| format!("{name} takes a positive number")),
        }
    }

    /// `--name A,B,C` (positive numbers), or `default`.
    fn numbers(&self, name: &str, default: &[usize]) -> anyhow::Result<Vec<usize>> {
        let Some(value) = self.value(name) else {
            return Ok(default.to_vec());
        };
        value
            .split(',')
            .map(|v| v.trim().parse().ok().filter(|n| *n > 0))
            .collect::<Option<Vec<usize>>>()
            .with_context(|| format!("{name} takes positive numbers separated by commas"))
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args {
        raw: std::env::args().collect(),
    };
    if let Some(i) = args.raw.iter().position(|a| a == CHILD_FLAG) {
        let (Some(kubeconfig), Some(namespace)) = (args.raw.get(i + 1), args.raw.get(i + 2)) else {
            bail!("{CHILD_FLAG} KUBECONFIG NAMESPACE");
        };
        // The manager binary's runtime (`src/cli.rs`): as many workers as
        // the CPUs it may use, or TOKIO_WORKER_THREADS, which the parent
        // sets as the chart's CPU limit gives them.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("build the manager's runtime")?;
        return runtime.block_on(world::run_child(kubeconfig.as_ref(), namespace));
    }
    // The driver's own runtime: its threads are neither the server's nor the manager's.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-driver")
        .enable_all()
        .build()
        .context("build the driver's runtime")?;
    runtime.block_on(async {
        let external = args.has("--external");
        if args.has("--curve") {
            let sizes = args.numbers("--sizes", &[100, 300, 1_000, 3_000])?;
            curve(&sizes, external).await
        } else if args.has("--throughput") {
            let clusters = args.number("--clusters", 100)?;
            let nodes = args.number("--nodes", 10)?;
            throughput(clusters, nodes, external).await
        } else if args.has("--restart") {
            let clusters = args.number("--clusters", 1_000)?;
            let nodes = args.number("--nodes", 10)?;
            restart::memory_after_restart(clusters, nodes, external).await
        } else if args.has("--latency") {
            let batches = args.numbers("--batches", &[1, 100, 1_000])?;
            latency(&batches, external).await
        } else {
            let clusters = args.number("--clusters", 10)?;
            let nodes = args.number("--nodes", 10)?;
            let idle = Duration::from_secs(args.number("--idle-seconds", 10)? as u64);
            one_life(clusters, nodes, idle, external).await
        }
    })
}

/// Scale-up of `clusters` x `nodes` to Joined, an idle window of `idle`, and
/// the scale-down to zero, with readings in between.
async fn life(
    clusters: usize,
    nodes: usize,
    idle: Duration,
    external: bool,
) -> anyhow::Result<Life> {
    let total = clusters * nodes;
    let mut world = World::start(&WorldOptions {
        capacity: total,
        external,
        market_state: None,
    })
    .await?;
    let mut tracker = Tracker::start(&world.client, &world.contract_namespace, false).await?;
    let claims = fleet::node_pools(&world.client, "c", clusters, nodes).await?;
    // Let the Clusters' writes settle so the figures are the claims' alone.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let before = Reading::take(&mut world).await?;
    fleet::create_claims(&world.client, &claims).await?;
    tracker
        .wait("every NodeClaim Joined", |t| t.joined == total)
        .await?;
    let all_joined = Instant::now();
    settle(&world).await;
    let settled = all_joined.elapsed();
    let joined = Reading::take(&mut world).await?;
    tokio::time::sleep(idle).await;
    let idled = Reading::take(&mut world).await?;
    let deleted = fleet::delete_claims(&world.client, &claims).await?;
    tracker
        .wait("every NodeClaim and ComputeContract gone", |t| {
            t.claims == 0 && t.contracts == 0
        })
        .await?;
    let gone = Reading::take(&mut world).await?;
    // The driver's watch may see the last Secret go after the last claim.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let way_out = tracker.departures(&deleted, idled.at);
    let log = world.server.requests();
    let manager_env = world.manager_env();
    tracker.stop();
    world.stop().await;
    Ok(Life {
        clusters,
        nodes,
        external,
        manager_env,
        log,
        settled,
        before,
        joined,
        idled,
        gone,
        way_out,
    })
}

/// How many writes the server has taken so far.
fn writes_taken(world: &World) -> u64 {
    let counters = world.server.counters();
    apiserver::audit::WRITE_VERBS
        .iter()
        .filter_map(|verb| counters.by_verb.get(*verb))
        .sum()
}

/// Waits until the server has taken no write for [`SETTLED`] (at most
/// [`SETTLE_LIMIT`]): the last Infra and Cluster statuses follow the last
/// claim's. A manager that never settles shows in the idle window.
async fn settle(world: &World) {
    let writes = || writes_taken(world);
    let started = Instant::now();
    let (mut last, mut since) = (writes(), Instant::now());
    while since.elapsed() < SETTLED && started.elapsed() < SETTLE_LIMIT {
        tokio::time::sleep(SETTLED / 4).await;
        let now = writes();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

async fn one_life(
    clusters: usize,
    nodes: usize,
    idle: Duration,
    external: bool,
) -> anyhow::Result<()> {
    let life = life(clusters, nodes, idle, external).await?;
    life.print();
    let idle_writes = life.idle_writes();
    if idle_writes > 0 {
        bail!("the manager made {idle_writes} writes while idle: a hot loop (invariant 8)");
    }
    Ok(())
}

async fn curve(sizes: &[usize], external: bool) -> anyhow::Result<()> {
    let mut lives = Vec::new();
    for size in sizes {
        let (clusters, nodes) = (size.div_ceil(10), (*size).min(10));
        eprintln!("bench-scale --curve: {} nodes...", clusters * nodes);
        lives.push(life(clusters, nodes, Duration::from_secs(2), external).await?);
    }
    let verdict = report::print_curve(&lives);
    let mut failures = Vec::new();
    if verdict.cpu_growth > CURVE_LIMIT {
        failures.push(format!(
            "CPU per node grew {:.2}x from the smallest size to the largest (limit {CURVE_LIMIT}x)",
            verdict.cpu_growth
        ));
    }
    for (nodes, ratio) in &verdict.down_slower {
        failures.push(format!(
            "scale-down per node took {ratio:.2}x scale-up's at {nodes} nodes (limit 1x)"
        ));
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

async fn throughput(clusters: usize, nodes: usize, external: bool) -> anyhow::Result<()> {
    let total = clusters * nodes;
    let mut world = World::start(&WorldOptions {
        capacity: total,
        external,
        market_state: None,
    })
    .await?;
    let mut tracker = Tracker::start(&world.client, &world.contract_namespace, true).await?;
    let plain = fleet::plain_creates(&world.client, total).await?;
    let claims = fleet::node_pools(&world.client, "t", clusters, nodes).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Reading::take(&mut world).await?;
    let cpu_before = (world.manager_cpu(), world.server_cpu(), world.driver_cpu());
    let started = Instant::now();
    let created = fleet::create_claims(&world.client, &claims).await?;
    tracker
        .wait("every contract Deployed", |t| t.deployed == total)
        .await?;
    let deployed = started.elapsed();
    let cpu = (
        world.manager_cpu().saturating_sub(cpu_before.0),
        world.server_cpu().saturating_sub(cpu_before.1),
        world.driver_cpu().saturating_sub(cpu_before.2),
    );
    let at_deployed = Reading::take(&mut world).await?;
    tracker
        .wait("every NodeClaim Joined", |t| t.joined == total)
        .await?;
    let joined = started.elapsed();
    report::print_throughput(total, clusters, nodes, plain, deployed, joined);
    report::print_throughput_cpu(total, deployed, cpu);
    report::print_throughput_work(total, &world.server.requests(), &before, &at_deployed);
    tracker.print_stages(&created, started);
    tracker.stop();
    world.stop().await;
    Ok(())
}

async fn latency(batches: &[usize], external: bool) -> anyhow::Result<()> {
    let world = World::start(&WorldOptions {
        capacity: batches.iter().sum(),
        external,
        market_state: None,
    })
    .await?;
    let mut tracker = Tracker::start(&world.client, &world.contract_namespace, false).await?;
    let mut rows = Vec::new();
    let mut joined = 0;
    for (b, batch) in batches.iter().enumerate() {
        let (clusters, nodes) = (batch.div_ceil(10), (*batch).min(10));
        let claims = fleet::node_pools(&world.client, &format!("l{b}-"), clusters, nodes).await?;
        let claims = &claims[..*batch];
        tokio::time::sleep(Duration::from_secs(1)).await;
        let created = fleet::create_claims(&world.client, claims).await?;
        joined += batch;
        tracker
            .wait("every NodeClaim of the batch Joined", |t| {
                t.joined == joined
            })
            .await?;
        let mut latencies: Vec<Duration> = created
            .iter()
            .map(|(entry, at)| {
                tracker
                    .contract_seen(entry)
                    .map_or(PHASE_LIMIT, |seen| seen.saturating_duration_since(*at))
            })
            .collect();
        rows.push((
            *batch,
            probe::percentile(&mut latencies, 0.5),
            probe::percentile(&mut latencies, 0.99),
        ));
    }
    tracker.stop();
    world.stop().await;
    report::print_latency(&rows, external);
    Ok(())
}

//! Readings taken between the phases of a run, and the tables printed from them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apiserver::audit::RequestRecord;

use crate::probe::{self, Writes};
use crate::world::World;
use crate::{BENCH_MANAGER, BID_WINDOW, CURVE_LIMIT};

/// Manager writes per node over a whole life (up, idle, down) that the issue aims at.
const WRITES_PER_NODE_TARGET: f64 = 16.0;
/// The manager's share of a core while idle that the issue aims at.
const IDLE_CPU_TARGET: f64 = 0.02;
/// The manager's resident memory with 10,000 contracts cached that the issue aims at.
pub const MANAGER_RSS_TARGET_MIB: f64 = 64.0;
/// The number of contracts the memory target is for.
const CACHED_CONTRACTS: f64 = 10_000.0;

/// Where things stood at one moment.
pub struct Reading {
    pub at: Instant,
    /// Length of the server's (writes-only) request log.
    writes: usize,
    /// List requests so far, anyone's (the driver lists only when its watches start).
    lists: u64,
    /// Get requests so far by resource, anyone's (the driver makes none).
    gets: BTreeMap<String, u64>,
    reconciles: BTreeMap<String, u64>,
    manager_cpu: Duration,
    server_cpu: Duration,
    /// This process's resident memory, KiB.
    process_rss: u64,
    /// The manager's own, when it runs in a process of its own.
    manager_rss: Option<probe::Resident>,
}

impl Reading {
    pub async fn take(world: &mut World) -> anyhow::Result<Self> {
        let reconciles = world.reconciles().await?;
        Ok(Self {
            at: Instant::now(),
            writes: world.server.requests().len(),
            lists: world
                .server
                .counters()
                .by_verb
                .get("list")
                .copied()
                .unwrap_or(0),
            gets: world
                .server
                .counters()
                .by_verb_resource
                .iter()
                .filter_map(|(key, n)| Some((key.strip_prefix("get ")?.to_owned(), *n)))
                .collect(),
            reconciles,
            manager_cpu: world.manager_cpu(),
            server_cpu: world.server_cpu(),
            process_rss: probe::resident_kib(None),
            manager_rss: world.manager_resident(),
        })
    }
}

/// One life: scale-up, idle, scale-down.
pub struct Life {
    pub clusters: usize,
    pub nodes: usize,
    pub external: bool,
    /// The variables an `--external` manager was started with (`NAME=value`).
    pub manager_env: Vec<String>,
    /// The server's write log.
    pub log: Vec<RequestRecord>,
    /// From the last claim Joined until the server took no write for a second.
    pub settled: Duration,
    pub before: Reading,
    pub joined: Reading,
    pub idled: Reading,
    pub gone: Reading,
    /// The deleted claims' steps on their way out, as printed.
    pub way_out: String,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// What the manager's resident memory is made of, at two readings.
pub fn resident_split(before: probe::Resident, after: probe::Resident) -> String {
    format!(
        "anonymous (heap, stacks) {:.1} -> {:.1} MiB, file-backed (the executable's code and data) \
         {:.1} -> {:.1} MiB",
        mib(before.anon),
        mib(after.anon),
        mib(before.file),
        mib(after.file),
    )
}

impl Life {
    pub fn total(&self) -> usize {
        self.clusters * self.nodes
    }

    fn per_node(&self, n: f64) -> f64 {
        n / self.total() as f64
    }

    fn writes(&self, from: &Reading, to: &Reading) -> Writes {
        Writes::of_manager(&self.log[from.writes..to.writes], BENCH_MANAGER)
    }

    pub fn idle_writes(&self) -> u64 {
        self.writes(&self.joined, &self.idled).total
    }

    /// CPU of the whole life, per node: (manager, API server).
    pub fn cpu_per_node(&self) -> (Duration, Duration) {
        let nodes = u32::try_from(self.total()).unwrap_or(u32::MAX);
        (
            (self
                .gone
                .manager_cpu
                .saturating_sub(self.before.manager_cpu))
                / nodes,
            (self.gone.server_cpu.saturating_sub(self.before.server_cpu)) / nodes,
        )
    }

    /// CPU per node of the scale-up (`up`) or the scale-down: (manager, API server).
    fn phase_cpu_per_node(&self, up: bool) -> (Duration, Duration) {
        let (from, to) = if up {
            (&self.before, &self.joined)
        } else {
            (&self.idled, &self.gone)
        };
        let nodes = u32::try_from(self.total()).unwrap_or(u32::MAX);
        (
            to.manager_cpu.saturating_sub(from.manager_cpu) / nodes,
            to.server_cpu.saturating_sub(from.server_cpu) / nodes,
        )
    }

    /// The scale-down's CPU per node beside the scale-up's, and the way out.
    fn print_way_out(&self) {
        let (up_manager, up_server) = self.phase_cpu_per_node(true);
        let (down_manager, down_server) = self.phase_cpu_per_node(false);
        let cores = |cpu: Duration, phase: Duration| cpu.as_secs_f64() / phase.as_secs_f64();
        let nodes = u32::try_from(self.total()).unwrap_or(u32::MAX);
        println!(
            "  CPU per node, up / down: manager {:.2} / {:.2} ms, API server {:.2} / {:.2} ms; \
             cores busy up {:.2}, down {:.2}",
            ms(up_manager),
            ms(down_manager),
            ms(up_server),
            ms(down_server),
            cores((up_manager + up_server) * nodes, self.up()),
            cores((down_manager + down_server) * nodes, self.down()),
        );
        self.print_down_work();
        print!("{}", self.way_out);
    }

    /// The scale-down's writes by writer, verb and resource, and its
    /// reconciles by controller, per node: what CPU per node down is spent on.
    fn print_down_work(&self) {
        let writes = self.writes(&self.idled, &self.gone);
        let reconciles: Vec<(&String, u64)> = self
            .gone
            .reconciles
            .iter()
            .map(|(c, n)| (c, n - self.idled.reconciles.get(c).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let all: u64 = reconciles.iter().map(|(_, n)| n).sum();
        // Writes refused or answered for nothing (a 404 of a repeated delete).
        let mut refused: BTreeMap<String, u64> = BTreeMap::new();
        for r in &self.log[self.idled.writes..self.gone.writes] {
            if !(200..300).contains(&r.status) && r.user_agent != BENCH_MANAGER {
                *refused
                    .entry(format!(
                        "{} {} {} {}",
                        r.field_manager, r.verb, r.resource, r.status
                    ))
                    .or_default() += 1;
            }
        }
        println!(
            "  scale-down per node: writes {:.2} ({}); refused {}; gets ({}); reconciles {:.2} ({})",
            self.per_node(writes.total as f64),
            writes
                .by_kind
                .iter()
                .map(|((writer, verb, resource), n)| format!(
                    "{writer} {verb} {resource} {:.2}",
                    self.per_node(*n as f64)
                ))
                .collect::<Vec<_>>()
                .join(", "),
            refused
                .iter()
                .map(|(kind, n)| format!("{kind} {:.2}", self.per_node(*n as f64)))
                .collect::<Vec<_>>()
                .join(", "),
            self.gone
                .gets
                .iter()
                .map(|(resource, n)| (
                    resource,
                    n - self.idled.gets.get(resource).copied().unwrap_or(0)
                ))
                .filter(|(_, n)| *n > 0)
                .map(|(resource, n)| format!("{resource} {:.2}", self.per_node(n as f64)))
                .collect::<Vec<_>>()
                .join(", "),
            self.per_node(all as f64),
            reconciles
                .iter()
                .map(|(c, n)| format!("{c} {:.2}", self.per_node(*n as f64)))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }

    fn up(&self) -> Duration {
        self.joined.at - self.before.at
    }

    fn down(&self) -> Duration {
        self.gone.at - self.idled.at
    }

    pub fn print(&self) {
        let total = self.total();
        let where_ = if self.external {
            format!(
                "in a process of its own, as the chart runs it ({})",
                self.manager_env.join(" ")
            )
        } else {
            "on a runtime of its own in this process".to_owned()
        };
        println!(
            "bench-scale: {} Clusters x {} NodeClaims = {total} nodes (debug build: {}); the manager \
             {where_}; local market: 2 bidders, boot delay 0, bid window {BID_WINDOW:?}, maxInFlight {total}",
            self.clusters,
            self.nodes,
            cfg!(debug_assertions),
        );
        let (up, down) = (self.up(), self.down());
        println!(
            "scale-up:    every claim Joined after {up:.2?} = {:.1} nodes/s; no write for 1 s after \
             another {:.2?}",
            total as f64 / up.as_secs_f64(),
            self.settled.saturating_sub(crate::SETTLED),
        );
        println!(
            "scale-down:  every claim and contract gone after {down:.2?} = {:.1} nodes/s; \
             down/up per node {:.2} (target: at most 1)",
            total as f64 / down.as_secs_f64(),
            down.as_secs_f64() / up.as_secs_f64(),
        );
        let life = self.writes(&self.before, &self.gone);
        println!(
            "writes:      the manager's, whole life (up, idle, down): {} = {:.2}/node (target: at most \
             {WRITES_PER_NODE_TARGET}); {} answered 409 Conflict. By writer, verb and resource:",
            life.total,
            self.per_node(life.total as f64),
            life.conflicts,
        );
        life.print(total, "    ");
        let up_writes = self.writes(&self.before, &self.joined);
        let down_writes = self.writes(&self.idled, &self.gone);
        println!(
            "             up {:.2}/node, down {:.2}/node",
            self.per_node(up_writes.total as f64),
            self.per_node(down_writes.total as f64)
        );
        println!(
            "reconciles:  whole life {}",
            reconciles_per_node(&self.before, &self.gone, total)
        );
        let idle = self.idled.at - self.joined.at;
        let idle_cpu = (self
            .idled
            .manager_cpu
            .saturating_sub(self.joined.manager_cpu))
        .as_secs_f64()
            / idle.as_secs_f64();
        let idle_by_kind: Vec<(&String, u64)> = self
            .idled
            .reconciles
            .iter()
            .map(|(c, n)| (c, n - self.joined.reconciles.get(c).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let idle_reconciles: u64 = idle_by_kind.iter().map(|(_, n)| n).sum();
        let by_kind = idle_by_kind
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "idle:        {idle:.1?} with {total} contracts Deployed: {} writes (target 0), {} lists \
             (target 0), {idle_reconciles} reconciles ({by_kind}), manager CPU {:.2}% of a core \
             (target: under {}%)",
            self.idle_writes(),
            self.idled.lists - self.joined.lists,
            idle_cpu * 100.0,
            IDLE_CPU_TARGET * 100.0,
        );
        self.writes(&self.joined, &self.idled).print(total, "    ");
        let (manager, server) = self.cpu_per_node();
        println!(
            "CPU:         whole life, per node: manager {:.2} ms, API server {:.2} ms (the driver's excluded)",
            ms(manager),
            ms(server),
        );
        self.print_memory();
        self.print_way_out();
    }

    fn print_memory(&self) {
        let total = self.total();
        match (self.before.manager_rss, self.joined.manager_rss) {
            (Some(before), Some(after)) => {
                let per_contract = after.total.saturating_sub(before.total) as f64 / total as f64;
                let projected = before.total as f64 + per_contract * CACHED_CONTRACTS;
                println!(
                    "memory:      the manager's VmRSS {:.1} MiB with its caches synced, {:.1} MiB with \
                     {total} contracts: {per_contract:.1} KiB per contract; {:.1} MiB projected with \
                     {CACHED_CONTRACTS} contracts (target: at most {MANAGER_RSS_TARGET_MIB} MiB)",
                    mib(before.total),
                    mib(after.total),
                    projected / 1024.0,
                );
                println!(
                    "  resident, synced -> with {total} contracts: {}",
                    resident_split(before, after)
                );
                // A guest-watch round (once a minute) is the idle manager's
                // one piece of work: `--idle-seconds 70` takes one in.
                if let Some(idled) = self.idled.manager_rss {
                    println!(
                        "  after the idle window ({:.0?}): VmRSS {:.1} MiB, anonymous {:.1}",
                        self.idled.at - self.joined.at,
                        mib(idled.total),
                        mib(idled.anon),
                    );
                }
            }
            _ => {
                let grown = self
                    .joined
                    .process_rss
                    .saturating_sub(self.before.process_rss);
                println!(
                    "memory:      VmRSS {:.1} MiB before the scale-up, {:.1} MiB after: {:.1} KiB/node \
                     (the API server and its objects share this process with the manager; \
                     --external measures the manager alone)",
                    mib(self.before.process_rss),
                    mib(self.joined.process_rss),
                    grown as f64 / total as f64,
                );
            }
        }
    }
}

/// What `--curve` measured against its targets.
pub struct CurveVerdict {
    /// The larger growth of CPU per node from the smallest size to the largest
    /// (manager or API server).
    pub cpu_growth: f64,
    /// The sizes whose scale-down took longer per node than their scale-up,
    /// with that ratio.
    pub down_slower: Vec<(usize, f64)>,
}

impl Life {
    /// Scale-down over scale-up per node, by the clock (the target).
    fn down_over_up(&self) -> f64 {
        self.down().as_secs_f64() / self.up().as_secs_f64()
    }

    /// Scale-down over scale-up per node, by the CPU the manager and the API
    /// server used: on a loaded machine the clock follows it.
    fn cpu_down_over_up(&self) -> f64 {
        let (up_manager, up_server) = self.phase_cpu_per_node(true);
        let (down_manager, down_server) = self.phase_cpu_per_node(false);
        (down_manager + down_server).as_secs_f64()
            / (up_manager + up_server).as_secs_f64().max(1e-9)
    }
}

/// Prints one row per life, the growth of CPU per node from the first to
/// the last and every size whose scale-down was slower per node than its
/// scale-up.
pub fn print_curve(lives: &[Life]) -> CurveVerdict {
    println!(
        "bench-scale --curve (debug build: {}); per node over a whole life (up, idle 2 s, down):",
        cfg!(debug_assertions)
    );
    println!(
        "  {:>6}  {:>9}  {:>11}  {:>7}  {:>11}  {:>13}  {:>14}  {:>10}",
        "nodes",
        "up ms/node",
        "down ms/node",
        "down/up",
        "CPU down/up",
        "manager CPU ms",
        "API server CPU ms",
        "writes"
    );
    for life in lives {
        let total = life.total() as f64;
        let (manager, server) = life.cpu_per_node();
        let writes = life.writes(&life.before, &life.gone).total as f64 / total;
        println!(
            "  {:>6}  {:>10.2}  {:>12.2}  {:>7.2}  {:>11.2}  {:>14.2}  {:>17.2}  {:>10.2}",
            life.total(),
            ms(life.up()) / total,
            ms(life.down()) / total,
            life.down_over_up(),
            life.cpu_down_over_up(),
            ms(manager),
            ms(server),
            writes,
        );
    }
    for life in lives {
        println!("  {} nodes, scale-down:", life.total());
        life.print_way_out();
    }
    let down_slower: Vec<(usize, f64)> = lives
        .iter()
        .map(|life| (life.total(), life.down_over_up()))
        .filter(|(_, ratio)| *ratio > 1.0)
        .collect();
    println!(
        "  scale-down per node over scale-up: {} (target: at most 1 at every size)",
        lives
            .iter()
            .map(|life| format!("{:.2} at {}", life.down_over_up(), life.total()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (Some(first), Some(last)) = (lives.first(), lives.last()) else {
        return CurveVerdict {
            cpu_growth: 0.0,
            down_slower,
        };
    };
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    let (first_manager, first_server) = first.cpu_per_node();
    let (last_manager, last_server) = last.cpu_per_node();
    let manager = ratio(last_manager, first_manager);
    let server = ratio(last_server, first_server);
    println!(
        "  CPU per node at {} nodes over {} nodes: manager {manager:.2}x, API server {server:.2}x \
         (target: at most {CURVE_LIMIT}x each)",
        last.total(),
        first.total(),
    );
    CurveVerdict {
        cpu_growth: manager.max(server),
        down_slower,
    }
}

pub fn print_throughput(
    total: usize,
    clusters: usize,
    nodes: usize,
    plain: Duration,
    deployed: Duration,
    joined: Duration,
) {
    let floor = plain + BID_WINDOW;
    println!(
        "bench-scale --throughput (debug build: {}): {clusters} Clusters x {nodes} NodeClaims = {total} nodes",
        cfg!(debug_assertions)
    );
    println!(
        "  floor: a plain client creates {total} objects in {plain:.2?}, plus one bid window \
         ({BID_WINDOW:?}) = {floor:.2?}"
    );
    println!(
        "  the manager: every contract Deployed after {deployed:.2?} = {:.2}x the floor; \
         every claim Joined after {joined:.2?} = {:.2}x",
        deployed.as_secs_f64() / floor.as_secs_f64(),
        joined.as_secs_f64() / floor.as_secs_f64(),
    );
}

/// The CPU the manager and the API server used until every contract was
/// Deployed: near the machine's cores, the run is bound by CPU per node, not
/// by waits (concurrency, polls, queue order).
pub fn print_throughput_cpu(
    total: usize,
    deployed: Duration,
    (manager, server, driver): (Duration, Duration, Duration),
) {
    let per_node = |cpu: Duration| cpu.as_secs_f64() * 1000.0 / total as f64;
    println!(
        "  CPU until every contract was Deployed: manager {manager:.2?} ({:.2} ms/node), \
         API server {server:.2?} ({:.2} ms/node); {:.2} cores busy on average; \
         besides them the benchmark's creates and watches {driver:.2?} ({:.2} ms/node)",
        per_node(manager),
        per_node(server),
        (manager + server).as_secs_f64() / deployed.as_secs_f64(),
        per_node(driver),
    );
}

/// Reconciles started from `from` to `to`, all and by controller, per node.
fn reconciles_per_node(from: &Reading, to: &Reading, nodes: usize) -> String {
    let per_node = |n: u64| n as f64 / nodes as f64;
    let reconciles: BTreeMap<&String, u64> = to
        .reconciles
        .iter()
        .map(|(c, n)| (c, n - from.reconciles.get(c).copied().unwrap_or(0)))
        .collect();
    let all: u64 = reconciles.values().sum();
    format!(
        "{all} = {:.2}/node: {}",
        per_node(all),
        reconciles
            .iter()
            .map(|(c, n)| format!("{c} {:.2}", per_node(*n)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// What the manager did for its CPU until every contract was Deployed: its
/// writes (each also a watch event it decodes) and reconciles per node.
pub fn print_throughput_work(
    total: usize,
    log: &[RequestRecord],
    before: &Reading,
    deployed: &Reading,
) {
    let writes = Writes::of_manager(
        log.get(before.writes..deployed.writes).unwrap_or_default(),
        BENCH_MANAGER,
    );
    println!(
        "  the manager's writes until every contract was Deployed: {} = {:.2}/node, {} answered 409:",
        writes.total,
        writes.total as f64 / total as f64,
        writes.conflicts,
    );
    writes.print(total, "    ");
    println!(
        "  reconciles until every contract was Deployed: {}",
        reconciles_per_node(before, deployed, total)
    );
}

pub fn print_latency(rows: &[(usize, Duration, Duration)], external: bool) {
    println!(
        "bench-scale --latency (debug build: {}, manager {}): claim created (its create answered) \
         -> its contract seen by a watch",
        cfg!(debug_assertions),
        if external {
            "in its own process"
        } else {
            "in this process"
        },
    );
    for (batch, p50, p99) in rows {
        println!("  {batch:>6} claims at once: p50 {p50:.2?}, p99 {p99:.2?}");
    }
}

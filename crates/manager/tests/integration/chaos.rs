//! The chaos scenario (issue 10): the `manager` binary against the standalone
//! `apiserver` binary while the server fails 5 % of requests (409, 500, 503),
//! applies 5 % of the writes it lets through and answers them 500 anyway, cuts
//! every watch after 2.5 s and compacts every few seconds; the manager is
//! SIGKILLed every few seconds and the API server three times, while claims
//! scale 0 -> peak -> plateau -> 0 and the Cluster is deleted.
//!
//! Each phase must converge within its deadline with the faults still on: a
//! controller that stalls under steady errors fails here, not only one that
//! breaks an invariant. Then, from the server's durable history of
//! ComputeContracts and the market's state directory: no contract requested or
//! rented twice, none deleted before Released, and nothing left (contracts,
//! join Secrets, Infras, running guests).
//!
//! `chaos_short` runs in the suite (and so in `.ci/run`); `chaos_long`
//! (0 -> 200 -> 50 -> 0) runs with `just chaos`.

use crate::chaos_support;
use crate::support;

use std::time::{Duration, Instant};

use api::NodeClaimPhase;
use chaos_support::driver::{Chaos, Figures};
use chaos_support::{CONTRACTS, Deadlines, Settings, World, chaos_faults, claim_names};
use support::invariants;

fn seconds(list: &[u64]) -> Vec<Duration> {
    list.iter()
        .map(|s| Duration::from_millis(s * 1000))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_short() {
    scenario(Settings {
        peak: 24,
        plateau: 6,
        manager_lifetimes: seconds(&[4, 7, 3, 6, 5]),
        new_identity_every: 3,
        compact_every: Duration::from_secs(3),
        faults: chaos_faults(),
        deadlines: Deadlines {
            up: Duration::from_secs(40),
            down: Duration::from_secs(30),
            zero: Duration::from_secs(30),
        },
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with `just chaos`"]
async fn chaos_long() {
    scenario(Settings {
        peak: 200,
        plateau: 50,
        manager_lifetimes: seconds(&[5, 9, 3, 7, 11, 4, 6]),
        new_identity_every: 3,
        compact_every: Duration::from_secs(3),
        faults: chaos_faults(),
        deadlines: Deadlines {
            up: Duration::from_secs(180),
            down: Duration::from_secs(120),
            zero: Duration::from_secs(120),
        },
    })
    .await;
}

/// Phase durations, for the figures.
#[derive(Debug, Default)]
struct Timings {
    up: Duration,
    down: Duration,
    zero: Duration,
}

async fn scenario(settings: Settings) {
    let (world, server) = World::start().await;
    let deadlines = settings.deadlines;
    let (peak, plateau) = (settings.peak, settings.plateau);
    let chaos = Chaos::start(settings, server, world.debug.clone()).await;
    let mut timings = Timings::default();

    // 0 -> peak; the server dies once about half the claims joined.
    let started = Instant::now();
    let all = claim_names(0..peak);
    world.create_claims(&all).await;
    wait_for(
        &world,
        "scale-up: half Joined",
        deadlines.up,
        started,
        |claims| joined(claims) >= peak / 2,
    )
    .await;
    chaos.kill_apiserver().await;
    wait_for(
        &world,
        "scale-up: every claim Joined",
        deadlines.up,
        started,
        |claims| claims.len() == peak && joined(claims) == peak,
    )
    .await;
    timings.up = started.elapsed();

    // peak -> plateau; the server dies right after the deletions.
    let started = Instant::now();
    world.delete_claims(&all[plateau..]).await;
    chaos.kill_apiserver().await;
    wait_for(
        &world,
        "scale-down: the deleted claims gone",
        deadlines.down,
        started,
        |claims| claims.len() == plateau && joined(claims) == plateau,
    )
    .await;
    timings.down = started.elapsed();

    // plateau -> 0, then the Cluster; the server dies mid-way.
    let started = Instant::now();
    world.delete_claims(&all[..plateau]).await;
    world.delete_cluster().await;
    chaos.kill_apiserver().await;
    wait_for(
        &world,
        "scale to zero: every claim gone",
        deadlines.zero,
        started,
        <[_]>::is_empty,
    )
    .await;
    wait_cluster_gone(&world, deadlines.zero, started).await;
    timings.zero = started.elapsed();

    let outcome = chaos.stop().await;
    let history = world.debug.history(CONTRACTS).await.unwrap();
    let market = world.market();
    invariants::deleted_only_when_released(&history);
    invariants::writers_are_exclusive(&history);
    invariants::published_and_rented_at_most_once(&market, &history);
    // The history is whole across the server's deaths: every claim's contract
    // was written, and every one of them deleted once.
    let contracts: std::collections::BTreeSet<&str> =
        history.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        contracts.len(),
        peak,
        "one contract per claim: {contracts:?}"
    );
    let deletions = history
        .iter()
        .filter(|e| e.change == apiserver::store::ChangeType::Deleted)
        .count();
    assert_eq!(deletions, peak, "every contract deleted once");
    invariants::assert_nothing_left(&world.client, &market).await;
    print_figures(&outcome.figures, &timings, peak, plateau);
    println!(
        "chaos history: {} writes of ComputeContracts",
        history.len()
    );
    drop(outcome);
}

fn joined(claims: &[(String, Option<NodeClaimPhase>)]) -> usize {
    claims
        .iter()
        .filter(|(_, phase)| *phase == Some(NodeClaimPhase::Joined))
        .count()
}

/// Polls the claims until `done`, failing after `deadline` from `started` with
/// what it saw last.
async fn wait_for(
    world: &World,
    what: &str,
    deadline: Duration,
    started: Instant,
    done: impl Fn(&[(String, Option<NodeClaimPhase>)]) -> bool,
) {
    let mut last = None;
    let mut reported = Instant::now();
    loop {
        if let Some(claims) = world.claim_phases().await {
            if done(&claims) {
                return;
            }
            // A trace of the progress, for a run that comes close to its deadline.
            if reported.elapsed() >= Duration::from_secs(2) {
                println!(
                    "{what}: {:.1?} in: {}",
                    started.elapsed(),
                    summary(Some(&claims))
                );
                reported = Instant::now();
            }
            last = Some(claims);
        }
        assert!(
            started.elapsed() < deadline,
            "{what}: not within {deadline:?} with the faults on; last seen: {}",
            summary(last.as_deref())
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn wait_cluster_gone(world: &World, deadline: Duration, started: Instant) {
    loop {
        if let Ok(None) = world.clusters().get_opt(chaos_support::CLUSTER).await {
            return;
        }
        assert!(
            started.elapsed() < deadline,
            "the Cluster is not gone within {deadline:?} with the faults on"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn summary(claims: Option<&[(String, Option<NodeClaimPhase>)]>) -> String {
    let Some(claims) = claims else {
        return "no successful list".to_owned();
    };
    let mut by_phase = std::collections::BTreeMap::<String, usize>::new();
    for (_, phase) in claims {
        *by_phase.entry(format!("{phase:?}")).or_default() += 1;
    }
    format!("{} claims {by_phase:?}", claims.len())
}

fn print_figures(figures: &Figures, timings: &Timings, peak: usize, plateau: usize) {
    let injected = &figures.injected;
    println!(
        "chaos figures: 0 -> {peak} in {:.1?}, -> {plateau} in {:.1?}, -> 0 in {:.1?}; \
         faults injected {} (409 {}, 500 {}, 503 {}, applied-then-500 {}, watches dropped {}); \
         compactions {}; manager SIGKILLs {}; API server SIGKILLs {}",
        timings.up,
        timings.down,
        timings.zero,
        injected.total(),
        injected.conflicts,
        injected.internal_errors,
        injected.unavailable,
        injected.applied_errors,
        injected.watches_dropped,
        figures.compactions,
        figures.manager_kills,
        figures.apiserver_kills,
    );
}

//! End-to-end with a stale NodeClaim cache: every claim watch event reaches
//! the controllers a second late, as on a loaded machine where the
//! controller's own status write shows up after the events of the Infra and
//! the contracts it caused. Decisions must hold against that lag: a Failed
//! claim never rents a second machine, and a claim's time to Deployed is
//! observed once.

use crate::nodeclaim_e2e_support;

use std::time::Duration;

use api::names::{compute_contract_name, entry_name, infra_name};
use api::{ComputeContractPhase, NodeClaimPhase};
use apiserver::store::ChangeType;
use controllers::metrics::Metrics;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use market::LocalMarketConfig;
use nodeclaim_e2e_support::*;
use prometheus_client::registry::Registry;
use serde_json::json;

/// Long enough that several contract and Infra events arrive while the
/// controllers still see a claim's previous status.
const LAG: Duration = Duration::from_millis(1500);

/// Creates a claim of `c1` and sets its join grace (seconds).
async fn claim_with_join_grace(env: &Env, name: &str, join: u32) -> api::NodeClaim {
    let claim = create_claim(&env.client, name, "c1", 2).await;
    claims(&env.client)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"joinGraceSeconds": join}})),
        )
        .await
        .unwrap();
    claim
}

/// Waits until the controllers' lagging claim cache has seen everything
/// written so far: a claim of a Cluster with no URL is created after it, and
/// the controller reports on it only once its watch delivered it (in order).
async fn wait_for_claim_cache(env: &Env, probe: &str) {
    let client = &env.client;
    create_claim(client, probe, "no-url", 2).await;
    eventually(&format!("the controller saw {probe}"), || async {
        claims(client).get(probe).await.unwrap().status.map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_claim_rents_no_second_machine_when_the_cache_lags() {
    let env = start_with(Setup {
        // Guests reach the network but never register their node.
        market: Some(LocalMarketConfig {
            seed: 7,
            node_register_delay: Duration::from_secs(3600),
            ..LocalMarketConfig::default()
        }),
        claim_watch_lag: Some(LAG),
        ..Setup::default()
    })
    .await;
    let client = &env.client;
    ready_and_unready_clusters(client).await;
    let claim = claim_with_join_grace(&env, "never-joins", 1).await;
    let entry = entry_name(&claim.uid().unwrap());
    let contract = compute_contract_name(&infra_name(NS, "c1"), &entry);

    eventually("never-joins Failed", || async {
        (phase_of(client, "never-joins").await == Some(NodeClaimPhase::Failed)).then_some(())
    })
    .await;
    testkit::wait_gone(&contracts(client), &contract).await;
    wait_for_claim_cache(&env, "probe").await;

    let history = env.server.history();
    let infra_versions: Vec<bool> = history
        .iter()
        .filter(|e| e.resource.ends_with("/infras") && e.name == infra_name(NS, "c1"))
        .map(|e| {
            let object = e.object();
            let live = e.change != ChangeType::Deleted
                && object["metadata"]["deletionTimestamp"].is_null();
            live && object["spec"]["contracts"]
                .as_array()
                .is_some_and(|entries| entries.iter().any(|c| c["name"] == entry.as_str()))
        })
        .collect();
    let removed_at = infra_versions
        .iter()
        .position(|has| !has)
        .expect("the failed claim's entry was removed");
    assert!(
        infra_versions[removed_at..].iter().all(|has| !has),
        "a Failed claim's entry never comes back: {infra_versions:?}"
    );
    let created = history
        .iter()
        .filter(|e| {
            e.resource.ends_with("/computecontracts")
                && e.name == contract
                && e.change == ChangeType::Added
        })
        .count();
    assert_eq!(created, 1, "one machine rented for the failed claim");
    let status = claim_status(client, "never-joins").await;
    assert_eq!(status.phase, Some(NodeClaimPhase::Failed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_to_deployed_is_observed_once_per_claim_when_the_cache_lags() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let env = start_with(Setup {
        claim_watch_lag: Some(LAG),
        metrics: Some(metrics),
        ..Setup::default()
    })
    .await;
    let client = &env.client;
    ready_and_unready_clusters(client).await;
    let names = ["worker-a", "worker-b", "worker-c"];
    for name in names {
        create_claim(client, name, "c1", 2).await;
    }
    for name in names {
        eventually(&format!("{name} Joined"), || async move {
            (phase_of(client, name).await == Some(NodeClaimPhase::Joined)).then_some(())
        })
        .await;
    }
    wait_for_claim_cache(&env, "probe").await;
    for name in names {
        let contract = contract_of_claim(&env, name).await;
        assert_eq!(contract, Some(ComputeContractPhase::Deployed));
    }

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for histogram in [
        "socialweb_nodeclaim_time_to_deployed_seconds_count",
        "socialweb_nodeclaim_time_to_joined_seconds_count",
    ] {
        assert_eq!(
            sample(&text, histogram),
            Some(3.0),
            "{histogram}: once per claim\n{text}"
        );
    }
}

/// The phase of a claim's contract, read through the claim's `status.infra`.
async fn contract_of_claim(env: &Env, name: &str) -> Option<ComputeContractPhase> {
    let claim = claims(&env.client).get(name).await.unwrap();
    let infra = claim.status?.infra?;
    let contract = contracts(&env.client)
        .get(&infra.compute_contract)
        .await
        .unwrap();
    contract.status?.phase
}

/// The value of an unlabelled sample in Prometheus text.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// The Cluster `c1`, ready with an endpoint, and `no-url`, which reports none.
async fn ready_and_unready_clusters(client: &kube::Client) {
    create_cluster(client, "c1", true).await;
    create_cluster(client, "no-url", false).await;
}

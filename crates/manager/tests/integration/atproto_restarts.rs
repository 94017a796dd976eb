//! The manager killed at each step of an atproto contract, and a bidder
//! restarted: no second request, no second accept (so never a second
//! machine), no lost release. The fake bidders count every machine they
//! start and stop (plan 0013, R5-ACCEPTANCE; the adapter's own restart tests
//! are crates/market/tests/integration/atproto_restart.rs, these run the whole product).

use crate::support;

use api::ComputeContractPhase;
use atproto::market as m;
use atproto_fake::{Fault, Service};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::atproto_market::three_bidders;
use support::invariants::{assert_all, receipts_of};
use support::{Env, NS, eventually};

fn phase(c: &api::ComputeContract) -> Option<ComputeContractPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

/// Machines started by every bidder together.
fn machines_started(env: &Env) -> u64 {
    env.atproto_env().started().values().sum()
}

async fn set_bid_window(env: &Env, seconds: u32) {
    env.requesters()
        .patch(
            "root",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bidWindowSeconds": seconds}})),
        )
        .await
        .unwrap();
}

/// A Ready Cluster `c1` with one claim `worker-a`.
async fn one_claim(env: &Env) -> api::NodeClaim {
    let cluster = env.create_cluster(NS, "c1", true).await;
    env.create_claim(NS, "worker-a", "c1", 2, Some(&cluster))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_bidding_publishes_no_second_request() {
    let mut env = Env::start_atproto(&three_bidders()).await;
    // A long window, so the manager is surely killed between the request and the accept.
    set_bid_window(&env, 600).await;
    let claim = one_claim(&env).await;
    eventually("the request published and bids in", || async {
        let contract = env.contract_of(&claim).await?;
        let bids: u64 = env.atproto_env().total(|c| c.bids);
        (phase(&contract) == Some(ComputeContractPhase::Bidding) && bids == 3).then_some(())
    })
    .await;
    env.kill_manager().await;
    set_bid_window(&env, 1).await;
    env.start_manager();
    env.wait_joined(NS, &["worker-a"]).await;
    let atproto = env.atproto_env();
    assert_eq!(atproto.rfps(), 1, "no second request for proposal");
    assert_eq!(atproto.accepts(), 1);
    assert_eq!(machines_started(&env), 1, "one machine");
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_a_lost_accept_answer_starts_no_second_machine() {
    let mut env = Env::start_atproto(&three_bidders()).await;
    // The bidder processes the accept (a receipt, a machine) but its answer is lost.
    env.atproto_env()
        .market
        .net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::LoseAnswer);
    let claim = one_claim(&env).await;
    eventually("the machine started for the lost answer", || async {
        (machines_started(&env) == 1).then_some(())
    })
    .await;
    env.kill_manager().await;
    env.start_manager();
    env.wait_joined(NS, &["worker-a"]).await;
    env.atproto_env().quiet().await;
    assert_eq!(
        machines_started(&env),
        1,
        "the receipt was found, not asked for again"
    );
    assert_eq!(env.atproto_env().accepts(), 1);
    let contract = env.contract_of(&claim).await.unwrap();
    assert_eq!(phase(&contract), Some(ComputeContractPhase::Deployed));
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accept_written_but_never_processed_is_sent_once_after_a_restart() {
    let mut env = Env::start_atproto(&three_bidders()).await;
    // Every accept fails before the bidder acts, until the manager is killed.
    let faults = env.atproto_env().market.net.faults.clone();
    faults.inject(
        Service::Bidder,
        Some(m::SUBMIT_ACCEPT),
        Fault::internal(),
        None,
    );
    one_claim(&env).await;
    eventually("our accept written", || async {
        (env.atproto_env().accepts() == 1).then_some(())
    })
    .await;
    env.kill_manager().await;
    assert_eq!(machines_started(&env), 0);
    faults.clear();
    env.start_manager();
    env.wait_joined(NS, &["worker-a"]).await;
    env.atproto_env().quiet().await;
    assert_eq!(machines_started(&env), 1, "sent again once, one machine");
    assert_eq!(
        env.atproto_env().accepts(),
        1,
        "the same accept, not a second"
    );
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_written_but_unacknowledged_is_sent_again_after_a_restart() {
    let mut env = Env::start_atproto(&three_bidders()).await;
    let claim = one_claim(&env).await;
    env.wait_joined(NS, &["worker-a"]).await;
    let name = env.contract_of(&claim).await.unwrap().name_any();
    let faults = env.atproto_env().market.net.faults.clone();
    faults.inject(
        Service::Bidder,
        Some(m::SUBMIT_EVENT),
        Fault::internal(),
        None,
    );
    env.delete_claim("worker-a").await;
    eventually("the release written and refused", || async {
        let contract = env.contracts().get_opt(&name).await.unwrap()?;
        let released = contract
            .status
            .as_ref()?
            .conditions
            .iter()
            .any(|c| c.type_ == "Released" && c.reason == "ReleaseFailed");
        (contract.spec.release && released).then_some(())
    })
    .await;
    env.kill_manager().await;
    let receipt = receipts_of(&env.server.history(), None)[&name].clone();
    assert!(env.atproto_env().machines_of(&receipt)[0].running);
    faults.clear();
    env.start_manager();
    env.wait_gone(&env.claims(NS), "worker-a").await;
    env.atproto_env().quiet().await;
    let machines = env.atproto_env().machines_of(&receipt);
    assert_eq!(machines.len(), 1);
    assert!(!machines[0].running, "the release reached the bidder");
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidder_restart_keeps_its_guests_deployed_and_rents_on() {
    let env = Env::start_atproto(&three_bidders()).await;
    let (cluster, a, _) = env.two_joined().await;
    // The bidder that won worker-a (the cheapest, unless its bid came after the window).
    let winner = env.winner_of(&a).await;
    let restarted = env.atproto_env().bidder(&winner).clone();
    // The bidder forgets its contracts (the reference keeps them in memory);
    // its machines keep running and their events stay in its repository.
    restarted.restart();
    let c = env
        .create_claim(NS, "worker-c", "c1", 2, Some(&cluster))
        .await;
    env.wait_joined(NS, &["worker-c"]).await;
    for claim in [&a, &c] {
        let contract = env.contract_of(claim).await.unwrap();
        assert_eq!(phase(&contract), Some(ComputeContractPhase::Deployed));
    }
    // A release of a contract the bidder forgot is acknowledged and ignored:
    // the protocol has no confirmation, so the contract says Released and the
    // machine runs on (docs/atproto-market.md says so to operators).
    let name_a = env.contract_of(&a).await.unwrap().name_any();
    testkit::delete_and_wait(&env.claims(NS), "worker-a").await;
    env.atproto_env().quiet().await;
    let counters = restarted.counters();
    assert!(counters.deletes_ignored >= 1, "{counters:?}");
    assert_eq!(counters.machines_stopped, 0, "{counters:?}");
    let history = env.server.history();
    let receipt = receipts_of(&history, None)[&name_a].clone();
    assert!(env.atproto_env().machines_of(&receipt)[0].running);
    assert_eq!(
        machines_started(&env),
        3,
        "one machine per claim, never two"
    );
    // A bidder restarted at the same endpoint leaves no trace in its
    // repository, so the release says what it is: acknowledged.
    assert_eq!(
        released_reason(&history, &name_a).as_deref(),
        Some("ReleaseAcknowledged")
    );
    assert_eq!(
        env.metric(r#"socialweb_contract_releases_total{outcome="acknowledged"}"#),
        Some(1.0)
    );
}

/// The reason of the first `Released=True` condition `name` carried, and its message.
fn released_condition(
    history: &[apiserver::testing::HistoryEntry],
    name: &str,
) -> Option<(String, String)> {
    history
        .iter()
        .filter(|e| e.resource.ends_with("/computecontracts") && e.name == name)
        .find_map(|e| {
            let conditions = e.object()["status"]["conditions"].as_array()?.clone();
            conditions.iter().find_map(|c| {
                (c["type"] == "Released" && c["status"] == "True").then(|| {
                    (
                        c["reason"].as_str().unwrap_or_default().to_owned(),
                        c["message"].as_str().unwrap_or_default().to_owned(),
                    )
                })
            })
        })
}

fn released_reason(history: &[apiserver::testing::HistoryEntry], name: &str) -> Option<String> {
    released_condition(history, name).map(|(reason, _)| reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lost_by_a_bidder_restart_is_reported_unconfirmed() {
    let env = Env::start_atproto(&three_bidders()).await;
    let claim = one_claim(&env).await;
    env.wait_joined(NS, &["worker-a"]).await;
    let contract = env.contract_of(&claim).await.unwrap();
    let name = contract.name_any();
    let winner = contract.status.unwrap().winner.unwrap().bidder;
    let restarted = env.atproto_env().bidder(&winner).clone();
    // As the reference's hono-bidder restarts: a new endpoint (a new ingress
    // per process), its offering rewritten to name it, the contracts forgotten.
    let old = restarted.url();
    let new = restarted.restart_on_new_endpoint().await.unwrap();
    testkit::delete_and_wait(&env.claims(NS), "worker-a").await;
    env.atproto_env().quiet().await;

    let history = env.server.history();
    let receipt = receipts_of(&history, None)[&name].clone();
    let (reason, message) = released_condition(&history, &name).expect("the contract was released");
    assert_eq!(reason, "ReleaseUnconfirmed", "{message}");
    for named in [
        winner.as_str(),
        receipt.uri.as_str(),
        old.as_str(),
        new.as_str(),
    ] {
        assert!(message.contains(named), "{named} in {message}");
    }
    let events: Api<Event> = Api::namespaced(env.client.clone(), support::CONTRACT_NS);
    eventually("a Warning Event about the lost release", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ReleaseUnconfirmed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                    && e.note.as_deref().is_some_and(|n| n.contains(&receipt.uri))
            })
            .then_some(())
    })
    .await;
    assert_eq!(
        env.metric(r#"socialweb_contract_releases_total{outcome="unconfirmed"}"#),
        Some(1.0)
    );
    // The machine runs on: only its provider can stop it, as the message says.
    let counters = restarted.counters();
    assert_eq!(counters.machines_stopped, 0, "{counters:?}");
    assert!(counters.deletes_ignored >= 1, "{counters:?}");
    assert!(env.atproto_env().machines_of(&receipt)[0].running);
    assert_eq!(machines_started(&env), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_pushed_while_no_manager_runs_are_read_after_the_restart() {
    let mut env = Env::start_atproto(&three_bidders()).await;
    // The machines report a while after the accept: by then no manager runs.
    env.atproto_env()
        .market
        .net
        .faults
        .set_bidder(atproto_fake::BidderKnobs {
            provisioning_delay: std::time::Duration::from_secs(2),
            ..Default::default()
        });
    let claim = one_claim(&env).await;
    eventually("the receipt recorded", || async {
        let contract = env.contract_of(&claim).await?;
        contract.status?.receipt.map(drop)
    })
    .await;
    env.kill_manager().await;
    // Nobody leads: the market port answers every push 503, and keeps nothing.
    let url = format!("{}/xrpc/{}", env.atproto_env().public_url, m::SUBMIT_EVENT);
    let answer = reqwest::Client::new()
        .post(&url)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 503);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "NotLeader");
    let winner = env.winner_of(&claim).await;
    eventually(
        "the provider's events written (and pushed in vain)",
        || async {
            let events = env
                .atproto_env()
                .market
                .net
                .pds
                .records(&winner, m::EVENT)
                .len();
            (events >= 2).then_some(())
        },
    )
    .await;
    env.start_manager();
    env.wait_joined(NS, &["worker-a"]).await;
    let contract = env.contract_of(&claim).await.unwrap();
    assert!(contract.status.unwrap().guest.unwrap().node_id.is_some());
    assert_eq!(machines_started(&env), 1);
    assert_all(&env).await;
}

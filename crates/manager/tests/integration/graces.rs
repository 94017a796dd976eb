//! The join and loss graces end to end (DESIGN section 4): a guest that never
//! joins, or whose node is lost for longer than the grace, fails its claim
//! with a reason a person can act on, and its machine is released; the other
//! claims of the Cluster are not disturbed.
//!
//! The pure deadlines are proven with a manual clock in
//! `controllers/tests/nodeclaim_graces.rs`; these runs prove the whole chain
//! (claim, Infra entry, contract release, market) on the real wiring, with
//! graces of a few seconds.

use crate::support;

use std::time::Duration;

use api::{ComputeContractPhase, NodeClaim, NodeClaimPhase};
use controllers::nodeclaim::conditions::{JOINED, reason};
use kube::ResourceExt;
use kube::api::PostParams;
use manager::wiring::ControllerOptions;
use market::{ContractKey, LocalMarketConfig};
use serde_json::json;
use support::invariants::{assert_all, receipts_of};
use support::{CONTRACT_NS, Env, NS, eventually};

/// A claim on `c1` with the given graces (seconds).
async fn claim_with_graces(env: &Env, name: &str, join: u32, loss: u32) -> NodeClaim {
    let mut body = testkit::claim_json(NS, name, "c1", 2);
    body["spec"]["joinGraceSeconds"] = json!(join);
    body["spec"]["lossGraceSeconds"] = json!(loss);
    let claim: NodeClaim = serde_json::from_value(body).unwrap();
    env.claims(NS)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
}

/// The reason of the claim's Joined condition, once the claim is Failed.
async fn failed_because(env: &Env, name: &str) -> String {
    eventually(&format!("{name} Failed"), || async {
        let claim = env.claims(NS).get(name).await.unwrap();
        let status = claim.status?;
        if status.phase != Some(NodeClaimPhase::Failed) {
            return None;
        }
        status
            .conditions
            .iter()
            .find(|c| c.type_ == JOINED)
            .map(|c| c.reason.to_string())
    })
    .await
}

/// Waits until the claim's contract is gone and checks its guest was released first.
async fn machine_released(env: &Env, contract: &str) {
    env.wait_gone(&env.contracts(), contract).await;
    let history = env.server.history();
    let receipt = &receipts_of(&history, None)[contract];
    assert!(
        env.market.release_calls(receipt) >= 1,
        "the failed claim's machine was released"
    );
    let released = history.iter().any(|e| {
        e.name == contract
            && e.resource.ends_with("/computecontracts")
            && e.object()["status"]["phase"] == "Released"
    });
    assert!(released, "{contract} was Released before it went");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_never_joins_fails_its_claim_and_is_released() {
    // Guests reach the network but take an hour to register their node.
    let env = Env::start_with_market(LocalMarketConfig {
        seed: 7,
        node_register_delay: Duration::from_secs(3600),
        ..LocalMarketConfig::default()
    })
    .await;
    env.create_cluster(NS, "c1", true).await;
    let claim = claim_with_graces(&env, "never-joins", 2, 300).await;
    let contract = eventually("the contract Deployed", || async {
        let c = env.contract_of(&claim).await?;
        let deployed = c.status.as_ref()?.phase == Some(ComputeContractPhase::Deployed);
        deployed.then(|| c.name_any())
    })
    .await;

    assert_eq!(
        failed_because(&env, "never-joins").await,
        reason::JOIN_TIMEOUT
    );
    let message = env
        .claims(NS)
        .get("never-joins")
        .await
        .unwrap()
        .status
        .unwrap();
    let joined = message
        .conditions
        .iter()
        .find(|c| c.type_ == JOINED)
        .unwrap();
    assert!(
        joined.message.contains("joinGraceSeconds") && joined.message.contains("recreate"),
        "the message says what happened and what to do: {}",
        joined.message
    );
    machine_released(&env, &contract).await;
    assert_eq!(env.market.running_guests(), 0);
    assert_eq!(
        env.market
            .rfps_published(&ContractKey::new(CONTRACT_NS, contract)),
        1,
        "a Failed claim is final: no machine is rented again"
    );
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lost_past_its_grace_fails_only_its_own_claim() {
    // The market is asked about running guests every second, not every minute.
    let env = Env::start_with(
        LocalMarketConfig {
            seed: 7,
            ..LocalMarketConfig::default()
        },
        ControllerOptions {
            guest_poll_seconds: 1,
            ..ControllerOptions::default()
        },
    )
    .await;
    env.create_cluster(NS, "c1", true).await;
    let lost = claim_with_graces(&env, "loses-node", 900, 2).await;
    let kept = claim_with_graces(&env, "stays", 900, 2).await;
    env.wait_joined(NS, &["loses-node", "stays"]).await;
    let lost_contract = env.contract_of(&lost).await.unwrap().name_any();
    let history = env.server.history();
    let receipt = receipts_of(&history, None)[&lost_contract].clone();

    assert!(env.market.lose_node(&receipt).unwrap());
    assert_eq!(failed_because(&env, "loses-node").await, reason::GUEST_LOST);
    machine_released(&env, &lost_contract).await;

    // The other claim of the Cluster keeps its node and its machine.
    assert_eq!(
        env.claim_phase(NS, "stays").await,
        Some(NodeClaimPhase::Joined)
    );
    let kept_contract = env.contract_of(&kept).await.unwrap();
    assert_eq!(
        kept_contract.status.unwrap().phase,
        Some(ComputeContractPhase::Deployed)
    );
    assert_eq!(env.market.running_guests(), 1);
    assert_all(&env).await;
}

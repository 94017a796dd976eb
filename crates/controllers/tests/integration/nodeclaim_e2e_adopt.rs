//! End-to-end: adoption (`spec.adopt`) never crosses tenants. A claim may take
//! over a running guest only if no contract holds it and the guest's owner is
//! the claim's account; otherwise a condition says why and nothing is rented
//! or released (issue 10, item 1).

use crate::nodeclaim_e2e_support;

use api::{ComputeContractPhase, NodeClaim, NodeClaimPhase, Receipt};
use controllers::nodeclaim::conditions::{DEPLOYED, INFRA_COMPOSED, reason};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use market::Market as _;
use nodeclaim_e2e_support::*;

/// Tenant B's Cluster `b1` (its own account), ready with an endpoint.
async fn tenant_b_cluster(env: &Env) {
    testkit::create_cluster(&env.client, OTHER_NS, "b1", "did:plc:tenant-b").await;
    let url = "https://b1.tenant-b.example:6443";
    testkit::set_cluster_ready(&env.client, OTHER_NS, "b1", url, None).await;
}

/// A claim in `namespace` of Cluster `cluster` that takes over `receipt`.
async fn adopting_claim(
    env: &Env,
    namespace: &str,
    name: &str,
    cluster: &str,
    receipt: &Receipt,
) -> NodeClaim {
    let mut claim = testkit::node_claim(namespace, name, cluster, 2);
    claim.spec.adopt = Some(Box::new(receipt.clone()));
    Api::<NodeClaim>::namespaced(env.client.clone(), namespace)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
}

/// The reason and message of a claim's condition, once it has `want`.
async fn condition_reason(
    env: &Env,
    namespace: &str,
    name: &str,
    type_: &str,
    want: &str,
) -> String {
    let api: Api<NodeClaim> = Api::namespaced(env.client.clone(), namespace);
    eventually(&format!("{namespace}/{name} {type_} {want}"), || async {
        let claim = api.get(name).await.ok()?;
        let condition = api::find_condition(&claim.status?.conditions, type_)?.clone();
        (condition.reason == want).then(|| condition.message.to_string())
    })
    .await
}

/// Deletes a claim of `namespace` and waits until it is gone.
async fn delete_claim(env: &Env, namespace: &str, name: &str) {
    let api: Api<NodeClaim> = Api::namespaced(env.client.clone(), namespace);
    api.delete(name, &DeleteParams::default()).await.unwrap();
    testkit::wait_gone(&api, name).await;
}

#[tokio::test]
async fn another_tenants_held_guest_cannot_be_adopted_and_its_machine_stays() {
    let env = start().await;
    let client = &env.client;
    let (worker, _) = two_claims_joined(&env).await;
    let entry = api::names::entry_name(&worker.uid().unwrap());
    let held = contracts(client)
        .get(&api::names::compute_contract_name(
            &api::names::infra_name(NS, "c1"),
            &entry,
        ))
        .await
        .unwrap();
    let receipt = held.status.clone().unwrap().receipt.unwrap();

    tenant_b_cluster(&env).await;
    let thief = adopting_claim(&env, OTHER_NS, "thief", "b1", &receipt).await;
    let message =
        condition_reason(&env, OTHER_NS, "thief", INFRA_COMPOSED, reason::GUEST_HELD).await;
    assert!(message.contains("held by another contract"), "{message}");
    let thief_entry = api::names::entry_name(&thief.uid().unwrap());
    let all = contracts(client).list(&Default::default()).await.unwrap();
    assert!(
        all.items
            .iter()
            .all(|c| c.labels()[api::names::CONTRACT_LABEL] != thief_entry),
        "nothing is rented for the refused claim"
    );

    delete_claim(&env, OTHER_NS, "thief").await;
    let market_receipt = market::Receipt {
        uri: receipt.uri.clone(),
        cid: receipt.cid.clone(),
    };
    assert_eq!(
        env.market.release_calls(&market_receipt),
        0,
        "A's machine is never released"
    );
    assert_eq!(env.market.running_guests(), 2);
    assert_eq!(
        phase_of(client, "worker-a").await,
        Some(NodeClaimPhase::Joined)
    );
    let held = contracts(client).get(&held.name_any()).await.unwrap();
    assert_eq!(
        held.status.unwrap().phase,
        Some(ComputeContractPhase::Deployed)
    );
}

#[tokio::test]
async fn a_guest_is_taken_over_only_by_its_owners_claim() {
    let env = start().await;
    let client = &env.client;
    create_cluster(client, "c1", true).await;
    eventually("the market has the Requester's bidders", || async {
        (!env.market.bidders().is_empty()).then_some(())
    })
    .await;
    // A guest of tenant A's account rented outside any claim, straight on the market.
    let rfp = market::RequestForProposal {
        contract: market::ContractKey::new(CONTRACT_NS, "rented-elsewhere"),
        resources: market::Resources {
            cpus: 2,
            memory_mib: 2048,
            disk_gib: 10,
            network_mbps: 100,
        },
        location: market::Location {
            country: "DE".into(),
            region: None,
        },
        owner_did: "did:plc:tenant".into(),
    };
    let id = env.market.publish_rfp(rfp).await.unwrap();
    let bids = env.market.collect_bids(&id).await.unwrap();
    let market_receipt = env.market.accept(&id, &bids[0]).await.unwrap();
    let receipt = Receipt {
        uri: market_receipt.uri.clone(),
        cid: market_receipt.cid.clone(),
    };

    // Tenant B names it: its contract asks the market, which says whose it is.
    tenant_b_cluster(&env).await;
    adopting_claim(&env, OTHER_NS, "thief", "b1", &receipt).await;
    let message =
        condition_reason(&env, OTHER_NS, "thief", DEPLOYED, reason::CONTRACT_FAILED).await;
    assert!(message.contains("another account"), "{message}");
    delete_claim(&env, OTHER_NS, "thief").await;
    assert_eq!(env.market.release_calls(&market_receipt), 0);
    assert_eq!(env.market.running_guests(), 1, "the guest still runs");

    // Its owner's claim takes it over.
    adopting_claim(&env, NS, "owner", "c1", &receipt).await;
    eventually("owner Joined", || async {
        (phase_of(client, "owner").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    assert_eq!(env.market.running_guests(), 1, "no second machine");
}

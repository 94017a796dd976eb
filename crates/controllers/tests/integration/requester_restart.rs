//! The Requester controller killed mid-flight and started again on the same
//! market, a status lost in a restore, and the root delete order.

use crate::requester_support;

use std::time::Duration;

use api::{ComputeContractPhase as Phase, Infra};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use market::Operation;
use requester_support::*;
use serde_json::json;

#[tokio::test]
async fn a_restart_in_the_middle_of_bidding_publishes_no_second_rfp() {
    let (env, first) = Env::running().await;
    env.create_requester("root", vec![bidder("did:web:a", 5)], 2)
        .await;
    env.create_contract("c1", 3600).await;
    env.wait_phase("c1", Phase::Bidding).await;
    first.abort();
    let _ = first.await;
    let second = env.start_controller();
    let c = env.wait_phase("c1", Phase::Deployed).await;
    assert_eq!(env.market.rfps_published(&key("c1")), 1);
    assert_eq!(env.market.guests_rented(&key("c1")), 1);
    // One publish per controller life at most: the RFP id is not in status,
    // so the restarted controller asks the (idempotent) market for it once.
    assert!(env.market.publish_calls(&key("c1")) <= 2);
    // A third life after the receipt never publishes again.
    second.abort();
    let _ = second.await;
    let calls = env.market.publish_calls(&key("c1"));
    let third = env.start_controller();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(env.market.publish_calls(&key("c1")), calls);
    assert_eq!(env.contracts().get("c1").await.unwrap().status, c.status);
    third.abort();
}

#[tokio::test]
async fn a_restart_in_the_middle_of_releasing_loses_no_release() {
    let (env, first) = Env::running_with_root().await;
    let deployed = env.create_deployed("c1", 3600).await;
    let receipt = market_receipt(&deployed);
    env.market.fail_next(Operation::Release, 3);
    env.release("c1").await;
    let stuck = env
        .wait_contract("c1", Duration::from_secs(10), |c| {
            c.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, "Released")
                    .is_some_and(|r| r.reason == "ReleaseFailed")
            })
        })
        .await;
    assert_eq!(phase_of(&stuck), Some(Phase::Releasing));
    assert!(stuck.status.unwrap().message.unwrap().contains("retrying"));
    first.abort();
    let _ = first.await;
    let second = env.start_controller();
    env.wait_phase("c1", Phase::Released).await;
    assert!(
        env.market.release_calls(&receipt) >= 4,
        "three failures, then a release"
    );
    assert_eq!(env.market.running_guests(), 0);
    assert_eq!(env.market.guests_rented(&key("c1")), 1);
    second.abort();
}

#[tokio::test]
async fn a_lost_status_is_rebuilt_from_the_receipt_annotation() {
    let (env, first) = Env::running_with_root().await;
    let deployed = env.create_deployed("c1", 3600).await;
    first.abort();
    let _ = first.await;
    // A restore that drops status keeps metadata (and so the annotation).
    env.contracts()
        .patch_status(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": null})),
        )
        .await
        .unwrap();
    assert!(env.contracts().get("c1").await.unwrap().status.is_none());
    let second = env.start_controller();
    let rebuilt = env.wait_phase("c1", Phase::Deployed).await;
    let (old, new) = (deployed.status.unwrap(), rebuilt.status.unwrap());
    assert_eq!(new.receipt, old.receipt);
    assert_eq!(new.winner, old.winner);
    assert_eq!(env.market.rfps_published(&key("c1")), 1);
    assert_eq!(env.market.guests_rented(&key("c1")), 1, "no second machine");
    second.abort();
}

#[tokio::test]
async fn deleting_the_requester_deletes_infras_first_releases_all_and_goes_last() {
    let (env, controller) = Env::running_with_root().await;
    let infras: Api<Infra> = Api::namespaced(env.client.clone(), NS);
    let bare: Infra = serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Infra",
        "metadata": {"name": "bare", "namespace": NS}, "spec": {}
    }))
    .unwrap();
    infras.create(&PostParams::default(), &bare).await.unwrap();
    env.create_contract("c1", 3600).await;
    env.create_contract("c2", 3600).await;
    let receipts = [
        market_receipt(&env.wait_phase("c1", Phase::Deployed).await),
        market_receipt(&env.wait_phase("c2", Phase::Deployed).await),
    ];
    env.wait_until("the root finalizer", Duration::from_secs(5), async || {
        let r = env.requesters().get("root").await.unwrap();
        !r.metadata.finalizers.unwrap_or_default().is_empty()
    })
    .await;
    env.requesters()
        .delete("root", &DeleteParams::default())
        .await
        .unwrap();
    env.wait_until(
        "the Requester is gone",
        Duration::from_secs(10),
        async || env.requesters().get_opt("root").await.unwrap().is_none(),
    )
    .await;
    assert!(infras.get_opt("bare").await.unwrap().is_none());
    assert!(env.contracts().get_opt("c1").await.unwrap().is_none());
    assert!(env.contracts().get_opt("c2").await.unwrap().is_none());
    for receipt in &receipts {
        assert!(env.market.release_calls(receipt) >= 1);
    }
    assert_eq!(env.market.running_guests(), 0);
    // The order, from the server's write history.
    let history = env.server.history();
    let deleted_at = |resource: &str, name: &str| {
        history
            .iter()
            .find(|e| {
                format!("{:?}", e.change) == "Deleted"
                    && e.resource.ends_with(resource)
                    && e.name == name
            })
            .map(|e| e.resource_version)
            .unwrap_or_else(|| panic!("{resource}/{name} was never deleted"))
    };
    let released_at = |name: &str| {
        history
            .iter()
            .find(|e| {
                e.resource.ends_with("computecontracts")
                    && e.name == name
                    && e.object()["status"]["phase"] == "Released"
            })
            .map(|e| e.resource_version)
            .unwrap_or_else(|| panic!("{name} was never Released"))
    };
    let requester_gone = deleted_at("requesters", "root");
    assert!(deleted_at("infras", "bare") < requester_gone);
    for name in ["c1", "c2"] {
        assert!(released_at(name) < deleted_at("computecontracts", name));
        assert!(deleted_at("computecontracts", name) < requester_gone);
    }
    controller.abort();
}

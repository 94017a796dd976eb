//! RESTART for the Infra controller on the embedded API server: the manager is
//! killed while releases are in flight (an entry removed, then the Infra
//! deleted) and a fresh one (new caches, no memory) takes over. No contract is
//! duplicated, none is deleted before it is Released, and the deletion finishes.

use crate::infra_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{ComputeContract, Infra};
use apiserver::store::ChangeType;
use apiserver::testing::TestServer;
use infra_support::e2e::{
    CONTRACTS, deployed_with, eventually, fake_requester, install, start_manager,
};
use infra_support::{INFRA, NS, cc_name, plain_spec_with};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use testkit::ListAll;

/// Every ComputeContract's phase, read from the API server.
async fn phases(
    contracts: &Api<ComputeContract>,
) -> Vec<(String, bool, Option<api::ComputeContractPhase>)> {
    contracts
        .list(&Default::default())
        .await
        .unwrap()
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.spec.release,
                c.status.and_then(|s| s.phase),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_release_loses_no_release_and_duplicates_nothing() {
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    install(&client).await;
    let hold_releases = Arc::new(AtomicBool::new(false));
    let requester = tokio::spawn(fake_requester(client.clone(), hold_releases.clone()));
    let infras: Api<Infra> = Api::namespaced(client.clone(), NS);
    let contracts: Api<ComputeContract> = Api::namespaced(client.clone(), NS);

    let first = start_manager(&client);
    infras
        .create(
            &PostParams::default(),
            &Infra::new(INFRA, plain_spec_with(&["node-a", "node-b", "node-c"])),
        )
        .await
        .unwrap();
    eventually("the Infra to be Deployed", || deployed_with(&infras, 3)).await;

    // Releases now stay at Releasing: remove an entry, then delete the Infra.
    hold_releases.store(true, Ordering::SeqCst);
    infras
        .patch(
            INFRA,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": plain_spec_with(&["node-b", "node-c"]) })),
        )
        .await
        .unwrap();
    eventually("node-a to be Releasing", || async {
        let all = phases(&contracts).await;
        all.iter()
            .any(|(n, release, p)| {
                *n == cc_name("node-a")
                    && *release
                    && *p == Some(api::ComputeContractPhase::Releasing)
            })
            .then_some(())
    })
    .await;
    infras
        .delete(INFRA, &DeleteParams::default())
        .await
        .unwrap();
    eventually("every contract to be Releasing", || async {
        let all = phases(&contracts).await;
        (all.len() == 3
            && all.iter().all(|(_, release, p)| {
                *release && *p == Some(api::ComputeContractPhase::Releasing)
            }))
        .then_some(())
    })
    .await;

    // Kill the manager mid-release; a new one starts with empty caches.
    first.kill();
    let restart_from = server.history().len();
    let second = start_manager(&client);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after_restart: Vec<_> = server
        .history()
        .into_iter()
        .skip(restart_from)
        .filter(|e| e.resource == CONTRACTS)
        .map(|e| format!("{:?} {}", e.change, e.name))
        .collect();
    assert!(
        after_restart.is_empty(),
        "the restarted manager wrote contracts while releases were in flight: {after_restart:?}"
    );
    assert!(
        infras.get_opt(INFRA).await.unwrap().is_some(),
        "the finalizer went early"
    );

    // The market confirms: everything is deleted, then the Infra goes.
    hold_releases.store(false, Ordering::SeqCst);
    testkit::wait_gone(&infras, INFRA).await;
    assert!(contracts.list_all().await.is_empty());

    let history: Vec<_> = server
        .history()
        .into_iter()
        .filter(|e| e.resource == CONTRACTS)
        .collect();
    let created = history
        .iter()
        .filter(|e| e.change == ChangeType::Added)
        .count();
    assert_eq!(created, 3, "a contract was created twice");
    for entry in history.iter().filter(|e| e.change == ChangeType::Deleted) {
        // The DELETED write carries the object's last state.
        let object = entry.object();
        assert_eq!(
            object["status"]["phase"], "Released",
            "{} deleted unreleased",
            entry.name
        );
        assert_eq!(object["spec"]["release"], true);
    }
    // node-b and node-c (the Infra's own deletion) went only once both were Released.
    let first_infra_delete = history
        .iter()
        .position(|e| e.change == ChangeType::Deleted && e.name != cc_name("node-a"))
        .unwrap();
    for entry in ["node-b", "node-c"] {
        let last = history[..first_infra_delete]
            .iter()
            .rev()
            .find(|e| e.name == cc_name(entry))
            .unwrap()
            .object();
        assert_eq!(last["status"]["phase"], "Released", "{entry}");
    }

    second.kill();
    requester.abort();
}

//! End to end on the embedded API server: the Infra controller with a tiny
//! fake Requester walks an Infra through scale-up, scale-down and deletion;
//! the order of writes is checked from the server's write history.

use crate::infra_support;
use crate::nodeclaim_e2e_support::lag;

use std::time::Duration;

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL, INFRA_RELEASE_FINALIZER};
use api::{Infra, InfraPhase};
use apiserver::testing::{HistoryEntry, TestServer};
use controllers::infra::{self};
use infra_support::e2e::{
    CONTRACTS, Rig, deployed_with, eventually, fake_requester, install, served_spec_with,
    start_manager,
};
use infra_support::{INFRA, NS, cc_name, plain_spec_with};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use testkit::ListAll;

/// A ComputeContract's release flag and phase after a write.
fn release_and_phase(entry: &HistoryEntry) -> (bool, Option<String>) {
    let object = entry.object();
    (
        object["spec"]["release"].as_bool().unwrap_or(false),
        object["status"]["phase"].as_str().map(str::to_owned),
    )
}

/// The ComputeContract writes from `from` on, in the server's order.
fn contract_writes(server: &TestServer, from: usize) -> Vec<HistoryEntry> {
    server
        .history()
        .into_iter()
        .skip(from)
        .filter(|e| e.resource == CONTRACTS && e.namespace == NS)
        .collect()
}

/// For each of `names`: its last state before the first contract delete in `writes`.
fn states_before_first_delete(
    writes: &[HistoryEntry],
    names: &[String],
) -> Vec<(bool, Option<String>)> {
    let first_delete = writes
        .iter()
        .position(|e| e.change == apiserver::store::ChangeType::Deleted)
        .expect("a contract was deleted");
    names
        .iter()
        .map(|name| {
            writes[..first_delete]
                .iter()
                .rev()
                .find(|e| e.name == *name)
                .map(release_and_phase)
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infra_scales_up_down_and_releases_everything_before_it_goes() {
    let Rig {
        server,
        client,
        manager,
        requester,
        infras,
        contracts,
    } = Rig::start().await;

    // SCALE-UP: two entries -> two ComputeContracts, the Infra Deployed.
    infras
        .create(
            &PostParams::default(),
            &Infra::new(INFRA, plain_spec_with(&["node-a", "node-b"])),
        )
        .await
        .unwrap();
    let deployed = eventually("the Infra to be Deployed", || deployed_with(&infras, 2)).await;
    assert!(
        deployed
            .finalizers()
            .iter()
            .any(|f| f == INFRA_RELEASE_FINALIZER)
    );
    for entry in ["node-a", "node-b"] {
        let contract = contracts.get(&cc_name(entry)).await.unwrap();
        assert_eq!(contract.labels()[INFRA_NAME_LABEL], INFRA);
        assert_eq!(contract.labels()[CONTRACT_LABEL], entry);
        let owner = &contract.owner_references()[0];
        assert_eq!(owner.uid, deployed.uid().unwrap());
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        assert_eq!(
            contract.spec,
            api::compute_contract_spec_for(&deployed.spec, entry).unwrap()
        );
        let managers: Vec<_> = contract
            .managed_fields()
            .iter()
            .filter_map(|m| m.manager.clone())
            .collect();
        assert!(
            managers.iter().any(|m| m == api::names::INFRA_MANAGER),
            "{managers:?}"
        );
    }

    // Converged: no writes at all (no apply, no status, no Event) while nothing changes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let quiet_from = server.history().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let noise: Vec<String> = server
        .history()
        .into_iter()
        .skip(quiet_from)
        .map(|e| format!("{:?} {} {}", e.change, e.resource, e.name))
        .collect();
    assert!(noise.is_empty(), "writes after convergence: {noise:?}");

    // SCALE-DOWN: remove node-a -> released, then deleted; node-b untouched.
    let untouched = contracts.get(&cc_name("node-b")).await.unwrap();
    let scale_down_from = server.history().len();
    let requests_from = server.requests().len();
    infras
        .patch(
            INFRA,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "spec": plain_spec_with(&["node-b"]) })),
        )
        .await
        .unwrap();
    // Waited for by listing, so every GET of node-a is the controller's.
    eventually("node-a gone", || async {
        let left = contracts.list_all().await;
        (!left.iter().any(|c| c.name_any() == cc_name("node-a"))).then_some(())
    })
    .await;
    let after = contracts.get(&cc_name("node-b")).await.unwrap();
    assert_eq!(
        after.resource_version(),
        untouched.resource_version(),
        "node-b was written"
    );
    let writes = contract_writes(&server, scale_down_from);
    assert_eq!(
        states_before_first_delete(&writes, &[cc_name("node-a")]),
        vec![(true, Some("Released".to_owned()))]
    );
    eventually("the Infra to count one contract", || async {
        let infra = infras.get(INFRA).await.ok()?;
        (infra.status?.contract_count == 1).then_some(())
    })
    .await;
    // node-a is read once, whole, to release it (the cache keeps less than
    // its spec, plan 0018). The cache showed it Released before the
    // controller deleted it, so its disappearance from the cache is its end:
    // not read again (a GET answered 404 per node in bench_scale's
    // scale-down, plan 0016 C4).
    let reads: Vec<String> = server.requests()[requests_from..]
        .iter()
        .filter(|r| r.verb == "get" && r.uri.contains(&cc_name("node-a")))
        .map(|r| format!("{} {}", r.uri, r.status))
        .collect();
    assert!(
        reads.len() == 1 && reads[0].ends_with(" 200"),
        "node-a read once, to release it, and never after it went: {reads:?}"
    );

    // Scale up again so the deletion has several contracts to order.
    infras
        .patch(
            INFRA,
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({ "spec": plain_spec_with(&["node-b", "node-c", "node-d"]) }),
            ),
        )
        .await
        .unwrap();
    eventually("three contracts Deployed", || deployed_with(&infras, 3)).await;

    // A contract fails (the Requester's status, as the fake one writes it):
    // the one Event of the whole life, a Warning naming it.
    let failed = cc_name("node-d");
    contracts
        .patch_status(
            &failed,
            &PatchParams::apply("socialweb/requester").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "socialweb.computer/v1alpha1",
                "kind": "ComputeContract",
                "status": { "phase": "Failed" },
            })),
        )
        .await
        .unwrap();
    let event_api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    eventually("a Warning about the failed contract", || async {
        let events = event_api.list_all().await;
        events
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("ContractFailed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(failed.as_str())
            })
            .then_some(())
    })
    .await;

    // DELETE: every contract Released before the first is deleted, then all gone.
    let delete_from = server.history().len();
    infras
        .delete(INFRA, &DeleteParams::default())
        .await
        .unwrap();
    testkit::wait_gone(&infras, INFRA).await;
    assert!(contracts.list_all().await.is_empty());
    let writes = contract_writes(&server, delete_from);
    let names: Vec<String> = ["node-b", "node-c", "node-d"]
        .iter()
        .map(|e| cc_name(e))
        .collect();
    assert_eq!(
        states_before_first_delete(&writes, &names),
        vec![(true, Some("Released".to_owned())); 3],
        "a contract was deleted before all were Released"
    );
    for name in &names {
        assert!(
            writes
                .iter()
                .any(|e| e.name == *name && e.change == apiserver::store::ChangeType::Deleted),
            "{name} was not deleted"
        );
    }

    // Events about the Infra: only the failure. Creating, releasing and
    // deleting contracts, Deployed and the finalizer going are routine: a
    // person follows them in the Infra's status, not in Events.
    let events = event_api.list_all().await;
    let published: Vec<(Option<String>, Option<String>, Option<String>)> = events
        .iter()
        .map(|e| {
            (
                e.type_.clone(),
                e.reason.clone(),
                e.related.as_ref().and_then(|r| r.name.clone()),
            )
        })
        .collect();
    assert_eq!(
        published,
        vec![(
            Some("Warning".to_owned()),
            Some("ContractFailed".to_owned()),
            Some(failed.clone())
        )],
        "a routine scale-up, scale-down and delete publish no Event"
    );
    for event in &events {
        let note = event.note.clone().unwrap_or_default();
        assert!(!note.contains("join-"), "an Event names a Secret: {note}");
        assert_eq!(event.reporting_controller.as_deref(), Some(infra::REPORTER));
    }

    manager.kill();
    requester.abort();
}

/// Plan 0009 S9: a hand-made Infra whose node entry names a NodeClaim that
/// does not exist rents nothing for it and says so; its plain entry is rented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_entry_naming_no_claim_is_not_rented_and_says_so() {
    let Rig {
        server: _server,
        manager,
        requester,
        infras,
        contracts,
        ..
    } = Rig::start().await;

    // node-a is a node of claim tenant/node-a (uid-node-a), which nobody created.
    let mut spec = infra_support::spec_with(&["node-a"]);
    spec.contracts.push(infra_support::entry("plain"));
    infras
        .create(&PostParams::default(), &Infra::new(INFRA, spec))
        .await
        .unwrap();
    let ready = eventually("the Infra says why node-a is not rented", || async {
        let status = infras.get(INFRA).await.ok()?.status?;
        let ready = api::find_condition(&status.conditions, "Ready")?.clone();
        (ready.reason == infra::problems::REASON_NODE_CLAIM_NOT_FOUND
            && status.phase == Some(InfraPhase::Failed)
            && status.ready_contracts == 1)
            .then_some(ready)
    })
    .await;
    assert!(ready.message.contains("tenant/node-a"), "{}", ready.message);
    let names: Vec<String> = contracts
        .list_all()
        .await
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(
        names,
        [cc_name("plain")],
        "a machine was rented for no claim"
    );

    manager.kill();
    requester.abort();
}

/// An Infra whose claims reach the Infra controller's cache after the Infra
/// does (its claims' watch two seconds late): the first reconcile finds no
/// claim and leaves the entries unserved (NodeClaimNotFound, no requeue); the
/// claims' arrival wakes the Infra and both are rented.
#[tokio::test]
async fn an_infra_decided_before_its_claims_reached_the_cache_rents_once_they_do() {
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    install(&client).await;
    let lagging = lag::lagging_watches(client.clone(), "nodeclaims", Duration::from_secs(2));
    let manager = start_manager(&lagging);
    let requester = tokio::spawn(fake_requester(client.clone(), Default::default()));
    let infras: Api<Infra> = Api::namespaced(client.clone(), NS);
    let spec = served_spec_with(&client, &["node-a", "node-b"]).await;
    infras
        .create(&PostParams::default(), &Infra::new(INFRA, spec))
        .await
        .unwrap();
    eventually("both entries rented and Deployed", || {
        deployed_with(&infras, 2)
    })
    .await;
    manager.kill();
    requester.abort();
}

//! End to end on the embedded API server and the fake PDS: an Infra's
//! `spec.record` published, kept current, kept on unbind, deleted after the
//! releases; failures said by the AtprotoRecord's conditions.

use crate::record_support;

use std::sync::atomic::Ordering;

use api::names::INFRA_NAME_LABEL;
use api::{
    AtprotoRecordPhase, ComputeContract, DECLARATION_COLLECTION, declaration, declaration_record,
};
use apiserver::store::ChangeType;
use kube::api::{Api, DeleteParams};
use record_support::{APP_PASSWORD, INFRA, MARKER, NS, World, eventually, record_gone};
use serde_json::json;
use testkit::kubectl::{headers, kubectl_ok, table};
use testkit::wait_gone;

fn contracts(world: &World) -> Api<ComputeContract> {
    Api::namespaced(world.client.clone(), NS)
}

/// Publish, update, then delete the Infra: the record holds exactly the
/// declaration at the derived key, follows it, and is deleted only after
/// every contract is released and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_follows_its_infra_and_goes_after_the_releases() {
    let mut world = World::new().await;
    world.create_join_secret().await;
    world.start();
    let infra = world.create_infra(Some(true)).await;

    let record = world.wait_published().await;
    let status = record.status.clone().unwrap();
    let rkey = api::names::record_key(NS, INFRA, infra.metadata.uid.as_deref().unwrap());
    let uri = format!("at://{}/{DECLARATION_COLLECTION}/{rkey}", world.did);
    assert_eq!(status.uri.as_deref(), Some(uri.as_str()));
    assert_eq!(status.repository.as_deref(), Some(world.did.as_str()));
    let infra = world.infras().get(INFRA).await.unwrap();
    let stored = world.stored(&uri).unwrap();
    assert_eq!(
        stored,
        declaration_record(&declaration(&infra.spec)).unwrap()
    );
    // Nothing private: not the marker of clusterRef, nodes, secrets or the join Secret.
    assert!(
        !stored
            .to_string()
            .to_lowercase()
            .contains(&MARKER.to_lowercase()),
        "{stored}"
    );
    assert!(
        !world.marked_secret_values().await.is_empty(),
        "the join Secret holds the marker"
    );
    assert_eq!(world.published().len(), 1);
    // The Event is recorded after the status write that wait_published saw.
    eventually("the Infra says the record is published", || async {
        world
            .event_reasons(INFRA)
            .await
            .contains(&"RecordPublished".to_owned())
            .then_some(())
    })
    .await;

    // A changed declaration replaces the record at the same key.
    let old_cid = status.cid.clone().unwrap();
    world
        .patch_infra(json!({"description": "web and batch nodes"}))
        .await;
    let updated = world.wait_published().await;
    assert_ne!(
        updated.status.as_ref().unwrap().cid.as_deref(),
        Some(old_cid.as_str())
    );
    assert_eq!(
        world.stored(&uri).unwrap()["description"],
        "web and batch nodes"
    );
    assert_eq!(world.published().len(), 1, "still one record");

    // Deleting the Infra: while a contract is held at Releasing the record stays.
    world.hold.store(true, Ordering::SeqCst);
    let history_from = world.server.history().len();
    world.delete_infra(&DeleteParams::default()).await;
    // The Infra controller orders the AtprotoRecord's delete after the contracts,
    // so nothing waits yet; the record is still there once a contract is Releasing.
    eventually("a contract is Releasing", || async {
        let list = contracts(&world).list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|c| {
                c.status.as_ref().and_then(|s| s.phase)
                    == Some(api::ComputeContractPhase::Releasing)
            })
            .then_some(())
    })
    .await;
    assert!(world.stored(&uri).is_some(), "deleted before the releases");
    assert!(world.records().get_opt(INFRA).await.unwrap().is_some());
    world.hold.store(false, Ordering::SeqCst);

    wait_gone(&world.infras(), INFRA).await;
    assert!(record_gone(&world).await);
    assert_eq!(
        world.stored(&uri),
        None,
        "the record was deleted from the repository"
    );
    assert!(world.published().is_empty());

    // Order from the server's history: every contract deleted before the
    // AtprotoRecord was deleted (its delete, then its finalizer's removal).
    let history: Vec<_> = world
        .server
        .history()
        .into_iter()
        .skip(history_from)
        .collect();
    let last_contract_delete = history
        .iter()
        .rposition(|e| e.resource.ends_with("/computecontracts") && e.change == ChangeType::Deleted)
        .expect("contracts were deleted");
    let record_marked = history
        .iter()
        .position(|e| {
            e.resource.ends_with("/atprotorecords")
                && e.object()["metadata"]["deletionTimestamp"].is_string()
        })
        .expect("the AtprotoRecord was deleted");
    assert!(
        last_contract_delete < record_marked,
        "the AtprotoRecord was deleted before the last contract"
    );
}

/// U1-UNBIND-KEEPS-RECORD: removing spec.record removes the AtprotoRecord
/// and leaves the record published, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbinding_keeps_the_record_and_says_so() {
    let mut world = World::new().await;
    world.start();
    world.create_infra(Some(true)).await;
    let record = world.wait_published().await;
    let uri = record.status.unwrap().uri.unwrap();

    world.patch_infra(json!({"record": null})).await;
    eventually("the AtprotoRecord is gone", || async {
        record_gone(&world).await.then_some(())
    })
    .await;
    assert!(world.stored(&uri).is_some(), "the record stays published");
    eventually("the Infra says the record is kept", || async {
        world
            .event_reasons(INFRA)
            .await
            .contains(&"RecordKept".to_owned())
            .then_some(())
    })
    .await;

    // Bound again: the same key, so the same record (no second one).
    world.patch_infra(json!({"record": true})).await;
    let again = world.wait_published().await;
    assert_eq!(again.status.unwrap().uri.as_deref(), Some(uri.as_str()));
    assert_eq!(world.published().len(), 1);

    // Deleting the Infra now deletes it.
    testkit::delete_and_wait(&world.infras(), INFRA).await;
    assert_eq!(world.stored(&uri), None);
}

/// What stops publishing is said by the Ready condition, and fixing it publishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_said_and_fixing_them_publishes() {
    let mut world = World::new().await;
    world.put_secret("not-the-password").await;
    world.start();
    world.create_infra(Some(true)).await;
    eventually("InvalidCredentials", || async {
        (world.ready_reason().await.as_deref() == Some("InvalidCredentials")).then_some(())
    })
    .await;
    let record = world.records().get(INFRA).await.unwrap();
    assert_eq!(
        record.status.unwrap().phase,
        Some(AtprotoRecordPhase::Failed)
    );
    assert!(world.published().is_empty());

    world
        .secrets()
        .delete(record_support::SECRET, &DeleteParams::default())
        .await
        .unwrap();
    // A Requester spec change wakes the record controller at once.
    world.touch_requester().await;
    eventually("SecretMissing", || async {
        (world.ready_reason().await.as_deref() == Some("SecretMissing")).then_some(())
    })
    .await;

    world.net.faults.inject(
        atproto_fake::Service::Pds,
        Some("com.atproto.repo.putRecord"),
        atproto_fake::Fault::internal(),
        Some(1),
    );
    world.put_secret(APP_PASSWORD).await;
    world.touch_requester().await;
    // One 500 (PdsUnreachable, retried), then published.
    world.wait_published().await;
    assert_eq!(world.published().len(), 1);
}

/// `kubectl get atprotorecords` shows the URI and the phase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_atprotorecords_shows_the_uri_and_phase() {
    if !testkit::kubectl::kubectl_required() {
        return;
    }
    let mut world = World::new().await;
    world.start();
    world.create_infra(Some(true)).await;
    let record = world.wait_published().await;
    let uri = record.status.unwrap().uri.unwrap();

    let selector = format!("{INFRA_NAME_LABEL}={INFRA}");
    let out = kubectl_ok(
        &world.server,
        &["get", "atprotorecords", "-n", NS, "-l", &selector],
    );
    assert_eq!(headers(&out), ["NAME", "INFRA", "PHASE", "URI", "AGE"]);
    let row = &table(&out)[0];
    assert_eq!(
        [&row["NAME"], &row["INFRA"], &row["PHASE"], &row["URI"]],
        [INFRA, INFRA, "Published", uri.as_str()]
    );
}

/// The garbage collector's foreground deletion deletes the AtprotoRecord
/// together with the contracts: the record controller still deletes the
/// record only once every contract is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_deletion_still_deletes_the_record_after_the_releases() {
    let mut world = World::new().await;
    world.start();
    world.create_infra(Some(true)).await;
    let uri = world.wait_published().await.status.unwrap().uri.unwrap();
    eventually("the contract is Deployed", || async {
        let list = contracts(&world).list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|c| {
                c.status.as_ref().and_then(|s| s.phase) == Some(api::ComputeContractPhase::Deployed)
            })
            .then_some(())
    })
    .await;

    world.hold.store(true, Ordering::SeqCst);
    world.delete_infra(&DeleteParams::foreground()).await;
    eventually("the AtprotoRecord waits for the releases", || async {
        let record = world.records().get_opt(INFRA).await.ok()??;
        (record.metadata.deletion_timestamp.is_some()
            && world.ready_reason().await.as_deref() == Some("WaitingForReleases"))
        .then_some(())
    })
    .await;
    assert!(world.stored(&uri).is_some(), "deleted before the releases");
    world.hold.store(false, Ordering::SeqCst);

    wait_gone(&world.infras(), INFRA).await;
    assert!(record_gone(&world).await);
    assert_eq!(world.stored(&uri), None);
}

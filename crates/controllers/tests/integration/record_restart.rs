//! A restart at any step of a record's life converges: the controllers are
//! killed (no reconcile finishes) in the middle of a putRecord, after a
//! putRecord whose answer was lost, in the middle of an unbind and of a
//! deleteRecord, and fresh ones (new caches, new sessions) take over. The
//! fake PDS is the judge: one record per Infra at its derived key, holding
//! the current declaration; present after an unbind; absent after a delete.

use crate::record_support;

use std::time::Duration;

use api::{DeletionPolicy, declaration, declaration_record};
use atproto_fake::{Fault, Service};
use kube::api::DeleteParams;
use record_support::{INFRA, World, eventually, record_gone};
use serde_json::json;
use testkit::wait_gone;

const PUT: &str = "com.atproto.repo.putRecord";
const DELETE: &str = "com.atproto.repo.deleteRecord";

/// Waits until the fake PDS holds exactly one declaration record, equal to
/// the Infra's current declaration; returns its rkey.
async fn one_current_record(world: &World) -> String {
    eventually("one record holding the current declaration", || async {
        let infra = world.infras().get(INFRA).await.ok()?;
        let expected = declaration_record(&declaration(&infra.spec)).ok()?;
        let published = world.published();
        (published.len() == 1 && published[0].1 == expected).then(|| published[0].0.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_at_each_step_writes_one_record_and_deletes_only_what_should_go() {
    let mut world = World::new().await;
    world.start();

    // 1. Killed in the middle of the first putRecord (the write still lands).
    world.net.faults.inject(
        Service::Pds,
        Some(PUT),
        Fault::Stall(Duration::from_millis(300)),
        Some(1),
    );
    world.create_infra(Some(true)).await;
    eventually("the repository is recorded before the put", || async {
        let record = world.records().get_opt(INFRA).await.ok()??;
        record.status?.repository.map(|_| ())
    })
    .await;
    world.stop();
    world.net.faults.stalls_finished().await;
    world.start();
    let rkey = one_current_record(&world).await;
    world.wait_published().await;

    // 2. A putRecord whose answer is lost (the write landed, the status did not follow).
    world
        .net
        .faults
        .inject(Service::Pds, Some(PUT), Fault::LoseAnswer, Some(1));
    world.patch_infra(json!({"description": "second"})).await;
    world.wait_published().await;
    assert_eq!(one_current_record(&world).await, rkey);

    // 3. Killed right after a declaration change, before anything was written.
    world.stop();
    world.patch_infra(json!({"description": "third"})).await;
    world.start();
    world.wait_published().await;
    assert_eq!(one_current_record(&world).await, rkey);

    // 4. Killed in the middle of an unbind (Orphan applied, object not yet deleted).
    world.patch_infra(json!({"record": null})).await;
    eventually("the AtprotoRecord is orphaned or gone", || async {
        match world.records().get_opt(INFRA).await.ok()? {
            None => Some(()),
            Some(r) => (r.spec.deletion_policy == DeletionPolicy::Orphan).then_some(()),
        }
    })
    .await;
    world.stop();
    world.start();
    eventually("the AtprotoRecord is gone", || async {
        record_gone(&world).await.then_some(())
    })
    .await;
    assert_eq!(
        one_current_record(&world).await,
        rkey,
        "an unbound record stays"
    );

    // 5. Bound again; then the Infra deleted, killed in the middle of
    //    deleteRecord, and a deleteRecord whose answer is lost.
    world.patch_infra(json!({"record": true})).await;
    world.wait_published().await;
    assert_eq!(one_current_record(&world).await, rkey);
    world.net.faults.inject(
        Service::Pds,
        Some(DELETE),
        Fault::Stall(Duration::from_millis(300)),
        Some(1),
    );
    world
        .net
        .faults
        .inject(Service::Pds, Some(DELETE), Fault::LoseAnswer, Some(1));
    world.delete_infra(&DeleteParams::default()).await;
    eventually("the AtprotoRecord is being deleted", || async {
        let record = world.records().get_opt(INFRA).await.ok()??;
        record.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    world.stop();
    world.net.faults.stalls_finished().await;
    world.start();
    wait_gone(&world.infras(), INFRA).await;
    assert!(record_gone(&world).await);
    assert!(world.published().is_empty(), "the record should have gone");
}

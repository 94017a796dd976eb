//! The write layer on the embedded API server: every write answers with the
//! object as the caches hold objects (no `managedFields`, which the server
//! keeps), and the answers say what the write did.

use api::{ComputeContract, ComputeContractPhase, ComputeContractStatus};
use controllers::write::{self, Deleted, Finalizers, Seen};
use kube::Api;
use serde_json::json;

const NS: &str = "contracts";
const MANAGER: &str = "socialweb/test";

fn contract(name: &str) -> ComputeContract {
    serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "ComputeContract",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resources": {"cpus": 2, "memory": 1024, "disk": 10, "network": 1},
            "location": {"country": "DE"},
        },
    }))
    .unwrap()
}

/// Asserts `answer` is the object the server holds now, without its managedFields.
async fn assert_answer_is_held_object(api: &Api<ComputeContract>, answer: &ComputeContract) {
    let name = answer.metadata.name.as_deref().unwrap();
    let held = api.get(name).await.unwrap();
    assert!(
        held.metadata.managed_fields.is_some(),
        "the server keeps who wrote what"
    );
    assert_eq!(
        answer.metadata.managed_fields, None,
        "{name}: no managedFields"
    );
    let mut held = held;
    held.metadata.managed_fields = None;
    assert_eq!(
        serde_json::to_value(answer).unwrap(),
        serde_json::to_value(&held).unwrap(),
        "{name}: the answer is the object as held"
    );
}

#[tokio::test]
async fn every_write_answers_with_the_object_without_managed_fields() {
    let server = testkit::server_with_crds(&[NS]).await;
    let client = server.client();
    let api: Api<ComputeContract> = Api::namespaced(client.clone(), NS);

    let created = write::create(&client, MANAGER, &contract("made"))
        .await
        .unwrap();
    assert_answer_is_held_object(&api, &created).await;
    let again = write::create(&client, MANAGER, &contract("made")).await;
    assert!(
        again.is_err_and(|e| e.is_conflict()),
        "a create of an existing object is a conflict"
    );

    let applied = write::apply(&client, MANAGER, &contract("applied"))
        .await
        .unwrap();
    assert_answer_is_held_object(&api, &applied).await;

    let status = ComputeContractStatus {
        phase: Some(ComputeContractPhase::Bidding),
        ..ComputeContractStatus::default()
    };
    let written = write::replace_status(&client, MANAGER, &applied, status.clone())
        .await
        .unwrap()
        .expect("the contract is there");
    assert_eq!(written.status.as_ref(), Some(&status));
    assert_answer_is_held_object(&api, &written).await;
    let stale = write::replace_status(&client, MANAGER, &applied, status.clone()).await;
    assert!(
        stale.is_err_and(|e| e.is_conflict()),
        "a status decided from an older version is a conflict"
    );
    let mut never_made = contract("never-made");
    never_made.metadata.resource_version = Some("1".to_owned());
    let gone = write::replace_status(&client, MANAGER, &never_made, status).await;
    assert!(
        matches!(gone, Ok(None)),
        "a status of an object gone is None: {gone:?}"
    );

    let (done, marked) = write::add_finalizer_written::<ComputeContract>(
        &client,
        MANAGER,
        &Seen::of(&written),
        "test/hold",
    )
    .await
    .unwrap();
    assert_eq!(done, Finalizers::Written);
    let marked = marked.expect("the patched object");
    assert_answer_is_held_object(&api, &marked).await;

    // Kept by its finalizer: the delete answers with the object marked.
    let Deleted::Marked(deleting) = write::delete::<ComputeContract>(&client, &Seen::of(&marked))
        .await
        .unwrap()
    else {
        panic!("a finalizer keeps the object")
    };
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_answer_is_held_object(&api, &deleting).await;
    // Nothing keeps it: the delete answers with a Status.
    let removed = write::delete::<ComputeContract>(&client, &Seen::of(&created))
        .await
        .unwrap();
    assert!(matches!(removed, Deleted::Removed), "{removed:?}");
    assert!(
        !write::delete_if_present::<ComputeContract>(&client, &Seen::of(&created))
            .await
            .unwrap(),
        "deleting what is gone is done"
    );
}

//! Section 3, the resourceVersion counter, no-op writes, generation and error Statuses.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};

use crate::kit::{
    APPLY, CONFIGMAPS, JSON, MERGE, RawWatch, WIDGETS, call_with, changes_until, create_configmap,
    create_widget, current_rv, delete, eventually, get, merge_patch, patch, post, put, widget,
    widget_server,
};

#[tokio::test]
async fn r3_1_one_global_resource_version_counter_bumped_by_every_write() {
    let server = widget_server().await;
    let owner = create_configmap(&server, "owner", &json!({})).await;
    let widget_rv = create_widget(&server, "w", &json!({})).await;
    let secret = post(
        &server,
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    let versions = [
        crate::kit::rv(&owner),
        crate::kit::rv(&widget_rv),
        secret.rv(),
    ];
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    // A list of any kind reports the global version.
    assert_eq!(
        current_rv(&server, "/api/v1/namespaces/default/serviceaccounts").await,
        versions[2]
    );

    // A garbage-collector delete is a write too.
    let mut dependent = crate::kit::configmap("dependent", &json!({}));
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner["metadata"]["uid"]}]);
    post(&server, CONFIGMAPS, &dependent).await.ok(201);
    delete(&server, &format!("{CONFIGMAPS}/owner"), &Value::Null)
        .await
        .ok(200);
    let owner_gone = server
        .history()
        .into_iter()
        .rfind(|h| h.name == "owner")
        .unwrap()
        .resource_version;
    eventually("the dependent is collected", || async {
        get(&server, &format!("{CONFIGMAPS}/dependent")).await.code == 404
    })
    .await;
    let collected = server
        .history()
        .into_iter()
        .rfind(|h| h.name == "dependent")
        .unwrap();
    assert_eq!(collected.change, apiserver::store::ChangeType::Deleted);
    assert!(collected.resource_version > owner_gone);
    assert_eq!(
        current_rv(&server, CONFIGMAPS).await,
        collected.resource_version
    );
}

#[tokio::test]
async fn r3_2_a_write_that_changes_nothing_bumps_nothing_and_emits_nothing() {
    let server = widget_server().await;
    let config = widget("w", &json!({"size": 1}));
    let path = format!("{WIDGETS}/w");
    let applied = patch(&server, &format!("{path}?fieldManager=m"), APPLY, &config).await;
    let rv = applied.rv();
    let mut watch = RawWatch::open(
        &server,
        &format!("{WIDGETS}?watch=true&resourceVersion={rv}"),
    )
    .await;

    let again = patch(&server, &format!("{path}?fieldManager=m"), APPLY, &config).await;
    assert_eq!(again.rv(), rv, "the same apply");
    let merged = patch(&server, &path, MERGE, &json!({"spec": {"size": 1}})).await;
    assert_eq!(merged.rv(), rv, "a merge patch of the same value");
    let replaced = put(&server, &path, &merged.body).await;
    assert_eq!(replaced.rv(), rv, "a PUT of the same object");
    let status = merge_patch(&server, &format!("{path}/status"), &json!({"status": null})).await;
    assert_eq!(status.rv(), rv, "a status patch of nothing");
    assert_eq!(current_rv(&server, WIDGETS).await, rv);

    create_widget(&server, "marker", &json!({})).await;
    assert_eq!(changes_until(&mut watch, "marker").await, [], "no events");
}

#[tokio::test]
async fn r3_3_generation_starts_at_1_and_counts_spec_changes_and_deletion() {
    let server = widget_server().await;
    let path = format!("{WIDGETS}/w");
    let created = create_widget(&server, "w", &json!({"size": 1})).await;
    assert_eq!(created["metadata"]["generation"], 1);
    let patched = patch(&server, &path, MERGE, &json!({"spec": {"size": 2}})).await;
    assert_eq!(patched.body["metadata"]["generation"], 2);
    let mut replacement = patched.body.clone();
    replacement["spec"]["colour"] = json!("red");
    let replaced = put(&server, &path, &replacement).await;
    assert_eq!(replaced.body["metadata"]["generation"], 3);
    merge_patch(
        &server,
        &path,
        &json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    )
    .await
    .ok(200);
    let marked = delete(&server, &path, &Value::Null).await;
    assert_eq!(
        marked.ok(200)["metadata"]["generation"],
        4,
        "marking for deletion bumps it"
    );
}

#[tokio::test]
async fn r3_9_errors_are_status_objects_with_reason_and_details() {
    let server = widget_server().await;
    let missing = get(&server, &format!("{WIDGETS}/missing")).await;
    missing.assert_status(404, "NotFound");
    assert_eq!(
        missing.body["details"],
        json!({"name": "missing", "group": "conformance.example.com", "kind": "widgets"})
    );
    assert_eq!(
        missing.body["message"],
        "widgets.conformance.example.com \"missing\" not found"
    );
    let core_missing = get(&server, &format!("{CONFIGMAPS}/missing")).await;
    core_missing.assert_status(404, "NotFound");
    assert_eq!(
        core_missing.body["message"],
        "configmaps \"missing\" not found"
    );

    get(&server, "/apis/nope.example.com/v1/things")
        .await
        .assert_status(404, "NotFound");
    let malformed = call_with(
        &server,
        "POST",
        CONFIGMAPS,
        JSON,
        None,
        b"{not json".to_vec(),
    )
    .await;
    malformed.assert_status(400, "BadRequest");

    // kube decides get_opt -> None from the reason alone.
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(api.get_opt("missing").await.unwrap().is_none());
}

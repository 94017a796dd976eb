//! Section 3, garbage collection by ownerReferences: background, foreground, orphan.

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{
    CONFIGMAPS, configmap, create_configmap, delete, drop_finalizers, eventually, get, post,
};

fn owner_ref(owner: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"]})
}

/// Creates ConfigMap `name` owned by `owners` (with extra `metadata` merged in).
async fn dependent(server: &TestServer, name: &str, owners: Vec<Value>, metadata: &Value) {
    let mut body = configmap(name, &json!({}));
    body["metadata"]["ownerReferences"] = Value::Array(owners);
    if let Some(extra) = metadata.as_object() {
        for (k, v) in extra {
            body["metadata"][k] = v.clone();
        }
    }
    post(server, CONFIGMAPS, &body).await.ok(201);
}

async fn exists(server: &TestServer, name: &str) -> bool {
    get(server, &format!("{CONFIGMAPS}/{name}")).await.code == 200
}

#[tokio::test]
async fn r3_26_background_deletes_dependents_whose_owners_are_all_gone() {
    let server = TestServer::start().await.unwrap();
    let owner = create_configmap(&server, "owner", &json!({})).await;
    let alive = create_configmap(&server, "alive", &json!({})).await;
    dependent(&server, "only-child", vec![owner_ref(&owner)], &json!({})).await;
    dependent(
        &server,
        "two-owners",
        vec![owner_ref(&owner), owner_ref(&alive)],
        &json!({}),
    )
    .await;
    let mut impostor = owner_ref(&alive);
    impostor["uid"] = json!("00000000-0000-0000-0000-000000000000");
    dependent(&server, "wrong-uid", vec![impostor], &json!({})).await;
    delete(
        &server,
        &format!("{CONFIGMAPS}/owner"),
        &json!({"propagationPolicy": "Background"}),
    )
    .await
    .ok(200);
    eventually("the dependents of gone owners are collected", || async {
        !exists(&server, "only-child").await && !exists(&server, "wrong-uid").await
    })
    .await;
    assert!(
        exists(&server, "two-owners").await,
        "one owner is still there"
    );
}

#[tokio::test]
async fn r3_27_foreground_waits_for_blocking_dependents() {
    let server = TestServer::start().await.unwrap();
    let owner = create_configmap(&server, "owner", &json!({})).await;
    let mut blocking = owner_ref(&owner);
    blocking["blockOwnerDeletion"] = json!(true);
    dependent(
        &server,
        "blocker",
        vec![blocking],
        &json!({"finalizers": ["example.com/hold"]}),
    )
    .await;
    let answer = delete(
        &server,
        &format!("{CONFIGMAPS}/owner"),
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    let marked = answer.ok(200);
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "{marked}"
    );
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    eventually("the blocking dependent is marked", || async {
        get(&server, &format!("{CONFIGMAPS}/blocker")).await.body["metadata"]["deletionTimestamp"]
            .is_string()
    })
    .await;
    assert!(
        exists(&server, "owner").await,
        "the owner waits for its blocking dependent"
    );
    drop_finalizers(&server, &format!("{CONFIGMAPS}/blocker")).await;
    eventually("the owner goes after it", || async {
        !exists(&server, "owner").await
    })
    .await;
    assert!(!exists(&server, "blocker").await);
}

#[tokio::test]
async fn r3_28_orphan_keeps_dependents_without_the_owner_reference() {
    let server = TestServer::start().await.unwrap();
    let owner = create_configmap(&server, "owner", &json!({})).await;
    dependent(&server, "kept", vec![owner_ref(&owner)], &json!({})).await;
    delete(
        &server,
        &format!("{CONFIGMAPS}/owner"),
        &json!({"propagationPolicy": "Orphan"}),
    )
    .await
    .ok(200);
    eventually("the owner goes", || async {
        !exists(&server, "owner").await
    })
    .await;
    let kept = get(&server, &format!("{CONFIGMAPS}/kept")).await;
    let refs = &kept.ok(200)["metadata"]["ownerReferences"];
    assert!(refs.is_null() || refs == &json!([]), "{}", kept.body);
    assert!(refs.is_null(), "an empty list is not stored: {}", kept.body);
}

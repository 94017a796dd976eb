//! Section 3, deletion with and without finalizers.

use serde_json::{Value, json};

use crate::kit::{
    CONFIGMAPS, JSON_PATCH, RawWatch, WIDGETS, changes_until, create_widget, delete, get,
    merge_patch, patch, post, widget, widget_server,
};

const HOLD: &str = "example.com/hold";

/// A Widget holding `finalizers`, and a watch on Widgets from its creation.
async fn held_widget(
    server: &apiserver::testing::TestServer,
    finalizers: &[&str],
) -> (Value, RawWatch) {
    let mut body = widget("w", &json!({"size": 1}));
    body["metadata"]["finalizers"] = json!(finalizers);
    let created = post(server, WIDGETS, &body).await.ok(201).clone();
    let rv = crate::kit::rv(&created);
    let watch = RawWatch::open(
        server,
        &format!("{WIDGETS}?watch=true&resourceVersion={rv}"),
    )
    .await;
    (created, watch)
}

#[tokio::test]
async fn r3_4_delete_with_finalizers_marks_the_object() {
    let server = widget_server().await;
    let (created, mut watch) = held_widget(&server, &[HOLD]).await;
    let answer = delete(&server, &format!("{WIDGETS}/w"), &Value::Null).await;
    let object = answer.ok(200);
    assert_eq!(
        object["kind"], "Widget",
        "the answer is the object: {object}"
    );
    assert!(object["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(object["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(object["metadata"]["generation"], 2);
    assert_eq!(object["metadata"]["finalizers"], json!([HOLD]));
    assert!(answer.rv() > crate::kit::rv(&created));
    let event = watch.next_change().await.unwrap();
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(
        event["object"]["metadata"]["deletionTimestamp"],
        object["metadata"]["deletionTimestamp"]
    );
}

#[tokio::test]
async fn r3_5_a_repeated_delete_changes_nothing() {
    let server = widget_server().await;
    let (_, mut watch) = held_widget(&server, &[HOLD]).await;
    let path = format!("{WIDGETS}/w");
    let first = delete(&server, &path, &Value::Null).await;
    let second = delete(&server, &path, &Value::Null).await;
    assert_eq!(
        second.ok(200)["metadata"]["deletionTimestamp"],
        first.body["metadata"]["deletionTimestamp"]
    );
    assert_eq!(second.rv(), first.rv());
    assert_eq!(second.body["metadata"]["generation"], 2);
    create_widget(&server, "marker", &json!({})).await;
    assert_eq!(
        changes_until(&mut watch, "marker").await,
        [("MODIFIED".into(), "w".into())]
    );
}

#[tokio::test]
async fn r3_6_removing_the_last_finalizer_deletes_the_object() {
    let server = widget_server().await;
    let (_, mut watch) = held_widget(&server, &[HOLD, "example.com/other"]).await;
    let path = format!("{WIDGETS}/w");
    delete(&server, &path, &Value::Null).await.ok(200);
    let one_left = merge_patch(&server, &path, &json!({"metadata": {"finalizers": [HOLD]}})).await;
    assert_eq!(one_left.ok(200)["metadata"]["finalizers"], json!([HOLD]));
    let last = merge_patch(&server, &path, &json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(last.code, 200, "{}", last.body);
    assert_eq!(get(&server, &path).await.code, 404);
    let mut types = Vec::new();
    for _ in 0..3 {
        let event = watch.next_change().await.unwrap();
        types.push(event["type"].as_str().unwrap().to_string());
    }
    assert_eq!(types, ["MODIFIED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn r3_7_delete_without_finalizers_answers_a_status_with_the_uid() {
    let server = widget_server().await;
    let (created, mut watch) = held_widget(&server, &[]).await;
    let answer = delete(&server, &format!("{WIDGETS}/w"), &Value::Null).await;
    let status = answer.ok(200);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["details"]["name"], "w");
    assert_eq!(status["details"]["kind"], "widgets");
    assert_eq!(status["details"]["group"], "conformance.example.com");
    assert_eq!(status["details"]["uid"], created["metadata"]["uid"]);
    let event = watch.next_change().await.unwrap();
    assert_eq!(event["type"], "DELETED");
    assert_eq!(event["object"]["metadata"]["name"], "w");
}

#[tokio::test]
async fn r3_8_an_empty_finalizer_list_is_never_stored() {
    let server = widget_server().await;
    let mut body = crate::kit::configmap("a", &json!({}));
    body["metadata"]["finalizers"] = json!([]);
    let created = post(&server, CONFIGMAPS, &body).await;
    assert!(
        created.ok(201)["metadata"].get("finalizers").is_none(),
        "{}",
        created.body
    );
    let path = format!("{CONFIGMAPS}/a");
    merge_patch(&server, &path, &json!({"metadata": {"finalizers": [HOLD]}}))
        .await
        .ok(200);
    let removed = patch(
        &server,
        &path,
        JSON_PATCH,
        &json!([{"op": "remove", "path": "/metadata/finalizers/0"}]),
    )
    .await;
    assert!(
        removed.ok(200)["metadata"].get("finalizers").is_none(),
        "{}",
        removed.body
    );
    let read = get(&server, &path).await;
    assert!(
        read.body["metadata"].get("finalizers").is_none(),
        "{}",
        read.body
    );
}

//! Section 2, the writes `kube::Api` sends: create, replace, the patch types, delete and
//! deletecollection, with the real server's answers to each mistake.

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{
    APPLY, CONFIGMAPS, JSON_PATCH, MERGE, STRATEGIC, WIDGETS, configmap, create_configmap,
    create_widget, delete, get, merge_patch, patch, post, put, widget, widget_server,
};

#[tokio::test]
async fn r2_1_create_sets_uid_timestamp_generation_and_version() {
    let server = widget_server().await;
    let before = crate::kit::current_rv(&server, WIDGETS).await;
    let created = post(&server, WIDGETS, &widget("w", &json!({"size": 1}))).await;
    let meta = &created.ok(201)["metadata"];
    assert!(
        meta["uid"].as_str().is_some_and(|u| u.len() >= 32),
        "{meta}"
    );
    let stamp = meta["creationTimestamp"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(stamp).is_ok() && stamp.len() == 20,
        "whole seconds, UTC: {stamp}"
    );
    assert_eq!(meta["generation"], 1);
    assert!(created.rv() > before);
    assert_eq!(meta["namespace"], "default");
}

#[tokio::test]
async fn r2_2_generate_name_adds_a_random_suffix() {
    let server = TestServer::start().await.unwrap();
    let body = json!({"metadata": {"generateName": "gen-"}, "data": {}});
    let first = post(&server, CONFIGMAPS, &body).await;
    let second = post(&server, CONFIGMAPS, &body).await;
    let names: Vec<String> = [first, second]
        .iter()
        .map(|a| a.ok(201)["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    for name in &names {
        let suffix = name.strip_prefix("gen-").unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        );
    }
    assert_ne!(names[0], names[1]);
}

#[tokio::test]
async fn r2_3_create_of_an_existing_name_is_409_already_exists() {
    let server = TestServer::start().await.unwrap();
    let created = create_configmap(&server, "a", &json!({})).await;
    let again = post(&server, CONFIGMAPS, &configmap("a", &json!({}))).await;
    again.assert_status(409, "AlreadyExists");
    assert_eq!(again.body["details"]["name"], "a");
    assert_eq!(again.body["details"]["kind"], "configmaps");
    let still = get(&server, &format!("{CONFIGMAPS}/a")).await;
    assert_eq!(still.rv(), crate::kit::rv(&created), "nothing written");
}

#[tokio::test]
async fn r2_4_create_in_a_missing_namespace_is_404_not_found() {
    let server = TestServer::start().await.unwrap();
    let answer = post(
        &server,
        "/api/v1/namespaces/nope/configmaps",
        &configmap("a", &json!({})),
    )
    .await;
    answer.assert_status(404, "NotFound");
    assert_eq!(answer.body["details"]["kind"], "namespaces");
    assert_eq!(answer.body["details"]["name"], "nope");
}

#[tokio::test]
async fn r2_5_a_name_that_is_not_a_dns_subdomain_is_422_invalid() {
    let server = TestServer::start().await.unwrap();
    for bad in ["Bad_Name", "-lead", "x".repeat(254).as_str()] {
        let answer = post(&server, CONFIGMAPS, &configmap(bad, &json!({}))).await;
        answer.assert_status(422, "Invalid");
        assert_eq!(
            answer.body["details"]["causes"][0]["field"],
            "metadata.name"
        );
        assert_eq!(answer.body["details"]["kind"], "ConfigMap");
    }
}

#[tokio::test]
async fn r2_6_a_resource_version_in_a_create_body_is_an_error() {
    let server = TestServer::start().await.unwrap();
    let mut body = configmap("a", &json!({}));
    body["metadata"]["resourceVersion"] = json!("5");
    let answer = post(&server, CONFIGMAPS, &body).await;
    // The real server's storage refuses it with a plain error: 500, no reason.
    assert_eq!(answer.code, 500, "{}", answer.body);
    assert_eq!(answer.body["kind"], "Status");
    assert!(answer.body.get("reason").is_none(), "{}", answer.body);
    answer.assert_message_contains("resourceVersion should not be set on objects to be created");
    assert_eq!(get(&server, &format!("{CONFIGMAPS}/a")).await.code, 404);
}

#[tokio::test]
async fn r2_7_a_custom_resource_put_without_resource_version_is_422_invalid() {
    let server = widget_server().await;
    let mut object = create_widget(&server, "w", &json!({"size": 1})).await;
    object["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    object["spec"]["size"] = json!(2);
    let answer = put(&server, &format!("{WIDGETS}/w"), &object).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );
    let stored = get(&server, &format!("{WIDGETS}/w")).await;
    assert_eq!(stored.body["spec"]["size"], 1);
}

#[tokio::test]
async fn r2_8_a_put_with_a_stale_resource_version_is_409_conflict() {
    let server = TestServer::start().await.unwrap();
    let stale = create_configmap(&server, "a", &json!({})).await;
    let path = format!("{CONFIGMAPS}/a");
    let fresh = patch(&server, &path, MERGE, &json!({"data": {"k": "fresh"}})).await;
    let mut replacement = stale.clone();
    replacement["data"]["k"] = json!("stale");
    let answer = put(&server, &path, &replacement).await;
    answer.assert_status(409, "Conflict");
    assert_eq!(answer.body["details"]["name"], "a");
    let stored = get(&server, &path).await;
    assert_eq!(stored.body["data"]["k"], "fresh");
    assert_eq!(stored.rv(), fresh.rv(), "nothing written");
    // The current version is accepted.
    replacement["metadata"]["resourceVersion"] = fresh.body["metadata"]["resourceVersion"].clone();
    assert!(put(&server, &path, &replacement).await.ok(200)["data"]["k"] == "stale");
}

#[tokio::test]
async fn r2_9_a_merge_patch_merges_and_null_deletes() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "a", &json!({"x": "1"})).await;
    let answer = merge_patch(
        &server,
        &format!("{CONFIGMAPS}/a"),
        &json!({"metadata": {"labels": {"y": "2"}}, "data": {"k": null, "n": "1"}}),
    )
    .await;
    let body = answer.ok(200);
    assert_eq!(body["data"], json!({"n": "1"}));
    assert_eq!(body["metadata"]["labels"], json!({"x": "1", "y": "2"}));
}

#[tokio::test]
async fn r2_10_a_json_patch_applies_and_a_failed_test_is_422() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "a", &json!({})).await;
    let path = format!("{CONFIGMAPS}/a");
    let ops = json!([{"op": "test", "path": "/data/k", "value": "v"},
                     {"op": "add", "path": "/data/n", "value": "1"}]);
    let applied = patch(&server, &path, JSON_PATCH, &ops).await;
    assert_eq!(applied.ok(200)["data"], json!({"k": "v", "n": "1"}));
    let failing = json!([{"op": "test", "path": "/data/n", "value": "2"},
                         {"op": "remove", "path": "/data/k"}]);
    let answer = patch(&server, &path, JSON_PATCH, &failing).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        get(&server, &path).await.rv(),
        applied.rv(),
        "nothing written"
    );
}

#[tokio::test]
async fn r2_11_apply_creates_and_updates_and_needs_a_field_manager() {
    let server = widget_server().await;
    let path = format!("{WIDGETS}/w");
    let config = widget("w", &json!({"size": 1}));
    let created = patch(
        &server,
        &format!("{path}?fieldManager=alice"),
        APPLY,
        &config,
    )
    .await;
    assert_eq!(
        created.ok(201)["spec"]["size"],
        1,
        "apply of a missing object creates it"
    );
    let config = widget("w", &json!({"size": 2}));
    let updated = patch(
        &server,
        &format!("{path}?fieldManager=alice"),
        APPLY,
        &config,
    )
    .await;
    assert_eq!(updated.ok(200)["spec"]["size"], 2);
    assert_eq!(updated.body["metadata"]["generation"], 2);
    let anonymous = patch(&server, &path, APPLY, &config).await;
    anonymous.assert_status(422, "Invalid");
    assert_eq!(
        anonymous.body["details"]["causes"][0]["field"],
        "fieldManager"
    );
}

#[tokio::test]
async fn r2_12_a_strategic_merge_patch_on_a_custom_resource_is_415() {
    let server = widget_server().await;
    create_widget(&server, "w", &json!({"size": 1})).await;
    let answer = patch(
        &server,
        &format!("{WIDGETS}/w"),
        STRATEGIC,
        &json!({"spec": {"size": 3}}),
    )
    .await;
    answer.assert_status(415, "UnsupportedMediaType");
    // Built-in kinds take it.
    create_configmap(&server, "a", &json!({})).await;
    let builtin = patch(
        &server,
        &format!("{CONFIGMAPS}/a"),
        STRATEGIC,
        &json!({"data": {"n": "1"}}),
    )
    .await;
    assert_eq!(builtin.ok(200)["data"]["n"], "1");
}

#[tokio::test]
async fn r2_16_delete_options_preconditions_dry_run_and_grace() {
    let server = TestServer::start().await.unwrap();
    let created = create_configmap(&server, "a", &json!({})).await;
    let path = format!("{CONFIGMAPS}/a");
    let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    delete(&server, &path, &wrong_uid)
        .await
        .assert_status(409, "Conflict");
    let stale_rv = json!({"preconditions": {"resourceVersion": "1"}});
    delete(&server, &path, &stale_rv)
        .await
        .assert_status(409, "Conflict");
    let dry = json!({"dryRun": ["All"], "propagationPolicy": "Background"});
    delete(&server, &path, &dry).await.ok(200);
    let still = get(&server, &path).await;
    assert_eq!(
        still.rv(),
        crate::kit::rv(&created),
        "a dry run writes nothing"
    );
    let right = json!({"preconditions": {"uid": created["metadata"]["uid"],
        "resourceVersion": created["metadata"]["resourceVersion"]},
        "gracePeriodSeconds": 0, "propagationPolicy": "Background"});
    let answer = delete(&server, &path, &right).await;
    assert_eq!(answer.ok(200)["details"]["uid"], created["metadata"]["uid"]);
    assert_eq!(get(&server, &path).await.code, 404);
}

#[tokio::test]
async fn r2_17_deletecollection_deletes_exactly_the_selected_objects() {
    let server = TestServer::start().await.unwrap();
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        create_configmap(&server, name, &json!({"app": app})).await;
    }
    create_configmap(&server, "d", &json!({})).await;
    let answer = delete(
        &server,
        &format!("{CONFIGMAPS}?labelSelector=app%3Dx"),
        &Value::Null,
    )
    .await;
    answer.ok(200);
    let left = get(&server, CONFIGMAPS).await;
    let names: Vec<&str> = left.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "d"]);
}

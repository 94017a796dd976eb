//! Bodies of built-in kinds decode through their type, and every body names the endpoint's
//! apiVersion and kind (issue 15, items 1 and 2).
//!
//! Upstream (kube-apiserver 1.32, k8s.io/apiserver/pkg/endpoints/handlers): a POST or PUT body
//! that does not decode is 400 "`<Kind>` in version "v" cannot be handled as a `<Kind>`"
//! (`transformDecodeError`, rest.go), Strict unknown fields included; a patched object that
//! does not decode is 422 Invalid on the field `patch` (patch.go); Warn sends each unknown
//! field as a `Warning` header; an apply patch with another apiVersion is 400 "Incorrect
//! version specified in apply patch" (k8s.io/apimachinery/pkg/util/managedfields/internal/
//! structuredmerge.go), and one that does not fit the type is a 500 "failed to create typed
//! patch object" whatever `fieldValidation` says (kubernetes issue 122480).

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::json;
use testkit::ListAll;

use crate::kit::{APPLY, CONFIGMAPS, JSON_PATCH, configmap, get, merge_patch, patch, post, put};

const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn secret(name: &str, data: &serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data})
}

fn warnings(answer: &crate::kit::Answer) -> Vec<String> {
    answer
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn r2_18_an_apply_patch_names_the_endpoints_api_version_and_kind() {
    let server = TestServer::start().await.unwrap();
    let at = format!("{CONFIGMAPS}/a?fieldManager=m");
    let bare = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let answer = patch(&server, &at, APPLY, &bare).await;
    answer.assert_status(400, "BadRequest");
    assert_eq!(
        answer.body["message"],
        "Incorrect version specified in apply patch. Specified patch version: , expected: v1"
    );
    let mut wrong_version = configmap("a", &json!({}));
    wrong_version["apiVersion"] = json!("apps/v1");
    let answer = patch(&server, &at, APPLY, &wrong_version).await;
    answer.assert_status(400, "BadRequest");
    answer.assert_message_contains("Specified patch version: apps/v1, expected: v1");
    let mut wrong_kind = configmap("a", &json!({}));
    wrong_kind["kind"] = json!("Secret");
    let answer = patch(&server, &at, APPLY, &wrong_kind).await;
    assert_eq!(answer.code, 500, "{}", answer.body);
    answer.assert_message_contains("no corresponding type for /v1, Kind=Secret");
    assert_eq!(get(&server, &format!("{CONFIGMAPS}/a")).await.code, 404);
    let applied = patch(&server, &at, APPLY, &configmap("a", &json!({}))).await;
    let managed = &applied.ok(201)["metadata"]["managedFields"][0];
    assert_eq!(managed["apiVersion"], "v1", "{managed}");
}

#[tokio::test]
async fn r2_19_a_post_or_put_body_of_another_api_version_or_kind_is_400() {
    let server = TestServer::start().await.unwrap();
    let mut other_group = configmap("a", &json!({}));
    other_group["apiVersion"] = json!("apps/v1");
    let answer = post(&server, CONFIGMAPS, &other_group).await;
    answer.assert_status(400, "BadRequest");
    assert_eq!(
        answer.body["message"],
        "the API version in the data (apps/v1) does not match the expected API version (v1)"
    );
    let mut other_kind = configmap("a", &json!({}));
    other_kind["kind"] = json!("Secret");
    let answer = post(&server, CONFIGMAPS, &other_kind).await;
    answer.assert_status(400, "BadRequest");
    answer.assert_message_starts_with("Secret in version \"v1\" cannot be handled as a ConfigMap");
    // Absent apiVersion and kind default to the endpoint's.
    let bare = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let created = post(&server, CONFIGMAPS, &bare).await;
    assert_eq!(created.ok(201)["kind"], "ConfigMap");
    let mut replaced = created.body.clone();
    replaced["kind"] = json!("Secret");
    put(&server, &format!("{CONFIGMAPS}/a"), &replaced)
        .await
        .assert_status(400, "BadRequest");
}

#[tokio::test]
async fn r4_13_built_in_kinds_decode_through_their_type() {
    let server = TestServer::start().await.unwrap();
    let mut numbers = configmap("numbers", &json!({}));
    numbers["data"] = json!({"a": 1});
    let answer = post(&server, CONFIGMAPS, &numbers).await;
    answer.assert_status(400, "BadRequest");
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "),
        "{message}"
    );
    assert!(message.contains("data.a"), "names the field: {message}");

    post(
        &server,
        SECRETS,
        &secret("not-base64", &json!({"k": "hunter2!"})),
    )
    .await
    .assert_status(400, "BadRequest");
    let answer = post(&server, SECRETS, &secret("flat", &json!("aHVudGVyMg=="))).await;
    answer.assert_status(400, "BadRequest");
    assert!(
        !answer.body["message"]
            .as_str()
            .unwrap()
            .contains("aHVudGVyMg"),
        "a Secret's value is never echoed: {}",
        answer.body
    );
    let mut string_data = secret("string-data", &json!({}));
    string_data["stringData"] = json!({"k": 1});
    post(&server, SECRETS, &string_data)
        .await
        .assert_status(400, "BadRequest");

    post(&server, CONFIGMAPS, &configmap("good", &json!({})))
        .await
        .ok(201);
    let answer = merge_patch(
        &server,
        &format!("{CONFIGMAPS}/good"),
        &json!({"data": {"n": 2}}),
    )
    .await;
    answer.assert_status(422, "Invalid");
    assert_eq!(answer.body["details"]["causes"][0]["field"], "patch");
    let answer = patch(
        &server,
        &format!("{CONFIGMAPS}/good"),
        JSON_PATCH,
        &json!([{"op": "add", "path": "/binaryData", "value": {"b": "%%"}}]),
    )
    .await;
    answer.assert_status(422, "Invalid");

    // Nothing undecodable was stored: typed clients list every object of the namespace.
    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert_eq!(configmaps.list_all().await.len(), 1);
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    assert!(secrets.list_all().await.is_empty());
}

#[tokio::test]
async fn r4_14_unknown_fields_of_built_in_kinds_follow_field_validation() {
    let server = TestServer::start().await.unwrap();
    let deployment = |name: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "colour": "red"}]}}}})
    };
    let answer = post(
        &server,
        &format!("{DEPLOYMENTS}?fieldValidation=Strict"),
        &deployment("strict"),
    )
    .await;
    answer.assert_status(400, "BadRequest");
    assert_eq!(
        answer.body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.template.spec.containers[0].colour\""
    );

    let warned = post(&server, DEPLOYMENTS, &deployment("warned")).await;
    let stored = warned.ok(201);
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]
            .get("colour")
            .is_none(),
        "{stored}"
    );
    // Quoted as net.NewWarningHeader quotes (k8s.io/apimachinery/pkg/util/net/http.go):
    // kubectl prints `Warning: unknown field "spec...colour"`.
    assert_eq!(
        warnings(&warned),
        [r#"299 - "unknown field \"spec.template.spec.containers[0].colour\"""#]
    );

    let ignored = post(
        &server,
        &format!("{DEPLOYMENTS}?fieldValidation=Ignore"),
        &deployment("ignored"),
    )
    .await;
    ignored.ok(201);
    assert!(warnings(&ignored).is_empty());

    post(&server, CONFIGMAPS, &configmap("a", &json!({})))
        .await
        .ok(201);
    let answer = merge_patch(
        &server,
        &format!("{CONFIGMAPS}/a?fieldValidation=Strict"),
        &json!({"junk": 1}),
    )
    .await;
    answer.assert_status(422, "Invalid");
    answer.assert_message_contains("strict decoding error: unknown field \"junk\"");

    let mut applied = configmap("a", &json!({}));
    applied["junk"] = json!(1);
    let answer = patch(
        &server,
        &format!("{CONFIGMAPS}/a?fieldManager=m&fieldValidation=Ignore"),
        APPLY,
        &applied,
    )
    .await;
    assert_eq!(answer.code, 500, "{}", answer.body);
    answer.assert_message_contains(".junk: field not declared in schema");
}

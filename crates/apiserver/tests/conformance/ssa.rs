//! Section 3, server-side apply: managedFields, ownership, conflicts, removal of
//! omitted fields, list types, and what an apply body may not carry.

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{APPLY, Answer, WIDGETS, merge_patch, patch, widget, widget_server};

/// Applies `spec` to Widget `w` as `manager` (`force` adds `&force=true`).
pub async fn apply(server: &TestServer, manager: &str, spec: &Value, force: bool) -> Answer {
    let force = if force { "&force=true" } else { "" };
    patch(
        server,
        &format!("{WIDGETS}/w?fieldManager={manager}{force}"),
        APPLY,
        &widget("w", spec),
    )
    .await
}

/// The managedFields entry of `manager`.
fn entry<'a>(object: &'a Value, manager: &str) -> &'a Value {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no managedFields entry for {manager}: {object}"))
}

#[tokio::test]
async fn r3_20_apply_records_managed_fields_per_manager() {
    let server = widget_server().await;
    apply(&server, "alice", &json!({"size": 1}), false)
        .await
        .ok(201);
    let both = apply(&server, "bob", &json!({"colour": "red"}), false).await;
    let object = both.ok(200);
    let alice = entry(object, "alice");
    assert_eq!(alice["operation"], "Apply");
    assert_eq!(alice["apiVersion"], "conformance.example.com/v1");
    assert_eq!(alice["fieldsType"], "FieldsV1");
    assert_eq!(alice["fieldsV1"]["f:spec"], json!({"f:size": {}}));
    assert!(alice["time"].is_string());
    assert_eq!(
        entry(object, "bob")["fieldsV1"]["f:spec"],
        json!({"f:colour": {}})
    );
}

#[tokio::test]
async fn r3_21_update_writes_take_ownership_of_what_they_change() {
    let server = widget_server().await;
    apply(
        &server,
        "alice",
        &json!({"size": 1, "colour": "red"}),
        false,
    )
    .await
    .ok(201);
    let updated = merge_patch(
        &server,
        &format!("{WIDGETS}/w?fieldManager=carol"),
        &json!({"spec": {"size": 3}}),
    )
    .await;
    let object = updated.ok(200);
    let carol = entry(object, "carol");
    assert_eq!(carol["operation"], "Update");
    assert_eq!(carol["fieldsV1"]["f:spec"], json!({"f:size": {}}));
    assert_eq!(
        entry(object, "alice")["fieldsV1"]["f:spec"],
        json!({"f:colour": {}})
    );
    // Alice no longer owns size: applying her old value conflicts with carol.
    let answer = apply(
        &server,
        "alice",
        &json!({"size": 1, "colour": "red"}),
        false,
    )
    .await;
    answer.assert_status(409, "Conflict");
}

#[tokio::test]
async fn r3_22_an_apply_over_another_managers_field_conflicts_unless_forced() {
    let server = widget_server().await;
    apply(&server, "alice", &json!({"size": 1}), false)
        .await
        .ok(201);
    let answer = apply(&server, "bob", &json!({"size": 2}), false).await;
    answer.assert_status(409, "Conflict");
    let causes = answer.body["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{}", answer.body);
    assert_eq!(causes[0]["reason"], "FieldManagerConflict");
    assert_eq!(causes[0]["field"], ".spec.size");
    assert!(causes[0]["message"].as_str().unwrap().contains("alice"));
    // The same value is shared ownership, not a conflict.
    apply(&server, "carol", &json!({"size": 1}), false)
        .await
        .ok(200);
    let forced = apply(&server, "bob", &json!({"size": 2}), true).await;
    let object = forced.ok(200);
    assert_eq!(object["spec"]["size"], 2);
    assert_eq!(
        entry(object, "bob")["fieldsV1"]["f:spec"],
        json!({"f:size": {}})
    );
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(
        managers,
        ["bob"],
        "force takes the field from every other owner"
    );
}

#[tokio::test]
async fn r3_23_fields_omitted_from_a_new_apply_are_removed_unless_owned_by_another() {
    let server = widget_server().await;
    apply(
        &server,
        "alice",
        &json!({"size": 1, "colour": "red", "tags": ["a"]}),
        false,
    )
    .await
    .ok(201);
    apply(&server, "bob", &json!({"tags": ["a"]}), false)
        .await
        .ok(200);
    let answer = apply(&server, "alice", &json!({"size": 1}), false).await;
    let spec = &answer.ok(200)["spec"];
    assert!(
        spec.get("colour").is_none(),
        "alice's omitted field goes: {spec}"
    );
    assert_eq!(spec["tags"], json!(["a"]), "bob still owns tags");
}

#[tokio::test]
async fn r3_24_list_maps_merge_by_key_and_sets_by_value() {
    let server = widget_server().await;
    let alice = json!({"ports": [{"name": "http", "port": 80}], "tags": ["a"]});
    apply(&server, "alice", &alice, false).await.ok(201);
    let bob = json!({"ports": [{"name": "metrics", "port": 9090}], "tags": ["b"]});
    let merged = apply(&server, "bob", &bob, false).await;
    let spec = &merged.ok(200)["spec"];
    assert_eq!(
        spec["ports"],
        json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}])
    );
    assert_eq!(spec["tags"], json!(["a", "b"]));
    let conflicting = json!({"ports": [{"name": "http", "port": 8080}]});
    apply(&server, "bob", &conflicting, false)
        .await
        .assert_status(409, "Conflict");
}

#[tokio::test]
async fn r3_25_managed_fields_in_an_apply_body_is_400() {
    let server = widget_server().await;
    let mut body = widget("w", &json!({"size": 1}));
    body["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Apply",
        "apiVersion": "conformance.example.com/v1", "fieldsType": "FieldsV1", "fieldsV1": {}}]);
    let answer = patch(
        &server,
        &format!("{WIDGETS}/w?fieldManager=m"),
        APPLY,
        &body,
    )
    .await;
    answer.assert_status(400, "BadRequest");
    assert!(
        answer.body["message"]
            .as_str()
            .unwrap()
            .contains("managedFields must be nil")
    );
}

#[tokio::test]
async fn r3_30_apply_on_a_deployment_merges_containers_by_name() {
    let server = TestServer::start().await.unwrap();
    let deployment = |container: &str| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": container, "image": "busybox"}]}}}})
    };
    let path = "/apis/apps/v1/namespaces/default/deployments/d";
    patch(
        &server,
        &format!("{path}?fieldManager=alice"),
        APPLY,
        &deployment("a"),
    )
    .await
    .ok(201);
    let merged = patch(
        &server,
        &format!("{path}?fieldManager=bob"),
        APPLY,
        &deployment("b"),
    )
    .await;
    let names: Vec<&str> = merged.ok(200)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    let bob = &entry(&merged.body, "bob")["fieldsV1"]["f:spec"]["f:template"]["f:spec"];
    assert!(
        bob["f:containers"].get(r#"k:{"name":"b"}"#).is_some(),
        "{bob}"
    );
    assert!(
        bob["f:containers"].get(r#"k:{"name":"a"}"#).is_none(),
        "{bob}"
    );
    // The same container's image is alice's.
    let mut takeover = deployment("a");
    takeover["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
    patch(
        &server,
        &format!("{path}?fieldManager=bob"),
        APPLY,
        &takeover,
    )
    .await
    .assert_status(409, "Conflict");
}

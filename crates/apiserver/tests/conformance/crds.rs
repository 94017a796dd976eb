//! Section 3, CustomResourceDefinitions: registration, structural defaults, pruning,
//! strict field validation, schema violations and CRD deletion.

use serde_json::{Value, json};

use crate::kit::{
    MERGE, WIDGETS, create_widget, delete, drop_finalizers, eventually, get, merge_patch, patch,
    post, put, widget, widget_server,
};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGET_CRD: &str =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.conformance.example.com";

fn condition_true(crd: &Value, kind: &str) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

#[tokio::test]
async fn r3_15_a_posted_crd_is_accepted_established_and_served() {
    let server = apiserver::testing::TestServer::start().await.unwrap();
    let created = post(&server, CRDS, &crate::kit::widget_crd()).await;
    created.ok(201);
    eventually("the CRD is Established with its names accepted", || async {
        let crd = get(&server, WIDGET_CRD).await.body;
        condition_true(&crd, "NamesAccepted") && condition_true(&crd, "Established")
    })
    .await;
    let crd = get(&server, WIDGET_CRD).await.body;
    let names = &crd["status"]["acceptedNames"];
    assert_eq!(
        (names["kind"].as_str(), names["plural"].as_str()),
        (Some("Widget"), Some("widgets"))
    );
    assert_eq!(names["shortNames"], json!(["wd"]));
    eventually("Widgets are served", || async {
        get(&server, WIDGETS).await.code == 200
    })
    .await;
    let discovery = get(&server, "/apis/conformance.example.com/v1").await;
    assert!(
        discovery.body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "widgets"),
        "{}",
        discovery.body
    );
}

#[tokio::test]
async fn r3_16_defaults_apply_on_create_update_and_read() {
    let server = widget_server().await;
    let created = create_widget(&server, "w", &json!({"limits": {}})).await;
    assert_eq!(created["spec"]["mode"], "Auto", "{created}");
    assert_eq!(
        created["spec"]["limits"]["cpu"], "1",
        "inside a parent that exists"
    );
    let path = format!("{WIDGETS}/w");
    let updated = patch(&server, &path, MERGE, &json!({"spec": {"mode": null}})).await;
    assert_eq!(
        updated.ok(200)["spec"]["mode"],
        "Auto",
        "a removed defaulted key comes back"
    );

    let mut held = widget("held", &json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&server, WIDGETS, &held).await.ok(201);

    // A default added to the schema later shows on read of objects stored before.
    let mut crd = get(&server, WIDGET_CRD).await.body;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["shape"] =
        json!({"type": "string", "default": "round"});
    put(&server, WIDGET_CRD, &crd).await.ok(200);
    eventually("the new schema is in force", || async {
        get(&server, &path).await.body["spec"]["shape"] == "round"
    })
    .await;
    // So does an object a delete only marks (it has a finalizer): its content is still
    // the old schema's, so it is defaulted on the way out, not served as stored.
    let held_path = format!("{WIDGETS}/held");
    let deleting = delete(&server, &held_path, &json!({})).await;
    let deleting = deleting.ok(200);
    assert!(
        !deleting["metadata"]["deletionTimestamp"].is_null(),
        "{deleting}"
    );
    assert_eq!(deleting["spec"]["shape"], "round", "{deleting}");
    assert_eq!(
        get(&server, &held_path).await.body["spec"]["shape"],
        "round"
    );
}

#[tokio::test]
async fn r3_17_unknown_fields_are_pruned_except_where_preserved() {
    let server = widget_server().await;
    let mut body = widget(
        "w",
        &json!({"size": 1, "unknown": 1, "extra": {"anything": {"deep": [1, 2]}}}),
    );
    body["junk"] = json!("top level");
    let created = post(&server, WIDGETS, &body).await;
    let created = created.ok(201);
    assert!(created["spec"].get("unknown").is_none(), "{created}");
    assert!(created.get("junk").is_none(), "{created}");
    assert_eq!(
        created["spec"]["extra"],
        json!({"anything": {"deep": [1, 2]}})
    );
    let read = get(&server, &format!("{WIDGETS}/w")).await;
    assert!(read.body["spec"].get("unknown").is_none());
}

#[tokio::test]
async fn r3_18_strict_field_validation_rejects_unknown_fields() {
    let server = widget_server().await;
    let body = widget("w", &json!({"size": 1, "unknown": 1}));
    let answer = post(&server, &format!("{WIDGETS}?fieldValidation=Strict"), &body).await;
    answer.assert_status(400, "BadRequest");
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.contains("strict decoding error")
            && message.contains("unknown field \"spec.unknown\""),
        "{message}"
    );
    assert_eq!(get(&server, &format!("{WIDGETS}/w")).await.code, 404);
    // Preserved subtrees are not unknown.
    let preserved = widget("p", &json!({"extra": {"free": true}}));
    post(
        &server,
        &format!("{WIDGETS}?fieldValidation=Strict"),
        &preserved,
    )
    .await
    .ok(201);
}

#[tokio::test]
async fn r3_19_a_schema_violation_is_422_invalid_naming_the_field() {
    let server = widget_server().await;
    for spec in [json!({"size": -1}), json!({"size": "big"})] {
        let answer = post(&server, WIDGETS, &widget("w", &spec)).await;
        answer.assert_status(422, "Invalid");
        assert_eq!(
            answer.body["details"]["causes"][0]["field"], "spec.size",
            "{}",
            answer.body
        );
        assert_eq!(answer.body["details"]["kind"], "Widget");
    }
    create_widget(&server, "ok", &json!({"size": 1})).await;
    let answer = merge_patch(
        &server,
        &format!("{WIDGETS}/ok"),
        &json!({"spec": {"size": -5}}),
    )
    .await;
    answer.assert_status(422, "Invalid");
}

#[tokio::test]
async fn r3_29_deleting_a_crd_deletes_its_instances_first() {
    let server = widget_server().await;
    let mut held = widget("held", &json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&server, WIDGETS, &held).await.ok(201);
    delete(&server, WIDGET_CRD, &Value::Null).await.ok(200);
    eventually("the instance is marked", || async {
        get(&server, &format!("{WIDGETS}/held")).await.body["metadata"]["deletionTimestamp"]
            .is_string()
    })
    .await;
    assert_eq!(
        get(&server, WIDGET_CRD).await.code,
        200,
        "instances go first"
    );
    drop_finalizers(&server, &format!("{WIDGETS}/held")).await;
    eventually("the CRD goes", || async {
        get(&server, WIDGET_CRD).await.code == 404
    })
    .await;
    get(&server, WIDGETS).await.assert_status(404, "NotFound");
}

/// The object the last write of Widget `name` stored, as stored (no read defaults).
fn last_stored_widget(server: &apiserver::testing::TestServer, name: &str) -> Value {
    server
        .history()
        .into_iter()
        .rev()
        .find(|entry| entry.resource.ends_with("/widgets") && entry.name == name)
        .map(|entry| entry.object())
        .unwrap()
}

#[tokio::test]
async fn r3_35_unchanged_values_ratchet_after_a_schema_change() {
    let server = widget_server().await;
    create_widget(&server, "w", &json!({"size": 50, "colour": "red"})).await;
    let path = format!("{WIDGETS}/w");
    // Metadata-only writes of content the schema in force made.
    merge_patch(
        &server,
        &path,
        &json!({"metadata": {"finalizers": ["x.io/keep"]}}),
    )
    .await
    .ok(200);
    merge_patch(&server, &path, &json!({"metadata": {"labels": {"a": "1"}}}))
        .await
        .ok(200);

    // The schema tightens size, makes colour immutable and defaults a new field.
    let mut crd = get(&server, WIDGET_CRD).await.body;
    let spec = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    spec["size"]["maximum"] = json!(10);
    spec["colour"]["x-kubernetes-validations"] =
        json!([{"rule": "self == oldSelf", "message": "colour is immutable"}]);
    spec["shape"] = json!({"type": "string", "default": "round"});
    put(&server, WIDGET_CRD, &crd).await.ok(200);
    eventually("the new schema is in force", || async {
        get(&server, &path).await.body["spec"]["shape"] == "round"
    })
    .await;
    assert!(
        last_stored_widget(&server, "w")["spec"]
            .get("shape")
            .is_none(),
        "stored before the change"
    );

    // Writes that leave size as it was pass (twice: the second one's content is the new
    // schema's), and store the new default.
    for labels in [json!({"a": "2"}), json!({"a": "3"})] {
        merge_patch(&server, &path, &json!({"metadata": {"labels": labels}}))
            .await
            .ok(200);
        let stored = last_stored_widget(&server, "w");
        assert_eq!(stored["metadata"]["labels"], labels, "{stored}");
        assert_eq!(stored["spec"]["shape"], "round", "{stored}");
        assert_eq!(stored["spec"]["size"], 50, "{stored}");
    }

    // A change of the invalid value is refused; so is a change of the immutable colour.
    let bigger = merge_patch(&server, &path, &json!({"spec": {"size": 60}})).await;
    assert_eq!(bigger.code, 422, "{}", bigger.body);
    assert_eq!(bigger.body["details"]["causes"][0]["field"], "spec.size");
    let recoloured = merge_patch(&server, &path, &json!({"spec": {"colour": "blue"}})).await;
    assert_eq!(recoloured.code, 422, "{}", recoloured.body);
    assert!(
        recoloured.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("colour is immutable")),
        "{}",
        recoloured.body
    );
    // A valid change of size passes; the immutable colour, unchanged, does not stop it.
    let smaller = merge_patch(&server, &path, &json!({"spec": {"size": 5}})).await;
    assert_eq!(smaller.ok(200)["spec"]["size"], 5);

    // The deletion (a metadata write while the finalizer holds) and the finalizer's
    // removal pass.
    delete(&server, &path, &Value::Null).await.ok(200);
    drop_finalizers(&server, &path).await;
    eventually("the widget is gone", || async {
        get(&server, &path).await.code == 404
    })
    .await;
}

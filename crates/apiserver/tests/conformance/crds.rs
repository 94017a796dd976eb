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

    // A default added to the schema later shows on read of objects stored before.
    let mut crd = get(&server, WIDGET_CRD).await.body;
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["shape"] =
        json!({"type": "string", "default": "round"});
    put(&server, WIDGET_CRD, &crd).await.ok(200);
    eventually("the new schema is in force", || async {
        get(&server, &path).await.body["spec"]["shape"] == "round"
    })
    .await;
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

//! Section 4 (and the events Recorder of section 1): what kubectl, Helm and operators
//! need beyond the controllers' reads and writes.

use std::time::{Duration, Instant};

use apiserver::faults::FaultConfig;
use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

use crate::kit::{
    CONFIGMAPS, JSON, MERGE, RawWatch, WIDGETS, call_with, configmap, create_configmap,
    create_widget, delete, get, patch, post, widget_server,
};

const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// Publishes the same Normal event about ConfigMap `target` twice, as a controller would.
async fn publish_twice(server: &TestServer) -> Value {
    let target = create_configmap(server, "target", &json!({})).await;
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        name: Some("target".into()),
        namespace: Some("default".into()),
        uid: target["metadata"]["uid"].as_str().map(String::from),
        ..ObjectReference::default()
    };
    let reporter = Reporter {
        controller: "tester".into(),
        instance: None,
    };
    let recorder = Recorder::new(server.client(), reporter);
    let event = Event {
        type_: EventType::Normal,
        reason: "Checked".into(),
        note: Some("all good".into()),
        action: "Check".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    target
}

#[tokio::test]
async fn r1_12_the_recorder_posts_events_and_patches_repeats_into_a_series() {
    let server = TestServer::start().await.unwrap();
    publish_twice(&server).await;
    let events = get(&server, "/apis/events.k8s.io/v1/namespaces/default/events").await;
    let items = events.ok(200)["items"].as_array().unwrap();
    assert_eq!(
        items.len(),
        1,
        "a repeat is a series of one event: {items:?}"
    );
    assert_eq!(items[0]["series"]["count"], 2);
    assert_eq!(items[0]["regarding"]["name"], "target");
    let writes: Vec<(String, u16)> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "events" && r.method != "GET")
        .map(|r| (r.verb, r.status))
        .collect();
    assert_eq!(writes, [("create".into(), 201), ("patch".into(), 200)]);
}

#[tokio::test]
async fn r4_1_version() {
    let server = TestServer::start().await.unwrap();
    let version = get(&server, "/version").await;
    let body = version.ok(200);
    assert_eq!(body["major"], "1");
    assert!(
        body["minor"]
            .as_str()
            .is_some_and(|m| m.parse::<u32>().is_ok()),
        "{body}"
    );
    assert!(body["gitVersion"].as_str().unwrap().starts_with("v1."));
}

#[tokio::test]
async fn r4_2_discovery_lists_groups_versions_and_resources() {
    let server = widget_server().await;
    let api = get(&server, "/api").await;
    assert_eq!(
        (api.body["kind"].as_str(), &api.body["versions"]),
        (Some("APIVersions"), &json!(["v1"]))
    );
    let core = get(&server, "/api/v1").await;
    assert_eq!(core.body["kind"], "APIResourceList");
    let resources = core.body["resources"].as_array().unwrap();
    let configmaps = resources
        .iter()
        .find(|r| r["name"] == "configmaps")
        .unwrap();
    assert_eq!(configmaps["singularName"], "configmap");
    assert_eq!(configmaps["namespaced"], true);
    assert_eq!(configmaps["kind"], "ConfigMap");
    assert_eq!(configmaps["shortNames"], json!(["cm"]));
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(
            configmaps["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v == verb),
            "{verb}"
        );
    }
    let groups = get(&server, "/apis").await;
    assert_eq!(groups.body["kind"], "APIGroupList");
    let ours = groups.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "conformance.example.com")
        .unwrap();
    assert_eq!(
        ours["preferredVersion"]["groupVersion"],
        "conformance.example.com/v1"
    );
    let widgets = get(&server, "/apis/conformance.example.com/v1").await;
    let resources = widgets.body["resources"].as_array().unwrap();
    let widget = resources.iter().find(|r| r["name"] == "widgets").unwrap();
    assert_eq!(widget["singularName"], "widget");
    assert_eq!(widget["kind"], "Widget");
    assert_eq!(widget["shortNames"], json!(["wd"]));
    assert_eq!(widget["categories"], json!(["gadgets"]));
    assert!(
        resources.iter().any(|r| r["name"] == "widgets/status"),
        "{resources:?}"
    );
}

#[tokio::test]
async fn r4_3_aggregated_discovery_is_v2_or_says_it_is_not() {
    let server = TestServer::start().await.unwrap();
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let answer = call_with(&server, "GET", "/apis", JSON, Some(accept), Vec::new()).await;
    let content_type = answer.headers["content-type"].to_str().unwrap();
    if content_type.contains("as=APIGroupDiscoveryList") {
        assert_eq!(answer.body["kind"], "APIGroupDiscoveryList");
    } else {
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        assert_eq!(answer.body["kind"], "APIGroupList");
    }
}

#[tokio::test]
async fn r4_4_tables_serve_printer_columns_with_metadata_rows() {
    let server = widget_server().await;
    create_widget(&server, "t1", &json!({"size": 7})).await;
    let table = call_with(
        &server,
        "GET",
        WIDGETS,
        JSON,
        Some(TABLE_ACCEPT),
        Vec::new(),
    )
    .await;
    let body = table.ok(200);
    assert_eq!(
        (body["kind"].as_str(), body["apiVersion"].as_str()),
        (Some("Table"), Some("meta.k8s.io/v1"))
    );
    let columns: Vec<&str> = body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Size"], "exactly the printer columns");
    assert_eq!(body["rows"][0]["cells"], json!(["t1", 7]));
    assert_eq!(body["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(body["metadata"]["resourceVersion"].is_string());

    // A CRD without printer columns: Name and Age.
    let mut plain = crate::kit::widget_crd();
    plain["metadata"]["name"] = json!("gizmos.conformance.example.com");
    plain["spec"]["names"] = json!({"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"});
    plain["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("additionalPrinterColumns");
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &plain,
    )
    .await
    .ok(201);
    let gizmos = "/apis/conformance.example.com/v1/namespaces/default/gizmos";
    crate::kit::eventually("gizmos are served", || async {
        get(&server, gizmos).await.code == 200
    })
    .await;
    let table = call_with(&server, "GET", gizmos, JSON, Some(TABLE_ACCEPT), Vec::new()).await;
    let columns: Vec<&str> = table.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Age"]);
}

#[tokio::test]
async fn r4_5_openapi_v3_makes_kubectl_validate_and_explain() {
    let server = widget_server().await;
    let index = get(&server, "/openapi/v3").await;
    let paths = &index.ok(200)["paths"];
    for group_version in ["api/v1", "apis/conformance.example.com/v1"] {
        assert!(
            paths[group_version]["serverRelativeURL"].is_string(),
            "{group_version}: {paths}"
        );
    }
    let core = get(
        &server,
        paths["api/v1"]["serverRelativeURL"].as_str().unwrap(),
    )
    .await;
    let namespace_patch = &core.ok(200)["paths"]["/api/v1/namespaces/{name}"]["patch"];
    assert!(
        namespace_patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"),
        "{namespace_patch}"
    );
    let crd_url = paths["apis/conformance.example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap();
    let doc = get(&server, crd_url).await;
    let schemas = doc.ok(200)["components"]["schemas"].as_object().unwrap();
    let widget = schemas
        .values()
        .find(|s| s["x-kubernetes-group-version-kind"][0]["kind"] == "Widget")
        .expect("a schema with the Widget group-version-kind");
    assert_eq!(
        widget["x-kubernetes-group-version-kind"][0]["group"],
        "conformance.example.com"
    );
    assert_eq!(
        widget["properties"]["spec"]["properties"]["size"]["description"],
        "How big."
    );
}

#[tokio::test]
async fn r4_6_kubectl_delete_waits_with_a_name_field_selector_watch() {
    let server = TestServer::start().await.unwrap();
    let mut held = configmap("held", &json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&server, CONFIGMAPS, &held).await.ok(201);
    create_configmap(&server, "other", &json!({})).await;
    let path = format!("{CONFIGMAPS}/held");
    delete(&server, &path, &json!({"propagationPolicy": "Background"}))
        .await
        .ok(200);
    let rv = get(&server, &path).await.rv();
    let mut watch = RawWatch::open(
        &server,
        &format!("{CONFIGMAPS}?watch=true&fieldSelector=metadata.name%3Dheld&resourceVersion={rv}"),
    )
    .await;
    delete(&server, &format!("{CONFIGMAPS}/other"), &Value::Null)
        .await
        .ok(200);
    patch(
        &server,
        &path,
        MERGE,
        &json!({"metadata": {"finalizers": null}}),
    )
    .await
    .ok(200);
    let event = watch.next_change().await.unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("held"))
    );
}

#[tokio::test]
async fn r4_7_events_are_mirrored_as_core_events_selectable_by_involved_object() {
    let server = TestServer::start().await.unwrap();
    let target = publish_twice(&server).await;
    let selector = format!(
        "involvedObject.name=target,involvedObject.namespace=default,involvedObject.kind=ConfigMap,involvedObject.uid={}",
        target["metadata"]["uid"].as_str().unwrap()
    );
    let selector: String = form_urlencoded::byte_serialize(selector.as_bytes()).collect();
    let core = get(
        &server,
        &format!("/api/v1/namespaces/default/events?fieldSelector={selector}"),
    )
    .await;
    let items = core.ok(200)["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["message"], "all good");
    assert_eq!(items[0]["reason"], "Checked");
    assert_eq!(items[0]["series"]["count"], 2);
    let other = get(
        &server,
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dnobody",
    )
    .await;
    assert_eq!(other.body["items"], json!([]));
}

#[tokio::test]
async fn r4_8_the_built_in_kinds_are_served_and_secrets_fold_string_data() {
    let server = TestServer::start().await.unwrap();
    for collection in [
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/secrets",
        CONFIGMAPS,
        "/api/v1/namespaces/default/serviceaccounts",
        "/api/v1/namespaces/default/services",
        "/api/v1/namespaces/default/events",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ] {
        assert_eq!(get(&server, collection).await.code, 200, "{collection}");
    }
    let secret =
        json!({"metadata": {"name": "s"}, "stringData": {"a": "hi"}, "data": {"b": "Ynk="}});
    let created = post(&server, "/api/v1/namespaces/default/secrets", &secret).await;
    let body = created.ok(201);
    assert_eq!(body["data"], json!({"a": "aGk=", "b": "Ynk="}));
    assert!(body.get("stringData").is_none());
}

#[tokio::test]
async fn r4_9_faults_are_injected_and_requests_counted() {
    let server = TestServer::start().await.unwrap();
    let body = configmap("f", &json!({}));
    let create = || crate::kit::call_bare(&server, "POST", CONFIGMAPS, &body);
    let cases = [
        (
            FaultConfig {
                conflict_rate: 1.0,
                ..FaultConfig::default()
            },
            409,
            "Conflict",
        ),
        (
            FaultConfig {
                throttle_rate: 1.0,
                ..FaultConfig::default()
            },
            429,
            "TooManyRequests",
        ),
        (
            FaultConfig {
                internal_error_rate: 1.0,
                ..FaultConfig::default()
            },
            500,
            "InternalError",
        ),
        (
            FaultConfig {
                unavailable_rate: 1.0,
                ..FaultConfig::default()
            },
            503,
            "ServiceUnavailable",
        ),
    ];
    for (faults, code, reason) in cases {
        server.set_faults(FaultConfig {
            writes_only: true,
            ..faults
        });
        let answer = create().await;
        answer.assert_status(code, reason);
        if matches!(code, 429 | 503) {
            assert!(answer.headers.contains_key("retry-after"), "{code}");
        }
        assert_eq!(get(&server, CONFIGMAPS).await.code, 200, "writes only");
    }
    server.set_faults(FaultConfig {
        latency: Duration::from_millis(200),
        ..FaultConfig::default()
    });
    let started = Instant::now();
    create().await.ok(201);
    assert!(started.elapsed() >= Duration::from_millis(200));
    server.set_faults(FaultConfig {
        drop_watch_after_events: Some(1),
        ..FaultConfig::default()
    });
    let mut watch = RawWatch::open(
        &server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion=1"),
    )
    .await;
    assert!(watch.next().await.is_some());
    assert!(watch.next().await.is_none(), "dropped after one event");
    server.set_faults(FaultConfig::default());
    let counters = server.counters();
    assert_eq!(counters.by_verb_resource.get("create configmaps"), Some(&5));
    assert!(server.requests().iter().any(|r| r.status == 503));
}

#[tokio::test]
async fn r4_10_built_in_kinds_are_validated() {
    // Upstream: ValidateDeploymentSpec (k8s.io/kubernetes/pkg/apis/apps/validation).
    let server = TestServer::start().await.unwrap();
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let answer = post(&server, deployments, &deployment).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "field": "spec.template.metadata.labels",
            "message": "Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"})
    );
    let mut unselected = deployment.clone();
    unselected["spec"]
        .as_object_mut()
        .unwrap()
        .remove("selector");
    let answer = post(&server, deployments, &unselected).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0]["field"],
        "spec.selector"
    );
    let mut matching = deployment;
    matching["spec"]["template"]["metadata"]["labels"] = json!({"app": "d", "tier": "web"});
    post(&server, deployments, &matching).await.ok(201);
}

#[tokio::test]
async fn r4_11_pod_disruption_budgets_are_served() {
    let server = TestServer::start().await.unwrap();
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "d"}}}});
    let created = post(
        &server,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        &pdb,
    )
    .await;
    assert_eq!(created.ok(201)["spec"]["minAvailable"], 1);
}

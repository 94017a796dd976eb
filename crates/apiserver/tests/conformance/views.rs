//! What kubectl shows of built-in kinds: the real server's Table columns (issue 15,
//! item 4) and their OpenAPI schemas for `kubectl explain` (item 5).
//!
//! Upstream: the columns and cells of kubernetes/pkg/printers/internalversion/printers.go
//! (1.32), always printed wide by the server (kubectl hides priority 1 unless `-o wide`);
//! kinds without a printer there get the default Name and Created At
//! (k8s.io/apiserver/pkg/registry/rest/table.go).

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{JSON, call_with, post};

const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn table(server: &TestServer, path: &str) -> Value {
    let answer = call_with(server, "GET", path, JSON, Some(TABLE_ACCEPT), Vec::new()).await;
    answer.ok(200).clone()
}

fn columns(table: &Value) -> Vec<(String, u64)> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn names(table: &Value) -> Vec<String> {
    columns(table).into_iter().map(|(n, _)| n).collect()
}

#[tokio::test]
async fn r4_15_built_in_kinds_have_the_real_servers_table_columns() {
    let server = TestServer::start().await.unwrap();
    let namespaces = table(&server, "/api/v1/namespaces/default").await;
    assert_eq!(names(&namespaces), ["Name", "Status", "Age"]);
    assert_eq!(namespaces["rows"][0]["cells"][1], "Active");

    post(
        &server,
        "/api/v1/namespaces/default/events",
        &json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Pulled",
            "message": " done ", "count": 3, "source": {"component": "kubelet", "host": "n1"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"}}),
    )
    .await
    .ok(201);
    let events = table(&server, "/api/v1/namespaces/default/events").await;
    assert_eq!(
        columns(&events),
        [
            ("Last Seen", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Subobject", 1),
            ("Source", 1),
            ("Message", 0),
            ("First Seen", 1),
            ("Count", 1),
            ("Name", 1)
        ]
        .map(|(n, p)| (n.to_string(), p))
    );
    let cells = events["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(
        cells[1..7],
        json!([
            "Normal",
            "Pulled",
            "pod/p",
            "spec.containers{c}",
            "kubelet, n1",
            "done"
        ])
        .as_array()
        .unwrap()[..]
    );
    assert_eq!(cells[8..], [json!(3), json!("e")]);
    // The same events, served by events.k8s.io, print the same.
    let v1 = table(&server, "/apis/events.k8s.io/v1/namespaces/default/events").await;
    assert_eq!(v1["rows"][0]["cells"], events["rows"][0]["cells"]);

    post(
        &server,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        &json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%"}}),
    )
    .await
    .ok(201);
    let pdbs = table(
        &server,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    )
    .await;
    assert_eq!(
        names(&pdbs),
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    let cells = pdbs["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(cells[1..4], [json!("50%"), json!("N/A"), json!(0)]);

    post(
        &server,
        "/api/v1/namespaces/default/services",
        &json!({"metadata": {"name": "s"}, "spec": {"type": "NodePort",
            "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "a"}}}),
    )
    .await
    .ok(201);
    let services = table(&server, "/api/v1/namespaces/default/services").await;
    assert_eq!(
        names(&services),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age",
            "Selector"
        ]
    );
    let cells = &services["rows"][0]["cells"];
    assert_eq!(cells[1], "NodePort");
    assert_eq!(cells[4], "80:30080/TCP,53/UDP");
    assert_eq!(cells[6], "app=a");

    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}}),
    )
    .await
    .ok(201);
    let configmaps = table(&server, "/api/v1/namespaces/default/configmaps/c").await;
    assert_eq!(names(&configmaps), ["Name", "Data", "Age"]);
    assert_eq!(configmaps["rows"][0]["cells"][1], 2);
    post(
        &server,
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": "AA==", "tls.key": "AA=="}}),
    )
    .await
    .ok(201);
    let secrets = table(&server, "/api/v1/namespaces/default/secrets/s").await;
    assert_eq!(names(&secrets), ["Name", "Type", "Data", "Age"]);
    let cells = secrets["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(cells[1..3], [json!("kubernetes.io/tls"), json!(2)]);
    post(
        &server,
        "/apis/apps/v1/namespaces/default/deployments",
        &json!({"metadata": {"name": "d"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}),
    )
    .await
    .ok(201);
    let deployments = table(&server, "/apis/apps/v1/namespaces/default/deployments").await;
    assert_eq!(
        columns(&deployments),
        [
            ("Name", 0),
            ("Ready", 0),
            ("Up-to-date", 0),
            ("Available", 0),
            ("Age", 0),
            ("Containers", 1),
            ("Images", 1),
            ("Selector", 1)
        ]
        .map(|(n, p)| (n.to_string(), p))
    );
    let cells = deployments["rows"][0]["cells"].as_array().unwrap().clone();
    assert_eq!(cells[1..4], [json!("0/3"), json!(0), json!(0)]);
    assert_eq!(cells[5..], [json!("c"), json!("nginx:1"), json!("app=d")]);

    let roles = table(&server, "/apis/rbac.authorization.k8s.io/v1/clusterroles").await;
    assert_eq!(names(&roles), ["Name", "Created At"]);
    let leases = table(
        &server,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    )
    .await;
    assert_eq!(names(&leases), ["Name", "Holder", "Age"]);
}

/// Upstream: the CRD OpenAPI builder adds `apiVersion`, `kind` and `metadata` (a reference to
/// ObjectMeta) to every CRD schema it publishes (k8s.io/apiextensions-apiserver/pkg/
/// controller/openapi/builder); built-in kinds publish their generated schemas.
#[tokio::test]
async fn r4_16_openapi_v3_publishes_built_in_schemas_and_crds_with_type_and_object_meta() {
    let server = crate::kit::widget_server().await;
    let core = crate::kit::get(&server, "/openapi/v3/api/v1").await;
    let schemas = &core.ok(200)["components"]["schemas"];
    let config_map = &schemas["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        config_map["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "ConfigMap"}])
    );
    assert!(
        config_map["properties"]["binaryData"].is_object(),
        "{config_map}"
    );
    let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    assert!(schemas[meta]["properties"]["labels"].is_object());

    let apps = crate::kit::get(&server, "/openapi/v3/apis/apps/v1").await;
    assert!(apps.ok(200)["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"].is_object());

    let widgets = crate::kit::get(&server, "/openapi/v3/apis/conformance.example.com/v1").await;
    let schemas = &widgets.ok(200)["components"]["schemas"];
    let widget = &schemas["com.example.conformance.v1.Widget"];
    for field in ["apiVersion", "kind"] {
        assert_eq!(widget["properties"][field]["type"], "string", "{widget}");
    }
    assert_eq!(
        widget["properties"]["metadata"]["allOf"][0]["$ref"],
        format!("#/components/schemas/{meta}")
    );
    assert!(
        schemas[meta].is_object(),
        "the reference resolves in the document"
    );
}

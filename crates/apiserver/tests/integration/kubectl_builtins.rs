//! The real `kubectl` (1.32) on built-in kinds: `get` prints the real server's columns
//! (issue 15, item 4).

use crate::support;

use apiserver::testing::TestServer;
use serde_json::json;
use support::kubectl::{headers, kubectl_ok, kubectl_required, squeeze, table};

async fn post(server: &TestServer, path: &str, body: serde_json::Value) {
    let request = http::Request::post(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    let response = server
        .client()
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    assert!(response.status().is_success(), "POST {path}: {response:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_prints_the_columns_of_the_real_printers() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "two"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}}),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": "AA==", "tls.key": "AA=="}}),
    )
    .await;
    post(
        &server,
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web"}, "spec": {"replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces/default/events",
        json!({"metadata": {"name": "e1"}, "type": "Warning", "reason": "Failed",
            "message": "it broke", "lastTimestamp": "2026-01-01T00:00:00Z",
            "involvedObject": {"kind": "ConfigMap", "name": "two", "namespace": "default"}}),
    )
    .await;
    post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "going", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    post(
        &server,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        json!({"metadata": {"name": "reader"}, "rules": []}),
    )
    .await;
    kubectl_ok(&server, &["delete", "namespace", "going", "--wait=false"]);

    let server = &server;
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "ns"]);
            assert_eq!(headers(&out), ["NAME", "STATUS", "AGE"], "{out}");
            let rows = table(&out);
            let going = rows.iter().find(|r| r["NAME"] == "going").unwrap();
            assert_eq!(going["STATUS"], "Terminating", "{out}");
        });
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "cm", "two"]);
            assert_eq!(headers(&out), ["NAME", "DATA", "AGE"], "{out}");
            assert_eq!(table(&out)[0]["DATA"], "2", "{out}");
        });
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "secret", "s"]);
            assert_eq!(headers(&out), ["NAME", "TYPE", "DATA", "AGE"], "{out}");
            assert_eq!(table(&out)[0]["TYPE"], "kubernetes.io/tls", "{out}");
            assert_eq!(table(&out)[0]["DATA"], "2", "{out}");
        });
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "deploy", "-o", "wide"]);
            assert_eq!(
                headers(&out),
                [
                    "NAME",
                    "READY",
                    "UP-TO-DATE",
                    "AVAILABLE",
                    "AGE",
                    "CONTAINERS",
                    "IMAGES",
                    "SELECTOR"
                ],
                "{out}"
            );
            let row = &table(&out)[0];
            assert_eq!(row["READY"], "0/3", "{out}");
            assert_eq!(row["IMAGES"], "nginx:1", "{out}");
            assert_eq!(row["SELECTOR"], "app=web", "{out}");
        });
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "events"]);
            assert_eq!(
                headers(&out),
                ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                "{out}"
            );
            assert!(
                out.contains("Warning")
                    && out.contains("configmap/two")
                    && out.contains("it broke"),
                "{out}"
            );
        });
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "roles"]);
            assert_eq!(headers(&out), ["NAME", "CREATED", "AT"], "{out}");
        });
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_built_in_kinds_and_the_crds_type_and_object_meta() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    support::objects::install_project_crds(&server.client()).await;
    let server = &server;
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "configmap"]));
            assert!(out.contains("KIND: ConfigMap"), "{out}");
            assert!(out.contains("VERSION: v1"), "{out}");
            assert!(
                out.contains("ConfigMap holds configuration data for pods to consume."),
                "{out}"
            );
            assert!(out.contains("binaryData <map[string]string>"), "{out}");
        });
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(
                server,
                &["explain", "deployment.spec.template.spec.containers.image"],
            ));
            assert!(out.contains("GROUP: apps"), "{out}");
            assert!(out.contains("FIELD: image <string>"), "{out}");
            assert!(out.contains("Container image name."), "{out}");
        });
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "nc", "--recursive"]));
            for field in [
                "apiVersion <string>",
                "kind <string>",
                "metadata <ObjectMeta>",
                "spec <Object>",
                "status <Object>",
                "finalizers <[]string>",
            ] {
                assert!(out.contains(field), "{field}: {out}");
            }
        });
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "nc.metadata.labels"]));
            assert!(out.contains("FIELD: labels <map[string]string>"), "{out}");
            assert!(out.contains("Map of string keys and values"), "{out}");
        });
    });
}

/// kubectl's `create <kind>` subcommands send their objects as protobuf (client-go's
/// typed clients); every one of them must be accepted (issue 15, item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_sends_protobuf_for_every_kind() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    let creates: &[&[&str]] = &[
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1",
            "--replicas=2",
            "--port=80",
        ],
        &[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=pods",
        ],
        &[
            "create",
            "rolebinding",
            "reads",
            "--role=reader",
            "--serviceaccount=default:app",
        ],
        &[
            "create",
            "clusterrole",
            "watcher",
            "--verb=watch",
            "--resource=configmaps",
        ],
        &[
            "create",
            "clusterrolebinding",
            "watches",
            "--clusterrole=watcher",
            "--user=alice",
        ],
        &["create", "service", "clusterip", "web", "--tcp=80:8080"],
        &[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=50%",
        ],
        &["create", "serviceaccount", "app"],
        &["create", "configmap", "settings", "--from-literal=a=1"],
        &[
            "create",
            "secret",
            "generic",
            "token",
            "--from-literal=t=s3cret",
        ],
        &["create", "namespace", "extra"],
    ];
    let server = &server;
    std::thread::scope(|s| {
        for args in creates {
            s.spawn(move || kubectl_ok(server, args));
        }
    });
    let protobuf_writes = server
        .requests()
        .iter()
        .filter(|r| r.verb == "create" && r.status == 201)
        .count();
    assert_eq!(protobuf_writes, creates.len(), "{:?}", server.requests());
    let get = |args: &[&str]| {
        serde_json::from_str::<serde_json::Value>(&kubectl_ok(server, args)).unwrap()
    };
    let deployment = get(&["get", "deployment", "web", "-o", "json"]);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );
    let binding = get(&["get", "rolebinding", "reads", "-o", "json"]);
    assert_eq!(binding["roleRef"]["name"], "reader");
    assert_eq!(binding["subjects"][0]["name"], "app");
    let service = get(&["get", "service", "web", "-o", "json"]);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    let pdb = get(&["get", "pdb", "web", "-o", "json"]);
    assert_eq!(pdb["spec"]["minAvailable"], "50%");
    let role = get(&["get", "clusterrole", "watcher", "-o", "json"]);
    assert_eq!(role["rules"][0]["verbs"], serde_json::json!(["watch"]));
}

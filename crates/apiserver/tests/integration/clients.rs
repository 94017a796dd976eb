//! The third-party client tier: clients nobody on this project wrote run CRUD,
//! merge/strategic/JSON patches, server-side apply, list paging, watches with bookmarks and
//! the 404/409/422 bodies, on ConfigMaps, Deployments and a CRD's objects, and the 400 for a
//! built-in object of the wrong type, against the embedded server over HTTPS.
//!
//! - Python: the official `kubernetes` client 32.0.1 (the client of Kubernetes 1.32) runs
//!   `fixtures/python_client.py` from a venv (`<target>/python-client-venv`, every package
//!   pinned in `fixtures/python_client.requirements.txt`).
//! - Node: `@kubernetes/client-node` 1.1.3 (the 1.32 client) runs
//!   `fixtures/client-node/client_node.mjs` from `<target>/client-node`, installed by
//!   `npm ci` from the committed `package.json` and `package-lock.json`.
//!
//! Each is installed on its first run (about 10 s for Python, 5 s for Node, with the
//! registries reachable) and reused afterwards; a run then takes about 2 s each. Under
//! `CI=true` a missing python3, node or npm, or a failed install, fails the test.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use apiserver::testing::TestServer;
use serde_json::json;
use support::npm_dir::NpmDir;
use support::pip_venv::PipVenv;

const VENV: PipVenv = PipVenv {
    name: "python-client-venv",
    requirements: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/python_client.requirements.txt"
    ),
    module: "kubernetes",
};

const CLIENT_NODE: NpmDir = NpmDir {
    name: "client-node",
    source: concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/client-node"),
    package: "@kubernetes/client-node",
};

/// A namespaced CRD with a status subresource and a bounded field, for the 422 check.
fn gadget_crd() -> serde_json::Value {
    json!({
      "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
      "metadata": {"name": "gadgets.clients.example.com"},
      "spec": {"group": "clients.example.com", "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{"name": "v1", "served": true, "storage": true,
          "subresources": {"status": {}},
          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
              "size": {"type": "integer", "minimum": 0}, "colour": {"type": "string"}}},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}}}}}]}
    })
}

/// A server with quick bookmarks and the Gadget CRD.
async fn server() -> TestServer {
    let server = TestServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(server.client());
    crds.create(
        &Default::default(),
        &serde_json::from_value(gadget_crd()).unwrap(),
    )
    .await
    .unwrap();
    server
}

/// Runs a client's script to its end and fails the test with its output unless every
/// check passed.
async fn run(mut command: Command, what: &str) {
    let output = tokio::task::spawn_blocking(move || command.output().expect("run the client"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_works_against_the_server() {
    let Some(python) = VENV.python_or_skip() else {
        return;
    };
    let server = server().await;
    let mut command = Command::new(python);
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_client.py"))
        .arg(server.kubeconfig_path())
        .arg("default");
    run(command, "the Python client").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_client_node_works_against_the_server() {
    let Some(dir) = CLIENT_NODE.installed_or_skip() else {
        return;
    };
    let server = server().await;
    // The script runs from the install, so its imports resolve to the pinned packages.
    let script = dir.join(format!("client_node-{}.mjs", std::process::id()));
    std::fs::copy(
        Path::new(CLIENT_NODE.source).join("client_node.mjs"),
        &script,
    )
    .unwrap();
    // The kubeconfig as the server writes it (HTTPS, its CA): client-node refuses plain
    // HTTP without skipTLSVerify (issue 15 item 7).
    let mut command = Command::new("node");
    command
        .arg(&script)
        .arg(server.kubeconfig_path())
        .arg("default");
    run(command, "client-node").await;
    let _ = std::fs::remove_file(script);
}

//! The third-party client tier, Python: the official `kubernetes` client (32.0.1, the
//! client of Kubernetes 1.32) runs `fixtures/python_client.py` against the embedded
//! server: CRUD, merge/strategic/JSON patches, server-side apply, list paging, a watch
//! with bookmarks and the 404/409/422 bodies, on ConfigMaps and on a CRD's objects.
//!
//! The venv (`<target>/python-client-venv`, every package pinned in
//! `fixtures/python_client.requirements.txt`) is installed on the first run (about 10 s
//! with PyPI reachable) and reused afterwards. Under `CI=true` a missing python3 or a
//! failed install fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use apiserver::testing::TestServer;
use serde_json::json;
use support::pip_venv::PipVenv;

const VENV: PipVenv = PipVenv {
    name: "python-client-venv",
    requirements: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/python_client.requirements.txt"
    ),
    module: "kubernetes",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_works_against_the_server() {
    let Some(python) = VENV.python_or_skip() else {
        return;
    };
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_client.py");
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(kubeconfig)
            .arg("default")
            .output()
            .expect("run python")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python client failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

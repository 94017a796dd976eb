//! Helm 4 (the library inside the `helm-sdkpy` Python bindings) against the
//! embedded API server: install a small chart of the kinds an operator chart
//! uses (Deployment, ServiceAccount, Role, RoleBinding), upgrade it, list the
//! release and uninstall it, leaving nothing behind (no object, no release Secret).
//!
//! The test builds its own venv under `<target>/helm-venv` (see
//! `support::helm_venv`); under `CI=true` a missing python3 or pip fails it.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams};
use serde_json::Value;
use support::helm_venv::helm_python;

const RELEASE: &str = "small";
const NAMESPACE: &str = "default";

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs one Helm action through helm_release.py; returns its JSON result.
fn helm(python: &Path, server: &TestServer, args: &[&str]) -> Value {
    helm_in(python, server, NAMESPACE, args)
}

/// Runs one Helm action for the release namespace `namespace`.
fn helm_in(python: &Path, server: &TestServer, namespace: &str, args: &[&str]) -> Value {
    let output = Command::new(python)
        .arg(fixtures().join("helm_release.py"))
        .arg(server.kubeconfig_path())
        .arg(namespace)
        .args(args)
        // Helm keeps caches and repository config under these; keep them out of $HOME.
        .env(
            "HELM_CACHE_HOME",
            server.kubeconfig_path().with_file_name("helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            server.kubeconfig_path().with_file_name("helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            server.kubeconfig_path().with_file_name("helm-data"),
        )
        .env_remove("KUBECONFIG")
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "helm {} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        args.join(" "),
        output.status
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("helm {}: not JSON ({e}): {stdout}", args.join(" ")))
}

async fn release_secrets(secrets: &Api<Secret>) -> Vec<Secret> {
    let selector = format!("owner=helm,name={RELEASE}");
    secrets
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list release secrets")
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_lists_and_uninstalls_a_small_chart() {
    let Some(python) = helm_python() else {
        return;
    };
    let server = TestServer::start().await.expect("start server");
    let client = server.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let roles: Api<Role> = Api::namespaced(client.clone(), NAMESPACE);
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);

    let chart = fixtures().join("smallchart");
    let installed = helm(
        &python,
        &server,
        &["install", RELEASE, chart.to_str().unwrap()],
    );
    assert_eq!(installed["name"], RELEASE, "{installed}");

    // Every templated object exists, with Helm's ownership metadata.
    let deployment = deployments.get(RELEASE).await.expect("the Deployment");
    let annotations = deployment.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("meta.helm.sh/release-name")
            .map(String::as_str),
        Some(RELEASE)
    );
    let labels = deployment.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm")
    );
    let spec = deployment.spec.expect("deployment spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.template.spec.unwrap().service_account_name.as_deref(),
        Some(RELEASE)
    );
    accounts.get(RELEASE).await.expect("the ServiceAccount");
    let role = roles.get(RELEASE).await.expect("the Role");
    assert_eq!(role.rules.unwrap_or_default().len(), 2);
    let binding = bindings.get(RELEASE).await.expect("the RoleBinding");
    assert_eq!(binding.role_ref.name, RELEASE);

    // The release is stored as Helm's release Secret.
    let stored = release_secrets(&secrets).await;
    assert_eq!(stored.len(), 1, "one release Secret");
    assert_eq!(
        stored[0].metadata.name.as_deref(),
        Some("sh.helm.release.v1.small.v1")
    );
    assert_eq!(stored[0].type_.as_deref(), Some("helm.sh/release.v1"));
    let secret_labels = stored[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        secret_labels.get("status").map(String::as_str),
        Some("deployed")
    );

    // An upgrade patches the Deployment (a three-way strategic merge patch, as Helm
    // does for built-in kinds) and stores revision 2 next to the superseded revision 1.
    let upgraded = helm(
        &python,
        &server,
        &["upgrade", RELEASE, chart.to_str().unwrap()],
    );
    assert_eq!(upgraded["version"], 2, "{upgraded}");
    let deployment = deployments.get(RELEASE).await.expect("the Deployment");
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(2));
    let mut revisions: Vec<(String, String)> = release_secrets(&secrets)
        .await
        .into_iter()
        .map(|s| {
            let labels = s.metadata.labels.unwrap_or_default();
            (labels["version"].clone(), labels["status"].clone())
        })
        .collect();
    revisions.sort();
    assert_eq!(
        revisions,
        [
            ("1".to_owned(), "superseded".to_owned()),
            ("2".to_owned(), "deployed".to_owned())
        ]
    );

    let listed = helm(&python, &server, &["list"]);
    let releases = listed
        .as_array()
        .unwrap_or_else(|| panic!("a list of releases: {listed}"));
    assert_eq!(releases.len(), 1, "{listed}");
    assert_eq!(releases[0]["name"], RELEASE, "{listed}");
    assert_eq!(releases[0]["namespace"], NAMESPACE, "{listed}");
    assert_eq!(releases[0]["version"], 2, "{listed}");

    helm(&python, &server, &["uninstall", RELEASE]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = [
            deployments
                .get_opt(RELEASE)
                .await
                .unwrap()
                .map(|_| "Deployment"),
            accounts
                .get_opt(RELEASE)
                .await
                .unwrap()
                .map(|_| "ServiceAccount"),
            roles.get_opt(RELEASE).await.unwrap().map(|_| "Role"),
            bindings
                .get_opt(RELEASE)
                .await
                .unwrap()
                .map(|_| "RoleBinding"),
            (!release_secrets(&secrets).await.is_empty()).then_some("release Secret"),
        ];
        let left: Vec<&str> = left.into_iter().flatten().collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still there after uninstall: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // helm-sdkpy prints Go's nil slice of releases as null.
    let listed = helm(&python, &server, &["list"]);
    assert!(
        listed.is_null() || listed.as_array().is_some_and(Vec::is_empty),
        "no release left: {listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_creates_the_release_namespace() {
    let Some(python) = helm_python() else {
        return;
    };
    let server = TestServer::start().await.expect("start server");
    let client = server.client();
    let chart = fixtures().join("smallchart");
    // Helm creates the namespace with its typed (protobuf) Namespace client.
    let installed = helm_in(
        &python,
        &server,
        "apps",
        &[
            "install-create-namespace",
            "in-apps",
            chart.to_str().unwrap(),
        ],
    );
    assert_eq!(installed["namespace"], "apps", "{installed}");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = namespaces
        .get("apps")
        .await
        .expect("the namespace Helm created");
    assert_eq!(
        namespace.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "apps");
    deployments
        .get("in-apps")
        .await
        .expect("the Deployment in the new namespace");
    let secrets: Api<Secret> = Api::namespaced(client, "apps");
    let stored = secrets
        .list(&ListParams::default().labels("owner=helm,name=in-apps"))
        .await
        .unwrap();
    assert_eq!(
        stored.items.len(),
        1,
        "the release Secret lives in the release namespace"
    );
}

//! Setting up a `TestServer` through the kube API (faster than kubectl) where
//! the set-up is not what a test is about: the project's CRDs, namespaces,
//! objects from YAML.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Discovery};
use serde_json::Value;

/// The repository root (for deploy/crds and examples).
#[must_use]
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project's CRD manifests (deploy/crds/*.yaml), sorted by file name.
#[must_use]
pub fn project_crds() -> Vec<CustomResourceDefinition> {
    let dir = repo_root().join("deploy/crds");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/crds")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| serde_yaml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

/// Registers the project's CRDs and waits until discovery serves them.
pub async fn install_project_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in project_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    wait_until_served(client, "socialweb.computer", "Infra").await;
}

/// Waits until discovery lists `kind` in `group` (CRDs are served asynchronously
/// on a real server; here it should be at once, but the test must not assume it).
pub async fn wait_until_served(client: &kube::Client, group: &str, kind: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let discovery = Discovery::new(client.clone()).filter(&[group]).run().await;
        if let Ok(discovery) = discovery
            && discovery
                .groups()
                .flat_map(|g| g.recommended_resources())
                .any(|(resource, _)| resource.kind == kind)
        {
            return;
        }
        assert!(Instant::now() < deadline, "{group} {kind} never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates a namespace.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
}

/// The dynamic API of a socialweb.computer kind in a namespace.
#[must_use]
pub fn socialweb_api(
    client: &kube::Client,
    kind: &str,
    plural: &str,
    namespace: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("socialweb.computer", "v1alpha1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Creates an object given as JSON through the dynamic API.
pub async fn create(api: &Api<DynamicObject>, object: &Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(object.clone()).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .expect("create object")
}

//! Smoke suite: the unmodified kube 5 client against the embedded server, for what the
//! conformance suite (tests/conformance, one test per rule of APISERVER.md) does not
//! cover: several served versions of one CRD.

use apiserver::testing::TestServer;
use kube::api::{Api, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

const CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.example.com"},
  "spec": {
    "group": "example.com",
    "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"size": {"type": "integer", "description": "How big."}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
      }}}
    }]
  }
}"#;

fn widget(name: &str, size: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}, "status": {"ready": true}
    }))
    .unwrap()
}

#[tokio::test]
async fn every_served_version_reads_the_same_objects() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = TestServer::start().await.unwrap();
    let mut crd: serde_json::Value = serde_json::from_str(CRD).unwrap();
    let mut beta = crd["spec"]["versions"][0].clone();
    beta["name"] = json!("v1beta1");
    beta["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(beta);
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let api = |version: &str| {
        let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
        Api::<DynamicObject>::namespaced_with(
            server.client(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
        )
    };
    let mut w = widget("multi", 3);
    w.types.as_mut().unwrap().api_version = "example.com/v1beta1".into();
    api("v1beta1")
        .create(&PostParams::default(), &w)
        .await
        .unwrap();
    let v1 = api("v1").get("multi").await.unwrap();
    assert_eq!(v1.types.unwrap().api_version, "example.com/v1");
    let listed = api("v1beta1").list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "example.com/v1beta1"
    );
}

//! Smoke suite: the unmodified kube 5 client against the embedded server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apiserver::testing::TestServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

#[tokio::test]
async fn configmap_crud() {
    let server = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let created = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some());
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let err = api
        .create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.reason == "AlreadyExists"),
        "{err:?}"
    );

    let got = api.get("a").await.unwrap();
    assert_eq!(got.data.as_ref().unwrap()["k"], "v");
    assert!(api.get_opt("missing").await.unwrap().is_none());

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    let rv2: u64 = patched
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    // The same patch again changes nothing: no new resourceVersion.
    let again = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        patched.metadata.resource_version
    );

    let mut stale = got.clone();
    stale.metadata.resource_version = Some(rv1.to_string());
    let err = api
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );

    let deleted = api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right());
    assert!(api.get_opt("a").await.unwrap().is_none());

    let other_ns: Api<ConfigMap> = Api::namespaced(server.client(), "nope");
    let err = other_ns
        .create(&PostParams::default(), &cm("b", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn list_pages_and_selectors() {
    let server = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for i in 0..7 {
        let labels = if i % 2 == 0 {
            json!({"tier": "even"})
        } else {
            json!({"tier": "odd"})
        };
        api.create(&PostParams::default(), &cm(&format!("c{i}"), labels))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(first.items.len(), 3);
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // A write between pages does not leak into the snapshot.
    api.create(&PostParams::default(), &cm("c9", json!({})))
        .await
        .unwrap();
    let second = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(snapshot_rv.as_str())
    );
    let third = api
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(third.items.len(), 1);
    assert!(third.metadata.continue_.is_none());
    assert!(third.metadata.resource_version.is_some());

    let even = api
        .list(&ListParams::default().labels("tier=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 4);
    let not_odd = api
        .list(&ListParams::default().labels("tier!=odd"))
        .await
        .unwrap();
    assert_eq!(not_odd.items.len(), 5, "!= matches objects without the key");
    let named = api
        .list(&ListParams::default().fields("metadata.name=c3"))
        .await
        .unwrap();
    assert_eq!(named.items.len(), 1);
    let err = api
        .list(&ListParams::default().fields("spec.nope=1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );

    // An expired continue token is 410 Expired.
    server.compact();
    api.create(&PostParams::default(), &cm("c10", json!({})))
        .await
        .unwrap();
    let err = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 410 && s.reason == "Expired"),
        "{err:?}"
    );
}

#[tokio::test]
async fn watch_events_bookmarks_and_expiry() {
    let server = TestServer::builder()
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("app=x").timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("w", json!({"app": "x"})))
        .await
        .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    // Leaving the selector is a DELETED.
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(o) => {
                assert!(o.metadata.resource_version.is_some());
                kinds.push("DELETED");
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    // Bookmarks parse (apiVersion, kind, resourceVersion).
    let mut bookmarked = false;
    let mut bm_stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    while let Some(event) = bm_stream.try_next().await.unwrap() {
        if matches!(event, WatchEvent::Bookmark(_)) {
            bookmarked = true;
            break;
        }
    }
    assert!(bookmarked);

    server.compact();
    let mut old = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match old.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        old.try_next().await.unwrap().is_none(),
        "the stream closes after the ERROR event"
    );
}

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

async fn install_crd(server: &TestServer) -> Api<DynamicObject> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let crd: CustomResourceDefinition = serde_json::from_str(CRD).unwrap();
    let created = crds.create(&PostParams::default(), &crd).await.unwrap();
    let conditions = created.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    Api::namespaced_with(server.client(), "default", &ar)
}

fn widget(name: &str, size: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"size": size}, "status": {"ready": true}
    }))
    .unwrap()
}

#[tokio::test]
async fn crd_then_custom_resource_status_and_generation() {
    let server = TestServer::start().await.unwrap();
    let widgets = install_crd(&server).await;
    let created = widgets
        .create(&PostParams::default(), &widget("w1", 1))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.data.get("status").is_none(), "create drops .status");

    // Labels do not bump generation; spec does.
    let labelled = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let resized = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(resized.metadata.generation, Some(2));
    assert!(
        resized.data.get("status").is_none(),
        "the main endpoint ignores .status"
    );

    // /status takes only .status, and does not bump generation.
    let status = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 9}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["ready"], true);
    assert_eq!(status.data["spec"]["size"], 2);
    assert_eq!(status.metadata.generation, Some(2));

    // PUT without resourceVersion is 422 for custom resources.
    let mut no_rv = status.clone();
    no_rv.metadata.resource_version = None;
    let err = widgets
        .replace("w1", &PostParams::default(), &no_rv)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err:?}"
    );

    // Strategic merge on a custom resource is 415.
    let err = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 415),
        "{err:?}"
    );
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

#[tokio::test]
async fn crd_selectable_fields_filter_lists() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = TestServer::start().await.unwrap();
    let mut crd: serde_json::Value = serde_json::from_str(CRD).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["colour"] =
        json!({"type": "string"});
    crd["spec"]["versions"][0]["selectableFields"] = json!([{"jsonPath": ".spec.colour"}]);
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        server.client(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    for (name, colour) in [("red1", "red"), ("blue1", "blue"), ("red2", "red")] {
        let mut w = widget(name, 1);
        w.data["spec"]["colour"] = json!(colour);
        widgets.create(&PostParams::default(), &w).await.unwrap();
    }
    let red = widgets
        .list(&ListParams::default().fields("spec.colour=red"))
        .await
        .unwrap();
    let names: Vec<String> = red
        .items
        .into_iter()
        .filter_map(|w| w.metadata.name)
        .collect();
    assert_eq!(names, ["red1", "red2"]);
    let err = widgets
        .list(&ListParams::default().fields("spec.size=1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err:?}"
    );
}

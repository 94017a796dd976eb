//! kube-runtime against the embedded server: Controller, the finalizer helper, GC,
//! namespaces, server-side apply and Tables.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::testing::TestServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// A tiny custom resource for the tests.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
#[kube(printcolumn = r#"{"name":"Size","type":"integer","jsonPath":".spec.size"}"#)]
pub struct GadgetSpec {
    /// How big.
    pub size: i64,
}

/// Observed state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
pub struct GadgetStatus {
    /// The size seen by the controller.
    pub seen: Option<i64>,
}

async fn install(server: &TestServer) -> Api<Gadget> {
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.create(&PostParams::default(), &Gadget::crd())
        .await
        .unwrap();
    Api::default_namespaced(server.client())
}

fn gadget(name: &str, size: i64) -> Gadget {
    Gadget::new(name, GadgetSpec { size })
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

const FINALIZER: &str = "example.com/cleanup";

#[derive(thiserror::Error, Debug)]
#[error("reconcile failed: {0}")]
struct ReconcileError(#[source] Box<dyn std::error::Error + Send + Sync>);

struct Ctx {
    api: Api<Gadget>,
    cleaned: Mutex<Vec<String>>,
}

async fn reconcile(obj: Arc<Gadget>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    finalizer(&ctx.api, FINALIZER, obj, |event| async {
        match event {
            Event::Apply(g) => {
                let status = json!({"status": {"seen": g.spec.size}});
                ctx.api
                    .patch_status(
                        &g.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(status),
                    )
                    .await
                    .map_err(|e| ReconcileError(Box::new(e)))?;
                Ok::<_, ReconcileError>(Action::await_change())
            }
            Event::Cleanup(g) => {
                ctx.cleaned.lock().unwrap().push(g.name_any());
                Ok::<_, ReconcileError>(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError(Box::new(e)))
}

#[tokio::test]
async fn controller_with_finalizer_reconciles_create_update_delete() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        cleaned: Mutex::new(Vec::new()),
    });
    let controller = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .owns(
                Api::<ConfigMap>::default_namespaced(server.client()),
                watcher::Config::default(),
            )
            .run(
                reconcile,
                |_, _, _| Action::requeue(Duration::from_millis(100)),
                ctx.clone(),
            )
            .for_each(|_| async {}),
    );
    api.create(&PostParams::default(), &gadget("g1", 3))
        .await
        .unwrap();
    eventually("the first reconcile", || async {
        let g = api.get("g1").await.unwrap();
        g.finalizers().contains(&FINALIZER.to_string()) && g.status.and_then(|s| s.seen) == Some(3)
    })
    .await;
    api.patch(
        "g1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 4}})),
    )
    .await
    .unwrap();
    eventually("the update reconcile", || async {
        api.get("g1").await.unwrap().status.and_then(|s| s.seen) == Some(4)
    })
    .await;
    assert_eq!(api.get("g1").await.unwrap().metadata.generation, Some(2));

    api.delete("g1", &DeleteParams::default()).await.unwrap();
    eventually("the cleanup", || async {
        api.get_opt("g1").await.unwrap().is_none()
    })
    .await;
    assert_eq!(*ctx.cleaned.lock().unwrap(), vec!["g1".to_string()]);
    // The history shows the finalizer released before the object was deleted.
    let history: Vec<_> = server
        .history()
        .into_iter()
        .filter(|h| h.name == "g1")
        .collect();
    let last = history.last().unwrap();
    assert_eq!(last.change, apiserver::store::ChangeType::Deleted);
    assert!(last.object()["metadata"]["finalizers"].is_null());
    controller.abort();
}

#[tokio::test]
async fn garbage_collector_deletes_orphaned_dependents_and_honours_orphan() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let owner = api
        .create(&PostParams::default(), &gadget("owner", 1))
        .await
        .unwrap();
    let owner_ref = owner.controller_owner_ref(&()).unwrap();
    for name in ["dep1", "dep2"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.owner_references = Some(vec![owner_ref.clone()]);
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    // Orphan: the dependents stay, without the owner reference.
    let keep = api
        .create(&PostParams::default(), &gadget("keeper", 1))
        .await
        .unwrap();
    let mut kept = ConfigMap::default();
    kept.metadata.name = Some("kept".into());
    kept.metadata.owner_references = Some(vec![keep.controller_owner_ref(&()).unwrap()]);
    cms.create(&PostParams::default(), &kept).await.unwrap();

    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the dependents to go", || async {
        cms.get_opt("dep1").await.unwrap().is_none() && cms.get_opt("dep2").await.unwrap().is_none()
    })
    .await;

    api.delete("keeper", &DeleteParams::orphan()).await.unwrap();
    eventually("the orphaned owner to go", || async {
        api.get_opt("keeper").await.unwrap().is_none()
    })
    .await;
    let kept = cms.get("kept").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let owner = api
        .create(&PostParams::default(), &gadget("fg", 1))
        .await
        .unwrap();
    let mut dep = ConfigMap::default();
    dep.metadata.name = Some("blocker".into());
    dep.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let mut reference = owner.controller_owner_ref(&()).unwrap();
    reference.block_owner_deletion = Some(true);
    dep.metadata.owner_references = Some(vec![reference]);
    cms.create(&PostParams::default(), &dep).await.unwrap();
    api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    eventually("the dependent to be marked", || async {
        cms.get("blocker")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    let owner = api.get("fg").await.unwrap();
    assert!(
        owner
            .finalizers()
            .contains(&"foregroundDeletion".to_string())
    );
    cms.patch(
        "blocker",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the owner to go", || async {
        api.get_opt("fg").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_instances_first() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    let mut held = gadget("held", 1);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the instance to be marked", || async {
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        crds.get_opt("gadgets.example.com").await.unwrap().is_some(),
        "instances go first"
    );
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the CRD to go", || async {
        crds.get_opt("gadgets.example.com").await.unwrap().is_none()
    })
    .await;
    let err = api.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}

#[tokio::test]
async fn namespace_lifecycle() {
    let server = TestServer::start().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(server.client());
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        namespaces.get(name).await.unwrap();
    }
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "team");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("held".into());
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = namespaces.get("team").await.unwrap();
    assert_eq!(
        terminating.status.unwrap().phase.as_deref(),
        Some("Terminating")
    );
    let mut another = ConfigMap::default();
    another.metadata.name = Some("late".into());
    let err = cms
        .create(&PostParams::default(), &another)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
    eventually("the content to be marked", || async {
        cms.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        namespaces.get_opt("team").await.unwrap().is_some(),
        "finalizers still block"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the namespace to go", || async {
        namespaces.get_opt("team").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn server_side_apply_conflicts_and_force() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    let config = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "ssa"}, "spec": {"size": 1}});
    let created = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&config))
        .await
        .unwrap();
    assert_eq!(created.spec.size, 1);
    assert!(
        created
            .metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(|m| m.manager.as_deref() == Some("alice"))
    );
    let bob = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "ssa"}, "spec": {"size": 2}});
    let err = api
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&bob))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    let forced = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&bob),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.size, 2);
    // Re-applying the same configuration is a no-op.
    let again = api
        .patch(
            "ssa",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&bob),
        )
        .await
        .unwrap();
    assert_eq!(again.resource_version(), forced.resource_version());
}

#[tokio::test]
async fn tables_use_printer_columns() {
    let server = TestServer::start().await.unwrap();
    let api = install(&server).await;
    api.create(&PostParams::default(), &gadget("t1", 7))
        .await
        .unwrap();
    let http = reqwest_like(&server, "/apis/example.com/v1/namespaces/default/gadgets").await;
    assert_eq!(http["kind"], "Table");
    let names: Vec<&str> = http["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // With printer columns, the real server serves exactly them (no implicit Age).
    assert_eq!(names, ["Name", "Size"]);
    assert_eq!(http["rows"][0]["cells"][1], 7);
    assert_eq!(http["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    let _ = Gadget::url_path(&(), Some("default"));
}

async fn reqwest_like(server: &TestServer, path: &str) -> serde_json::Value {
    let request = http::Request::get(path)
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    server
        .client()
        .request::<serde_json::Value>(request)
        .await
        .unwrap()
}

#[tokio::test]
async fn leader_election_with_kube_lease_manager() {
    use kube_lease_manager::LeaseManagerBuilder;
    let server = TestServer::start().await.unwrap();
    // Short leases: a waiting candidate sleeps until the holder's lease could expire.
    let manager = |identity: &str| {
        LeaseManagerBuilder::new(server.client(), "leader")
            .with_identity(identity)
            .with_duration(3)
            .with_grace(1)
            .build()
    };
    let a = manager("a").await.unwrap();
    let b = manager("b").await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), a.changed())
            .await
            .unwrap()
            .unwrap(),
        "a leads"
    );
    // b does not take a live lease.
    assert!(
        tokio::time::timeout(Duration::from_millis(1000), b.changed())
            .await
            .is_err(),
        "b must wait"
    );
    a.release().await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(10), b.changed())
            .await
            .unwrap()
            .unwrap(),
        "b leads after release"
    );
    let lease: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::default_namespaced(server.client());
    let spec = lease.get("leader").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
}

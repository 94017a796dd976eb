//! kube-runtime against the embedded server: a Controller with the finalizer helper, and
//! leader election. GC, namespaces, server-side apply and Tables are rules of APISERVER.md,
//! tested in tests/conformance.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::testing::TestServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
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

//! One object the manager cannot decode stops no other tenant (issue 10,
//! item 2): a NodeClaim with `cpus: 4294967296` (a u32 cannot hold it) made
//! the initial list of NodeClaims fail, so after a restart the caches never
//! synced, no reconcile ran for anyone and `/readyz` stayed 503.
//!
//! The schema now refuses such a number, so the objects are stored the way
//! one stored before the bound existed would be: the CRD loses the bound for
//! a moment (the API server does not check stored objects again when a CRD
//! changes, as kube-apiserver does not). The manager runs through the real
//! `run` path: HTTP port, metrics, wiring.

use crate::production_support;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::{Client, Resource};
use production_support::{CONTRACT_NS, NS, Replica, World, eventually};
use serde_json::{Value, json};
use testkit::ListAll;

/// A number no u32 holds.
const TOO_MANY_CPUS: u64 = 4_294_967_296;

/// A NodeClaim of `c1` asking for [`TOO_MANY_CPUS`].
fn huge_claim() -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
        "metadata": {"name": "huge", "namespace": NS},
        "spec": {
            "clusterName": "c1",
            "resources": {"cpus": TOO_MANY_CPUS, "memory": 2048, "disk": 10, "network": 100},
            "location": {"country": "DE"},
        },
    })
}

/// A ComputeContract (by hand, ownerless) asking for [`TOO_MANY_CPUS`].
fn huge_contract() -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "ComputeContract",
        "metadata": {"name": "huge", "namespace": CONTRACT_NS},
        "spec": {
            "resources": {"cpus": TOO_MANY_CPUS, "memory": 2048, "disk": 10, "network": 100},
            "location": {"country": "DE"},
        },
    })
}

fn api_for<K: Resource<DynamicType = ()>>(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<K>(&()))
}

/// Stores `object` past the `maximum` of `spec.resources.cpus` in the CRD
/// `crd`: the bound is dropped, the object created, and the bound restored.
async fn store_past_validation<K: Resource<DynamicType = ()>>(
    client: &Client,
    crd: &str,
    object: Value,
) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let original = crds.get(crd).await.unwrap();
    let mut unbounded = serde_json::to_value(&original).unwrap();
    let cpus = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/resources/properties/cpus";
    let bound = unbounded
        .pointer_mut(cpus)
        .unwrap()
        .as_object_mut()
        .unwrap()
        .remove("maximum");
    assert!(bound.is_some(), "{crd} bounds cpus");
    let unbounded: CustomResourceDefinition = serde_json::from_value(unbounded).unwrap();
    crds.replace(crd, &PostParams::default(), &unbounded)
        .await
        .unwrap();
    let namespace = object["metadata"]["namespace"].as_str().unwrap().to_owned();
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api_for::<K>(client, &namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let mut bounded = crds.get(crd).await.unwrap();
    bounded.spec = original.spec;
    crds.replace(crd, &PostParams::default(), &bounded)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_the_manager_cannot_decode_stops_no_other_tenant() {
    let world = World::start(true).await;
    world.create_requester(100, None).await;
    world.create_ready_cluster("c1").await;

    // The schema refuses a number the manager could not hold.
    let object: DynamicObject = serde_json::from_value(huge_claim()).unwrap();
    let refused = api_for::<api::NodeClaim>(&world.client, NS)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(status) if status.code == 422
            && status.message.contains("spec.resources.cpus")),
        "{refused:?}"
    );

    // A manager runs; then an unreadable claim arrives by a watch event.
    let replica = Replica::start(&world, "before", Some(world.market.clone()), false).await;
    world.create_claims("c1", &["w1"]).await;
    world.wait_joined(&["w1"]).await;
    store_past_validation::<api::NodeClaim>(
        &world.client,
        "nodeclaims.socialweb.computer",
        huge_claim(),
    )
    .await;
    store_past_validation::<api::ComputeContract>(
        &world.client,
        "computecontracts.socialweb.computer",
        huge_contract(),
    )
    .await;
    world.create_claims("c1", &["w2"]).await;
    world.wait_joined(&["w2"]).await;

    // A restart: the initial lists hold both unreadable objects.
    drop(replica);
    let replica = Replica::start(&world, "after", Some(world.market.clone()), false).await;
    world.create_claims("c1", &["w3"]).await;
    world.wait_joined(&["w1", "w2", "w3"]).await;
    eventually("/readyz to answer 200", || async {
        (replica.get("/readyz").await.0 == 200).then_some(())
    })
    .await;

    // Counted by kind, and each marked with a Warning naming its field, not its value.
    let metrics = replica.metrics().await;
    for kind in ["NodeClaim", "ComputeContract"] {
        assert_eq!(
            metrics.value(&format!(
                r#"socialweb_cache_undecodable_objects{{kind="{kind}"}}"#
            )),
            1.0,
            "{kind}"
        );
        assert!(
            metrics.value(&format!(
                r#"socialweb_cache_decode_failures_total{{kind="{kind}"}}"#
            )) >= 1.0,
            "{kind}"
        );
    }
    assert_eq!(
        metrics.value(r#"socialweb_cache_undecodable_objects{kind="Infra"}"#),
        0.0
    );
    for namespace in [NS, CONTRACT_NS] {
        let events: Api<Event> = Api::namespaced(world.client.clone(), namespace);
        let warning = eventually("an Undecodable Warning", || async {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("Undecodable")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("huge")
                })
        })
        .await;
        assert_eq!(warning.type_.as_deref(), Some("Warning"));
        let note = warning.note.unwrap_or_default();
        assert!(note.contains("spec.resources.cpus"), "{note}");
        assert!(!note.contains(&TOO_MANY_CPUS.to_string()), "{note}");
    }
    // Nothing was rented for the unreadable claim (listed untyped: a typed
    // list fails on the unreadable contract, which is the point of this test).
    let contracts = api_for::<api::ComputeContract>(&world.client, CONTRACT_NS);
    assert_eq!(
        contracts.list_all().await.len(),
        3 + 1,
        "one contract per readable claim, and the unreadable one by hand"
    );
}

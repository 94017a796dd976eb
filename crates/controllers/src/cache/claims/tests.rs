//! The keeper holds what a kube-runtime store would, grouped by Cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use api::{Location, NodeClaimSpec, Resources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::cache::fan_out::Beside;

/// A claim `name` of namespace `ns` for Cluster `cluster`, at version `version`.
fn claim(ns: &str, name: &str, cluster: &str, version: usize) -> CachedClaim {
    // A UUID as the API server makes them (kept as 16 bytes) in version 1,
    // any other text in the others.
    let uid = |of: &str| {
        if version == 1 {
            format!("{:08x}-0000-4000-8000-{:012x}", of.len(), of.len() * 7)
        } else {
            format!("uid-{of}")
        }
    };
    let claim_uid = uid(name);
    CachedClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            uid: Some(claim_uid.clone()),
            resource_version: Some(version.to_string()),
            // Every metadata field the keeper holds apart, in some versions.
            generation: (version > 0).then(|| i64::try_from(version).unwrap()),
            finalizers: (version % 2 == 1)
                .then(|| vec![api::names::NODECLAIM_FINALIZER.to_owned()]),
            deletion_timestamp: (version == 2).then(|| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-12-06T01:00:00Z".parse().unwrap(),
                )
            }),
            // Owners the keeper holds compactly: its Cluster's, and one of
            // another kind with other flags.
            owner_references: (version > 0).then(|| {
                let owner = |kind: &str, owner: &str, controller: Option<bool>| OwnerReference {
                    api_version: format!("{kind}.example/v{version}"),
                    kind: kind.to_owned(),
                    name: owner.to_owned(),
                    uid: uid(owner),
                    controller,
                    block_owner_deletion: controller.map(|c| !c),
                };
                let mut owners = vec![owner("Cluster", cluster, Some(true))];
                if version == 2 {
                    owners.push(owner("Other", name, None));
                }
                owners
            }),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            cluster_name: cluster.to_owned(),
            resources: Resources {
                cpus: 2,
                memory: 4096,
                disk: 40,
                network: 1000,
            },
            // Another location in one version: claims of a Cluster share
            // only an equal one.
            location: Location {
                country: "DE".to_owned(),
                region: (version == 2).then(|| "BY".to_owned()),
            },
            // The spec's optional fields, set in one version.
            owner_did: (version == 2).then(|| "did:plc:owner".to_owned()),
            adopt: (version == 2).then(|| {
                Box::new(api::Receipt {
                    uri: format!("at://did:plc:bidder/guest/{name}"),
                    cid: "bafy".to_owned(),
                })
            }),
            join_grace_seconds: 900,
            loss_grace_seconds: 300,
        },
        // An Infra entry as the NodeClaim controller writes it (the entry
        // named after the claim's uid, its contract after the Infra and
        // entry), and one named otherwise.
        status: (version > 0).then(|| crate::cache::CachedClaimStatus {
            infra: Some(api::InfraRef {
                namespace: format!("system-{ns}"),
                name: format!("nodes-{cluster}"),
                contract: if version == 1 {
                    api::names::entry_name(&claim_uid)
                } else {
                    format!("node-{name}")
                },
                compute_contract: if version == 1 {
                    api::names::compute_contract_name(
                        &format!("nodes-{cluster}"),
                        &api::names::entry_name(&claim_uid),
                    )
                } else {
                    format!("by-hand-{name}")
                },
            }),
            observed_generation: Some(i64::try_from(version).unwrap()),
            // The rest of a status in one version: each field is kept.
            phase: (version == 2).then_some(api::NodeClaimPhase::Joined),
            conditions: if version == 2 {
                vec![crate::cache::CachedCondition::new(
                    "Joined".into(),
                    api::ConditionStatus::True,
                    "NodeRegistered".into(),
                    &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        "2026-12-06T02:00:00.25Z".parse().unwrap(),
                    ),
                    7,
                )]
            } else {
                Vec::new()
            },
            guest: (version == 2).then(|| api::Guest {
                provider: "did:plc:bidder".to_owned(),
                address: Some("10.0.0.7".to_owned()),
                node_id: Some(format!("guest-{name}")),
            }),
            grant_expires_at: (version == 2).then(|| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-12-06T03:00:00Z".parse().unwrap(),
                )
            }),
        }),
    }
}

fn names(claims: &[Arc<CachedClaim>]) -> Vec<&str> {
    claims
        .iter()
        .map(|c| c.metadata.name.as_deref().unwrap())
        .collect()
}

#[test]
fn claims_are_read_by_cluster_in_name_order_and_by_namespace() {
    let mut keep = Claims::default();
    let reader = keep.reader();
    for (ns, name, cluster) in [
        ("a", "w2", "c1"),
        ("a", "w1", "c1"),
        ("a", "w3", "c2"),
        ("b", "w1", "c1"),
    ] {
        keep.apply(&watcher::Event::Apply(claim(ns, name, cluster, 1)));
    }
    assert_eq!(names(&reader.of_cluster("a", "c1")), ["w1", "w2"]);
    assert_eq!(names(&reader.of_cluster("a", "c2")), ["w3"]);
    assert_eq!(
        names(&reader.of_cluster("b", "c1")),
        ["w1"],
        "a Cluster's name is only a key within its namespace"
    );
    assert!(reader.of_cluster("c", "c1").is_empty());
    let mut keys = reader.cluster_keys();
    keys.sort();
    let key = |ns: &str, c: &str| (ns.to_owned(), c.to_owned());
    assert_eq!(keys, [key("a", "c1"), key("a", "c2"), key("b", "c1")]);

    // A claim applied again replaces its version, in its group.
    keep.apply(&watcher::Event::Apply(claim("a", "w1", "c1", 2)));
    let w1 = reader.get(&ObjectRef::new("w1").within("a")).unwrap();
    assert_eq!(w1.metadata.resource_version.as_deref(), Some("2"));
    assert_eq!(names(&reader.of_cluster("a", "c1")), ["w1", "w2"]);

    keep.apply(&watcher::Event::Delete(claim("a", "w3", "c2", 1)));
    assert!(reader.of_cluster("a", "c2").is_empty());
    assert_eq!(reader.cluster_keys().len(), 2, "an emptied group is gone");
    keep.apply(&watcher::Event::Delete(claim("b", "w1", "c1", 1)));
    assert_eq!(reader.state().len(), 2);
    assert!(reader.get(&ObjectRef::new("w1").within("b")).is_none());
}

#[test]
fn a_relist_replaces_everything_only_when_it_is_done() {
    let mut keep = Claims::default();
    let reader = keep.reader();
    keep.apply(&watcher::Event::Apply(claim("a", "old", "c1", 1)));
    keep.apply(&watcher::Event::Init);
    keep.apply(&watcher::Event::InitApply(claim("a", "new", "c1", 1)));
    assert_eq!(
        names(&reader.of_cluster("a", "c1")),
        ["old"],
        "the list under way is not read yet"
    );
    keep.apply(&watcher::Event::InitDone);
    assert_eq!(names(&reader.of_cluster("a", "c1")), ["new"]);
}

#[test]
fn the_subscribers_get_the_decoded_claim_and_a_read_gets_it_back() {
    let mut keep = Claims::default();
    let mut applied = claim("a", "w1", "c1", 1);
    applied.metadata.finalizers = Some(vec![api::names::NODECLAIM_FINALIZER.to_owned()]);
    applied.metadata.generation = Some(3);
    keep.apply(&watcher::Event::Apply(applied.clone()));
    let told = keep.for_subscribers(applied.clone());
    assert_eq!(*told, applied);
    let kept = keep.get(&ObjectRef::new("w1").within("a")).unwrap();
    assert_eq!(
        *kept, applied,
        "kept without its ObjectMeta, read back whole"
    );
    assert_eq!(*keep.of_cluster("a", "c1")[0], applied);
}

/// One watch event over a few namespaces, names, Clusters and versions.
#[derive(Clone, Debug)]
enum Step {
    Apply(Object),
    Delete(Object),
    Relist(Vec<Object>),
}

/// (namespace, name, Cluster, version), each a small index.
type Object = (usize, usize, usize, usize);

fn object() -> impl Strategy<Value = Object> {
    (0..2usize, 0..4usize, 0..2usize, 0..3usize)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => object().prop_map(Step::Apply),
        2 => object().prop_map(Step::Delete),
        1 => proptest::collection::vec(object(), 0..5).prop_map(Step::Relist),
    ]
}

fn built((ns, name, cluster, version): Object) -> CachedClaim {
    claim(
        &format!("ns{ns}"),
        &format!("w{name}"),
        &format!("c{cluster}"),
        version,
    )
}

proptest! {
    /// Whatever the events, the keeper holds what kube-runtime's store holds,
    /// and each Cluster's group is that store's claims of its namespace and
    /// Cluster name, by name.
    #[test]
    fn it_holds_what_a_kube_runtime_store_holds(steps in proptest::collection::vec(step(), 0..24)) {
        let mut beside = Beside::<CachedClaim, Claims>::new();
        for step in steps {
            let events = match step {
                Step::Apply(o) => vec![watcher::Event::Apply(built(o))],
                Step::Delete(o) => vec![watcher::Event::Delete(built(o))],
                Step::Relist(objects) => std::iter::once(watcher::Event::Init)
                    .chain(objects.into_iter().map(|o| watcher::Event::InitApply(built(o))))
                    .chain(std::iter::once(watcher::Event::InitDone))
                    .collect(),
            };
            let as_set = |objects: Vec<Arc<CachedClaim>>| -> BTreeSet<String> {
                objects.iter().map(|o| format!("{o:?}")).collect()
            };
            for event in &events {
                // What the subscribers hear, as the reflector tells them.
                let (heard_kube, heard_keep) = beside.take(event);
                prop_assert_eq!(heard_keep, heard_kube);
            }
            let (kube, keep) = (&beside.kube, &beside.keep);
            prop_assert_eq!(as_set(keep.state()), as_set(kube.state()));
            for ns in ["ns0", "ns1"] {
                for cluster in ["c0", "c1"] {
                    let mut expected: Vec<String> = kube
                        .state()
                        .iter()
                        .filter(|c| c.metadata.namespace.as_deref() == Some(ns) && c.spec.cluster_name == cluster)
                        .map(|c| c.metadata.name.clone().unwrap())
                        .collect();
                    expected.sort();
                    let kept = keep.of_cluster(ns, cluster);
                    prop_assert_eq!(names(&kept), expected);
                }
            }
            let mut expected_keys: Vec<(String, String)> = kube
                .state()
                .iter()
                .map(|c| (c.metadata.namespace.clone().unwrap(), c.spec.cluster_name.clone()))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            expected_keys.sort();
            let mut keys = keep.cluster_keys();
            keys.sort();
            prop_assert_eq!(keys, expected_keys);
        }
    }
}

#[test]
fn the_claims_composed_into_an_infra_are_those_whose_status_names_it() {
    let composed = |name: &str, infra: Option<(&str, &str)>| {
        let mut claim = claim("a", name, "c1", 1);
        claim.status = Some(crate::cache::CachedClaimStatus {
            infra: infra.map(|(namespace, infra)| api::InfraRef {
                namespace: namespace.to_owned(),
                name: infra.to_owned(),
                contract: format!("node-{name}"),
                compute_contract: format!("{infra}-node-{name}"),
            }),
            ..crate::cache::CachedClaimStatus::default()
        });
        claim
    };
    let mut keep = Claims::default();
    let mine = composed("w1", Some(("system", "nodes-x")));
    for claim in [
        mine.clone(),
        composed("w2", Some(("system", "nodes-y"))),
        composed("w3", Some(("elsewhere", "nodes-x"))),
        composed("w4", None),
        claim("b", "w5", "c1", 1),
    ] {
        keep.apply(&watcher::Event::Apply(claim));
    }
    let found = keep.composed_into("system", "nodes-x");
    assert_eq!(found.len(), 1);
    assert_eq!(*found[0], mine, "built whole");
    assert!(keep.composed_into("system", "nodes-z").is_empty());
}

#[test]
fn the_claims_of_a_cluster_share_its_name_and_its_infras() {
    let mut keep = Claims::default();
    for name in ["a", "b"] {
        keep.apply(&watcher::Event::Apply(claim("ns", name, "c1", 1)));
    }
    let held = keep.held.read();
    let namespace = &held.0["ns"];
    let (a, b) = (&namespace.by_name["a"], &namespace.by_name["b"]);
    assert!(Arc::ptr_eq(&a.cluster, &b.cluster), "the group's key");
    assert!(a.shares_infra_name_with(b));
    assert!(a.shares_location_with(b));
    drop(held);
    let read = keep.of_cluster("ns", "c1");
    assert_eq!(read[1].spec.cluster_name, "c1");
    assert_eq!(
        read[1]
            .status
            .as_ref()
            .and_then(|s| s.infra.as_ref())
            .map(|i| i.name.as_str()),
        Some("nodes-c1")
    );
}

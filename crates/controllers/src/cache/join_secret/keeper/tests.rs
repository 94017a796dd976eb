//! The keeper holds what a kube-runtime store would, grouped by Infra.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use api::names::{CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::cache::fan_out::Beside;
use crate::cache::join_secret::SecretLabels;

/// A join Secret `name` of namespace `ns`, labelled with Infra `infra`, token `token`.
fn secret(ns: &str, name: &str, infra: Option<&str>, token: &str) -> WatchedJoinSecret {
    labelled(ns, name, infra, None, token)
}

/// [`secret`], labelled with Cluster `cluster` too, and then with its entry
/// (its name after `join-`) as the NodeClaim controller labels it, unless
/// the Cluster's name ends in `-by-hand`; one more label when it ends in
/// `-more`.
fn labelled(
    ns: &str,
    name: &str,
    infra: Option<&str>,
    cluster: Option<&str>,
    token: &str,
) -> WatchedJoinSecret {
    let mut labels = BTreeMap::from([(CONTRACT_LABEL.to_owned(), name.to_owned())]);
    if let Some(infra) = infra {
        labels.insert(INFRA_NAME_LABEL.to_owned(), infra.to_owned());
    }
    if let Some(cluster) = cluster {
        let entry = name.strip_prefix("join-").unwrap_or(name);
        if !cluster.ends_with("-by-hand") {
            labels.insert(CONTRACT_LABEL.to_owned(), entry.to_owned());
        }
        labels.insert(CLUSTER_LABEL.to_owned(), cluster.to_owned());
        labels.insert(CLUSTER_NAMESPACE_LABEL.to_owned(), "tenant-a".to_owned());
        if cluster.ends_with("-more") {
            labels.insert("a/b".to_owned(), "c".to_owned());
        }
    }
    WatchedJoinSecret::from(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(token.len().to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "token".to_owned(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    })
}

fn names(secrets: &[Arc<CachedJoinSecret>]) -> Vec<&str> {
    secrets.iter().map(|s| s.name()).collect()
}

#[test]
fn secrets_are_read_by_infra_in_name_order_and_move_with_their_label() {
    let mut keep = JoinSecrets::default();
    let reader = keep.reader();
    for (name, infra) in [("c", "x"), ("a", "x"), ("b", "y")] {
        keep.apply(&watcher::Event::Apply(secret("ns", name, Some(infra), "t")));
    }
    keep.apply(&watcher::Event::Apply(secret("ns", "u", None, "t")));
    assert_eq!(names(&reader.of_infra("x")), ["a", "c"]);
    assert_eq!(names(&reader.of_infra("y")), ["b"]);
    assert!(reader.of_infra("z").is_empty());
    assert_eq!(
        reader.state().len(),
        4,
        "one without an Infra label is kept too"
    );

    keep.apply(&watcher::Event::Apply(secret("ns", "a", Some("y"), "t2")));
    assert_eq!(names(&reader.of_infra("x")), ["c"]);
    assert_eq!(names(&reader.of_infra("y")), ["a", "b"]);
    assert_eq!(reader.of_infra("y")[0].token.as_deref(), Some("t2"));

    keep.apply(&watcher::Event::Delete(secret("ns", "c", Some("x"), "t")));
    assert!(reader.of_infra("x").is_empty());
    keep.apply(&watcher::Event::Delete(secret("ns", "u", None, "t")));
    assert_eq!(reader.state().len(), 2);
}

#[test]
fn a_relist_replaces_everything_only_when_it_is_done() {
    let mut keep = JoinSecrets::default();
    let reader = keep.reader();
    keep.apply(&watcher::Event::Apply(secret("ns", "old", Some("x"), "t")));
    keep.apply(&watcher::Event::Init);
    keep.apply(&watcher::Event::InitApply(secret(
        "ns",
        "new",
        Some("x"),
        "t",
    )));
    assert_eq!(
        names(&reader.of_infra("x")),
        ["old"],
        "the list under way is not read yet"
    );
    keep.apply(&watcher::Event::InitDone);
    assert_eq!(names(&reader.of_infra("x")), ["new"]);
}

#[test]
fn a_kept_secret_is_given_back_as_watched_and_shares_its_namespace() {
    let mut keep = JoinSecrets::default();
    let a = secret("ns", "a", Some("x"), "t");
    keep.apply(&watcher::Event::Apply(a.clone()));
    keep.apply(&watcher::Event::Apply(secret("ns", "b", Some("x"), "t")));
    assert_eq!(
        keep.get(&ObjectRef::new("a").within("ns")).as_deref(),
        Some(&a)
    );
    assert_eq!(keep.get(&ObjectRef::new("a").within("other")), None);
    let [a, b] = &keep.of_infra("x")[..] else {
        panic!("two Secrets of x")
    };
    let (Some(ns_a), Some(ns_b)) = (&a.namespace, &b.namespace) else {
        panic!("both have a namespace")
    };
    assert!(Arc::ptr_eq(ns_a, ns_b), "one allocation per namespace");
}

/// One object: its name, Infra, token and Cluster, by number (Cluster 2
/// labelled by hand, 3 with one label more).
type Object = (usize, Option<usize>, usize, Option<usize>);

/// One watch event over a few names, Infras, tokens and Clusters.
#[derive(Clone, Debug)]
enum Step {
    Apply(Object),
    Delete(usize),
    Relist(Vec<Object>),
}

fn step() -> impl Strategy<Value = Step> {
    let object = (
        0..4usize,
        proptest::option::of(0..2usize),
        0..3usize,
        proptest::option::of(0..4usize),
    );
    prop_oneof![
        4 => object.clone().prop_map(Step::Apply),
        2 => (0..4usize).prop_map(Step::Delete),
        1 => proptest::collection::vec(object, 0..5).prop_map(Step::Relist),
    ]
}

fn object((name, infra, token, cluster): Object) -> WatchedJoinSecret {
    let infra = infra.map(|i| format!("infra-{i}"));
    let cluster = cluster.map(|c| match c {
        2 => "cluster-0-by-hand".to_owned(),
        3 => "cluster-1-more".to_owned(),
        c => format!("cluster-{c}"),
    });
    labelled(
        "ns",
        &format!("join-s{name}"),
        infra.as_deref(),
        cluster.as_deref(),
        &"t".repeat(token + 1),
    )
}

proptest! {
    /// Whatever the events, the keeper holds what kube-runtime's store holds,
    /// and each Infra's group is that store's Secrets with its label, by name.
    #[test]
    fn it_holds_what_a_kube_runtime_store_holds(steps in proptest::collection::vec(step(), 0..24)) {
        let mut beside = Beside::<WatchedJoinSecret, JoinSecrets>::new();
        for step in steps {
            let events = match step {
                Step::Apply(o) => vec![watcher::Event::Apply(object(o))],
                Step::Delete(n) => vec![watcher::Event::Delete(object((n, None, 0, None)))],
                Step::Relist(objects) => std::iter::once(watcher::Event::Init)
                    .chain(objects.into_iter().map(|o| watcher::Event::InitApply(object(o))))
                    .chain(std::iter::once(watcher::Event::InitDone))
                    .collect(),
            };
            let as_set = |objects: Vec<Arc<WatchedJoinSecret>>| -> BTreeSet<String> {
                objects.iter().map(|o| format!("{o:?}")).collect()
            };
            for event in &events {
                // What the subscribers hear, as the reflector tells them.
                let (heard_kube, heard_keep) = beside.take(event);
                prop_assert_eq!(heard_keep, heard_kube);
            }
            let (kube, keep) = (&beside.kube, &beside.keep);
            prop_assert_eq!(as_set(keep.state()), as_set(kube.state()));
            for infra in ["infra-0", "infra-1"] {
                let mut expected: Vec<String> = kube
                    .state()
                    .iter()
                    .filter(|s| s.label(INFRA_NAME_LABEL) == Some(infra))
                    .map(|s| s.metadata.name.clone().unwrap())
                    .collect();
                expected.sort();
                let kept = keep.of_infra(infra);
                prop_assert_eq!(names(&kept), expected);
                for secret in &kept {
                    let watched = kube.get(&ObjectRef::new(secret.name()).within("ns")).unwrap();
                    for key in [INFRA_NAME_LABEL, CONTRACT_LABEL, CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL] {
                        prop_assert_eq!(secret.label(key), watched.label(key), "{}", key);
                    }
                }
            }
        }
    }
}

#[test]
fn the_secrets_of_an_infra_share_its_cluster_texts() {
    let mut keep = JoinSecrets::default();
    for name in ["join-a", "join-b"] {
        let secret = labelled("ns", name, Some("x"), Some("c1"), "t");
        keep.apply(&watcher::Event::Apply(secret));
    }
    let [a, b] = &keep.of_infra("x")[..] else {
        panic!("two Secrets of x")
    };
    let (
        SecretLabels::Join {
            infra: infra_a,
            cluster: cluster_a,
            cluster_namespace: namespace_a,
        },
        SecretLabels::Join {
            infra: infra_b,
            cluster: cluster_b,
            cluster_namespace: namespace_b,
        },
    ) = (&a.labels, &b.labels)
    else {
        panic!("both are labelled as the NodeClaim controller labels them")
    };
    assert!(Arc::ptr_eq(infra_a, infra_b));
    assert!(Arc::ptr_eq(cluster_a, cluster_b));
    assert!(Arc::ptr_eq(namespace_a, namespace_b));
    assert_eq!(a.label(CONTRACT_LABEL), Some("a"));
    assert_eq!(b.labels().get(CLUSTER_LABEL), Some("c1"));
}

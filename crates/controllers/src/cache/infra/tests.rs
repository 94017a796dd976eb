#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL, compute_contract_name, join_secret_name};
use api::{
    ClusterKind, ClusterRef, ComputeContractPhase, Condition, ConditionStatus, ContractEntry,
    ContractState, ContractStatus, Infra, InfraPhase, InfraSpec, InfraStatus, Location,
    NodeClaimRef, NodeEntry, NodeJoin, Receipt, Resources, Role, SecretEntry, SecretRef, StringMap,
    Taint, TaintEffect,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use proptest::prelude::*;

use super::CachedInfra;
use crate::cache::Labelled;
use crate::nodeclaim::compose::node_name;

/// Entry names from a small set, so lists share them (or do not) by chance.
fn entry() -> impl Strategy<Value = String> {
    "node-[a-c]"
}

/// A name derived from `entry` by `derive`, or another one.
fn derived_or_not(
    entry: String,
    derive: fn(&str) -> String,
) -> impl Strategy<Value = (String, String)> {
    let derived = derive(&entry);
    prop_oneof![Just(derived), "[a-z-]{0,12}"].prop_map(move |name| (entry.clone(), name))
}

fn location() -> impl Strategy<Value = Location> {
    ("[A-C]{2}", proptest::option::of("[A-B]{2}"))
        .prop_map(|(country, region)| Location { country, region })
}

fn contract_entry() -> impl Strategy<Value = ContractEntry> {
    (
        entry(),
        (1u32..4, 1u64..4, 1u64..4, 1u32..4),
        location(),
        any::<bool>(),
    )
        .prop_map(
            |(name, (cpus, memory, disk, network), location, control)| ContractEntry {
                name,
                resources: Resources {
                    cpus,
                    memory,
                    disk,
                    network,
                },
                location,
                role: if control {
                    Role::ControlPlane
                } else {
                    Role::Worker
                },
            },
        )
}

fn secret_entry() -> impl Strategy<Value = SecretEntry> {
    entry()
        .prop_flat_map(|entry| derived_or_not(entry, join_secret_name))
        .prop_map(|(contract, name)| SecretEntry {
            contract,
            secret_ref: SecretRef { name },
        })
}

fn node_join() -> impl Strategy<Value = NodeJoin> {
    (
        "https://[a-b]",
        "[a-z0-9-]{1,8}",
        proptest::collection::btree_map("[a-b]/[a-c]", "node-[a-c]|[a-z]{0,3}", 0..3),
        proptest::collection::vec(("[a-b]", proptest::option::of("[a-b]"), 0..3u8), 0..2),
    )
        .prop_map(|(api_server, node_name, labels, taints)| NodeJoin {
            api_server,
            node_name,
            labels: labels.into(),
            taints: taints
                .into_iter()
                .map(|(key, value, effect)| Taint {
                    key,
                    value,
                    effect: match effect {
                        0 => TaintEffect::NoSchedule,
                        1 => TaintEffect::PreferNoSchedule,
                        _ => TaintEffect::NoExecute,
                    },
                })
                .collect(),
        })
}

fn node_entry() -> impl Strategy<Value = NodeEntry> {
    (
        entry(),
        "did:plc:[a-b]{1,3}",
        proptest::option::of(("at://[a-b]", "bafy[a-b]")),
        proptest::option::of(node_join()),
        (
            "tenant-[a-b]",
            "[a-z]{1,6}",
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f-]{1,8}",
        ),
    )
        .prop_map(
            |(contract, owner_did, adopt, node_join, (namespace, name, uid))| NodeEntry {
                contract,
                owner_did,
                adopt: adopt.map(|(uri, cid)| Box::new(Receipt { uri, cid })),
                node_join,
                node_claim_ref: NodeClaimRef {
                    namespace,
                    name,
                    uid,
                },
            },
        )
}

fn spec() -> impl Strategy<Value = InfraSpec> {
    (
        "[a-z ]{0,8}",
        proptest::collection::vec(contract_entry(), 0..4),
        proptest::collection::vec(secret_entry(), 0..4),
        proptest::option::of(any::<bool>()),
        proptest::option::of(("tenant-[a-b]", "[a-c]")),
        proptest::collection::vec(node_entry(), 0..4),
    )
        .prop_map(
            |(description, contracts, secrets, record, cluster, nodes)| InfraSpec {
                description,
                contracts,
                secrets,
                record,
                cluster_ref: cluster.map(|(namespace, name)| ClusterRef {
                    namespace,
                    name,
                    kind: ClusterKind::Cluster,
                }),
                nodes,
            },
        )
}

fn state(pick: u8) -> ContractState {
    match pick % 4 {
        0 => ContractState::Staged,
        1 => ContractState::Requested,
        2 => ContractState::Released,
        _ => ContractState::ReleasedByHand,
    }
}

fn phase(pick: u8) -> ComputeContractPhase {
    match pick % 7 {
        0 => ComputeContractPhase::Pending,
        1 => ComputeContractPhase::Bidding,
        2 => ComputeContractPhase::Accepted,
        3 => ComputeContractPhase::Deployed,
        4 => ComputeContractPhase::Releasing,
        5 => ComputeContractPhase::Released,
        _ => ComputeContractPhase::Failed,
    }
}

/// Status rows of the Infra `infra`: each contract's name derived or not.
fn status(infra: String) -> impl Strategy<Value = InfraStatus> {
    let row = (
        entry(),
        any::<bool>(),
        "[a-z-]{0,12}",
        any::<u8>(),
        proptest::option::of(any::<u8>()),
    )
        .prop_map(
            move |(name, derived, other, pick, phase_pick)| ContractStatus {
                compute_contract: if derived {
                    compute_contract_name(&infra, &name)
                } else {
                    other
                },
                name,
                state: state(pick),
                phase: phase_pick.map(phase),
            },
        );
    (
        proptest::option::of(0u8..5),
        proptest::collection::vec(row, 0..4),
        proptest::option::of("[0-9a-f]{4}"),
        (0u32..5, 0u32..5, proptest::option::of(0i64..5)),
        proptest::collection::vec(("[A-C][a-z]{0,3}", "[a-z ]{0,6}"), 0..3),
    )
        .prop_map(
            |(phase, contracts, declaration_hash, (count, ready, generation), conditions)| {
                InfraStatus {
                    phase: phase.map(|pick| match pick {
                        0 => InfraPhase::Requesting,
                        1 => InfraPhase::Deployed,
                        2 => InfraPhase::Releasing,
                        3 => InfraPhase::Released,
                        _ => InfraPhase::Failed,
                    }),
                    contracts,
                    declaration_hash,
                    contract_count: count,
                    ready_contracts: ready,
                    observed_generation: generation,
                    conditions: conditions
                        .into_iter()
                        .map(|(type_, message)| {
                            Condition::new(
                                type_,
                                ConditionStatus::True,
                                "Because",
                                message,
                                generation,
                                Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                            )
                        })
                        .collect(),
                }
            },
        )
}

/// `spec` with the node names and join labels of the nodes `derive` picks
/// as the NodeClaim controller derives them for the Infra `infra` (labels:
/// 0 as they are, 1 derived, 2 derived and one more, 3 the infra's only).
fn with_derived_joins(mut spec: InfraSpec, infra: &str, derive: &[(bool, u8)]) -> InfraSpec {
    for (node, (name, labels)) in spec.nodes.iter_mut().zip(derive) {
        let Some(join) = node.node_join.as_mut() else {
            continue;
        };
        if *name {
            join.node_name = node_name(&node.node_claim_ref.name, &node.contract);
        }
        if *labels > 0 {
            join.labels = StringMap::from([
                (INFRA_NAME_LABEL.to_owned(), infra.to_owned()),
                (CONTRACT_LABEL.to_owned(), node.contract.clone()),
            ]);
        }
        if *labels == 2 {
            join.labels.insert("a/b".to_owned(), "c".to_owned());
        }
        if *labels == 3 {
            join.labels.remove(CONTRACT_LABEL);
        }
    }
    spec
}

fn infra() -> impl Strategy<Value = Infra> {
    (
        "nodes-[a-b]",
        spec(),
        proptest::collection::vec((any::<bool>(), 0u8..4), 4),
        any::<bool>(),
        (0u8..3, 0u8..3),
    )
        .prop_flat_map(|(name, spec, derive, with_status, labelled)| {
            let status = if with_status {
                status(name.clone()).prop_map(Some).boxed()
            } else {
                Just(None).boxed()
            };
            let spec = with_derived_joins(spec, &name, &derive);
            (Just(name), Just(spec), status, Just(labelled))
        })
        .prop_map(|(name, spec, status, labelled)| Infra {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some("socialweb-system".to_owned()),
                uid: Some("u-1".to_owned()),
                resource_version: Some("7".to_owned()),
                labels: string_map(labelled.0, api::names::CLUSTER_LABEL),
                annotations: string_map(labelled.1, "example.com/note"),
                finalizers: Some(vec![api::names::INFRA_RELEASE_FINALIZER.to_owned()]),
                ..ObjectMeta::default()
            },
            spec,
            status,
        })
}

/// None, empty, or `key` and another entry.
fn string_map(which: u8, key: &str) -> Option<BTreeMap<String, String>> {
    match which {
        0 => None,
        1 => Some(BTreeMap::new()),
        _ => Some(BTreeMap::from([
            (key.to_owned(), "c1".to_owned()),
            ("b/other".to_owned(), String::new()),
        ])),
    }
}

/// An Infra's parts, to compare (the kube-derived `Infra` is not `PartialEq`).
fn parts(infra: &Infra) -> (&ObjectMeta, &InfraSpec, Option<&InfraStatus>) {
    (&infra.metadata, &infra.spec, infra.status.as_ref())
}

proptest! {
    #[test]
    fn an_infra_reads_back_whole_as_it_was_kept(infra in infra()) {
        let cached = CachedInfra::from(infra.clone());
        let back = cached.infra();
        prop_assert_eq!(parts(&back), parts(&infra));
        prop_assert_eq!(cached.cluster_ref(), infra.spec.cluster_ref.as_ref());
        let label = |key| infra.metadata.labels.as_ref()?.get(key).map(String::as_str);
        for key in [api::names::CLUSTER_LABEL, "b/other", "c/absent"] {
            prop_assert_eq!(cached.label(key), label(key));
        }
        let adopted: Vec<(&str, &Receipt)> = cached.adopted().collect();
        let nodes: Vec<(&str, &Receipt)> = infra
            .spec
            .nodes
            .iter()
            .filter_map(|n| Some((n.contract.as_str(), n.adopt.as_deref()?)))
            .collect();
        prop_assert_eq!(adopted, nodes);
    }
}

#[test]
fn an_infra_decodes_as_the_infra_it_is() {
    let json = include_str!("../../../examples/cache_weight/infra.json");
    let cached: CachedInfra = serde_json::from_str(json).unwrap();
    let infra: Infra = serde_json::from_str(json).unwrap();
    assert_eq!(parts(&cached.infra()), parts(&infra));
    assert_eq!(cached, CachedInfra::from(infra));
    // What does not decode as an Infra does not decode as one either.
    let broken = json.replace("\"cpus\": 2", "\"cpus\": \"two\"");
    assert_ne!(broken, json);
    assert!(serde_json::from_str::<CachedInfra>(&broken).is_err());
}

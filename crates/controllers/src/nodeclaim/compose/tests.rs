#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use proptest::prelude::*;

/// Whether two entries share a name (a list-map the server would refuse;
/// reordering those changes a stable sort's outcome).
fn has_duplicate_names(entries: &[(String, u32)]) -> bool {
    let names: std::collections::BTreeSet<&String> = entries.iter().map(|(name, _)| name).collect();
    names.len() != entries.len()
}

#[test]
fn node_name_keeps_claim_name_and_entry_suffix() {
    assert_eq!(
        node_name("worker-1", "node-1825b1e943648c927b7b"),
        "worker-1-1825b1"
    );
    let long = "a".repeat(300);
    let n = node_name(&long, "node-abcdef0123");
    assert_eq!(n.len(), MAX_NODE_NAME_LEN);
    assert!(n.ends_with("-abcdef"));
}

#[test]
fn resources_limits() {
    let ok = Resources {
        cpus: 2,
        memory: 4096,
        disk: 20,
        network: 100,
    };
    assert!(check_resources(&ok).is_ok());
    let zero = Resources {
        cpus: 0,
        ..ok.clone()
    };
    let err = check_resources(&zero).unwrap_err();
    assert_eq!(err.reason, reason::IMPOSSIBLE_RESOURCES);
    assert!(err.message.contains("cpus"), "{}", err.message);
    let huge = Resources {
        memory: limits::MAX_MEMORY_MIB + 1,
        ..ok
    };
    assert!(
        check_resources(&huge)
            .unwrap_err()
            .message
            .contains("memory")
    );
}

/// An Infra spec with one contract, secret and node entry per `(name, cpus)`.
fn spec_of(entries: &[(String, u32)]) -> InfraSpec {
    let resources = |cpus| Resources {
        cpus,
        memory: 1024,
        disk: 10,
        network: 10,
    };
    InfraSpec {
        contracts: (entries.iter())
            .map(|(name, cpus)| ContractEntry {
                name: name.clone(),
                resources: resources(*cpus),
                location: api::Location {
                    country: "FR".into(),
                    region: None,
                },
                role: api::Role::default(),
            })
            .collect(),
        secrets: (entries.iter())
            .map(|(name, _)| api::SecretEntry {
                contract: name.clone(),
                secret_ref: api::SecretRef {
                    name: format!("join-{name}"),
                },
            })
            .collect(),
        nodes: (entries.iter())
            .map(|(name, cpus)| NodeEntry {
                contract: name.clone(),
                owner_did: format!("did:plc:{cpus}"),
                adopt: None,
                node_join: None,
                node_claim_ref: NodeClaimRef {
                    namespace: "ns".into(),
                    name: name.clone(),
                    uid: format!("uid-{name}"),
                },
            })
            .collect(),
        description: String::new(),
        record: None,
        cluster_ref: None,
    }
}

/// The comparison as it was first written: both specs cloned, their
/// list-maps sorted by key, compared whole.
fn same_spec_by_sorted_clones(a: &InfraSpec, b: &InfraSpec) -> bool {
    let sorted = |spec: &InfraSpec| {
        let mut spec = spec.clone();
        spec.contracts.sort_by(|a, b| a.name.cmp(&b.name));
        spec.secrets.sort_by(|a, b| a.contract.cmp(&b.contract));
        spec.nodes.sort_by(|a, b| a.contract.cmp(&b.contract));
        spec
    };
    sorted(a) == sorted(b)
}

proptest! {
    #[test]
    fn list_maps_compare_as_sets(
        entries in prop::collection::vec(("[a-d]", 1u32..3), 0..5),
        other in prop::collection::vec(("[a-d]", 1u32..3), 0..5),
        rotation in 0usize..5,
        record in proptest::option::of(any::<bool>()),
        description in "|d",
    ) {
        let spec = spec_of(&entries);
        let mut reordered = spec.clone();
        reordered.contracts.reverse();
        let turn = |len: usize| if len == 0 { 0 } else { rotation % len };
        reordered.secrets.rotate_left(turn(entries.len()));
        reordered.nodes.rotate_right(turn(entries.len()));
        prop_assert!(same_spec(&spec, &reordered) || has_duplicate_names(&entries));
        let other = InfraSpec {
            record,
            description,
            ..spec_of(&other)
        };
        for b in [other, reordered] {
            prop_assert_eq!(same_spec(&spec, &b), same_spec_by_sorted_clones(&spec, &b));
        }
    }

    #[test]
    fn node_names_are_bounded_and_distinct_per_entry(name in "[a-z0-9]([a-z0-9.-]{0,300}[a-z0-9])?", a in "[0-9a-f]{20}", b in "[0-9a-f]{20}") {
        prop_assume!(a[..6] != b[..6]);
        let na = node_name(&name, &format!("node-{a}"));
        let nb = node_name(&name, &format!("node-{b}"));
        prop_assert!(na.len() <= MAX_NODE_NAME_LEN);
        prop_assert_ne!(na, nb);
    }
}

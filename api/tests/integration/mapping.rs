//! Properties of the contract mapping: what reaches a ComputeContract, and what
//! never reaches the published declaration or its hash.

use api::{
    ClusterKind, ClusterRef, ContractEntry, EntrySpecs, InfraSpec, Location, NodeClaimRef,
    NodeEntry, NodeJoin, Receipt, Resources, Role, SecretEntry, SecretRef, Taint, TaintEffect,
    compute_contract_spec, compute_contract_spec_for, declaration, declaration_hash,
    infra_declaration_hash,
};
use proptest::prelude::*;

fn resources() -> impl Strategy<Value = Resources> {
    (1u32..64, 1u64..1 << 20, 1u64..4096, 1u32..10_000).prop_map(|(cpus, memory, disk, network)| {
        Resources {
            cpus,
            memory,
            disk,
            network,
        }
    })
}

fn location() -> impl Strategy<Value = Location> {
    ("[A-Z]{2}", proptest::option::of("[a-z]{1,6}"))
        .prop_map(|(country, region)| Location { country, region })
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![Just(Role::Worker), Just(Role::ControlPlane)]
}

fn entry(name: String) -> impl Strategy<Value = ContractEntry> {
    (resources(), location(), role()).prop_map(move |(resources, location, role)| ContractEntry {
        name: name.clone(),
        resources,
        location,
        role,
    })
}

fn contracts() -> impl Strategy<Value = Vec<ContractEntry>> {
    proptest::collection::btree_set("node-[a-f0-9]{6}", 0..5)
        .prop_flat_map(|names| names.into_iter().map(entry).collect::<Vec<_>>())
}

fn receipt() -> impl Strategy<Value = Receipt> {
    ("at://[a-z]{4}/[a-z0-9]{6}", "baf[a-z0-9]{10}").prop_map(|(uri, cid)| Receipt { uri, cid })
}

fn node_join() -> impl Strategy<Value = NodeJoin> {
    (
        "https://[a-z]{5}:6443",
        "[a-z]{3}-[0-9]{2}",
        proptest::collection::btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..3),
        proptest::collection::vec(
            ("[a-z]{1,5}", proptest::option::of("[a-z]{1,5}")).prop_map(|(key, value)| Taint {
                key,
                value,
                effect: TaintEffect::NoSchedule,
            }),
            0..2,
        ),
    )
        .prop_map(|(api_server, node_name, labels, taints)| NodeJoin {
            api_server,
            node_name,
            labels: labels.into(),
            taints,
        })
}

fn node_entry(contract: String) -> impl Strategy<Value = NodeEntry> {
    (
        "did:plc:[a-z2-7]{24}",
        proptest::option::of(receipt()),
        proptest::option::of(node_join()),
        "[a-z]{1,8}",
        "[0-9a-f-]{36}",
    )
        .prop_map(move |(owner_did, adopt, node_join, claim, uid)| NodeEntry {
            contract: contract.clone(),
            owner_did,
            adopt: adopt.map(Box::new),
            node_join,
            node_claim_ref: NodeClaimRef {
                namespace: "tenant".into(),
                name: claim,
                uid,
            },
        })
}

/// The fields that must never reach a declaration: clusterRef, nodes, secrets, record.
fn private_fields(
    names: Vec<String>,
) -> impl Strategy<
    Value = (
        Option<ClusterRef>,
        Vec<NodeEntry>,
        Vec<SecretEntry>,
        Option<bool>,
    ),
> {
    let nodes = names.iter().cloned().map(node_entry).collect::<Vec<_>>();
    let secrets = names
        .iter()
        .map(|n| SecretEntry {
            contract: n.clone(),
            secret_ref: SecretRef {
                name: format!("join-{n}"),
            },
        })
        .collect::<Vec<_>>();
    (
        proptest::option::of(("[a-z]{1,8}", "[a-z]{1,8}").prop_map(|(namespace, name)| {
            ClusterRef {
                namespace,
                name,
                kind: ClusterKind::Cluster,
            }
        })),
        nodes,
        proptest::sample::subsequence(secrets.clone(), 0..=secrets.len()),
        proptest::option::of(any::<bool>()),
    )
}

fn spec_with_private_variants() -> impl Strategy<Value = (InfraSpec, InfraSpec)> {
    ("\\PC{0,20}", contracts()).prop_flat_map(|(description, contracts)| {
        let names: Vec<String> = contracts.iter().map(|c| c.name.clone()).collect();
        (private_fields(names.clone()), private_fields(names)).prop_map(move |(a, b)| {
            let make = |(cluster_ref, nodes, secrets, record)| InfraSpec {
                description: description.clone(),
                contracts: contracts.clone(),
                secrets,
                record,
                cluster_ref,
                nodes,
            };
            (make(a), make(b))
        })
    })
}

proptest! {
    #[test]
    fn private_fields_never_reach_declaration_or_hash((a, b) in spec_with_private_variants()) {
        prop_assert_eq!(declaration(&a), declaration(&b));
        prop_assert_eq!(infra_declaration_hash(&a).unwrap(), infra_declaration_hash(&b).unwrap());

        let json = serde_json::to_value(declaration(&a)).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        prop_assert_eq!(keys, vec!["contracts", "description"]);
        let text = json.to_string();
        for node in &a.nodes {
            prop_assert!(!text.contains(&node.owner_did), "ownerDid leaked: {text}");
            prop_assert!(!text.contains(&node.node_claim_ref.uid), "claim uid leaked: {text}");
        }
        for secret in &a.secrets {
            prop_assert!(!text.contains(&secret.secret_ref.name), "secret leaked: {text}");
        }
    }

    #[test]
    fn hash_ignores_contract_order((a, _) in spec_with_private_variants()) {
        let mut reversed = a.clone();
        reversed.contracts.reverse();
        prop_assert_eq!(infra_declaration_hash(&a).unwrap(), infra_declaration_hash(&reversed).unwrap());
    }

    #[test]
    fn hash_follows_publishable_fields((a, _) in spec_with_private_variants(), extra in entry("node-zzzzzz".into())) {
        let mut described = a.clone();
        described.description.push('!');
        prop_assert_ne!(infra_declaration_hash(&a).unwrap(), infra_declaration_hash(&described).unwrap());
        let mut grown = a.clone();
        grown.contracts.push(extra);
        prop_assert_ne!(infra_declaration_hash(&a).unwrap(), infra_declaration_hash(&grown).unwrap());
    }

    #[test]
    fn node_fields_reach_the_compute_contract(e in entry("node-abc".into()), node in node_entry("node-abc".into())) {
        let secret = SecretRef { name: "join-node-abc".into() };
        let spec = compute_contract_spec(&e, Some(&node), Some(&secret));
        prop_assert_eq!(spec.owner_did.as_ref(), Some(&node.owner_did));
        prop_assert_eq!(&spec.adopt, &node.adopt);
        prop_assert_eq!(&spec.node_join, &node.node_join);
        prop_assert_eq!(spec.secrets_ref.as_ref(), Some(&secret));
        prop_assert_eq!(&spec.resources, &e.resources);
        prop_assert_eq!(&spec.location, &e.location);
        prop_assert_eq!(spec.role, e.role);
        prop_assert!(!spec.release);
        prop_assert_eq!(spec.ttl_seconds_after_finished, 691_200);
    }

    #[test]
    fn ordinary_entry_has_no_node_fields(e in entry("node-abc".into())) {
        let spec = compute_contract_spec(&e, None, None);
        prop_assert!(spec.owner_did.is_none() && spec.adopt.is_none() && spec.node_join.is_none());
        prop_assert!(spec.secrets_ref.is_none());
    }

    #[test]
    fn lookup_by_name_pairs_entry_node_and_secret((a, _) in spec_with_private_variants()) {
        for c in &a.contracts {
            let spec = compute_contract_spec_for(&a, &c.name).unwrap();
            let node = a.nodes.iter().find(|n| n.contract == c.name);
            prop_assert_eq!(spec.owner_did, node.map(|n| n.owner_did.clone()));
            let secret = a.secrets.iter().find(|s| s.contract == c.name).map(|s| s.secret_ref.clone());
            prop_assert_eq!(spec.secrets_ref, secret);
        }
        prop_assert!(compute_contract_spec_for(&a, "node-absent").is_none());
    }

    #[test]
    fn entry_specs_pair_as_the_lookup_by_name_does(
        (mut a, b) in spec_with_private_variants(),
        doubled in any::<proptest::sample::Index>(),
    ) {
        // A name listed twice in each list (the schema's list-map keys
        // forbid it, a decide must not depend on that): the first counts.
        if !a.contracts.is_empty() {
            let twice = doubled.get(&a.contracts).name.clone();
            let mut second = doubled.get(&a.contracts).clone();
            second.resources.cpus += 1;
            a.contracts.push(second);
            a.nodes.extend(b.nodes.iter().filter(|n| n.contract == twice).cloned());
            a.secrets.push(SecretEntry {
                contract: twice,
                secret_ref: SecretRef { name: "join-second".into() },
            });
        }
        let specs = EntrySpecs::of(&a);
        // Every name once, in name order, each with the spec its lookup gives.
        let mut names: Vec<&str> = a.contracts.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let listed: Vec<&str> = specs.iter().map(|(name, _)| name).collect();
        prop_assert_eq!(listed, names);
        for (name, spec) in specs.iter() {
            prop_assert_eq!(Some(spec), compute_contract_spec_for(&a, name));
        }
    }
}

/// A fixed vector computed outside Rust, so the hash stays stable across
/// implementations:
/// `printf '%s' '{"contracts":[{"location":{"country":"DE"},"name":"node-1825b1e943648c927b7b",`
/// `"resources":{"cpus":2,"disk":40,"memory":4096,"network":100},"role":"Worker"}],`
/// `"description":"nodes of tenant/c1"}' | sha256sum` (one line).
#[test]
fn declaration_hash_fixed_vector() {
    let spec = InfraSpec {
        description: "nodes of tenant/c1".into(),
        contracts: vec![ContractEntry {
            name: "node-1825b1e943648c927b7b".into(),
            resources: Resources {
                cpus: 2,
                memory: 4096,
                disk: 40,
                network: 100,
            },
            location: Location {
                country: "DE".into(),
                region: None,
            },
            role: Role::Worker,
        }],
        secrets: vec![],
        record: None,
        cluster_ref: None,
        nodes: vec![],
    };
    let decl = declaration(&spec);
    assert_eq!(
        declaration_hash(&decl).unwrap(),
        "9fd14d4969499dbeea7506d401ca4d275f040a7cdd5dd35dee9bc9f867eced5a"
    );
}

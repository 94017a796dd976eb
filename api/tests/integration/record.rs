//! The published record: exactly the declaration, valid against our lexicon
//! (`lexicons/computer/socialweb/infra/declaration.json`), and never
//! anything of an Infra's private fields.

use std::collections::BTreeSet;

use api::{
    ClusterKind, ClusterRef, ContractEntry, DECLARATION_COLLECTION, InfraSpec, Location,
    NodeClaimRef, NodeEntry, NodeJoin, Receipt, Resources, Role, SecretEntry, SecretRef, Taint,
    TaintEffect, declaration, declaration_record, record_key,
};
use proptest::prelude::*;
use serde_json::Value;

const LEXICON: &str = include_str!("../../../lexicons/computer/socialweb/infra/declaration.json");

fn lexicon() -> Value {
    serde_json::from_str(LEXICON).unwrap()
}

/// Validates `value` against the lexicon type `schema`, more strictly than
/// the lexicon language asks: objects are closed (every property declared)
/// and `knownValues` is a closed set, since our records must hold exactly
/// the declaration. Returns the first violation.
fn validate(defs: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{at}: {why} ({value})"));
    match schema["type"].as_str().unwrap() {
        "ref" => {
            let name = schema["ref"].as_str().unwrap().strip_prefix('#').unwrap();
            validate(defs, &defs[name], value, at)
        }
        "object" => {
            let Some(object) = value.as_object() else {
                return fail("not an object");
            };
            let properties = schema["properties"].as_object().unwrap();
            for required in schema["required"].as_array().into_iter().flatten() {
                if !object.contains_key(required.as_str().unwrap()) {
                    return fail(&format!("missing {required}"));
                }
            }
            for (key, field) in object {
                if key == "$type" {
                    continue;
                }
                let Some(field_schema) = properties.get(key) else {
                    return fail(&format!("undeclared property {key}"));
                };
                validate(defs, field_schema, field, &format!("{at}.{key}"))?;
            }
            Ok(())
        }
        "array" => {
            let Some(items) = value.as_array() else {
                return fail("not an array");
            };
            for (i, item) in items.iter().enumerate() {
                validate(defs, &schema["items"], item, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        "string" => {
            let Some(text) = value.as_str() else {
                return fail("not a string");
            };
            let len = u64::try_from(text.len()).unwrap();
            if schema["minLength"].as_u64().is_some_and(|min| len < min)
                || schema["maxLength"].as_u64().is_some_and(|max| len > max)
            {
                return fail("length out of bounds");
            }
            if let Some(known) = schema["knownValues"].as_array()
                && !known.iter().any(|k| k == value)
            {
                return fail("not a known value");
            }
            Ok(())
        }
        "integer" => {
            let Some(number) = value.as_i64() else {
                return fail("not an integer");
            };
            if schema["minimum"].as_i64().is_some_and(|min| number < min)
                || schema["maximum"].as_i64().is_some_and(|max| number > max)
            {
                return fail("out of range");
            }
            Ok(())
        }
        other => panic!("the test validator knows no lexicon type {other}"),
    }
}

fn validate_record(record: &Value) -> Result<(), String> {
    let lexicon = lexicon();
    let defs = &lexicon["defs"];
    if record["$type"] != DECLARATION_COLLECTION {
        return Err(format!("$type is {}", record["$type"]));
    }
    validate(defs, &defs["main"]["record"], record, "record")
}

/// A marker that cannot occur by chance in anything publishable: the
/// publishable strings below are lowercase, digits and two-letter countries.
fn marker() -> impl Strategy<Value = String> {
    "ZQX[0-9]{6}"
}

fn resources() -> impl Strategy<Value = Resources> {
    (
        1u32..=1024,
        1u64..=16_777_216,
        1u64..=1_048_576,
        1u32..=1_000_000,
    )
        .prop_map(|(cpus, memory, disk, network)| Resources {
            cpus,
            memory,
            disk,
            network,
        })
}

fn entry(name: String) -> impl Strategy<Value = ContractEntry> {
    (
        resources(),
        "[A-Z]{2}",
        proptest::option::of("[a-z]{1,6}"),
        prop_oneof![Just(Role::Worker), Just(Role::ControlPlane)],
    )
        .prop_map(move |(resources, country, region, role)| ContractEntry {
            name: name.clone(),
            resources,
            location: Location { country, region },
            role,
        })
}

fn node(contract: String) -> impl Strategy<Value = NodeEntry> {
    (
        proptest::collection::vec(marker(), 9),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(m, adopt, join)| NodeEntry {
            contract: contract.clone(),
            owner_did: format!("did:plc:{}", m[0]),
            adopt: adopt.then(|| {
                Box::new(Receipt {
                    uri: format!("at://did:plc:{}/x/y", m[1]),
                    cid: m[2].clone(),
                })
            }),
            node_join: join.then(|| NodeJoin {
                api_server: format!("https://{}:6443", m[3]),
                node_name: m[4].clone(),
                labels: [(m[5].clone(), m[6].clone())].into(),
                taints: vec![Taint {
                    key: m[7].clone(),
                    value: None,
                    effect: TaintEffect::NoExecute,
                }],
            }),
            node_claim_ref: NodeClaimRef {
                namespace: m[8].clone(),
                name: m[8].clone(),
                uid: m[8].clone(),
            },
        })
}

/// An Infra whose private fields (clusterRef, nodes, secrets) hold markers
/// everywhere, and whose publishable fields hold none.
fn infra_spec() -> impl Strategy<Value = InfraSpec> {
    (
        "[a-z ]{0,24}",
        proptest::collection::btree_set("node-[a-f0-9]{6}", 0..5),
    )
        .prop_flat_map(|(description, names)| {
            let names: Vec<String> = names.into_iter().collect();
            (
                Just(description),
                names.iter().cloned().map(entry).collect::<Vec<_>>(),
                names.iter().cloned().map(node).collect::<Vec<_>>(),
                proptest::collection::vec(marker(), names.len()),
                (marker(), marker()),
                proptest::option::of(any::<bool>()),
            )
        })
        .prop_map(
            |(description, contracts, nodes, secret_names, cluster, record)| {
                let secrets = contracts
                    .iter()
                    .zip(secret_names)
                    .map(|(c, name)| SecretEntry {
                        contract: c.name.clone(),
                        secret_ref: SecretRef { name },
                    })
                    .collect();
                InfraSpec {
                    description,
                    contracts,
                    secrets,
                    record,
                    cluster_ref: Some(ClusterRef {
                        namespace: cluster.0,
                        name: cluster.1,
                        kind: ClusterKind::Cluster,
                    }),
                    nodes,
                }
            },
        )
}

fn all_keys<'a>(value: &'a Value, keys: &mut BTreeSet<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                keys.insert(key);
                all_keys(inner, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| all_keys(item, keys)),
        _ => {}
    }
}

proptest! {
    #[test]
    fn no_secret_join_token_node_or_cluster_reaches_a_record(spec in infra_spec()) {
        let record = declaration_record(&declaration(&spec)).unwrap();
        let text = record.to_string();
        prop_assert!(!text.contains("ZQX"), "a private field reached the record: {text}");
        // No field of a private part, at any depth: every key is one of the declaration's.
        let mut keys = BTreeSet::new();
        all_keys(&record, &mut keys);
        let declared = BTreeSet::from(["$type", "description", "contracts", "name", "resources",
            "location", "role", "cpus", "memory", "disk", "network", "country", "region"]);
        prop_assert!(keys.is_subset(&declared), "undeclared keys: {:?}", keys.difference(&declared));
        // Exactly the declaration: $type, description, contracts and nothing else.
        let keys: BTreeSet<&str> = record.as_object().unwrap().keys().map(String::as_str).collect();
        prop_assert_eq!(keys, BTreeSet::from(["$type", "contracts", "description"]));
        let mut without_type = record.clone();
        without_type.as_object_mut().unwrap().remove("$type");
        prop_assert_eq!(without_type, serde_json::to_value(declaration(&spec)).unwrap());
    }

    #[test]
    fn every_record_is_valid_against_the_lexicon(spec in infra_spec()) {
        let record = declaration_record(&declaration(&spec)).unwrap();
        prop_assert_eq!(validate_record(&record), Ok(()));
    }

    #[test]
    fn record_keys_are_tids_and_stable(ns in "[a-z0-9-]{1,63}", name in "[a-z0-9-]{1,63}", uid in "[0-9a-f-]{36}") {
        let key = record_key(&ns, &name, &uid);
        prop_assert_eq!(&key, &record_key(&ns, &name, &uid));
        prop_assert_eq!(key.len(), 13);
        prop_assert!(key.bytes().all(|b| b"234567abcdefghijklmnopqrstuvwxyz".contains(&b)), "{key}");
        // The top bit is 0: the first character is in 2..j.
        prop_assert!(key.as_bytes()[0] <= b'j', "{key}");
    }
}

/// Computed outside Rust: the first 8 bytes of
/// sha256("socialweb-system/nodes-2b726ab7ba6f76600839/6f1e4b7a-0c2d-4e5f-8a9b-1c2d3e4f5a6b"),
/// shifted right once, in base32-sortable.
#[test]
fn record_key_fixed_vector() {
    assert_eq!(
        record_key(
            "socialweb-system",
            "nodes-2b726ab7ba6f76600839",
            "6f1e4b7a-0c2d-4e5f-8a9b-1c2d3e4f5a6b"
        ),
        "4yac5gdjkcf36"
    );
}

#[test]
fn the_lexicon_describes_our_collection_as_a_tid_keyed_record() {
    let lexicon = lexicon();
    assert_eq!(lexicon["lexicon"], 1);
    assert_eq!(lexicon["id"], DECLARATION_COLLECTION);
    assert_eq!(lexicon["defs"]["main"]["type"], "record");
    assert_eq!(lexicon["defs"]["main"]["key"], "tid");
    // Every property the lexicon declares is one the declaration has.
    let record = &lexicon["defs"]["main"]["record"]["properties"];
    assert_eq!(
        record.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["contracts", "description"]
    );
}

#[test]
fn records_with_anything_more_or_out_of_bounds_are_refused() {
    let spec = InfraSpec {
        description: "web".into(),
        contracts: vec![ContractEntry {
            name: "node-a".into(),
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
        record: Some(true),
        cluster_ref: None,
        nodes: vec![],
    };
    let good = declaration_record(&declaration(&spec)).unwrap();
    validate_record(&good).unwrap();

    let mut extra = good.clone();
    extra["clusterRef"] = serde_json::json!({"namespace": "t", "name": "c"});
    assert!(validate_record(&extra).unwrap_err().contains("clusterRef"));
    let mut nested = good.clone();
    nested["contracts"][0]["ownerDid"] = "did:plc:x".into();
    assert!(validate_record(&nested).unwrap_err().contains("ownerDid"));
    let mut big = good.clone();
    big["contracts"][0]["resources"]["cpus"] = 1025.into();
    assert!(validate_record(&big).is_err());
    let mut untyped = good;
    untyped["$type"] = "app.bsky.feed.post".into();
    assert!(validate_record(&untyped).is_err());
}

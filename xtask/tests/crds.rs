//! The committed CRDs are what generation produces now, and each is a valid,
//! structural `apiextensions.k8s.io/v1` CustomResourceDefinition.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::json;

/// Every committed CRD, parsed, by file name.
fn committed() -> BTreeMap<String, CustomResourceDefinition> {
    let dir = xtask::workspace_root().join(xtask::CRD_DIR);
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let crd: CustomResourceDefinition = serde_yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                crd,
            )
        })
        .collect()
}

#[test]
fn committed_files_equal_generation() {
    let dir = xtask::workspace_root().join(xtask::CRD_DIR);
    let rendered = xtask::render_crds().unwrap();
    let names: BTreeSet<&String> = rendered.iter().map(|(name, _)| name).collect();
    let on_disk: BTreeSet<String> = committed().into_keys().collect();
    assert_eq!(
        names,
        on_disk.iter().collect(),
        "run `cargo run -p xtask -- generate`"
    );
    for (name, text) in &rendered {
        let disk = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(
            disk == *text,
            "{name} is stale: run `cargo run -p xtask -- generate`"
        );
    }
}

#[test]
fn every_kind_is_namespaced_with_status_in_the_group() {
    let crds = committed();
    assert_eq!(crds.len(), 6);
    for (file, crd) in &crds {
        let spec = &crd.spec;
        assert_eq!(spec.group, "socialweb.computer");
        assert_eq!(spec.scope, "Namespaced");
        assert_eq!(
            *file,
            format!("{}.socialweb.computer.yaml", spec.names.plural)
        );
        assert_eq!(spec.versions.len(), 1);
        let version = &spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.served && version.storage);
        assert!(
            version.subresources.as_ref().unwrap().status.is_some(),
            "{file}: no status subresource"
        );
        assert!(
            spec.names
                .short_names
                .as_ref()
                .is_some_and(|s| !s.is_empty()),
            "{file}: no short name"
        );
    }
}

/// Printer columns per kind, and every column's JSONPath names a field the schema has.
#[test]
fn printer_columns_point_at_real_fields() {
    let expected: BTreeMap<&str, Vec<&str>> = BTreeMap::from([
        ("Cluster", vec!["Phase", "Nodes", "Age"]),
        (
            "NodeClaim",
            vec!["Cluster", "Phase", "Contract", "Address", "Age"],
        ),
        (
            "Infra",
            vec!["Cluster", "Phase", "Contracts", "Ready", "Age"],
        ),
        (
            "ComputeContract",
            vec!["Infra", "Phase", "Winner", "Cost", "Age"],
        ),
        ("Requester", vec!["Market", "Contracts", "Age"]),
        (
            "AtprotoRecord",
            vec!["Infra", "Phase", "URI", "Policy", "Age"],
        ),
    ]);
    for crd in committed().values() {
        let version = &crd.spec.versions[0];
        let columns = version.additional_printer_columns.as_ref().unwrap();
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, expected[crd.spec.names.kind.as_str()]);
        let root = version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap();
        for column in columns {
            let path = column.json_path.trim_start_matches('.');
            if path.starts_with("metadata.") {
                continue; // metadata is not part of a CRD's schema
            }
            let mut node = root;
            for segment in path.split('.') {
                node = node
                    .properties
                    .as_ref()
                    .and_then(|p| p.get(segment))
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: column {} reads missing {path}",
                            crd.spec.names.kind, column.name
                        )
                    });
            }
            let ty = node.type_.as_deref().unwrap();
            assert_eq!(
                column.type_,
                if ty == "string" && node.format.as_deref() == Some("date-time") {
                    "date"
                } else {
                    ty
                }
            );
        }
    }
}

/// Collects structural-schema violations and every default and list-map under `node`.
struct Walk {
    problems: Vec<String>,
    defaults: BTreeMap<String, serde_json::Value>,
    list_maps: BTreeMap<String, Vec<String>>,
}

impl Walk {
    fn visit(&mut self, path: &str, node: &JSONSchemaProps) {
        let preserve = node.x_kubernetes_preserve_unknown_fields == Some(true);
        if node.type_.is_none() && node.x_kubernetes_int_or_string != Some(true) && !preserve {
            self.problems.push(format!("{path}: no type"));
        }
        if node.any_of.is_some()
            || node.one_of.is_some()
            || node.all_of.is_some()
            || node.not.is_some()
        {
            self.problems.push(format!("{path}: anyOf/oneOf/allOf/not"));
        }
        if node.ref_path.is_some() || node.definitions.is_some() {
            self.problems.push(format!("{path}: $ref or definitions"));
        }
        if let Some(default) = &node.default {
            self.defaults.insert(path.to_owned(), default.0.clone());
        }
        if let Some(properties) = &node.properties {
            for (name, child) in properties {
                self.visit(&format!("{path}.{name}"), child);
            }
        }
        if let Some(JSONSchemaPropsOrBool::Schema(child)) = &node.additional_properties {
            self.visit(&format!("{path}.*"), child);
        }
        match &node.items {
            Some(JSONSchemaPropsOrArray::Schema(items)) => {
                let items_path = format!("{path}[]");
                if node.x_kubernetes_list_type.as_deref() == Some("map") {
                    let keys = node.x_kubernetes_list_map_keys.clone().unwrap_or_default();
                    if keys.is_empty() {
                        self.problems.push(format!("{path}: list-map without keys"));
                    }
                    let required = items.required.clone().unwrap_or_default();
                    for key in &keys {
                        let declared = items
                            .properties
                            .as_ref()
                            .is_some_and(|p| p.contains_key(key));
                        if !declared || !required.contains(key) {
                            self.problems
                                .push(format!("{path}: list-map key {key} not a required field"));
                        }
                    }
                    self.list_maps.insert(path.to_owned(), keys);
                }
                self.visit(&items_path, items);
            }
            Some(JSONSchemaPropsOrArray::Schemas(_)) => {
                self.problems.push(format!("{path}: tuple items"))
            }
            None if node.type_.as_deref() == Some("array") => {
                self.problems.push(format!("{path}: array without items"))
            }
            None => {}
        }
    }
}

fn walk_all() -> BTreeMap<String, Walk> {
    committed()
        .into_values()
        .map(|crd| {
            let mut walk = Walk {
                problems: vec![],
                defaults: BTreeMap::new(),
                list_maps: BTreeMap::new(),
            };
            let root = crd.spec.versions[0]
                .schema
                .clone()
                .unwrap()
                .open_api_v3_schema
                .unwrap();
            walk.visit("", &root);
            (crd.spec.names.kind, walk)
        })
        .collect()
}

#[test]
fn schemas_are_structural_with_keyed_list_maps() {
    let walks = walk_all();
    let problems: Vec<String> = walks
        .iter()
        .flat_map(|(kind, w)| w.problems.iter().map(move |p| format!("{kind}{p}")))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let infra = &walks["Infra"].list_maps;
    assert_eq!(infra[".spec.contracts"], ["name"]);
    assert_eq!(infra[".spec.nodes"], ["contract"]);
    assert_eq!(infra[".spec.secrets"], ["contract"]);
    assert_eq!(infra[".status.contracts"], ["name"]);
    for (kind, walk) in &walks {
        assert_eq!(walk.list_maps[".status.conditions"], ["type"], "{kind}");
    }
}

#[test]
fn defaults_only_where_intended() {
    let intended: BTreeMap<&str, BTreeMap<&str, serde_json::Value>> = BTreeMap::from([
        ("Cluster", BTreeMap::new()),
        (
            "NodeClaim",
            BTreeMap::from([
                (".spec.joinGraceSeconds", json!(900)),
                (".spec.lossGraceSeconds", json!(300)),
            ]),
        ),
        (
            "Infra",
            BTreeMap::from([
                (".spec.clusterRef.kind", json!("Cluster")),
                (".spec.contracts[].role", json!("Worker")),
                (".status.contractCount", json!(0)),
                (".status.readyContracts", json!(0)),
            ]),
        ),
        (
            "ComputeContract",
            BTreeMap::from([
                (".spec.role", json!("Worker")),
                (".spec.release", json!(false)),
                (".spec.ttlSecondsAfterFinished", json!(691_200)),
            ]),
        ),
        (
            "Requester",
            BTreeMap::from([
                (".spec.bidWindowSeconds", json!(5)),
                (".spec.maxInFlight", json!(10)),
                (".spec.market.local.seed", json!(0)),
                (".spec.market.local.bidders[].bootDelayMillis", json!(2000)),
                (".spec.market.local.bidders[].failureRate", json!(0)),
                (
                    ".spec.market.atproto.plcUrl",
                    json!("https://plc.directory"),
                ),
                (".spec.market.atproto.scope", json!("default")),
                (
                    ".spec.market.atproto.signingKeyAlgorithm",
                    json!("Secp256k1"),
                ),
                // The whole object, so a stored Requester shows the timeouts in effect.
                (
                    ".spec.market.atproto.timeouts",
                    json!({"requestSeconds": 10, "provisioningSeconds": 900, "acceptResendSeconds": 120}),
                ),
                (".spec.market.atproto.timeouts.requestSeconds", json!(10)),
                (
                    ".spec.market.atproto.timeouts.provisioningSeconds",
                    json!(900),
                ),
                (
                    ".spec.market.atproto.timeouts.acceptResendSeconds",
                    json!(120),
                ),
                (".status.contracts", json!(0)),
            ]),
        ),
        (
            "AtprotoRecord",
            BTreeMap::from([
                (
                    ".spec.collection",
                    json!("computer.socialweb.infra.declaration"),
                ),
                (".spec.deletionPolicy", json!("Delete")),
            ]),
        ),
    ]);
    for (kind, walk) in walk_all() {
        let actual: BTreeMap<&str, serde_json::Value> = walk
            .defaults
            .iter()
            .map(|(p, v)| (p.as_str(), v.clone()))
            .collect();
        assert_eq!(actual, intended[kind.as_str()], "{kind}");
    }
}

/// Follows `path` (dot-separated property names, `[]` for items) from the root of `kind`.
fn schema_at(kind: &str, path: &str) -> JSONSchemaProps {
    let crd = committed()
        .into_values()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    let mut node = crd.spec.versions[0]
        .schema
        .clone()
        .unwrap()
        .open_api_v3_schema
        .unwrap();
    for segment in path.split('.') {
        let (name, items) = segment
            .strip_suffix("[]")
            .map_or((segment, false), |n| (n, true));
        node = node
            .properties
            .unwrap()
            .remove(name)
            .unwrap_or_else(|| panic!("{kind}: no {path}"));
        if items {
            let Some(JSONSchemaPropsOrArray::Schema(inner)) = node.items else {
                panic!("{kind}: {path} not an array")
            };
            node = *inner;
        }
    }
    node
}

#[test]
fn validation_protects_the_user() {
    let cluster_name = schema_at("NodeClaim", "spec.clusterName");
    let rules = cluster_name.x_kubernetes_validations.unwrap();
    assert_eq!(rules[0].rule, "self == oldSelf");

    let market = schema_at("Requester", "spec.market")
        .x_kubernetes_validations
        .unwrap();
    assert!(market[0].rule.contains("size() == 1"), "{}", market[0].rule);
    let atproto = schema_at("Requester", "spec.market.atproto")
        .x_kubernetes_validations
        .unwrap();
    assert!(
        atproto[0].rule.contains("has(self.relayUrl)"),
        "{}",
        atproto[0].rule
    );
    let scope = schema_at("Requester", "spec.market.atproto.scope")
        .x_kubernetes_validations
        .unwrap();
    assert_eq!(scope[0].rule, "self == oldSelf");

    for field in ["cpus", "memory", "disk", "network"] {
        assert_eq!(
            schema_at("NodeClaim", &format!("spec.resources.{field}")).minimum,
            Some(1.0),
            "{field}"
        );
        assert_eq!(
            schema_at("Infra", &format!("spec.contracts[].resources.{field}")).minimum,
            Some(1.0)
        );
    }
    for (kind, path) in [
        ("Cluster", "spec.account"),
        ("NodeClaim", "spec.ownerDid"),
        ("Infra", "spec.nodes[].ownerDid"),
        ("ComputeContract", "spec.ownerDid"),
        ("Requester", "spec.market.local.bidders[].did"),
    ] {
        assert_eq!(
            schema_at(kind, path).pattern.as_deref(),
            Some(api::names::DID_PATTERN),
            "{kind} {path}"
        );
    }
    for path in [
        "spec.contracts[].name",
        "spec.nodes[].contract",
        "spec.secrets[].contract",
    ] {
        let node = schema_at("Infra", path);
        assert_eq!(
            node.pattern.as_deref(),
            Some(api::names::DNS_LABEL_PATTERN),
            "{path}"
        );
        assert_eq!(node.max_length, Some(63), "{path}");
    }
}

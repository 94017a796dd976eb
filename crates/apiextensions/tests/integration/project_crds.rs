//! The project's own CRDs (deploy/crds) must register here exactly as on a real cluster,
//! and their CEL rules must behave: an immutable field and the "at most one market" rule.

use std::path::PathBuf;

use apiextensions::StructuralSchema;
use serde_json::{Value, json};

fn crds() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("deploy/crds exists") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let crd: Value = serde_yaml::from_str(&text).unwrap();
            out.push((path.display().to_string(), crd));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn schema_of(crd: &Value, version_index: usize) -> &Value {
    &crd["spec"]["versions"][version_index]["schema"]["openAPIV3Schema"]
}

#[test]
fn every_project_crd_version_is_structural() {
    let crds = crds();
    assert!(!crds.is_empty());
    for (file, crd) in &crds {
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        for (i, _) in versions.iter().enumerate() {
            let at = format!("spec.versions[{i}].schema.openAPIV3Schema");
            if let Err(e) = StructuralSchema::from_value_at(schema_of(crd, i), &at) {
                panic!("{file}: {e}");
            }
            let version = &versions[i];
            if version["subresources"].get("status").is_some() {
                let errors =
                    apiextensions::validate_status_subresource_root(schema_of(crd, i), &at);
                assert!(errors.is_empty(), "{file}: {errors:?}");
            }
            for (c, column) in version["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let errors = apiextensions::validate_printer_column(
                    column,
                    &format!("spec.versions[{i}].additionalPrinterColumns[{c}]"),
                );
                assert!(errors.is_empty(), "{file}: {errors:?}");
            }
        }
    }
}

fn schema_named(suffix: &str) -> StructuralSchema {
    let (_, crd) = crds()
        .into_iter()
        .find(|(f, _)| f.ends_with(suffix))
        .expect("crd file");
    StructuralSchema::from_value(schema_of(&crd, 0)).expect("structural")
}

#[test]
fn node_claim_cluster_name_is_immutable() {
    let schema = schema_named("nodeclaims.socialweb.computer.yaml");
    let claim = |cluster: &str| {
        json!({"apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
            "metadata": {"name": "n", "namespace": "t"},
            "spec": {"clusterName": cluster, "location": {"country": "DE"},
                "resources": {"cpus": 1, "disk": 1, "memory": 1, "network": 1}}})
    };
    let mut created = claim("a");
    schema.apply_defaults(&mut created);
    assert!(schema.prune(&mut created).is_empty());
    assert_eq!(created["spec"]["joinGraceSeconds"], json!(900));
    assert!(schema.validate(&created, None).is_empty());
    let mut moved = claim("b");
    schema.apply_defaults(&mut moved);
    let errors: Vec<String> = schema
        .validate(&moved, Some(&created))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        ["spec.clusterName: Invalid value: \"string\": clusterName is immutable"]
    );
}

#[test]
fn requester_market_rule_compiles_and_passes_with_one_market() {
    let schema = schema_named("requesters.socialweb.computer.yaml");
    let mut requester = json!({"spec": {"market": {"local": {"bidders": [
        {"did": "did:web:a", "capacity": 1, "cost": 1, "currency": "EUR"}]}}}});
    schema.apply_defaults(&mut requester);
    assert_eq!(
        requester["spec"]["market"]["local"]["bidders"][0]["bootDelayMillis"],
        json!(2000)
    );
    assert!(schema.validate(&requester, None).is_empty());
    let duplicate = json!({"spec": {"market": {"local": {"bidders": [
        {"did": "did:web:a", "capacity": 1, "cost": 1, "currency": "EUR"},
        {"did": "did:web:a", "capacity": 2, "cost": 1, "currency": "EUR"}]}}}});
    let errors: Vec<String> = schema
        .validate(&duplicate, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        [
            "spec.market.local.bidders[1]: Duplicate value: map[string]interface {}{\"did\":\"did:web:a\"}"
        ]
    );
}

#[test]
fn every_project_crd_but_the_clusters_root_rule_lets_an_update_walk_only_what_changed() {
    for (file, crd) in &crds() {
        let versions = crd["spec"]["versions"].as_array().expect("versions");
        for i in 0..versions.len() {
            let schema = StructuralSchema::from_value(schema_of(crd, i)).unwrap();
            // The Cluster's root rule reads metadata.name, so its writes are walked whole.
            let expected = !file.ends_with("clusters.socialweb.computer.yaml");
            assert_eq!(schema.passes_metadata_only_updates(), expected, "{file}");
            let old = json!({"metadata": {"name": "n"}});
            let mut new = json!({"metadata": {"name": "n", "finalizers": ["f"]}});
            assert_eq!(
                schema.update_pass(&mut new, &old).is_some(),
                expected,
                "{file}"
            );
        }
    }
}

//! The manifests in `examples/` must stay valid: each document parses into the
//! `api` types and passes the generated CRD schemas (defaults, pruning and
//! validation as the API server applies them), so the examples cannot rot when
//! a field is renamed, tightened or dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use api::{Cluster, ComputeContract, Infra, NodeClaim, Requester};
use apiextensions::StructuralSchema;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use serde::Deserialize;
use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every document of every example file, as (file name, document).
fn example_documents() -> Vec<(String, Value)> {
    documents_in(&repo_root().join("examples"))
}

/// The atproto market's example: a subdirectory, so `kubectl apply -f
/// examples/` never starts renting real machines.
fn atproto_documents() -> Vec<(String, Value)> {
    documents_in(&repo_root().join("examples/atproto"))
}

fn documents_in(dir: &Path) -> Vec<(String, Value)> {
    let mut documents = Vec::new();
    for path in yaml_files(dir) {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value =
                Value::deserialize(document).unwrap_or_else(|e| panic!("{name}: not YAML: {e}"));
            if !value.is_null() {
                documents.push((name.clone(), value));
            }
        }
    }
    documents
}

/// The structural schema of each CRD kind in deploy/crds, by kind.
fn crd_schemas() -> BTreeMap<String, StructuralSchema> {
    let mut schemas = BTreeMap::new();
    for path in yaml_files(&repo_root().join("deploy/crds")) {
        let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(
            versions.len(),
            1,
            "{}: one served version expected",
            path.display()
        );
        let schema = StructuralSchema::from_value(&versions[0]["schema"]["openAPIV3Schema"])
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        schemas.insert(kind, schema);
    }
    schemas
}

fn describe(file: &str, document: &Value) -> String {
    format!(
        "{file}: {} {}/{}",
        document["kind"].as_str().unwrap_or("<no kind>"),
        document["metadata"]["namespace"].as_str().unwrap_or(""),
        document["metadata"]["name"].as_str().unwrap_or("<no name>"),
    )
}

/// Parses a document into its `api` type; panics with the serde error otherwise.
fn parse_typed(what: &str, document: &Value) {
    let kind = document["kind"].as_str().unwrap_or_default();
    let result = match kind {
        "Namespace" => serde_json::from_value::<Namespace>(document.clone()).map(drop),
        "Cluster" => serde_json::from_value::<Cluster>(document.clone()).map(drop),
        "NodeClaim" => serde_json::from_value::<NodeClaim>(document.clone()).map(drop),
        "Infra" => serde_json::from_value::<Infra>(document.clone()).map(drop),
        "ComputeContract" => serde_json::from_value::<ComputeContract>(document.clone()).map(drop),
        "Requester" => serde_json::from_value::<Requester>(document.clone()).map(drop),
        "Secret" => serde_json::from_value::<Secret>(document.clone()).map(drop),
        other => panic!("{what}: no example should hold a {other:?}"),
    };
    if let Err(e) = result {
        panic!("{what}: does not parse into the api type: {e}");
    }
}

#[test]
fn every_example_parses_into_the_api_types() {
    let documents = example_documents();
    assert!(
        documents.len() >= 7,
        "examples lost documents: {}",
        documents.len()
    );
    for (file, document) in &documents {
        parse_typed(&describe(file, document), document);
    }
}

/// Checks every custom resource of `documents` against its CRD schema as the
/// API server would; returns how many were checked.
fn check_against_crds(documents: Vec<(String, Value)>) -> usize {
    let schemas = crd_schemas();
    let mut checked = 0;
    for (file, document) in documents {
        let what = describe(&file, &document);
        let api_version = document["apiVersion"].as_str().unwrap_or_default();
        if !api_version.starts_with("socialweb.computer/") {
            continue;
        }
        assert_eq!(api_version, "socialweb.computer/v1alpha1", "{what}");
        let kind = document["kind"].as_str().unwrap();
        let schema = schemas
            .get(kind)
            .unwrap_or_else(|| panic!("{what}: no CRD in deploy/crds for {kind}"));
        let mut object = document.clone();
        schema.apply_defaults(&mut object);
        let pruned = schema.prune(&mut object);
        assert!(
            pruned.is_empty(),
            "{what}: unknown fields the server would drop: {pruned:?}"
        );
        let errors: Vec<String> = schema
            .validate(&object, None)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(errors.is_empty(), "{what}: invalid: {errors:#?}");
        checked += 1;
    }
    checked
}

#[test]
fn every_custom_resource_example_passes_its_crd_schema() {
    let checked = check_against_crds(example_documents());
    assert!(
        checked >= 5,
        "expected a Requester, a Cluster and 3 NodeClaims, checked {checked}"
    );
}

#[test]
fn the_atproto_example_is_a_secret_and_a_valid_requester_that_uses_it() {
    let documents = atproto_documents();
    for (file, document) in &documents {
        parse_typed(&describe(file, document), document);
        assert_eq!(
            document["metadata"]["namespace"],
            api::DEFAULT_CONTRACT_NAMESPACE
        );
    }
    assert_eq!(check_against_crds(documents.clone()), 1);
    let find = |kind: &str| {
        documents
            .iter()
            .map(|(_, d)| d)
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in examples/atproto"))
    };
    let secret = find("Secret");
    let market = &find("Requester")["spec"]["market"]["atproto"];
    for reference in ["appPasswordSecretRef", "signingKeySecretRef"] {
        assert_eq!(market[reference]["name"], secret["metadata"]["name"]);
        let key = market[reference]["key"].as_str().unwrap();
        assert!(
            secret["stringData"].get(key).is_some(),
            "{reference} names key {key}, which the Secret lacks"
        );
    }
}

#[test]
fn examples_are_namespaced_and_consistent() {
    let documents = example_documents();
    let namespaces: Vec<&str> = documents
        .iter()
        .filter(|(_, d)| d["kind"] == "Namespace")
        .map(|(_, d)| d["metadata"]["name"].as_str().unwrap())
        .collect();
    let clusters: Vec<(&str, &str)> = documents
        .iter()
        .filter(|(_, d)| d["kind"] == "Cluster")
        .map(|(_, d)| {
            let m = &d["metadata"];
            (
                m["namespace"].as_str().unwrap(),
                m["name"].as_str().unwrap(),
            )
        })
        .collect();
    let mut claims = 0;
    for (file, document) in &documents {
        let what = describe(file, document);
        if document["kind"] == "Namespace" {
            continue;
        }
        // kubectl apply would otherwise put the object in whatever namespace is current.
        let namespace = document["metadata"]["namespace"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no metadata.namespace"));
        assert!(
            namespaces.contains(&namespace),
            "{what}: namespace not created by an example"
        );
        if document["kind"] == "NodeClaim" {
            let cluster = document["spec"]["clusterName"].as_str().unwrap();
            assert!(
                clusters.contains(&(namespace, cluster)),
                "{what}: names Cluster {namespace}/{cluster}, which no example defines"
            );
            claims += 1;
        }
    }
    assert_eq!(claims, 3, "nodeclaims.yaml holds 3 claims");
    let requesters: Vec<&Value> = documents
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "Requester")
        .collect();
    assert_eq!(requesters.len(), 1);
    assert_eq!(
        requesters[0]["metadata"]["namespace"],
        api::DEFAULT_CONTRACT_NAMESPACE
    );
    let bidders = requesters[0]["spec"]["market"]["local"]["bidders"]
        .as_array()
        .unwrap();
    assert_eq!(bidders.len(), 3, "a local market of 3 bidders");
}

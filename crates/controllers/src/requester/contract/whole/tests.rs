//! A contract is cached with its labels and annotations beside its metadata,
//! and writes back as the contract it came from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL, RECEIPT_ANNOTATION};
use serde_json::{Value, json};

use super::*;
use crate::cache::decode::Decoded;
use kube::Resource;

/// A Deployed contract with its receipt annotated (the status holds none), as the server sends it.
pub(crate) fn contract_json() -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "ComputeContract",
        "metadata": {
            "name": "nodes-a-node-1", "namespace": "socialweb-system", "uid": "u1",
            "resourceVersion": "59", "generation": 1,
            "creationTimestamp": "2026-12-05T04:26:41Z",
            "finalizers": ["requester.socialweb.computer/release"],
            "labels": {CONTRACT_LABEL: "node-1", INFRA_NAME_LABEL: "nodes-a"},
            "annotations": {RECEIPT_ANNOTATION: "{\"uri\":\"local://guests/g-1\",\"cid\":\"sha256:00\"}"},
            "ownerReferences": [{"apiVersion": "socialweb.computer/v1alpha1", "kind": "Infra",
                                 "name": "nodes-a", "uid": "u0", "controller": true}],
        },
        "spec": {
            "ownerDid": "did:plc:a", "role": "Worker", "release": false,
            "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 1000},
            "secretsRef": {"name": "join-node-1"}, "location": {"country": "DE"},
        },
        "status": {"phase": "Deployed", "message": "on the network"},
    })
}

fn cached(value: Value) -> WholeContract {
    match serde_json::from_value::<Decoded<WholeContract>>(value).unwrap() {
        Decoded::Object(contract) => contract,
        Decoded::Undecodable(bad) => panic!("a readable contract decodes: {bad:?}"),
    }
}

#[test]
fn labels_and_annotations_are_kept_beside_the_metadata() {
    let contract = cached(contract_json());
    assert_eq!(contract.label(CONTRACT_LABEL), Some("node-1"));
    assert_eq!(contract.label(INFRA_NAME_LABEL), Some("nodes-a"));
    assert_eq!(contract.annotated_receipt(), Some(receipt("g-1")));
    assert!(
        !contract.receipt_annotated,
        "the status holds no receipt: the annotation is kept as written"
    );
    assert_eq!(contract.metadata.labels, None);
    assert_eq!(contract.metadata.annotations, None);
    assert_eq!(
        contract.metadata.creation_timestamp, None,
        "nothing reads it"
    );
    assert_eq!(contract.metadata.uid.as_deref(), Some("u1"));
    assert_eq!(
        contract.metadata.owner_references.as_ref().unwrap().len(),
        1
    );
    assert_eq!(
        contract.status().and_then(|s| s.message.as_deref()),
        Some("on the network")
    );
}

#[test]
fn it_writes_back_as_the_contract_it_came_from() {
    let mut expected = contract_json();
    expected["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    let whole: ComputeContract = serde_json::from_value(expected).unwrap();
    let contract = cached(contract_json());
    assert_eq!(
        serde_json::to_value(ComputeContract::from(contract.clone())).unwrap(),
        serde_json::to_value(&whole).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&contract).unwrap(),
        serde_json::to_value(&whole).unwrap()
    );
    // Cached again from its own JSON (a write's answer), it is the same.
    assert_eq!(cached(serde_json::to_value(&contract).unwrap()), contract);
}

fn receipt(guest: &str) -> Receipt {
    Receipt {
        uri: format!("local://guests/{guest}"),
        cid: "sha256:00".to_owned(),
    }
}

/// The contract with `status.receipt` of guest `guest`.
fn with_status_receipt(guest: &str) -> Value {
    let mut value = contract_json();
    value["status"]["receipt"] = serde_json::to_value(receipt(guest)).unwrap();
    value
}

#[test]
fn a_receipt_annotation_that_is_the_status_receipt_is_not_kept_twice() {
    let value = with_status_receipt("g-1");
    let contract = cached(value.clone());
    assert!(contract.receipt_annotated);
    assert!(contract.annotations.is_empty(), "its text is not kept");
    assert_eq!(contract.annotated_receipt(), Some(receipt("g-1")));
    // It writes back as it came, the annotation's text included.
    let mut expected = value;
    expected["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    let whole: ComputeContract = serde_json::from_value(expected).unwrap();
    assert_eq!(
        serde_json::to_value(&contract).unwrap(),
        serde_json::to_value(&whole).unwrap()
    );
    assert_eq!(cached(serde_json::to_value(&contract).unwrap()), contract);
}

#[test]
fn a_receipt_annotation_that_differs_from_the_status_is_kept_as_written() {
    // Another receipt, and the same one written by someone else's hand.
    for annotation in [
        "{\"uri\":\"local://guests/g-1\",\"cid\":\"sha256:00\"}",
        "{\"cid\":\"sha256:00\",\"uri\":\"local://guests/g-2\"}",
    ] {
        let mut value = with_status_receipt("g-2");
        value["metadata"]["annotations"][RECEIPT_ANNOTATION] = annotation.into();
        let contract = cached(value);
        assert!(!contract.receipt_annotated, "{annotation}");
        let written = serde_json::to_value(&contract).unwrap();
        assert_eq!(
            written["metadata"]["annotations"][RECEIPT_ANNOTATION],
            annotation
        );
    }
    let mut value = with_status_receipt("g-2");
    value["metadata"]["annotations"][RECEIPT_ANNOTATION] =
        "{\"uri\":\"local://guests/g-1\",\"cid\":\"sha256:00\"}".into();
    assert_eq!(
        cached(value).annotated_receipt(),
        Some(receipt("g-1")),
        "the annotation's receipt, not the status's"
    );
}

#[test]
fn a_contract_without_labels_or_annotations_has_none_written_back() {
    let mut bare = contract_json();
    let meta = bare["metadata"].as_object_mut().unwrap();
    meta.remove("labels");
    meta.remove("annotations");
    let contract = cached(bare);
    assert!(contract.labels.is_empty() && contract.annotations.is_empty());
    let written = serde_json::to_value(&contract).unwrap();
    assert_eq!(written["metadata"].get("labels"), None);
    assert_eq!(written["metadata"].get("annotations"), None);
}

#[test]
fn it_is_watched_and_written_as_a_compute_contract() {
    assert_eq!(WholeContract::kind(&()), "ComputeContract");
    assert_eq!(
        WholeContract::api_version(&()),
        ComputeContract::api_version(&())
    );
    assert_eq!(
        WholeContract::url_path(&(), Some("ns")),
        ComputeContract::url_path(&(), Some("ns"))
    );
}

#[test]
fn equal_condition_messages_share_one_allocation_and_write_back_unchanged() {
    let mut value = contract_json();
    let condition = |type_: &str, message: &str| {
        json!({"type": type_, "status": "True", "reason": "Deployed", "message": message,
               "lastTransitionTime": "2026-12-05T04:26:47Z", "observedGeneration": 1})
    };
    value["status"]["conditions"] = json!([
        condition("Accepted", "the bid of did:web:a was accepted"),
        condition("Ready", "on the network"),
        condition("Bidding", "the bid of did:web:a was accepted"),
        condition("Deployed", "on the network"),
    ]);
    let contract = cached(value.clone());
    let status = contract.status().unwrap();
    let [accepted, ready, bidding, deployed] = &status.conditions[..] else {
        panic!("four conditions");
    };
    assert!(bidding.message.shares(&accepted.message));
    assert!(deployed.message.shares(&ready.message));
    assert!(status.message.as_ref().unwrap().shares(&ready.message));
    let mut expected: ComputeContract = serde_json::from_value(value).unwrap();
    expected.metadata.creation_timestamp = None;
    assert_eq!(
        serde_json::to_value(&contract).unwrap(),
        serde_json::to_value(&expected).unwrap()
    );
}

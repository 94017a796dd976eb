//! The attestation CIDs and signatures of a recorded run of the reference
//! market (`tests/data/market-records-example.json`), reproduced byte for byte.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use atproto::{attest, data};
use serde_json::Value;

fn records() -> Vec<Value> {
    let text = include_str!("data/market-records-example.json");
    serde_json::from_str::<Vec<Value>>(text).unwrap()
}

fn signed(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["value"].get("signatures").is_some())
        .collect()
}

fn find<'a>(records: &'a [Value], collection_suffix: &str) -> &'a Value {
    records
        .iter()
        .find(|r| {
            r["collection"]
                .as_str()
                .unwrap()
                .ends_with(collection_suffix)
        })
        .unwrap()
}

#[test]
fn every_signed_record_reproduces_its_attestation_cid() {
    let records = records();
    let signed = signed(&records);
    assert_eq!(signed.len(), 4, "rfp, accept, bid, receipt");
    for record in signed {
        let repository = record["did"].as_str().unwrap();
        for entry in record["value"]["signatures"].as_array().unwrap() {
            let cid = attest::attestation_cid(&record["value"], entry, repository).unwrap();
            assert_eq!(
                cid.to_string(),
                entry["cid"].as_str().unwrap(),
                "{}",
                record["uri"]
            );
        }
    }
}

#[test]
fn every_signature_verifies_with_its_did_key() {
    let records = records();
    for record in signed(&records) {
        let repository = record["did"].as_str().unwrap();
        let verified = attest::verify_record(&record["value"], repository).unwrap();
        assert_eq!(verified.len(), 1, "{}", record["uri"]);
    }
}

#[test]
fn a_tampered_record_or_signature_fails() {
    let records = records();
    let rfp = find(&records, "market.rfp");
    let repository = rfp["did"].as_str().unwrap();
    let mut changed = rfp["value"].clone();
    changed["createdAt"] = Value::from("2026-07-08T05:50:24.476Z");
    assert!(attest::verify_record(&changed, repository).is_err());
    // The cid is right but the signature is another record's.
    let accept = find(&records, "market.accept");
    let mut swapped = rfp["value"].clone();
    swapped["signatures"][0]["signature"] = accept["value"]["signatures"][0]["signature"].clone();
    let err = attest::verify_record(&swapped, repository).unwrap_err();
    assert!(err.to_string().contains("does not verify"), "{err}");
}

#[test]
fn the_receipt_binds_our_accept() {
    let records = records();
    let accept = find(&records, "market.accept");
    let receipt = find(&records, "market.receipt");
    let requester = accept["did"].as_str().unwrap();
    attest::verify_receipt_binding(&accept["value"], &receipt["value"], requester).unwrap();
    let mut other_accept = accept["value"].clone();
    other_accept["createdAt"] = Value::from("2026-07-08T05:50:39.502Z");
    assert!(attest::verify_receipt_binding(&other_accept, &receipt["value"], requester).is_err());
}

/// The record CIDs the reference PDS published: it hashes `{$bytes}` as a map,
/// so the signed records need the plain-JSON encoding and only the unsigned
/// ones agree with a standard PDS. Either way our DAG-CBOR matches.
#[test]
fn record_cids_match_the_reference_pds() {
    for record in records() {
        let value = &record["value"];
        let published = record["cid"].as_str().unwrap();
        assert_eq!(
            data::record_cid_plain_json(value).unwrap().to_string(),
            published,
            "{}",
            record["uri"]
        );
        let standard = data::record_cid(value).unwrap().to_string();
        assert_eq!(
            standard == published,
            value.get("signatures").is_none(),
            "{}",
            record["uri"]
        );
    }
}

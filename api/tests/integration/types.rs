//! Wire shape of the kinds: camelCase fields, PascalCase enums, and the
//! defaults a user gets when leaving a field out.

use api::{
    AtprotoTimeouts, ComputeContractPhase, ComputeContractSpec, InfraSpec, MarketKind, NodeClaim,
    NodeClaimPhase, NodeClaimSpec, NodeClaimStatus, RequesterSpec, Role, SigningKeyAlgorithm,
};
use kube::Resource;
use serde_json::json;

#[test]
fn nodeclaim_defaults_the_graces() {
    let spec: NodeClaimSpec = serde_json::from_value(json!({
        "clusterName": "c1",
        "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 100},
        "location": {"country": "DE"}
    }))
    .unwrap();
    assert_eq!(spec.join_grace_seconds, 900);
    assert_eq!(spec.loss_grace_seconds, 300);
    assert_eq!(spec.owner_did, None);
}

#[test]
fn compute_contract_defaults_ttl_role_and_release() {
    let spec: ComputeContractSpec = serde_json::from_value(json!({
        "resources": {"cpus": 1, "memory": 1, "disk": 1, "network": 1},
        "location": {"country": "FR", "region": "IDF"}
    }))
    .unwrap();
    assert_eq!(spec.ttl_seconds_after_finished, 691_200);
    assert_eq!(spec.role, Role::Worker);
    assert!(!spec.release);
}

#[test]
fn requester_defaults_and_market_kind() {
    let spec: RequesterSpec = serde_json::from_value(json!({
        "market": {"local": {"bidders": [{"did": "did:web:a.example", "cost": 120, "currency": "EUR", "capacity": 3}]}}
    }))
    .unwrap();
    assert_eq!(spec.bid_window_seconds, 5);
    assert_eq!(spec.max_in_flight, 10);
    let local = spec.market.local.as_ref().unwrap();
    assert_eq!(local.seed, 0);
    assert_eq!(local.bidders[0].boot_delay_millis, 2000);
    assert_eq!(local.bidders[0].failure_rate, 0);
    assert_eq!(spec.market.kind(), Some(MarketKind::Local));
}

#[test]
fn an_atproto_market_gets_its_defaults_and_kind() {
    let spec: RequesterSpec = serde_json::from_value(json!({
        "market": {"atproto": {
            "pdsUrl": "https://pds.example.org",
            "account": "did:plc:ewvi7nxzyoun6zhxrhs64oiz",
            "appPasswordSecretRef": {"name": "atproto", "key": "app-password"},
            "signingKeySecretRef": {"name": "atproto", "key": "signing-key"},
            "relayUrl": "https://relay.example.org",
            "publicUrl": "https://market.example.org",
        }}
    }))
    .unwrap();
    assert_eq!(spec.market.kind(), Some(MarketKind::Atproto));
    let atproto = spec.market.atproto.as_ref().unwrap();
    assert_eq!(atproto.plc_url, "https://plc.directory");
    assert_eq!(
        atproto.signing_key_algorithm,
        SigningKeyAlgorithm::Secp256k1
    );
    assert_eq!(atproto.timeouts, AtprotoTimeouts::default());
    assert_eq!(atproto.timeouts.request_seconds, 10);
    assert!(atproto.bidders.is_empty());
    // What the API server stores names the Secrets' keys, never their content.
    let stored = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        stored["market"]["atproto"]["appPasswordSecretRef"],
        json!({"name": "atproto", "key": "app-password"})
    );
    assert_eq!(
        stored["market"]["atproto"]["signingKeyAlgorithm"],
        "Secp256k1"
    );
}

#[test]
fn enums_and_fields_use_kubernetes_casing() {
    let status = NodeClaimStatus {
        phase: Some(NodeClaimPhase::Joined),
        observed_generation: Some(2),
        ..NodeClaimStatus::default()
    };
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!({"phase": "Joined", "observedGeneration": 2})
    );
    assert_eq!(
        serde_json::to_value(Role::ControlPlane).unwrap(),
        json!("ControlPlane")
    );
    assert!(ComputeContractPhase::Released.is_finished());
    assert!(!ComputeContractPhase::Deployed.is_finished());
}

#[test]
fn empty_infra_spec_serializes_to_empty_object() {
    // Server-side apply of an empty spec must not claim fields it does not set.
    let spec: InfraSpec = serde_json::from_value(json!({})).unwrap();
    assert_eq!(serde_json::to_value(&spec).unwrap(), json!({}));
}

#[test]
fn kinds_live_in_the_group() {
    assert_eq!(NodeClaim::group(&()), api::GROUP);
    assert_eq!(NodeClaim::version(&()), api::VERSION);
    assert_eq!(NodeClaim::plural(&()), "nodeclaims");
    assert_eq!(api::Infra::plural(&()), "infras");
}

#[test]
fn an_atproto_record_defaults_to_our_collection_and_delete() {
    let spec: api::AtprotoRecordSpec = serde_json::from_value(json!({
        "infraName": "nodes-2b726ab7ba6f76600839",
        "rkey": "4yac5gdjkcf36"
    }))
    .unwrap();
    assert_eq!(spec.collection, "computer.socialweb.infra.declaration");
    assert_eq!(spec.deletion_policy, api::DeletionPolicy::Delete);
    let orphan: api::DeletionPolicy = serde_json::from_value(json!("Orphan")).unwrap();
    assert_eq!(orphan, api::DeletionPolicy::Orphan);
    assert_eq!(api::AtprotoRecord::kind(&()), "AtprotoRecord");
    assert_eq!(api::AtprotoRecord::plural(&()), "atprotorecords");
}

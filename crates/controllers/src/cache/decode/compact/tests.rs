//! A join Secret is cached with its token and the digest of its data; other
//! objects are left as they came.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use super::*;
use crate::cache::decode::Decoded;

fn secret_json(type_: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "join-e1", "namespace": "ns", "resourceVersion": "3",
                     "labels": {api::names::CONTRACT_LABEL: "e1"}},
        "type": type_,
        // "token-1", "https://c1:6443", "LS0t", "worker-1"
        "data": {"token": "dG9rZW4tMQ==", "apiServer": "aHR0cHM6Ly9jMTo2NDQz",
                 "caData": "TFMwdA==", "nodeName": "d29ya2VyLTE="},
    })
}

fn cached(value: Value) -> Secret {
    match serde_json::from_value::<Decoded<Secret>>(value).unwrap() {
        Decoded::Object(secret) => secret,
        Decoded::Undecodable(bad) => panic!("a readable Secret decodes: {bad:?}"),
    }
}

#[test]
fn a_join_secret_is_cached_with_its_token_and_the_digest_of_its_data() {
    let whole: Secret = serde_json::from_value(secret_json(JOIN_SECRET_TYPE)).unwrap();
    let secret = cached(secret_json(JOIN_SECRET_TYPE));
    let data = secret.data.as_ref().unwrap();
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(keys, [DATA_DIGEST_KEY, TOKEN_KEY]);
    assert_eq!(data[TOKEN_KEY].0, b"token-1");
    assert_eq!(data_digest_of(&secret), data_digest_of(&whole));
    assert_eq!(data_digest_of(&secret).0.len(), 32);
    assert_eq!(secret.metadata, whole.metadata, "the metadata are kept");
    // Cached twice (a re-list of the store's own copy) it stays the same.
    assert_eq!(cached(serde_json::to_value(&secret).unwrap()), secret);
}

#[test]
fn the_digest_changes_with_any_key_or_value() {
    let whole: Secret = serde_json::from_value(secret_json(JOIN_SECRET_TYPE)).unwrap();
    let digest = data_digest_of(&whole);
    for key in ["token", "apiServer", "caData", "nodeName"] {
        let mut changed = secret_json(JOIN_SECRET_TYPE);
        changed["data"][key] = json!("eA==");
        assert_ne!(data_digest_of(&cached(changed)), digest, "{key} changed");
        let mut without = secret_json(JOIN_SECRET_TYPE);
        without["data"].as_object_mut().unwrap().remove(key);
        assert_ne!(data_digest_of(&cached(without)), digest, "{key} removed");
    }
    // Lengths are hashed: moving a byte from a key's value to the next key differs.
    let a = BTreeMap::from([
        ("a".to_owned(), ByteString(b"bc".to_vec())),
        ("d".to_owned(), ByteString(vec![])),
    ]);
    let b = BTreeMap::from([
        ("a".to_owned(), ByteString(b"b".to_vec())),
        ("cd".to_owned(), ByteString(vec![])),
    ]);
    assert_ne!(data_digest(&a), data_digest(&b));
}

#[test]
fn other_secrets_are_cached_whole() {
    let whole: Secret = serde_json::from_value(secret_json("Opaque")).unwrap();
    assert_eq!(cached(secret_json("Opaque")), whole);
}

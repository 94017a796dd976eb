//! A join Secret is watched and kept with its labels, token and the digest of its data.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;
use crate::cache::Labelled;
use crate::cache::decode::Decoded;
use kube::Resource;

fn secret_json(type_: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "join-e1", "namespace": "ns", "resourceVersion": "3", "uid": "u1",
                     "creationTimestamp": "2026-12-05T04:26:41Z",
                     "annotations": {"note": "kept by nobody"},
                     "labels": {api::names::CONTRACT_LABEL: "e1", api::names::INFRA_NAME_LABEL: "nodes-a"}},
        "type": type_,
        // "token-1", "https://c1:6443", "LS0t", "worker-1"
        "data": {"token": "dG9rZW4tMQ==", "apiServer": "aHR0cHM6Ly9jMTo2NDQz",
                 "caData": "TFMwdA==", "nodeName": "d29ya2VyLTE="},
    })
}

fn cached(value: Value) -> WatchedJoinSecret {
    match serde_json::from_value::<Decoded<WatchedJoinSecret>>(value).unwrap() {
        Decoded::Object(secret) => secret,
        Decoded::Undecodable(bad) => panic!("a readable Secret decodes: {bad:?}"),
    }
}

#[test]
fn a_join_secret_is_cached_with_its_labels_token_and_the_digest_of_its_data() {
    let whole: Secret = serde_json::from_value(secret_json(JOIN_SECRET_TYPE)).unwrap();
    let secret = cached(secret_json(JOIN_SECRET_TYPE));
    assert!(secret.is_join_type);
    assert_eq!(secret.token.as_deref(), Some("token-1"));
    assert_eq!(
        secret.data_digest,
        data_digest(whole.data.as_ref().unwrap())
    );
    assert_eq!(secret.label(api::names::CONTRACT_LABEL), Some("e1"));
    assert_eq!(secret.label(api::names::INFRA_NAME_LABEL), Some("nodes-a"));
    assert_eq!(
        BTreeMap::from(secret.labels.clone()),
        whole.metadata.labels.clone().unwrap()
    );
    // The metadata a reconcile reads (or a delete's preconditions) are kept.
    let meta = &secret.metadata;
    assert_eq!(meta.name.as_deref(), Some("join-e1"));
    assert_eq!(meta.namespace.as_deref(), Some("ns"));
    assert_eq!(meta.uid.as_deref(), Some("u1"));
    assert_eq!(meta.resource_version.as_deref(), Some("3"));
    assert_eq!(meta.labels, None, "labels are held once, in `labels`");
    assert_eq!(meta.annotations, None);
    assert_eq!(meta.creation_timestamp, None);
}

#[test]
fn the_kept_form_gives_back_the_watched_secret_unchanged() {
    let watched = cached(secret_json(JOIN_SECRET_TYPE));
    let kept = CachedJoinSecret::kept(watched.clone(), Some(Arc::from("ns")));
    assert_eq!(kept.name(), "join-e1");
    assert_eq!(kept.uid().as_deref(), Some("u1"));
    assert_eq!(kept.label(api::names::INFRA_NAME_LABEL), Some("nodes-a"));
    assert_eq!(WatchedJoinSecret::from(&kept), watched);
    let seen = kept.seen();
    assert_eq!(
        (seen.namespace.as_str(), seen.name.as_str()),
        ("ns", "join-e1")
    );
    assert_eq!(seen.uid.as_deref(), Some("u1"));
    assert_eq!(seen.resource_version.as_deref(), Some("3"));
    let whole: Secret = serde_json::from_value(secret_json(JOIN_SECRET_TYPE)).unwrap();
    assert_eq!(CachedJoinSecret::from(whole), kept);
    // A uid as the API server makes them is kept as 16 bytes, and given back.
    let mut json = secret_json(JOIN_SECRET_TYPE);
    let uuid = "e3a3d8b5-01a8-45d3-8db1-e81e90452c6d";
    json["metadata"]["uid"] = uuid.into();
    let watched = cached(json);
    let kept = CachedJoinSecret::kept(watched.clone(), Some(Arc::from("ns")));
    assert!(matches!(
        kept.uid,
        Some(crate::cache::uid::KeptUid::Uuid(_))
    ));
    assert_eq!(kept.uid().as_deref(), Some(uuid));
    assert_eq!(WatchedJoinSecret::from(&kept), watched);
}

#[test]
fn another_type_and_a_missing_or_binary_token_are_told_apart() {
    assert!(!cached(secret_json("Opaque")).is_join_type);
    let mut without = secret_json(JOIN_SECRET_TYPE);
    without["data"].as_object_mut().unwrap().remove("token");
    assert_eq!(cached(without).token, None);
    let mut binary = secret_json(JOIN_SECRET_TYPE);
    binary["data"]["token"] = json!("/w=="); // 0xff: not UTF-8
    assert_eq!(cached(binary).token, None);
    let mut no_data = secret_json(JOIN_SECRET_TYPE);
    no_data.as_object_mut().unwrap().remove("data");
    assert_eq!(cached(no_data).data_digest, data_digest(&BTreeMap::new()));
}

#[test]
fn the_digest_changes_with_any_key_or_value() {
    let digest = cached(secret_json(JOIN_SECRET_TYPE)).data_digest;
    for key in ["token", "apiServer", "caData", "nodeName"] {
        let mut changed = secret_json(JOIN_SECRET_TYPE);
        changed["data"][key] = json!("eA==");
        assert_ne!(cached(changed).data_digest, digest, "{key} changed");
        let mut without = secret_json(JOIN_SECRET_TYPE);
        without["data"].as_object_mut().unwrap().remove(key);
        assert_ne!(cached(without).data_digest, digest, "{key} removed");
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
fn its_debug_never_shows_the_token() {
    let watched = cached(secret_json(JOIN_SECRET_TYPE));
    let kept = CachedJoinSecret::kept(watched.clone(), None);
    for shown in [format!("{watched:?}"), format!("{kept:?}")] {
        assert!(!shown.contains("token-1"), "{shown}");
        assert!(shown.contains("has_token: true"), "{shown}");
    }
}

#[test]
fn it_is_watched_as_a_secret() {
    assert_eq!(WatchedJoinSecret::kind(&()), "Secret");
    assert_eq!(WatchedJoinSecret::api_version(&()), "v1");
    assert_eq!(
        WatchedJoinSecret::url_path(&(), Some("ns")),
        Secret::url_path(&(), Some("ns"))
    );
}

use std::collections::BTreeMap;

use base64::Engine;
use proptest::prelude::*;
use serde_json::json;

use super::*;

/// A minimal encoder, the inverse of the decoder's wire reading.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn bytes_field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn varint_field(number: u64, value: u64, out: &mut Vec<u8>) {
    varint(number << 3, out);
    varint(value, out);
}

fn entry(key: &str, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(1, key.as_bytes(), &mut out);
    bytes_field(2, value, &mut out);
    out
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    bytes_field(1, api_version.as_bytes(), &mut type_meta);
    bytes_field(2, kind.as_bytes(), &mut type_meta);
    let mut out = b"k8s\0".to_vec();
    bytes_field(1, &type_meta, &mut out);
    bytes_field(2, raw, &mut out);
    bytes_field(3, b"", &mut out);
    bytes_field(4, b"", &mut out);
    out
}

/// ObjectMeta the way gogo-protobuf writes it: every non-pointer field, empty or not.
fn meta(name: &str, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(1, name.as_bytes(), &mut out);
    bytes_field(2, b"", &mut out);
    bytes_field(3, namespace.as_bytes(), &mut out);
    bytes_field(4, b"", &mut out);
    bytes_field(5, b"", &mut out);
    bytes_field(6, b"", &mut out);
    varint_field(7, 0, &mut out);
    bytes_field(8, b"", &mut out);
    for (key, value) in labels {
        bytes_field(11, &entry(key, value.as_bytes()), &mut out);
    }
    out
}

#[test]
fn decodes_the_release_secret_helm_4_creates() {
    let body = include_bytes!("../../tests/fixtures/protobuf/helm-release-secret-create.bin");
    let secret = decode_object(body).unwrap();
    assert_eq!(secret["apiVersion"], "v1");
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["type"], "helm.sh/release.v1");
    let metadata = secret["metadata"].as_object().unwrap();
    assert_eq!(metadata["name"], "sh.helm.release.v1.small2.v1");
    // Empty strings and the zero time are absent, as in the JSON the same client would send.
    for absent in [
        "namespace",
        "generateName",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
    ] {
        assert!(
            !metadata.contains_key(absent),
            "{absent} should be absent: {metadata:?}"
        );
    }
    assert_eq!(
        metadata["labels"],
        json!({"createdAt": "1796210499", "name": "small2", "owner": "helm",
            "status": "pending-install", "version": "1"})
    );
    // data values are base64 in JSON; Helm's release payload is itself base64 of gzip.
    let release = secret["data"]["release"].as_str().unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(release)
        .unwrap();
    assert!(payload.starts_with(b"H4sI"), "gzip, base64-encoded by Helm");
}

#[test]
fn decodes_delete_options_with_pointer_fields_only_when_present() {
    let mut preconditions = Vec::new();
    bytes_field(1, b"uid-1", &mut preconditions);
    let mut raw = Vec::new();
    varint_field(1, 0, &mut raw);
    bytes_field(2, &preconditions, &mut raw);
    bytes_field(4, b"Background", &mut raw);
    bytes_field(5, b"All", &mut raw);
    let options = decode_object(&envelope("v1", "DeleteOptions", &raw)).unwrap();
    assert_eq!(
        options,
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": {"uid": "uid-1"}, "propagationPolicy": "Background", "dryRun": ["All"]})
    );
    let empty = decode_object(&envelope("meta.k8s.io/v1", "DeleteOptions", &[])).unwrap();
    assert_eq!(
        empty,
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"})
    );
}

#[test]
fn decodes_namespace_config_map_and_service_account() {
    let mut spec = Vec::new();
    bytes_field(1, b"kubernetes", &mut spec);
    let mut raw = Vec::new();
    bytes_field(1, &meta("tenant-a", "", &BTreeMap::new()), &mut raw);
    bytes_field(2, &spec, &mut raw);
    assert_eq!(
        decode_object(&envelope("v1", "Namespace", &raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"},
            "spec": {"finalizers": ["kubernetes"]}})
    );

    let mut raw = Vec::new();
    bytes_field(1, &meta("cm", "default", &BTreeMap::new()), &mut raw);
    bytes_field(2, &entry("a", b"text"), &mut raw);
    bytes_field(3, &entry("b", &[0, 255]), &mut raw);
    varint_field(4, 1, &mut raw);
    assert_eq!(
        decode_object(&envelope("v1", "ConfigMap", &raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"},
            "data": {"a": "text"}, "binaryData": {"b": "AP8="}, "immutable": true})
    );

    let mut pull = Vec::new();
    bytes_field(1, b"registry", &mut pull);
    let mut raw = Vec::new();
    bytes_field(1, &meta("sa", "default", &BTreeMap::new()), &mut raw);
    bytes_field(3, &pull, &mut raw);
    varint_field(4, 0, &mut raw);
    assert_eq!(
        decode_object(&envelope("v1", "ServiceAccount", &raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "sa", "namespace": "default"},
            "imagePullSecrets": [{"name": "registry"}], "automountServiceAccountToken": false})
    );
}

#[test]
fn decodes_owner_references_finalizers_and_times() {
    let mut owner = Vec::new();
    bytes_field(1, b"Deployment", &mut owner);
    bytes_field(3, b"web", &mut owner);
    bytes_field(4, b"uid-9", &mut owner);
    bytes_field(5, b"apps/v1", &mut owner);
    varint_field(6, 1, &mut owner);
    let mut time = Vec::new();
    varint_field(1, 1_700_000_000, &mut time);
    let mut metadata = meta("s", "default", &BTreeMap::new());
    bytes_field(9, &time, &mut metadata);
    bytes_field(13, &owner, &mut metadata);
    bytes_field(14, b"example.com/keep", &mut metadata);
    let mut raw = Vec::new();
    bytes_field(1, &metadata, &mut raw);
    let secret = decode_object(&envelope("v1", "Secret", &raw)).unwrap();
    assert_eq!(
        secret["metadata"],
        json!({"name": "s", "namespace": "default",
            "deletionTimestamp": "2023-11-14T22:13:20Z",
            "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "uid-9",
                "apiVersion": "apps/v1", "controller": true}],
            "finalizers": ["example.com/keep"]})
    );
}

#[test]
fn refuses_what_it_cannot_decode() {
    assert_eq!(
        decode_object(b"{\"kind\":\"Secret\"}"),
        Err(ProtobufError::NoMagic)
    );
    let body = envelope("socialweb.computer/v1alpha1", "Cluster", &[]);
    assert_eq!(
        decode_object(&body),
        Err(ProtobufError::UnsupportedKind {
            api_version: "socialweb.computer/v1alpha1".into(),
            kind: "Cluster".into()
        })
    );
    let whole = envelope("v1", "Secret", &meta("s", "default", &BTreeMap::new()));
    for cut in [5, whole.len() / 2, whole.len() - 1] {
        assert!(
            decode_object(&whole[..cut]).is_err(),
            "cut at {cut} must fail"
        );
    }
    let mut bad_string = Vec::new();
    bytes_field(1, &[0xff, 0xfe], &mut bad_string);
    let mut raw = Vec::new();
    bytes_field(1, &bad_string, &mut raw);
    assert_eq!(
        decode_object(&envelope("v1", "Secret", &raw)),
        Err(ProtobufError::NotUtf8(1))
    );
}

proptest! {
    /// Whatever labels and bytes a Secret carries, they come out as the JSON a client would send.
    #[test]
    fn secret_labels_and_data_survive(
        labels in proptest::collection::btree_map("[a-z][a-z0-9./-]{0,20}", "[a-zA-Z0-9._-]{0,20}", 0..5),
        data in proptest::collection::btree_map("[a-zA-Z0-9._-]{1,20}", proptest::collection::vec(any::<u8>(), 0..64), 0..5),
        name in "[a-z][a-z0-9-]{0,30}",
    ) {
        let mut raw = Vec::new();
        bytes_field(1, &meta(&name, "default", &labels), &mut raw);
        for (key, value) in &data {
            bytes_field(2, &entry(key, value), &mut raw);
        }
        bytes_field(3, b"Opaque", &mut raw);
        let secret = decode_object(&envelope("v1", "Secret", &raw)).unwrap();
        prop_assert_eq!(&secret["metadata"]["name"], &json!(name));
        let expected_labels: serde_json::Map<String, Value> =
            labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        if labels.is_empty() {
            prop_assert!(secret["metadata"].get("labels").is_none());
        } else {
            prop_assert_eq!(&secret["metadata"]["labels"], &Value::Object(expected_labels));
        }
        for (key, value) in &data {
            let encoded = secret["data"][key].as_str().unwrap();
            prop_assert_eq!(base64::engine::general_purpose::STANDARD.decode(encoded).unwrap(), value.clone());
        }
        prop_assert_eq!(&secret["type"], &json!("Opaque"));
    }
}

//! Protobuf request bodies (issue 15, item 3): every kind discovery lists accepts the
//! encoding client-go's typed clients send.

use apiserver::testing::TestServer;

use crate::kit::{JSON, call_with, get};

/// Protobuf wire encoding, just enough for an envelope around a metadata-only object.
fn protobuf_field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
    let mut varint = |mut value: u64| loop {
        let byte = u8::try_from(value & 0x7f).unwrap();
        value >>= 7;
        if value == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    };
    varint((number << 3) | 2);
    varint(bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The resources discovery lists with the verb `create`: (apiVersion, kind, collection path).
async fn creatable(server: &TestServer) -> Vec<(String, String, String)> {
    let mut versions = vec!["/api/v1".to_string()];
    let groups = get(server, "/apis").await;
    for group in groups.ok(200)["groups"].as_array().unwrap() {
        versions.push(format!(
            "/apis/{}",
            group["preferredVersion"]["groupVersion"].as_str().unwrap()
        ));
    }
    let mut out = Vec::new();
    for version in versions {
        let list = get(server, &version).await;
        let api_version = list.ok(200)["groupVersion"].as_str().unwrap().to_string();
        for resource in list.body["resources"].as_array().unwrap() {
            let plural = resource["name"].as_str().unwrap();
            let creates = resource["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v == "create");
            if plural.contains('/') || !creates {
                continue;
            }
            let namespace = if resource["namespaced"] == true {
                "/namespaces/default"
            } else {
                ""
            };
            out.push((
                api_version.clone(),
                resource["kind"].as_str().unwrap().to_string(),
                format!("{version}{namespace}/{plural}"),
            ));
        }
    }
    out
}

/// Upstream: every built-in kind is registered with the protobuf serializer
/// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf; kube-apiserver's codec factory
/// accepts `application/vnd.kubernetes.protobuf` for every built-in resource), which
/// client-go's typed clients send (`kubectl create deployment|role|rolebinding|clusterrole|
/// clusterrolebinding|service|poddisruptionbudget`, Helm 4). A body is the `k8s\0` magic and
/// a `runtime.Unknown` (typeMeta, raw); the raw object's field 1 is always its ObjectMeta.
#[tokio::test]
async fn r4_12_protobuf_bodies_of_every_built_in_kind_are_accepted() {
    let server = TestServer::start().await.unwrap();
    let kinds = creatable(&server).await;
    assert!(kinds.len() >= 20, "{kinds:?}");
    let mut created = Vec::new();
    for (i, (api_version, kind, collection)) in kinds.iter().enumerate() {
        // core/v1 and events.k8s.io/v1 Events are the same objects: one name each.
        let name = format!("pb-{i}-{}", kind.to_lowercase());
        let mut meta = Vec::new();
        protobuf_field(1, name.as_bytes(), &mut meta);
        let mut object = Vec::new();
        protobuf_field(1, &meta, &mut object);
        let mut type_meta = Vec::new();
        protobuf_field(1, api_version.as_bytes(), &mut type_meta);
        protobuf_field(2, kind.as_bytes(), &mut type_meta);
        let mut body = b"k8s\0".to_vec();
        protobuf_field(1, &type_meta, &mut body);
        protobuf_field(2, &object, &mut body);
        let answer = call_with(
            &server,
            "POST",
            collection,
            "application/vnd.kubernetes.protobuf",
            Some(JSON),
            body,
        )
        .await;
        // An object this bare may fail the kind's validation (a Deployment needs a
        // selector), never the decoding.
        assert!(
            matches!(answer.code, 201 | 422),
            "{kind} at {collection}: {} {}",
            answer.code,
            answer.body
        );
        if answer.code == 201 {
            assert_eq!(answer.body["kind"], kind.as_str(), "{}", answer.body);
            created.push(kind.clone());
        }
    }
    for kind in [
        "Role",
        "ClusterRole",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Namespace",
    ] {
        assert!(created.iter().any(|k| k == kind), "{kind}: {created:?}");
    }
}

//! The CEL rules of the generated CRDs compile and say what they mean, checked
//! with kube-cel against the committed schemas (as an API server would).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

fn schema(plural: &str) -> Value {
    let path = xtask::workspace_root()
        .join(xtask::CRD_DIR)
        .join(format!("{plural}.socialweb.computer.yaml"));
    let crd: CustomResourceDefinition =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let root = crd.spec.versions[0]
        .schema
        .clone()
        .unwrap()
        .open_api_v3_schema
        .unwrap();
    serde_json::to_value(root).unwrap()
}

fn claim(cluster_name: &str) -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "NodeClaim",
        "metadata": {"name": "n1", "namespace": "tenant"},
        "spec": {
            "clusterName": cluster_name,
            "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 100},
            "location": {"country": "DE"}
        }
    })
}

#[test]
fn cluster_name_is_immutable() {
    let schema = schema("nodeclaims");
    kube_cel::validate(&schema, &claim("c1"), None).unwrap();
    kube_cel::validate(&schema, &claim("c1"), Some(&claim("c1"))).unwrap();
    let errors = kube_cel::validate(&schema, &claim("c2"), Some(&claim("c1"))).unwrap_err();
    let messages: Vec<String> = errors
        .as_slice()
        .iter()
        .map(|e| e.message.clone())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("clusterName is immutable")),
        "{messages:?}"
    );
}

fn requester(market: Value) -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "Requester",
        "metadata": {"name": "root", "namespace": "socialweb-system"},
        "spec": {"market": market}
    })
}

fn messages(errors: &kube_cel::ValidationErrors) -> Vec<String> {
    errors
        .as_slice()
        .iter()
        .map(|e| e.message.clone())
        .collect()
}

fn atproto(extra: Value) -> Value {
    let mut market = json!({
        "pdsUrl": "https://pds.example.org",
        "account": "market.example.org",
        "appPasswordSecretRef": {"name": "atproto", "key": "app-password"},
        "signingKeySecretRef": {"name": "atproto", "key": "signing-key"},
        "publicUrl": "https://market.example.org",
    });
    for (key, value) in extra.as_object().unwrap() {
        market[key] = value.clone();
    }
    market
}

#[test]
fn exactly_one_market_is_accepted() {
    let schema = schema("requesters");
    let bidders = json!({"bidders": ["did:plc:ewvi7nxzyoun6zhxrhs64oiz"]});
    kube_cel::validate(&schema, &requester(json!({"local": {"seed": 7}})), None).unwrap();
    kube_cel::validate(
        &schema,
        &requester(json!({"atproto": atproto(bidders.clone())})),
        None,
    )
    .unwrap();
    for market in [
        json!({}),
        json!({"local": {"seed": 7}, "atproto": atproto(bidders)}),
    ] {
        let errors = kube_cel::validate(&schema, &requester(market.clone()), None).unwrap_err();
        assert!(
            messages(&errors)
                .iter()
                .any(|m| m.contains("set exactly one market: local or atproto")),
            "{market}: {:?}",
            messages(&errors)
        );
    }
}

#[test]
fn an_atproto_market_needs_bidders_or_a_relay() {
    let schema = schema("requesters");
    for ok in [
        json!({"bidders": ["did:plc:ewvi7nxzyoun6zhxrhs64oiz"]}),
        json!({"relayUrl": "https://relay.example.org"}),
    ] {
        kube_cel::validate(&schema, &requester(json!({"atproto": atproto(ok)})), None).unwrap();
    }
    for nowhere in [json!({}), json!({"bidders": []})] {
        let errors = kube_cel::validate(
            &schema,
            &requester(json!({"atproto": atproto(nowhere.clone())})),
            None,
        )
        .unwrap_err();
        assert!(
            messages(&errors)
                .iter()
                .any(|m| m.contains("name at least one bidder")),
            "{nowhere}: {:?}",
            messages(&errors)
        );
    }
}

/// Guards the test above: the validator does compile the market rule, so a
/// malformed rule in the generated schema would fail there.
#[test]
fn a_malformed_market_rule_is_caught() {
    let mut schema = schema("requesters");
    let rules =
        &mut schema["properties"]["spec"]["properties"]["market"]["x-kubernetes-validations"];
    assert!(
        rules[0]["rule"]
            .as_str()
            .unwrap()
            .contains("has(self.local)")
    );
    rules[0]["rule"] = json!("[has(self.local)].filter(x, x).size( == 1");
    let requester = json!({"spec": {"market": {"local": {}}}});
    assert!(kube_cel::validate(&schema, &requester, None).is_err());
}

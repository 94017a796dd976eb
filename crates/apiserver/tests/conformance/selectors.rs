//! Section 3, label and field selectors on lists.

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{CONFIGMAPS, WIDGETS, create_configmap, create_widget, get, widget_server};

/// The names a list answers, or the failed answer's code and reason.
pub async fn select(
    server: &TestServer,
    collection: &str,
    param_and_value: &str,
) -> Result<Vec<String>, (u16, String)> {
    let (param, value) = param_and_value.split_once('=').unwrap();
    let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    let answer = get(server, &format!("{collection}?{param}={value}")).await;
    if answer.code != 200 {
        return Err((answer.code, answer.reason().to_string()));
    }
    Ok(answer.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect())
}

/// a {tier: even, env: prod}, b {tier: odd}, c {}, d {tier: even}.
pub async fn labelled_configmaps() -> TestServer {
    let server = TestServer::start().await.unwrap();
    let labels: [(&str, Value); 4] = [
        ("a", json!({"tier": "even", "env": "prod"})),
        ("b", json!({"tier": "odd"})),
        ("c", json!({})),
        ("d", json!({"tier": "even"})),
    ];
    for (name, labels) in labels {
        create_configmap(&server, name, &labels).await;
    }
    server
}

#[tokio::test]
async fn r3_10_label_selectors_of_every_operator() {
    let server = labelled_configmaps().await;
    let cases: [(&str, &[&str]); 10] = [
        ("tier", &["a", "b", "d"]),
        ("!tier", &["c"]),
        ("tier=even", &["a", "d"]),
        ("tier==even", &["a", "d"]),
        ("tier!=odd", &["a", "c", "d"]),
        ("tier in (even,odd)", &["a", "b", "d"]),
        ("tier notin (odd)", &["a", "c", "d"]),
        ("tier=even,env=prod", &["a"]),
        ("tier,!env", &["b", "d"]),
        ("env in (prod), tier", &["a"]),
    ];
    for (selector, expected) in cases {
        let found = select(&server, CONFIGMAPS, &format!("labelSelector={selector}")).await;
        assert_eq!(
            found,
            Ok(expected.iter().map(ToString::to_string).collect()),
            "{selector}"
        );
    }
    let bad = select(&server, CONFIGMAPS, "labelSelector=tier in even").await;
    assert_eq!(bad, Err((400, "BadRequest".into())));
}

#[tokio::test]
async fn r3_11_field_selectors_name_namespace_selectable_fields_else_400() {
    let server = widget_server().await;
    for name in ["a", "b"] {
        create_configmap(&server, name, &json!({})).await;
    }
    let ok = |names: &[&str]| Ok(names.iter().map(ToString::to_string).collect::<Vec<_>>());
    assert_eq!(
        select(&server, CONFIGMAPS, "fieldSelector=metadata.name=b").await,
        ok(&["b"])
    );
    assert_eq!(
        select(&server, CONFIGMAPS, "fieldSelector=metadata.name!=b").await,
        ok(&["a"])
    );
    assert_eq!(
        select(
            &server,
            "/api/v1/configmaps",
            "fieldSelector=metadata.namespace=default,metadata.name=a"
        )
        .await,
        ok(&["a"])
    );
    assert_eq!(
        select(&server, CONFIGMAPS, "fieldSelector=spec.nope=1").await,
        Err((400, "BadRequest".into()))
    );
    for (name, colour) in [("red1", "red"), ("blue1", "blue"), ("red2", "red")] {
        create_widget(&server, name, &json!({"colour": colour, "size": 1})).await;
    }
    assert_eq!(
        select(&server, WIDGETS, "fieldSelector=spec.colour=red").await,
        ok(&["red1", "red2"])
    );
    assert_eq!(
        select(&server, WIDGETS, "fieldSelector=spec.size=1").await,
        Err((400, "BadRequest".into())),
        "only the CRD's selectableFields"
    );
}

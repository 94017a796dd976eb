//! The `/status` write's body copy: [`prepare::status_body`] keeps all that
//! [`prepare::update`] reads of a status body, so an update from it answers as one from
//! the whole body (the handler copied the whole body before, plan 0016 C3).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use proptest::prelude::*;
use serde_json::{Value, json};

use super::prepare;
use crate::registry::Resource;

fn things() -> Resource {
    let crd = json!({
        "spec": {
            "group": "x.io",
            "names": {"plural": "things", "kind": "Thing"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}}}]
        }
    });
    crate::registry::resources_of_crd(&crd).unwrap().remove(0)
}

/// Small JSON values: scalars, and objects and lists of them, two levels deep.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (0i64..4).prop_map(Value::from),
        "[ab]{0,2}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-c]", inner, 0..3)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A member of a body or of its metadata: absent, the expected value, or anything.
fn member(expected: Value) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![Just(None), Just(Some(expected)), any_value().prop_map(Some)]
}

/// Bodies a `/status` write may send: the object's own names and kinds, others, odd
/// metadata, extra members.
fn any_body() -> impl Strategy<Value = Value> {
    (
        member(json!("x.io/v1")),
        member(json!("Thing")),
        member(json!("a")),
        member(json!([{"manager": "m", "operation": "Update", "fieldsV1": {"f:status": {}}}])),
        any_value(),
        member(json!({"phase": "Up"})),
        any_value(),
        0u8..4,
    )
        .prop_map(
            |(api_version, kind, name, managed, status, spec, extra, shape)| {
                let mut metadata = serde_json::Map::new();
                if let Some(name) = name {
                    metadata.insert("name".into(), name);
                }
                if let Some(managed) = managed {
                    metadata.insert("managedFields".into(), managed);
                }
                metadata.insert("labels".into(), extra.clone());
                let mut body = serde_json::Map::new();
                for (key, value) in [("apiVersion", api_version), ("kind", kind), ("spec", spec)] {
                    if let Some(value) = value {
                        body.insert(key.into(), value);
                    }
                }
                body.insert("status".into(), status);
                match shape {
                    0 => {
                        body.insert("metadata".into(), Value::Object(metadata));
                    }
                    1 => {
                        body.insert("metadata".into(), extra);
                    }
                    2 => {}
                    _ => return extra,
                }
                Value::Object(body)
            },
        )
}

fn stored() -> Value {
    json!({
        "apiVersion": "x.io/v1", "kind": "Thing",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "generation": 2, "labels": {"l": "v"},
                     "managedFields": [{"manager": "c", "operation": "Update",
                                        "fieldsV1": {"f:spec": {}}}]},
        "spec": {"replicas": 1},
        "status": {"phase": "Down", "n": [1, 2]}
    })
}

proptest! {
    #[test]
    fn a_status_update_from_the_status_body_answers_as_from_the_whole_body(
        body in any_body(),
        without_status in any::<bool>(),
    ) {
        let res = things();
        let mut old = stored();
        if without_status {
            old.as_object_mut().unwrap().remove("status");
        }
        let whole = prepare::update(&res, &old, body.clone(), true);
        let trimmed = prepare::update(&res, &old, prepare::status_body(&body), true);
        prop_assert_eq!(whole, trimmed);
    }
}

#[test]
fn the_status_body_holds_only_what_a_status_update_reads() {
    let body = json!({
        "apiVersion": "x.io/v1", "kind": "Thing",
        "metadata": {"name": "a", "labels": {"l": "v"}, "managedFields": []},
        "spec": {"replicas": 3}, "status": {"phase": "Up"}
    });
    assert_eq!(
        prepare::status_body(&body),
        json!({"apiVersion": "x.io/v1", "kind": "Thing",
               "metadata": {"name": "a", "managedFields": []}, "status": {"phase": "Up"}})
    );
    let old = stored();
    let updated = prepare::update(&things(), &old, prepare::status_body(&body), true).unwrap();
    let mut expected = old;
    expected["status"] = json!({"phase": "Up"});
    expected["metadata"]["managedFields"] = json!([]);
    assert_eq!(updated, expected);
}

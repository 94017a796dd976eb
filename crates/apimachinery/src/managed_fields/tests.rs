#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// A CRD-like schema: `spec.contracts` keyed by name, its `ports` keyed by port and
/// protocol, `spec.tags` a set; everything else atomic.
pub(super) struct TestSchema;

impl SchemaTypes for TestSchema {
    fn list_type(&self, path: &[&str]) -> ListType {
        match path {
            ["spec", "contracts"] => ListType::Map(vec!["name".into()]),
            ["spec", "contracts", "ports"] => ListType::Map(vec!["port".into(), "protocol".into()]),
            ["spec", "tags"] => ListType::Set,
            _ => ListType::Atomic,
        }
    }

    fn map_is_atomic(&self, path: &[&str]) -> bool {
        path == ["spec", "selector"]
    }
}

pub(super) const T1: &str = "2026-01-01T00:00:01Z";
pub(super) const T2: &str = "2026-01-01T00:00:02Z";
pub(super) const T3: &str = "2026-01-01T00:00:03Z";

pub(super) fn object(spec: Value) -> Value {
    json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "ns"}, "spec": spec})
}

pub(super) fn apply_as(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Value, ApplyError> {
    apply(live, config, manager, None, force, &TestSchema, now)
}

/// An unforced apply of `spec` by `manager` that succeeds.
pub(super) fn applied(live: Option<&Value>, spec: Value, manager: &str, now: &str) -> Value {
    apply_as(live, &object(spec), manager, false, now).unwrap()
}

pub(super) fn fields_of(object: &Value, manager: &str) -> Value {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| entry["manager"] == manager)
        .map(|entry| entry["fieldsV1"].clone())
        .unwrap_or(Value::Null)
}

pub(super) fn without_managed(object: &Value) -> Value {
    without_managed_fields(object)
}

#[test]
fn create_by_apply_writes_the_real_fields_v1() {
    let mut config = object(json!({
        "replicas": 2,
        "selector": {"app": "x"},
        "contracts": [{"name": "a", "resources": {"cpu": 1}, "ports": [{"port": 80, "protocol": "TCP"}]}],
        "tags": ["blue"],
        "list": [1, 2]
    }));
    config["metadata"]["labels"] = json!({"app": "x"});
    config["metadata"]["finalizers"] = json!(["x.io/cleanup"]);
    let created = apply_as(None, &config, "ctl", false, T1).unwrap();
    assert_eq!(without_managed(&created), config);
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{
            "apiVersion": "x.io/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:finalizers": {"v:\"x.io/cleanup\"": {}}, "f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:contracts": {"k:{\"name\":\"a\"}": {
                        ".": {},
                        "f:name": {},
                        "f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:protocol": {}}},
                        "f:resources": {"f:cpu": {}}
                    }},
                    "f:list": {},
                    "f:replicas": {},
                    "f:selector": {},
                    "f:tags": {"v:\"blue\"": {}}
                }
            },
            "manager": "ctl",
            "operation": "Apply",
            "time": T1
        }])
    );
}

#[test]
fn applying_twice_is_idempotent() {
    let config = object(json!({"replicas": 2, "contracts": [{"name": "a", "port": 1}]}));
    let once = apply_as(None, &config, "ctl", false, T1).unwrap();
    let twice = apply_as(Some(&once), &config, "ctl", false, T2).unwrap();
    assert_eq!(
        once, twice,
        "an apply that changes nothing keeps even the time"
    );
}

#[test]
fn omitted_fields_are_removed() {
    let mut first = object(
        json!({"replicas": 2, "paused": true, "contracts": [{"name": "a"}, {"name": "b", "port": 1}]}),
    );
    first["metadata"]["labels"] = json!({"app": "x", "tier": "fe"});
    let live = apply_as(None, &first, "ctl", false, T1).unwrap();
    let mut second = object(json!({"replicas": 2, "contracts": [{"name": "b"}]}));
    second["metadata"]["labels"] = json!({"app": "x"});
    let applied = apply_as(Some(&live), &second, "ctl", false, T2).unwrap();
    assert_eq!(
        applied["spec"],
        json!({"replicas": 2, "contracts": [{"name": "b"}]})
    );
    assert_eq!(applied["metadata"]["labels"], json!({"app": "x"}));
    assert_eq!(
        fields_of(&applied, "ctl"),
        json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:contracts": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}}}, "f:replicas": {}}})
    );
    // Removing the last label drops the map, like ObjectMeta's omitempty.
    let third = object(json!({"replicas": 2, "contracts": [{"name": "b"}]}));
    let applied = apply_as(Some(&applied), &third, "ctl", false, T3).unwrap();
    assert!(applied["metadata"].get("labels").is_none());
    assert_eq!(applied["metadata"]["name"], "a");
}

#[test]
fn fields_shared_with_another_manager_are_only_disowned() {
    let live = applied(None, json!({"replicas": 2, "paused": true}), "a", T1);
    // b applies the same value: no conflict, shared ownership.
    let live = applied(Some(&live), json!({"replicas": 2}), "b", T2);
    let live = applied(Some(&live), json!({"paused": true}), "a", T3);
    assert_eq!(live["spec"], json!({"replicas": 2, "paused": true}));
    assert_eq!(fields_of(&live, "a"), json!({"f:spec": {"f:paused": {}}}));
    assert_eq!(fields_of(&live, "b"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn changing_another_managers_field_conflicts_until_forced() {
    let live = applied(
        None,
        json!({"replicas": 2, "contracts": [{"name": "a", "resources": {"cpu": 1}}]}),
        "a",
        T1,
    );
    let attempt =
        object(json!({"replicas": 3, "contracts": [{"name": "a", "resources": {"cpu": 2}}]}));
    let error = apply_as(Some(&live), &attempt, "b", false, T2).unwrap_err();
    let ApplyError::Conflicts(conflicts) = &error else {
        panic!("{error}")
    };
    let fields: Vec<&str> = conflicts.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            ".spec.contracts[name=\"a\"].resources.cpu",
            ".spec.replicas"
        ]
    );
    assert!(
        conflicts
            .iter()
            .all(|c| c.manager == "a" && c.cause_message() == "conflict with \"a\"")
    );
    assert_eq!(
        error.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.contracts[name=\"a\"].resources.cpu\n- .spec.replicas"
    );

    let forced = apply_as(Some(&live), &attempt, "b", true, T2).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    assert_eq!(
        fields_of(&forced, "a"),
        json!({"f:spec": {"f:contracts": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}})
    );
    // a applying its old values again now conflicts with b.
    let again =
        object(json!({"replicas": 2, "contracts": [{"name": "a", "resources": {"cpu": 1}}]}));
    let error = apply_as(Some(&forced), &again, "a", false, T3).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Apply failed with 2 conflicts: conflicts with \"b\":\n- .spec.contracts[name=\"a\"].resources.cpu\n- .spec.replicas"
    );
}

#[test]
fn single_conflict_message() {
    let live = applied(None, json!({"replicas": 2}), "a", T1);
    let error = apply_as(Some(&live), &object(json!({"replicas": 3})), "b", false, T2).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
    );
    let ApplyError::Conflicts(conflicts) = error else {
        panic!()
    };
    assert_eq!(
        conflicts[0].to_cause(),
        json!({"type": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".spec.replicas"})
    );
}

#[test]
fn list_map_items_of_two_managers_both_stay() {
    let live = applied(
        None,
        json!({"contracts": [{"name": "a", "port": 1}]}),
        "a",
        T1,
    );
    let live = applied(
        Some(&live),
        json!({"contracts": [{"name": "b", "port": 2}]}),
        "b",
        T2,
    );
    assert_eq!(
        live["spec"]["contracts"],
        json!([{"name": "a", "port": 1}, {"name": "b", "port": 2}])
    );
    // a re-applies (changing its item); b's item stays.
    let live = applied(
        Some(&live),
        json!({"contracts": [{"name": "a", "port": 3}]}),
        "a",
        T3,
    );
    assert_eq!(
        live["spec"]["contracts"],
        json!([{"name": "a", "port": 3}, {"name": "b", "port": 2}])
    );
    // a drops its item: gone, b's remains.
    let live = applied(Some(&live), json!({"contracts": []}), "a", T3);
    assert_eq!(live["spec"]["contracts"], json!([{"name": "b", "port": 2}]));
    assert_eq!(
        fields_of(&live, "a"),
        Value::Null,
        "an entry owning nothing is dropped"
    );
}

#[test]
fn atomic_lists_are_replaced_whole_and_conflict() {
    let live = applied(None, json!({"list": [1, 2]}), "a", T1);
    let error = apply_as(Some(&live), &object(json!({"list": [3]})), "b", false, T2).unwrap_err();
    assert!(matches!(&error, ApplyError::Conflicts(c) if c[0].field == ".spec.list"));
    let forced = apply_as(Some(&live), &object(json!({"list": [3]})), "b", true, T2).unwrap();
    assert_eq!(forced["spec"]["list"], json!([3]));
    assert_eq!(fields_of(&forced, "a"), Value::Null);
}

#[test]
fn sets_merge_by_value() {
    let live = applied(None, json!({"tags": ["a", "b"]}), "a", T1);
    let live = applied(Some(&live), json!({"tags": ["c", "b"]}), "b", T2);
    assert_eq!(live["spec"]["tags"], json!(["a", "c", "b"]));
    let live = applied(Some(&live), json!({"tags": []}), "a", T3);
    assert_eq!(live["spec"]["tags"], json!(["c", "b"]), "b still owns b");
}

#[test]
fn finalizers_merge_as_a_set_for_every_kind() {
    let mut first = object(json!({}));
    first["metadata"]["finalizers"] = json!(["one"]);
    let live = apply(None, &first, "a", None, false, &AtomicLists, T1).unwrap();
    let mut second = object(json!({}));
    second["metadata"]["finalizers"] = json!(["two"]);
    let live = apply(Some(&live), &second, "b", None, false, &AtomicLists, T2).unwrap();
    assert_eq!(live["metadata"]["finalizers"], json!(["one", "two"]));
}

#[test]
fn null_members_are_not_applied() {
    let live = applied(None, json!({"replicas": 2, "paused": true}), "a", T1);
    let live = applied(Some(&live), json!({"replicas": 2, "paused": null}), "a", T2);
    assert_eq!(live["spec"], json!({"replicas": 2}));
    assert_eq!(fields_of(&live, "a"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn invalid_configurations() {
    let mut config = object(json!({}));
    config["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        apply_as(None, &config, "a", false, T1).unwrap_err(),
        ApplyError::Invalid("metadata.managedFields must be nil".into())
    );
    config["metadata"]["managedFields"] = Value::Null;
    assert!(apply_as(None, &config, "a", false, T1).is_ok());
    let duplicate = object(json!({"contracts": [{"name": "a"}, {"name": "a"}]}));
    assert_eq!(
        apply_as(None, &duplicate, "a", false, T1)
            .unwrap_err()
            .to_string(),
        ".spec.contracts: duplicate entries for key [name=\"a\"]"
    );
    let keyless = object(json!({"contracts": [{"port": 1}]}));
    assert!(
        apply_as(None, &keyless, "a", false, T1)
            .unwrap_err()
            .to_string()
            .contains("omits key field \"name\"")
    );
    assert!(apply_as(None, &json!([1]), "a", false, T1).is_err());
}

#[test]
fn status_applies_are_a_separate_entry() {
    let live = applied(None, json!({"replicas": 1}), "ctl", T1);
    let status = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a"}, "status": {"phase": "Ready"}});
    let live = apply(
        Some(&live),
        &status,
        "ctl",
        Some("status"),
        false,
        &TestSchema,
        T2,
    )
    .unwrap();
    assert_eq!(live["spec"], json!({"replicas": 1}));
    assert_eq!(live["status"], json!({"phase": "Ready"}));
    let entries = live["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["subresource"], "status");
    assert_eq!(entries[1]["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
    // The main apply omitting status does not prune the status apply's fields.
    let live = applied(Some(&live), json!({"replicas": 2}), "ctl", T3);
    assert_eq!(live["status"], json!({"phase": "Ready"}));
}

#[test]
fn fields_v1_round_trips_the_real_encoding() {
    let encoded = json!({
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {".": {}, "f:contracts": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}, "f:tags": {"v:\"x\"": {}}}
    });
    let set = FieldSet::from_fields_v1(&encoded);
    assert_eq!(set.len(), 6);
    assert_eq!(set.to_fields_v1(), encoded);
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0i64..4).prop_map(Value::from),
        "[ab]".prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool)
    ]
}

pub(super) fn spec() -> impl Strategy<Value = Value> {
    let contract = (
        prop_oneof![Just("a"), Just("b"), Just("c")],
        proptest::option::of(leaf()),
        proptest::option::of(leaf()),
    )
        .prop_map(|(name, port, extra)| {
            let mut item = json!({"name": name});
            if let Some(port) = port {
                item["port"] = port;
            }
            if let Some(extra) = extra {
                item["extra"] = json!({"x": extra});
            }
            item
        });
    (
        proptest::option::of(leaf()),
        proptest::option::of(proptest::collection::vec(contract, 0..3)),
        proptest::option::of(proptest::collection::btree_set("[a-d]", 0..3)),
        proptest::option::of(proptest::collection::vec(leaf(), 0..3)),
    )
        .prop_map(|(replicas, contracts, tags, list)| {
            let mut spec = serde_json::Map::new();
            if let Some(r) = replicas {
                spec.insert("replicas".into(), r);
            }
            if let Some(mut c) = contracts {
                let mut seen = std::collections::BTreeSet::new();
                c.retain(|item| seen.insert(item["name"].clone().to_string()));
                spec.insert("contracts".into(), Value::Array(c));
            }
            if let Some(t) = tags {
                spec.insert("tags".into(), json!(t));
            }
            if let Some(l) = list {
                spec.insert("list".into(), Value::Array(l));
            }
            Value::Object(spec)
        })
}

proptest! {
    #[test]
    fn apply_is_idempotent_and_owns_exactly_the_config(first in spec(), second in spec(), other in spec()) {
        let base = applied(None, first, "a", T1);
        let base = apply_as(Some(&base), &object(other), "b", true, T2).unwrap();
        let config = object(second);
        let once = apply_as(Some(&base), &config, "a", true, T3).unwrap();
        let twice = apply_as(Some(&once), &config, "a", false, "2027-01-01T00:00:00Z").unwrap();
        prop_assert_eq!(&once, &twice);
        // What a owns is exactly the configuration's field set.
        let owned = FieldSet::from_fields_v1(&fields_of(&once, "a"));
        let expected = walk::field_set(&config, &walk::Schema::new(&TestSchema)).unwrap();
        prop_assert_eq!(owned, expected);
    }

    #[test]
    fn applied_values_are_in_the_result(first in spec(), second in spec()) {
        let base = applied(None, first, "a", T1);
        let config = object(second.clone());
        let result = apply_as(Some(&base), &config, "b", true, T2).unwrap();
        for (name, value) in second.as_object().unwrap() {
            match name.as_str() {
                "contracts" => for item in value.as_array().unwrap() {
                    let found = result["spec"]["contracts"].as_array().unwrap().iter().find(|i| i["name"] == item["name"]).unwrap();
                    for (k, v) in item.as_object().unwrap() {
                        prop_assert_eq!(&found[k], v);
                    }
                },
                "tags" => for tag in value.as_array().unwrap() {
                    prop_assert!(result["spec"]["tags"].as_array().unwrap().contains(tag));
                },
                _ => prop_assert_eq!(&result["spec"][name], value),
            }
        }
    }

    #[test]
    fn nobody_owns_a_field_the_object_lacks(
        steps in proptest::collection::vec((spec(), 0..3usize, any::<bool>()), 1..6),
    ) {
        let mut live: Option<Value> = None;
        for (step, (spec, who, by_apply)) in steps.into_iter().enumerate() {
            let manager = ["a", "b", "c"][who];
            let now = format!("2026-01-01T00:00:{step:02}Z");
            let next = if by_apply {
                apply_as(live.as_ref(), &object(spec), manager, true, &now).unwrap()
            } else {
                let mut new = live.clone().unwrap_or_else(|| object(json!({})));
                new["spec"] = spec;
                let mut written = new;
                update(live.as_ref(), &mut written, manager, None, &TestSchema, &now);
                written
            };
            for entry in decode(&next) {
                for path in entry.fields.iter() {
                    prop_assert!(walk::path_exists(&next, path), "{} owns missing {:?} in {}", entry.manager, path, next);
                }
            }
            live = Some(next);
        }
    }

    #[test]
    fn fields_v1_round_trips(paths in proptest::collection::vec(proptest::collection::vec(prop_oneof![Just("f:a".to_owned()), Just("f:b".to_owned()), Just("k:{\"name\":\"x\"}".to_owned()), Just("v:1".to_owned())], 1..4), 0..6)) {
        let set: FieldSet = paths.into_iter().collect();
        prop_assert_eq!(FieldSet::from_fields_v1(&set.to_fields_v1()), set);
    }
}

#[test]
fn server_managed_metadata_in_a_configuration_is_not_owned() {
    let mut config = object(json!({"replicas": 1}));
    config["metadata"]["uid"] = json!("u-1");
    config["metadata"]["resourceVersion"] = json!("7");
    config["metadata"]["annotations"] = json!({"note": "x"});
    let created = apply_as(None, &config, "ctl", false, T1).unwrap();
    assert_eq!(
        fields_of(&created, "ctl"),
        json!({"f:metadata": {"f:annotations": {"f:note": {}}}, "f:spec": {"f:replicas": {}}})
    );
}

#[test]
fn finalizer_json_patch_then_apply_keeps_the_finalizer() {
    // kube's finalizer helper adds its finalizer with a JSON patch (an Update write)...
    let live = applied(None, json!({"replicas": 1}), "ctl", T1);
    let mut patched = live.clone();
    crate::patch::json_patch(
        &mut patched,
        &json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["x.io/cleanup"]}
        ]),
    )
    .unwrap();
    update(
        Some(&live),
        &mut patched,
        "ctl-finalizer",
        None,
        &TestSchema,
        T2,
    );
    assert_eq!(
        fields_of(&patched, "ctl-finalizer"),
        json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"x.io/cleanup\"": {}}}})
    );
    // ...and the controller's next apply, which does not mention finalizers, keeps it.
    let applied = applied(Some(&patched), json!({"replicas": 2}), "ctl", T3);
    assert_eq!(applied["metadata"]["finalizers"], json!(["x.io/cleanup"]));
}

//! Properties of pruning, defaulting and validation that must hold for any object.

use apiextensions::StructuralSchema;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn schema() -> StructuralSchema {
    StructuralSchema::from_value(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["resources"],
                "properties": {
                    "resources": {"type": "object", "properties": {
                        "cpus": {"type": "integer", "minimum": 1, "maximum": 64, "default": 2},
                        "memory": {"type": "string", "pattern": "^[0-9]+Gi$"}}},
                    "mode": {"type": "string", "enum": ["Auto", "Manual"], "default": "Auto"},
                    "contracts": {"type": "array", "maxItems": 3,
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "weight": {"type": "integer", "default": 1}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "deep": {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}}
                },
                "x-kubernetes-validations": [{"rule": "self.mode == 'Auto' || has(self.resources.memory)",
                    "message": "manual mode needs memory"}]
            }
        }
    }))
    .unwrap()
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..100).prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("spec".to_string()),
                    Just("resources".to_string()),
                    Just("cpus".to_string()),
                    Just("contracts".to_string()),
                    Just("name".to_string()),
                    Just("raw".to_string()),
                    "[a-z]{1,4}"
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn valid_spec() -> impl Strategy<Value = Value> {
    (
        prop::option::of(1i64..=64),
        prop::option::of((1u32..512).prop_map(|g| format!("{g}Gi"))),
        prop::collection::btree_set("[a-z]{1,5}", 0..=3),
        prop::option::of(prop::collection::btree_map("[a-z]{1,5}", "[a-z]{0,5}", 0..3)),
        "[a-z]{1,5}",
    )
        .prop_map(|(cpus, memory, names, labels, junk)| {
            let mut resources = Map::new();
            if let Some(c) = cpus {
                resources.insert("cpus".into(), json!(c));
            }
            let manual = memory.is_some();
            if let Some(m) = memory {
                resources.insert("memory".into(), json!(m));
            }
            let contracts: Vec<Value> = names.into_iter().map(|n| json!({"name": n, "junk": 1})).collect();
            let mut spec = json!({"resources": resources, "contracts": contracts, "raw": {"kept": [1, {"a": null}]}});
            if manual {
                spec["mode"] = json!("Manual");
            }
            if let Some(l) = labels {
                spec["labels"] = json!(l);
            }
            spec[format!("unknown{junk}")] = json!(true);
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": spec})
        })
}

proptest! {
    #[test]
    fn prune_is_idempotent(mut object in any_json()) {
        let s = schema();
        s.prune(&mut object);
        let once = object.clone();
        let again = s.prune(&mut object);
        prop_assert!(again.is_empty(), "second prune removed {again:?}");
        prop_assert_eq!(object, once);
    }

    #[test]
    fn defaults_are_idempotent(mut object in any_json()) {
        let s = schema();
        s.apply_defaults(&mut object);
        let once = object.clone();
        s.apply_defaults(&mut object);
        prop_assert_eq!(object, once);
    }

    #[test]
    fn valid_objects_stay_valid_after_prune_and_defaults(mut object in valid_spec()) {
        let s = schema();
        let removed = s.prune(&mut object);
        prop_assert!(removed.iter().any(|p| p.starts_with("spec.unknown")));
        s.apply_defaults(&mut object);
        prop_assert!(object["spec"].get("deep").is_none(), "defaults created an absent parent");
        let errors = s.validate(&object, None);
        prop_assert!(errors.is_empty(), "{errors:?} for {object}");
        // an update that changes nothing is valid too
        prop_assert!(s.validate(&object, Some(&object)).is_empty());
        prop_assert_eq!(&object["spec"]["raw"], &json!({"kept": [1, {"a": null}]}));
    }
}

proptest! {
    #[test]
    fn jsonpath_never_panics(path in "[.\\[\\]?()@=!<>'\"*a-z0-9\\\\é-]{0,24}", object in any_json()) {
        let _ = apiextensions::printer_column_value(&object, &path);
    }

    #[test]
    fn arbitrary_schemas_and_objects_never_panic(raw in any_json(), object in any_json()) {
        let schema_value = json!({"type": "object", "properties": {"spec": raw}});
        if let Ok(s) = StructuralSchema::from_value(&schema_value) {
            let mut o = json!({"spec": object});
            s.prune(&mut o);
            s.apply_defaults(&mut o);
            let _ = s.validate(&o, Some(&o));
            let _ = s.validate(&o, None);
        }
    }
}

fn any_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "string", "maxLength": 3, "default": "ab"})),
        Just(json!({"type": "string", "enum": ["a", "b"]})),
        Just(json!({"type": "string", "format": "date-time"})),
        Just(json!({"type": "integer", "minimum": 0, "maximum": 50, "default": 1})),
        Just(json!({"type": "number", "nullable": true})),
        Just(json!({"type": "boolean"})),
        Just(json!({"x-kubernetes-int-or-string": true})),
        Just(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
        Just(json!({"type": "string", "x-kubernetes-validations": [{"rule": "self.size() < 5"}]})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map(
                prop_oneof![
                    Just("spec".to_string()),
                    Just("name".to_string()),
                    Just("cpus".to_string()),
                    "[a-z]{1,3}"
                ],
                inner.clone(),
                1..4
            )
            .prop_map(|props| {
                let first = props.keys().next().cloned().unwrap_or_default();
                json!({"type": "object", "properties": props, "required": [first],
                    "x-kubernetes-validations": [{"rule": "size(self) >= 0"}]})
            }),
            inner
                .clone()
                .prop_map(|items| json!({"type": "array", "items": items, "maxItems": 3})),
            inner.prop_map(|values| json!({"type": "object", "additionalProperties": values})),
        ]
    })
}

proptest! {
    #[test]
    fn random_schemas_prune_and_default_idempotently(raw in any_schema(), object in any_json()) {
        let schema_value = json!({"type": "object", "properties": {"spec": raw}});
        let s = StructuralSchema::from_value(&schema_value).expect("generated schemas are structural");
        let mut o = json!({"spec": object});
        s.prune(&mut o);
        s.apply_defaults(&mut o);
        let settled = o.clone();
        prop_assert!(s.prune(&mut o).is_empty());
        s.apply_defaults(&mut o);
        prop_assert_eq!(&o, &settled);
        let _ = s.validate(&o, None);
        // ratcheting: an update that changes nothing is never refused
        let unchanged = s.validate(&o, Some(&o));
        prop_assert!(unchanged.is_empty(), "{unchanged:?}");
    }
}

/// The whole pass of an update: defaults, pruning, then validation against `old`.
fn whole_pass(s: &StructuralSchema, object: &mut Value, old: &Value) -> (Vec<String>, String) {
    s.apply_defaults(object);
    let pruned = s.prune(object);
    (pruned, format!("{:?}", s.validate(object, Some(old))))
}

proptest! {
    #[test]
    fn an_update_pass_walking_only_changed_fields_answers_as_the_whole_pass(
        spec_schema in any_schema(),
        status_schema in any_schema(),
        old in any_json(),
        replacement in any_json(),
        change in 0..5usize,
    ) {
        let s = StructuralSchema::from_value(&json!({"type": "object", "properties": {
            "spec": spec_schema, "status": status_schema}}))
            .expect("generated schemas are structural");
        prop_assert!(s.passes_metadata_only_updates());
        // Content this schema made: its defaults and pruning settled.
        let mut old = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": old.clone(), "status": old});
        for _ in 0..3 {
            s.apply_defaults(&mut old);
            s.prune(&mut old);
        }
        let mut settled = old.clone();
        s.apply_defaults(&mut settled);
        prop_assume!(s.prune(&mut settled).is_empty() && settled == old);
        let mut new = old.clone();
        new["metadata"]["labels"] = json!({"a": "b"});
        new["metadata"]["junk"] = json!(1);
        match change {
            0 => new["spec"] = replacement,
            1 => new["status"] = replacement,
            2 => {
                new.as_object_mut().unwrap().remove("spec");
            }
            3 => new["extra"] = replacement,
            _ => {}
        }
        let mut whole = new.clone();
        let (pruned, errors) = whole_pass(&s, &mut whole, &old);
        let mut keyed = new;
        let pass = s.update_pass(&mut keyed, &old).expect("the schema allows it");
        prop_assert_eq!(&keyed, &whole);
        prop_assert_eq!(pass.pruned, pruned);
        prop_assert_eq!(format!("{:?}", pass.errors), errors);
    }
}

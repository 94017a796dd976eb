#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The walks name errors and pruned fields as they did when every step built its path
//! with `format!` (the expected strings below are what 1456d0d answered).

use serde_json::{Value, json};

use super::tests::schema;

fn paths_schema() -> super::StructuralSchema {
    schema(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string", "minLength": 2}},
                            "x-kubernetes-validations": [{"rule": "self.name != 'bad'"}]
                        }
                    },
                    "labels": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "string",
                            "maxLength": 3,
                            "x-kubernetes-validations": [{"rule": "self != 'zz'"}]
                        }
                    },
                    "groups": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "array",
                            "x-kubernetes-list-type": "set",
                            "items": {"type": "string"}
                        }
                    },
                    "nested": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "properties": {"n": {"type": "integer", "minimum": 1}}
                        }
                    },
                    "resources": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true
                        }
                    }
                }
            }
        }
    }))
}

fn rendered(errors: &[crate::error::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn errors_name_their_fields_as_before() {
    let s = paths_schema();
    let rules = json!({"spec": {
        "items": [{"name": "ok"}, {"name": "b"}, {"name": "bad"}],
        "labels": {"z": "zz"},
        "nested": {"a": {"n": 0}},
        "groups": {"g": ["x", "x"]}
    }});
    let blocking = json!({"spec": {
        "items": [{"name": 5}],
        "labels": {"k": "long"},
        "resources": {"r": {"apiVersion": "v1"}}
    }});
    for (object, expected) in [(rules, EXPECTED_RULES), (blocking, EXPECTED_BLOCKING)] {
        let errors = s.validate(&object, None);
        assert_eq!(rendered(&errors), expected, "{object}");
        // The update pass over a changed spec names them the same.
        let old = json!({"spec": {}});
        let mut updated = object.clone();
        let pass = s.update_pass(&mut updated, &old).unwrap();
        assert_eq!(rendered(&pass.errors), expected, "{object}");
    }
}

#[test]
fn pruned_fields_are_named_as_before() {
    let s = paths_schema();
    let mut object = json!({
        "junk": 1,
        "metadata": {"name": "n", "bogus": 1},
        "spec": {
            "items": [{"name": "ok", "junk": 1}],
            "nested": {"a": {"n": 1, "junk": 2}},
            "resources": {"r": {"apiVersion": "v1", "kind": "K", "metadata": {"name": "x", "bogus": 1}, "other": 1}},
            "junk": 3
        }
    });
    let pruned: Vec<Value> = s
        .prune(&mut object)
        .into_iter()
        .map(Value::String)
        .collect();
    assert_eq!(Value::Array(pruned), json!(EXPECTED_PRUNED));
}

const EXPECTED_RULES: &[&str] = &[
    "spec.items[1].name: Invalid value: \"b\": spec.items[1].name in body should be at least 2 chars long",
    "spec.nested.a.n: Invalid value: 0: spec.nested.a.n in body should be greater than or equal to 1",
    "spec.groups[g][1]: Duplicate value: \"x\"",
    "spec.items[2]: Invalid value: \"object\": failed rule: self.name != 'bad'",
    "spec.labels[z]: Invalid value: \"string\": failed rule: self != 'zz'",
];
const EXPECTED_BLOCKING: &[&str] = &[
    "spec.items[0].name: Invalid value: \"integer\": spec.items[0].name in body must be of type string: \"integer\"",
    "spec.labels.k: Too long: may not be more than 3 bytes",
    "spec.resources[r].kind: Required value",
    "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
];
const EXPECTED_PRUNED: &[&str] = &[
    "metadata.bogus",
    "junk",
    "spec.items[0].junk",
    "spec.junk",
    "spec.nested.a.junk",
    "spec.resources.r.metadata.bogus",
];

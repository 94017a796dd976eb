#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::{ListType, StructuralSchema};
use crate::error::FieldErrorKind;

pub(super) fn schema(value: Value) -> StructuralSchema {
    StructuralSchema::from_value(&value).expect("schema parses")
}

fn node_schema() -> StructuralSchema {
    schema(json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["resources"],
                "properties": {
                    "resources": {
                        "type": "object",
                        "properties": {
                            "cpus": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 64, "default": 2},
                            "memory": {"type": "string", "pattern": "^[0-9]+Gi$"}
                        }
                    },
                    "mode": {"type": "string", "enum": ["Auto", "Manual"], "default": "Auto"},
                    "name": {"type": "string", "maxLength": 5, "minLength": 2},
                    "contracts": {
                        "type": "array",
                        "maxItems": 2,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1},
                                "weight": {"type": "integer", "default": 1}
                            }
                        }
                    },
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                    "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "port": {"x-kubernetes-int-or-string": true},
                    "since": {"type": "string", "format": "date-time"},
                    "optionalThing": {"type": "object", "properties": {"deep": {"type": "string", "default": "x"}}}
                }
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
    }))
}

pub(super) fn messages(errors: &[crate::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn minimum_reports_real_message() {
    let s = node_schema();
    let errors = s.validate(&json!({"spec": {"resources": {"cpus": 0}}}), None);
    assert_eq!(
        messages(&errors),
        [
            "spec.resources.cpus: Invalid value: 0: spec.resources.cpus in body should be greater than or equal to 1"
        ]
    );
    assert_eq!(errors[0].kind.reason(), "FieldValueInvalid");
    let errors = s.validate(&json!({"spec": {"resources": {"cpus": 65}}}), None);
    assert_eq!(
        messages(&errors),
        [
            "spec.resources.cpus: Invalid value: 65: spec.resources.cpus in body should be less than or equal to 64"
        ]
    );
}

#[test]
fn required_and_enum_and_lengths() {
    let s = node_schema();
    let errors = s.validate(&json!({"spec": {"mode": "x", "name": "toolong"}}), None);
    assert_eq!(
        messages(&errors),
        [
            "spec.mode: Unsupported value: \"x\": supported values: \"Auto\", \"Manual\"",
            "spec.name: Too long: may not be more than 5 bytes",
            "spec.resources: Required value",
        ]
    );
    let kinds: Vec<_> = errors.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            FieldErrorKind::Unsupported,
            FieldErrorKind::TooLong,
            FieldErrorKind::Required
        ]
    );
    let errors = s.validate(&json!({"spec": {"resources": {}, "name": "a"}}), None);
    assert_eq!(
        messages(&errors),
        ["spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"]
    );
}

#[test]
fn type_pattern_format_and_items_paths() {
    let s = node_schema();
    let errors = s.validate(
        &json!({"spec": {"resources": {"cpus": "two", "memory": "4G"}, "contracts": [{"name": ""}], "since": "now"}}),
        None,
    );
    assert_eq!(
        messages(&errors),
        [
            "spec.contracts[0].name: Invalid value: \"\": spec.contracts[0].name in body should be at least 1 chars long",
            "spec.resources.cpus: Invalid value: \"string\": spec.resources.cpus in body must be of type integer: \"string\"",
            "spec.resources.memory: Invalid value: \"4G\": spec.resources.memory in body should match '^[0-9]+Gi$'",
            "spec.since: Invalid value: \"now\": spec.since in body must be of type date-time: \"now\"",
        ]
    );
    assert_eq!(errors[1].kind.reason(), "FieldValueTypeInvalid");
}

#[test]
fn integers_accept_whole_floats_and_int_or_string_accepts_both() {
    let s = node_schema();
    assert!(
        s.validate(
            &json!({"spec": {"resources": {"cpus": 4.0}, "port": 80}}),
            None
        )
        .is_empty()
    );
    assert!(
        s.validate(&json!({"spec": {"resources": {}, "port": "http"}}), None)
            .is_empty()
    );
    let errors = s.validate(
        &json!({"spec": {"resources": {"cpus": 1.5}, "port": true}}),
        None,
    );
    assert_eq!(
        messages(&errors),
        [
            "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
            "spec.resources.cpus: Invalid value: \"number\": spec.resources.cpus in body must be of type integer: \"number\"",
        ]
    );
}

#[test]
fn max_items_and_map_values_and_duplicates() {
    let s = node_schema();
    let errors = s.validate(
        &json!({"spec": {"resources": {}, "contracts": [{"name": "a"}, {"name": "b"}, {"name": "a"}],
            "tags": ["x", "y", "x"], "labels": {"k": "long"}}}),
        None,
    );
    assert_eq!(
        messages(&errors),
        [
            "spec.contracts: Too many: 3: must have at most 2 items",
            "spec.labels.k: Too long: may not be more than 3 bytes",
            "spec.contracts[2]: Duplicate value: map[string]interface {}{\"name\":\"a\"}",
            "spec.tags[2]: Duplicate value: \"x\"",
        ]
    );
}

#[test]
fn null_is_a_type_error_unless_nullable() {
    let s = schema(json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}));
    assert!(s.validate(&json!({"b": null}), None).is_empty());
    assert_eq!(
        messages(&s.validate(&json!({"a": null}), None)),
        ["a: Invalid value: \"null\": a in body must be of type string: \"null\""]
    );
    // ... but pruning drops non-nullable nulls first, as the real server does
    let mut o = json!({"a": null, "b": null});
    assert!(s.prune(&mut o).is_empty());
    assert_eq!(o, json!({"b": null}));
}

#[test]
fn defaults_fill_missing_keys_without_creating_parents() {
    let s = node_schema();
    let mut o = json!({"spec": {"resources": {}, "contracts": [{"name": "a"}, {"name": "b", "weight": 5}]}});
    s.apply_defaults(&mut o);
    assert_eq!(
        o,
        json!({"spec": {"resources": {"cpus": 2}, "mode": "Auto",
            "contracts": [{"name": "a", "weight": 1}, {"name": "b", "weight": 5}]}})
    );
    // spec.optionalThing is absent: its default child must not create it
    assert!(o["spec"].get("optionalThing").is_none());
    // no spec at all: nothing is created
    let mut empty = json!({"apiVersion": "x/v1", "kind": "K"});
    s.apply_defaults(&mut empty);
    assert_eq!(empty, json!({"apiVersion": "x/v1", "kind": "K"}));
}

#[test]
fn defaults_replace_non_nullable_null() {
    let s = node_schema();
    let mut o = json!({"spec": {"mode": null, "resources": {}}});
    s.apply_defaults(&mut o);
    assert_eq!(o["spec"]["mode"], json!("Auto"));
}

#[test]
fn defaults_apply_to_map_values() {
    let s = schema(
        json!({"type": "object", "properties": {"m": {"type": "object",
        "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer", "default": 7}}}}}}),
    );
    let mut o = json!({"m": {"a": {}, "b": {"v": 1}}});
    s.apply_defaults(&mut o);
    assert_eq!(o, json!({"m": {"a": {"v": 7}, "b": {"v": 1}}}));
}

#[test]
fn prune_reports_unknown_paths_and_keeps_meta_and_preserved() {
    let s = node_schema();
    let mut o = json!({
        "apiVersion": "x/v1", "kind": "K",
        "metadata": {"name": "n", "labels": {"a": "b"}, "bogus": 1},
        "spec": {"foo": 1, "resources": {"cpus": 2, "gpu": 1}, "raw": {"anything": {"goes": true}},
            "contracts": [{"name": "a", "extra": 1}]},
        "other": true
    });
    let unknown = s.prune(&mut o);
    assert_eq!(
        unknown,
        [
            "metadata.bogus",
            "other",
            "spec.contracts[0].extra",
            "spec.foo",
            "spec.resources.gpu"
        ]
    );
    assert_eq!(
        o,
        json!({
            "apiVersion": "x/v1", "kind": "K",
            "metadata": {"name": "n", "labels": {"a": "b"}},
            "spec": {"resources": {"cpus": 2}, "raw": {"anything": {"goes": true}}, "contracts": [{"name": "a"}]}
        })
    );
}

#[test]
fn prune_embedded_resource_keeps_type_meta() {
    let s = schema(json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}));
    let mut o = json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1}, "spec": {}}});
    let unknown = s.prune(&mut o);
    assert_eq!(unknown, ["template.metadata.junk"]);
    assert_eq!(
        o,
        json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}})
    );
}

#[test]
fn non_structural_schemas_are_rejected_with_paths() {
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "spec": {"properties": {"a": {"type": "string"}}},
        "list": {"type": "array"}
    }}))
    .unwrap_err();
    let texts = messages(err.field_errors());
    assert_eq!(
        texts,
        [
            "openAPIV3Schema.properties[list].items: Required value: must be specified",
            "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ]
    );
    assert!(StructuralSchema::from_value(&json!({"type": "string"})).is_err());
    assert!(
        StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "a": {"type": "string", "pattern": "("}}}))
        .is_err()
    );
}

#[test]
fn list_types_for_server_side_apply() {
    let s = node_schema();
    assert_eq!(
        s.list_type(&["spec", "contracts"]),
        ListType::Map(vec!["name".into()])
    );
    assert_eq!(s.list_type(&["spec", "tags"]), ListType::Set);
    assert_eq!(s.list_type(&["spec", "nothing"]), ListType::Atomic);
    assert_eq!(
        s.list_type(&["spec", "contracts", "name"]),
        ListType::Atomic
    );
    assert!(s.sub_schema(&["spec", "contracts", "weight"]).is_some());
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let s = node_schema();
    let old = json!({"spec": {"resources": {"cpus": 0}, "name": "a"}});
    let new = json!({"spec": {"resources": {"cpus": 0}, "name": "ab"}});
    assert!(s.validate(&new, Some(&old)).is_empty());
    let changed = json!({"spec": {"resources": {"cpus": -1}, "name": "ab"}});
    assert_eq!(s.validate(&changed, Some(&old)).len(), 1);
}

#[test]
fn schema_is_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<StructuralSchema>();
}

#[test]
fn invalid_defaults_reject_the_crd() {
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {
            "cpus": {"type": "integer", "minimum": 1, "default": 0},
            "resources": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"b": "x"}}
        }}}}))
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[spec].properties[cpus].default: Invalid value: 0:  in body should be greater than or equal to 1",
            "openAPIV3Schema.properties[spec].properties[resources].default: Invalid value: map[string]interface {}{\"b\":\"x\"}: must not have unknown fields",
        ]
    );
    assert!(StructuralSchema::from_value(&json!({"type": "object", "properties": {"spec": {
        "type": "object", "default": {}, "properties": {"a": {"type": "string", "default": "x"}}}}}))
    .is_ok());
}

#[test]
fn preserve_unknown_root_keeps_metadata_whole() {
    let s = schema(
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
        "spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    );
    let mut o = json!({"metadata": {"name": "n", "labels": {"x": "y"}}, "spec": {"a": "1", "b": 2}, "extra": 1});
    assert_eq!(s.prune(&mut o), ["spec.b"]);
    assert_eq!(
        o,
        json!({"metadata": {"name": "n", "labels": {"x": "y"}}, "spec": {"a": "1"}, "extra": 1})
    );
}

#[test]
fn embedded_resources_need_type_meta() {
    let s = schema(json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}}}));
    assert!(
        s.validate(
            &json!({"template": {"apiVersion": "v1", "kind": "Pod"}}),
            None
        )
        .is_empty()
    );
    assert_eq!(
        messages(&s.validate(&json!({"template": {"kind": ""}}), None)),
        [
            "template.apiVersion: Required value",
            "template.kind: Invalid value: \"\": must not be empty"
        ]
    );
}

#[test]
fn list_extension_errors_match_crd_validation() {
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "missing"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "b": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {}}},
        "c": {"type": "string", "x-kubernetes-list-type": "atomic"},
        "d": {"type": "array", "items": {"type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}
    }}))
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[a].x-kubernetes-list-map-keys: Invalid value: []string{\"name\", \"missing\"}: entries must all be names of item properties",
            "openAPIV3Schema.properties[a].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            "openAPIV3Schema.properties[b].items.x-kubernetes-map-type: Invalid value: \"null\": must be atomic as item of a list with x-kubernetes-list-type=set",
            "openAPIV3Schema.properties[c].type: Invalid value: \"string\": must be array if x-kubernetes-list-type is specified",
        ]
    );
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "d": {"type": "array", "items": {"type": "string",
            "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}}))
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[d].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[d]"
        ]
    );
}

#[test]
fn unsupported_keywords_are_forbidden() {
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "a": {"type": "object", "$ref": "#/x"},
        "b": {"type": "array", "items": [{"type": "string"}]},
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}
    }}))
    .unwrap_err();
    let texts = messages(err.field_errors());
    assert!(
        texts.contains(
            &"openAPIV3Schema.properties[a].$ref: Forbidden: $ref is not supported".to_string()
        ),
        "{texts:?}"
    );
    assert!(
        texts.contains(&"openAPIV3Schema.properties[b].items: Forbidden: items must be a schema object and not an array".to_string()),
        "{texts:?}"
    );
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}}}))
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"
        ]
    );
}

#[test]
fn patterns_have_re2_ascii_classes() {
    let s = schema(json!({"type": "object", "properties": {
        "n": {"type": "string", "pattern": "^\\d+$"},
        "w": {"type": "string", "pattern": "^[\\w-]+\\b$"},
        "s": {"type": "string", "pattern": "^a\\sb$"}}}));
    assert!(
        s.validate(&json!({"n": "123", "w": "a-b_c", "s": "a b"}), None)
            .is_empty()
    );
    let errors = s.validate(&json!({"n": "١٢", "w": "é", "s": "a\u{2003}b"}), None);
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert_eq!(
        errors[0].message,
        "Invalid value: \"١٢\": n in body should match '^\\d+$'"
    );
}

#[test]
fn int_or_string_any_of_pattern_is_structural() {
    let s = schema(json!({"type": "object", "properties": {"port": {
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]}}}));
    assert!(s.validate(&json!({"port": 80}), None).is_empty());
    assert!(s.validate(&json!({"port": "http"}), None).is_empty());
    assert!(!s.validate(&json!({"port": true}), None).is_empty());
    assert!(
        StructuralSchema::from_value(&json!({"type": "object", "properties": {"p": {
        "type": "string", "anyOf": [{"type": "string"}, {"maxLength": 3}]}}}))
        .is_err()
    );
    assert!(
        StructuralSchema::from_value(&json!({"type": "object", "properties": {"e": {
        "type": "object", "x-kubernetes-embedded-resource": true}}}))
        .is_err()
    );
}

#[test]
fn value_validations_must_name_structural_fields() {
    let err = StructuralSchema::from_value(&json!({"type": "object",
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}},
        "anyOf": [{"properties": {"spec": {"required": ["a"]}}}, {"properties": {"status": {"required": ["b"]}}}]}))
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[status]: Required value: because it is defined in openAPIV3Schema.anyOf[1].properties[status]"
        ]
    );
}

#[test]
fn metadata_only_updates_pass_unless_something_reads_metadata_or_a_transition_rule_may_fail() {
    let spec_with = |rule: Value| {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "string", "x-kubernetes-validations": [rule]}}
        }}})
    };
    let passing = [
        json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
        json!({"type": "object", "properties": {"metadata": {"type": "object"}, "spec": {"type": "object"}}}),
        spec_with(json!({"rule": "self == oldSelf", "message": "immutable"})),
        spec_with(json!({"rule": "oldSelf  ==  self"})),
        spec_with(json!({"rule": "self.size() < 5"})),
    ];
    for raw in passing {
        assert!(schema(raw.clone()).passes_metadata_only_updates(), "{raw}");
    }
    let reading = [
        json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 9"}],
               "properties": {"spec": {"type": "object"}}}),
        json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 9}}}}}),
        spec_with(json!({"rule": "self >= oldSelf"})),
        spec_with(
            json!({"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "optionalOldSelf": true}),
        ),
    ];
    for raw in reading {
        assert!(!schema(raw.clone()).passes_metadata_only_updates(), "{raw}");
    }
}

#[test]
fn a_metadata_only_update_pass_prunes_only_unknown_object_meta_keys() {
    let s = node_schema();
    let old = json!({"metadata": {"name": "n"}, "spec": {"resources": {"cpus": 2}}});
    let mut o = json!({"metadata": {"name": "n", "bogus": 1}, "spec": {"resources": {"cpus": 2}}});
    let pass = s.update_pass(&mut o, &old).unwrap();
    assert_eq!(pass.pruned, ["metadata.bogus"]);
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    assert_eq!(o, old);
}

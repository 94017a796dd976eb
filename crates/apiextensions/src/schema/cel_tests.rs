#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::StructuralSchema;
use super::tests::{messages, schema};
use crate::error::FieldErrorKind;

fn market_schema() -> StructuralSchema {
    schema(json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "!(has(self.local) && has(self.other))", "message": "at most one market may be set"}
        ],
        "properties": {
            "nodeName": {"type": "string", "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "nodeName is immutable"}]},
            "local": {"type": "object", "properties": {"x": {"type": "integer"}}},
            "other": {"type": "object", "properties": {"y": {"type": "integer"}}},
            "count": {"type": "integer", "x-kubernetes-validations": [
                {"rule": "self <= 3", "messageExpression": "'count ' + string(self) + ' exceeds 3'", "reason": "FieldValueForbidden"}]}
        }
    }}}))
}

#[test]
fn cel_rule_on_object() {
    let s = market_schema();
    assert!(
        s.validate(&json!({"spec": {"local": {"x": 1}}}), None)
            .is_empty()
    );
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"local": {}, "other": {}}}), None)),
        ["spec: Invalid value: \"object\": at most one market may be set"]
    );
}

#[test]
fn cel_transition_rule_runs_on_update_only() {
    let s = market_schema();
    let old = json!({"spec": {"nodeName": "a"}});
    let new = json!({"spec": {"nodeName": "b"}});
    assert!(
        s.validate(&new, None).is_empty(),
        "create: no oldSelf, rule skipped"
    );
    assert_eq!(
        messages(&s.validate(&new, Some(&old))),
        ["spec.nodeName: Invalid value: \"string\": nodeName is immutable"]
    );
    assert!(s.validate(&old, Some(&old)).is_empty());
    // setting it for the first time on update: no old value at that path
    assert!(s.validate(&new, Some(&json!({"spec": {}}))).is_empty());
}

#[test]
fn cel_message_expression_and_reason() {
    let s = market_schema();
    let errors = s.validate(&json!({"spec": {"count": 5}}), None);
    assert_eq!(
        messages(&errors),
        ["spec.count: Forbidden: count 5 exceeds 3"]
    );
    assert_eq!(errors[0].kind, FieldErrorKind::Forbidden);
}

#[test]
fn cel_skipped_after_blocking_errors() {
    let s = market_schema();
    let errors = s.validate(
        &json!({"spec": {"count": "x", "local": {}, "other": {}}}),
        None,
    );
    assert_eq!(
        messages(&errors),
        [
            "spec.count: Invalid value: \"string\": spec.count in body must be of type integer: \"string\"",
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ]
    );
}

#[test]
fn cel_rules_that_do_not_compile_reject_the_crd() {
    let err = StructuralSchema::from_value(&json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}]}}}))
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.a >\": compilation failed"),
        "{text}"
    );
    assert!(
        StructuralSchema::from_value(&json!({"type": "object", "x-kubernetes-validations": [
        {"rule": "self.nosuchfunction()"}]}))
        .is_err()
    );
}

#[test]
fn cel_common_functions_work() {
    let s = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [
            {"rule": "size(self.items) <= 2"},
            {"rule": "self.name.startsWith('n') && self.name.matches('^[a-z]+$')"},
            {"rule": "self.items.all(i, i > 0)"},
            {"rule": "!has(self.extra) || self.extra.size() > 0"}
        ],
        "properties": {
            "items": {"type": "array", "items": {"type": "integer"}},
            "name": {"type": "string"},
            "extra": {"type": "string"}
        }}}}),
    );
    assert!(
        s.validate(&json!({"spec": {"items": [1, 2], "name": "node"}}), None)
            .is_empty()
    );
    let errors = s.validate(
        &json!({"spec": {"items": [1, 0, 3], "name": "Node", "extra": ""}}),
        None,
    );
    assert_eq!(
        messages(&errors),
        [
            "spec: Invalid value: \"object\": failed rule: size(self.items) <= 2",
            "spec: Invalid value: \"object\": failed rule: self.name.startsWith('n') && self.name.matches('^[a-z]+$')",
            "spec: Invalid value: \"object\": failed rule: self.items.all(i, i > 0)",
            "spec: Invalid value: \"object\": failed rule: !has(self.extra) || self.extra.size() > 0",
        ]
    );
}

#[test]
fn cel_sees_date_time_as_timestamp() {
    let s = schema(
        json!({"type": "object", "properties": {"since": {"type": "string", "format": "date-time",
        "x-kubernetes-validations": [{"rule": "self < timestamp('2030-01-01T00:00:00Z')", "message": "too late"}]}}}),
    );
    assert!(
        s.validate(&json!({"since": "2024-01-01T00:00:00Z"}), None)
            .is_empty()
    );
    assert_eq!(
        messages(&s.validate(&json!({"since": "2031-01-01T00:00:00Z"}), None)),
        ["since: Invalid value: \"string\": too late"]
    );
}

#[test]
fn cel_matches_uses_re2_classes() {
    let s = schema(
        json!({"type": "object", "properties": {"n": {"type": "string",
        "x-kubernetes-validations": [{"rule": "self.matches('^\\\\d+$')", "message": "digits"}]}}}),
    );
    assert!(s.validate(&json!({"n": "42"}), None).is_empty());
    assert_eq!(s.validate(&json!({"n": "١٢"}), None).len(), 1);
}

#[test]
fn cel_rules_selecting_undeclared_fields_reject_the_crd() {
    let with_rule = |rule: &str| {
        StructuralSchema::from_value(&json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [{"rule": rule}],
        "properties": {
            "replicas": {"type": "integer"},
            "my-field": {"type": "string"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}}))
    };
    for ok in [
        "self.replicas > 0",
        "has(self.my__dash__field)",
        "self.items.all(i, i.name != '')",
        "has(self.labels.anything) && self.raw.whatever == 1",
        "self.items[0].name == 'a'",
    ] {
        assert!(with_rule(ok).is_ok(), "{ok}");
    }
    let err = with_rule("has(self.replicsa)").unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"has(self.replicsa)\": compilation failed: ERROR: undefined field 'replicsa'"
        ]
    );
    assert!(with_rule("self.items.exists(i, i.nmae == 'x')").is_err());
    let root_rule = StructuralSchema::from_value(&json!({"type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 10 && self.kind == 'K'"}]}));
    assert!(root_rule.is_ok());
    let root_labels = StructuralSchema::from_value(&json!({"type": "object",
        "x-kubernetes-validations": [{"rule": "has(self.metadata.labels)"}]}));
    assert!(root_labels.is_err());
}

#[test]
fn cel_field_path_names_the_error_field() {
    let s = schema(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min above max", "fieldPath": ".min"}],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}}}}),
    );
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"min": 3, "max": 1}}), None)),
        ["spec.min: Invalid value: \"object\": min above max"]
    );
    let err = StructuralSchema::from_value(
        &json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".nope"}],
        "properties": {"min": {"type": "integer"}}}}}),
    )
    .unwrap_err();
    assert_eq!(
        messages(err.field_errors()),
        [
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path"
        ]
    );
}

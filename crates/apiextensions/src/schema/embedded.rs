//! Type meta of nested `x-kubernetes-embedded-resource` objects (apiextensions-apiserver
//! `schema/objectmeta/validation.go`): `apiVersion` and `kind` are required strings, the
//! kind a DNS-1035 label in any case. The root is left to the server's own checks.

use serde_json::{Map, Value};

use super::parse::Node;
use super::path::Path;
use crate::error::{BadValue, FieldError};

/// Walks the object and validates every embedded resource below the root.
pub(crate) fn validate(node: &Node, path: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            if node.embedded_resource {
                validate_type_meta(path, map, errors);
            }
            for (key, child) in map {
                if let Some(prop) = node.properties.get(key) {
                    validate(prop, &path.field(key), child, errors);
                } else if let Some(values) = node.additional_properties.as_deref() {
                    validate(values, &path.key(key), child, errors);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    validate(item_node, &path.index(i), item, errors);
                }
            }
        }
        _ => {}
    }
}

fn validate_type_meta(path: &Path<'_>, map: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    for key in ["apiVersion", "kind"] {
        let field = path.field(key).to_string();
        match map.get(key) {
            None => errors.push(FieldError::required(&field, "")),
            Some(Value::String(s)) if s.is_empty() => {
                errors.push(FieldError::invalid(
                    &field,
                    BadValue::Str(s),
                    "must not be empty",
                ));
            }
            Some(Value::String(s)) if key == "apiVersion" => {
                if s.split('/').count() > 2 {
                    let detail = format!("unexpected GroupVersion string: {s}");
                    errors.push(FieldError::invalid(&field, BadValue::Str(s), &detail));
                }
            }
            Some(Value::String(s)) => {
                if !is_dns1035_label(&s.to_lowercase()) {
                    errors.push(FieldError::invalid(
                        &field,
                        BadValue::Str(s),
                        "may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                    ));
                }
            }
            Some(other) => errors.push(FieldError::invalid(
                &field,
                BadValue::Json(other),
                "must be a string",
            )),
        }
    }
}

fn is_dns1035_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

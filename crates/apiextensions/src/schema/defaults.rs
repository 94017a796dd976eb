//! Structural defaulting (apiextensions-apiserver `schema/defaulting/algorithm.go`): a
//! `default` fills a key missing from an object that exists (or a non-nullable `null`);
//! defaults under `items` and `additionalProperties` apply to every element. Absent parents
//! are never created, so a default deep inside an absent object does nothing.

use serde_json::Value;

use super::parse::Node;
use crate::error::{BadValue, FieldError};

fn is_non_nullable_null(value: &Value, node: &Node) -> bool {
    value.is_null() && !node.nullable
}

/// Applies defaults in place.
pub(crate) fn apply(value: &mut Value, node: &Node) {
    match value {
        Value::Object(map) => {
            for (key, prop) in &node.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = map.get(key).is_none_or(|v| is_non_nullable_null(v, prop));
                if missing {
                    map.insert(key.clone(), default.clone());
                }
            }
            for (key, child) in map.iter_mut() {
                if let Some(prop) = node.properties.get(key) {
                    apply(child, prop);
                } else if let Some(values) = node.additional_properties.as_deref() {
                    if is_non_nullable_null(child, values) {
                        *child = values.default.clone().unwrap_or(Value::Null);
                    }
                    apply(child, values);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            for item in items.iter_mut() {
                if is_non_nullable_null(item, item_node) {
                    *item = item_node.default.clone().unwrap_or(Value::Null);
                }
                apply(item, item_node);
            }
        }
        _ => {}
    }
}

/// As [`apply`] on an object whose `node` has no `additionalProperties`, for its keys
/// `keys` only.
pub(crate) fn apply_keys(value: &mut Value, node: &Node, keys: &[String]) {
    let Value::Object(map) = value else { return };
    for key in keys {
        let Some(prop) = node.properties.get(key) else {
            continue;
        };
        if let Some(default) = &prop.default
            && map.get(key).is_none_or(|v| is_non_nullable_null(v, prop))
        {
            map.insert(key.clone(), default.clone());
        }
        if let Some(child) = map.get_mut(key) {
            apply(child, prop);
        }
    }
}

/// Checks every `default` at CRD registration like the real server
/// (`schema/defaulting/validation.go`): it must not have unknown fields and must validate
/// against its own schema, CEL rules included. Defaults inside the root `metadata` are left
/// to the ObjectMeta checks and not validated here.
pub(crate) fn check(node: &Node, path: &str, inside_meta: bool, errors: &mut Vec<FieldError>) {
    if let Some(default) = &node.default
        && !inside_meta
    {
        let default_path = format!("{path}.default");
        let mut pruned = default.clone();
        super::prune::prune_value(&mut pruned, node);
        if &pruned != default {
            errors.push(FieldError::invalid(
                &default_path,
                BadValue::Json(default),
                "must not have unknown fields",
            ));
        }
        let mut found = Vec::new();
        super::validate::validate_value(node, &super::path::Path::ROOT, default, None, &mut found);
        if found.is_empty() {
            super::cel::with_context(|ctx| {
                super::cel::evaluate_rules(
                    ctx,
                    node,
                    "",
                    default,
                    Some(default),
                    false,
                    &mut found,
                );
            });
        }
        for mut error in found {
            error.field = match error.field.as_str() {
                "<nil>" | "" => default_path.clone(),
                f if f.starts_with('[') => format!("{default_path}{f}"),
                f => format!("{default_path}.{f}"),
            };
            errors.push(error);
        }
    }
    if let Some(items) = node.items.as_deref() {
        check(items, &format!("{path}.items"), inside_meta, errors);
    }
    for (key, prop) in &node.properties {
        let meta = inside_meta
            || (path_is_resource(node)
                && matches!(key.as_str(), "metadata" | "apiVersion" | "kind"));
        check(prop, &format!("{path}.properties[{key}]"), meta, errors);
    }
}

fn path_is_resource(node: &Node) -> bool {
    node.embedded_resource
}

//! Structural defaulting (apiextensions-apiserver `schema/defaulting/algorithm.go`): a
//! `default` fills a key missing from an object that exists (or a non-nullable `null`);
//! defaults under `items` and `additionalProperties` apply to every element. Absent parents
//! are never created, so a default deep inside an absent object does nothing.

use serde_json::Value;

use super::parse::Node;

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

//! `x-kubernetes-list-type` invariants: no duplicate items in a `set`, no duplicate keys in a
//! `map` (apiextensions-apiserver `schema/listtype`).

use serde_json::{Map, Value};

use super::parse::Node;
use super::path::Path;
use crate::error::{BadValue, FieldError};

/// Validates every set and map list under an object at `path` (empty for the root).
pub(crate) fn validate_object(
    node: &Node,
    path: &Path<'_>,
    object: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    if let Some(values) = node.additional_properties.as_deref() {
        for (key, value) in object {
            validate_any(values, &path.key(key), value, errors);
        }
    }
    for (key, value) in object {
        if let Some(prop) = node.properties.get(key) {
            validate_any(prop, &path.field(key), value, errors);
        }
    }
}

/// As [`validate_object`] at the root, whose node has no `additionalProperties`, for the
/// keys `keys` only.
pub(crate) fn validate_keys(
    node: &Node,
    object: &Map<String, Value>,
    keys: &[String],
    errors: &mut Vec<FieldError>,
) {
    for (key, value) in object {
        if keys.contains(key)
            && let Some(prop) = node.properties.get(key)
        {
            validate_any(prop, &Path::Text(key), value, errors);
        }
    }
}

fn validate_any(node: &Node, path: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    match value {
        Value::Array(items) => validate_array(node, path, items, errors),
        Value::Object(object) => validate_object(node, path, object, errors),
        _ => {}
    }
}

fn validate_array(node: &Node, path: &Path<'_>, items: &[Value], errors: &mut Vec<FieldError>) {
    match node.list_type.as_deref() {
        Some("set") => {
            for i in duplicate_indices(items.iter().cloned()) {
                errors.push(FieldError::duplicate(
                    &path.index(i).to_string(),
                    BadValue::Json(&items[i]),
                ));
            }
        }
        Some("map") => validate_map_list(node, path, items, errors),
        _ => {}
    }
    if let Some(item_node) = node.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            validate_any(item_node, &path.index(i), item, errors);
        }
    }
}

fn validate_map_list(node: &Node, path: &Path<'_>, items: &[Value], errors: &mut Vec<FieldError>) {
    if let Some((i, item)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !x.is_object() && !x.is_null())
    {
        errors.push(FieldError::invalid(
            &path.index(i).to_string(),
            BadValue::Json(item),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|item| map_key(&node.list_map_keys, item))
        .collect();
    for i in duplicate_indices(keys.iter().cloned()) {
        errors.push(FieldError::duplicate(
            &path.index(i).to_string(),
            BadValue::Json(&keys[i]),
        ));
    }
}

/// The key object of a list-map item: the key fields it has.
pub(crate) fn map_key(key_fields: &[String], item: &Value) -> Value {
    let mut key = Map::new();
    for field in key_fields {
        if let Some(v) = item.get(field) {
            key.insert(field.clone(), v.clone());
        }
    }
    Value::Object(key)
}

/// Indices of the second occurrence of each value seen more than once.
fn duplicate_indices(values: impl Iterator<Item = Value>) -> Vec<usize> {
    let mut seen: Vec<(Value, usize)> = Vec::new();
    let mut out = Vec::new();
    for (i, v) in values.enumerate() {
        match seen.iter_mut().find(|(s, _)| *s == v) {
            Some((_, times)) => {
                *times += 1;
                if *times == 2 {
                    out.push(i);
                }
            }
            None => seen.push((v, 1)),
        }
    }
    out
}

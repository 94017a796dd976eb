//! Pruning of unknown fields (apiextensions-apiserver `schema/pruning/algorithm.go`, the
//! ObjectMeta coercion of `schema/objectmeta` and `PruneNonNullableNullsWithoutDefaults`).
//! Paths of removed fields use apimachinery's form: `spec.foo`, `spec.items[0].bar`,
//! `metadata.foo`; they are sorted, metadata first, like the real server's unknown-field list.

use serde_json::{Map, Value};

use super::parse::Node;
use super::path::Path;

/// The fields of `metav1.ObjectMeta`; anything else under an (embedded) resource's
/// `metadata` is dropped.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Prunes a whole resource (the root counts as an embedded resource) and returns the paths
/// of removed unknown fields.
pub(crate) fn prune_resource(object: &mut Value, root: &Node) -> Vec<String> {
    let mut meta_unknown = Vec::new();
    if let Some(meta) = object.get_mut("metadata") {
        prune_object_meta(meta, &Path::Text("metadata"), &mut meta_unknown);
    }
    let mut unknown = Vec::new();
    prune(object, Some(root), &Path::ROOT, true, &mut unknown);
    unknown.sort();
    prune_nulls(object, Some(root));
    meta_unknown.extend(unknown);
    meta_unknown
}

/// Prunes the keys of the root's `metadata` that ObjectMeta does not have (the first step
/// of [`prune_resource`]).
pub(crate) fn prune_root_metadata(object: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(meta) = object.get_mut("metadata") {
        prune_object_meta(meta, &Path::Text("metadata"), &mut unknown);
    }
    unknown
}

/// As [`prune_resource`] for a root without `x-kubernetes-preserve-unknown-fields` or
/// `additionalProperties`, below the top-level keys `keys` only (and `metadata`).
pub(crate) fn prune_resource_keys(object: &mut Value, root: &Node, keys: &[String]) -> Vec<String> {
    let mut meta_unknown = prune_root_metadata(object);
    let Value::Object(map) = object else {
        return meta_unknown;
    };
    let mut unknown = Vec::new();
    for key in keys {
        if META_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if let Some(prop) = root.properties.get(key) {
            if let Some(v) = map.get_mut(key) {
                prune(v, Some(prop), &Path::Text(key), false, &mut unknown);
            }
        } else if map.remove(key).is_some() {
            unknown.push(key.clone());
        }
    }
    unknown.sort();
    for key in keys {
        let child = root.child(key);
        let drop = child.is_some_and(|c| !c.nullable && c.default.is_none())
            && map.get(key).is_some_and(Value::is_null);
        if drop {
            map.remove(key);
        } else if let Some(v) = map.get_mut(key) {
            prune_nulls(v, child);
        }
    }
    meta_unknown.extend(unknown);
    meta_unknown
}

/// Prunes a value against a sub-schema (for checking `default`s at CRD registration).
pub(crate) fn prune_value(value: &mut Value, node: &Node) -> Vec<String> {
    let mut unknown = Vec::new();
    prune(
        value,
        Some(node),
        &Path::ROOT,
        node.embedded_resource,
        &mut unknown,
    );
    unknown
}

fn prune_object_meta(meta: &mut Value, path: &Path<'_>, unknown: &mut Vec<String>) {
    let Value::Object(map) = meta else { return };
    let mut removed: Vec<String> = map
        .keys()
        .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
        .cloned()
        .collect();
    removed.sort();
    for key in removed {
        map.remove(&key);
        unknown.push(format!("{path}.{key}"));
    }
}

fn prune(
    value: &mut Value,
    node: Option<&Node>,
    path: &Path<'_>,
    embedded_root: bool,
    unknown: &mut Vec<String>,
) {
    if let Some(n) = node
        && n.preserve_unknown_fields
    {
        skip_prune(value, n, path, embedded_root, unknown);
        return;
    }
    match value {
        Value::Object(map) => {
            let Some(node) = node else {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in &keys {
                    unknown.push(path.field(key).to_string());
                }
                map.clear();
                return;
            };
            let embedded = embedded_root || node.embedded_resource;
            if node.embedded_resource
                && !path.is_empty()
                && let Some(meta) = map.get_mut("metadata")
            {
                prune_object_meta(meta, &path.field("metadata"), unknown);
            }
            prune_map(map, node, path, embedded, unknown, false);
        }
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune(item, item_node, &path.index(i), false, unknown);
            }
        }
        _ => {}
    }
}

fn prune_map(
    map: &mut Map<String, Value>,
    node: &Node,
    path: &Path<'_>,
    embedded: bool,
    unknown: &mut Vec<String>,
    preserve: bool,
) {
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in &keys {
        if embedded && META_FIELDS.contains(&key.as_str()) {
            continue;
        }
        let child_path = path.field(key);
        if let Some(prop) = node.properties.get(key) {
            if let Some(v) = map.get_mut(key) {
                prune(v, Some(prop), &child_path, false, unknown);
            }
        } else if node.is_map() {
            if let Some(v) = map.get_mut(key) {
                prune(
                    v,
                    node.additional_properties.as_deref(),
                    &child_path,
                    false,
                    unknown,
                );
            }
        } else if !preserve {
            map.remove(key);
            unknown.push(child_path.to_string());
        }
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`: unknown keys stay, known ones are pruned.
fn skip_prune(
    value: &mut Value,
    node: &Node,
    path: &Path<'_>,
    embedded_root: bool,
    unknown: &mut Vec<String>,
) {
    match value {
        Value::Object(map) => {
            let embedded = embedded_root || node.embedded_resource;
            if embedded
                && !path.is_empty()
                && let Some(meta) = map.get_mut("metadata")
            {
                prune_object_meta(meta, &path.field("metadata"), unknown);
            }
            prune_map(map, node, path, embedded, unknown, true);
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            for (i, item) in items.iter_mut().enumerate() {
                skip_prune(item, item_node, &path.index(i), false, unknown);
            }
        }
        _ => {}
    }
}

/// Drops `null`s of non-nullable fields that have no default (the real server does so right
/// after pruning, so a `null` never reaches validation as a type error).
fn prune_nulls(value: &mut Value, node: Option<&Node>) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let child = node.and_then(|n| n.child(&key));
                let drop = child.is_some_and(|c| !c.nullable && c.default.is_none())
                    && map.get(&key).is_some_and(Value::is_null);
                if drop {
                    map.remove(&key);
                } else if let Some(v) = map.get_mut(&key) {
                    prune_nulls(v, child);
                }
            }
        }
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            for item in items.iter_mut() {
                prune_nulls(item, item_node);
            }
        }
        _ => {}
    }
}

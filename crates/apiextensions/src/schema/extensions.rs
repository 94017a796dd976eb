//! CRD registration checks of the `x-kubernetes-*` list and map extensions
//! (apiextensions `validation.go`: `ValidateCustomResourceDefinitionOpenAPISchema` and
//! `validateMapListKeysMapSet`), with the real server's paths and messages.

use serde_json::{Map, Value};

use super::parse::Node;
use crate::error::{BadValue, FieldError, go_quote};

/// Checks one node's extensions; `raw` is the node as written.
pub(crate) fn check(
    node: &Node,
    raw: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let ty = node.ty.as_deref().unwrap_or("");
    if raw.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(FieldError::invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(&Value::Bool(false)),
            "must be true or undefined",
        ));
    }
    if let Some(map_type) = raw.get("x-kubernetes-map-type").and_then(Value::as_str) {
        type_must_be(ty, "object", "x-kubernetes-map-type", path, errors);
        if !matches!(map_type, "atomic" | "granular") {
            errors.push(FieldError::not_supported(
                &format!("{path}.x-kubernetes-map-type"),
                &Value::String(map_type.to_string()),
                &["atomic", "granular"].map(String::from),
            ));
        }
    }
    let list_type = node.list_type.as_deref();
    if list_type.is_some() && ty != "array" {
        type_must_be(ty, "array", "x-kubernetes-list-type", path, errors);
    } else if list_type == Some("set")
        && let Some(items) = node.items.as_deref()
    {
        check_set_items(items, path, errors);
    }
    if let Some(lt) = list_type
        && !matches!(lt, "atomic" | "set" | "map")
    {
        errors.push(FieldError::not_supported(
            &format!("{path}.x-kubernetes-list-type"),
            &Value::String(lt.to_string()),
            &["atomic", "set", "map"].map(String::from),
        ));
    }
    if !node.list_map_keys.is_empty() {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errors.push(FieldError::required(
                &format!("{path}.x-kubernetes-list-type"),
                detail,
            )),
            Some("map") => {}
            Some(other) => {
                errors.push(FieldError::invalid(
                    &format!("{path}.x-kubernetes-list-type"),
                    BadValue::Str(other),
                    detail,
                ));
            }
        }
    }
    if list_type == Some("map") {
        check_map_list(node, path, errors);
    }
    if let (Some(lt @ ("set" | "map")), Some(items)) = (list_type, node.items.as_deref()) {
        check_map_set_keys(node, items, lt, path, errors);
    }
}

fn type_must_be(ty: &str, wanted: &str, extension: &str, path: &str, errors: &mut Vec<FieldError>) {
    if ty == wanted {
        return;
    }
    let detail = format!("must be {wanted} if {extension} is specified");
    let field = format!("{path}.type");
    if ty.is_empty() {
        errors.push(FieldError::required(&field, &detail));
    } else {
        errors.push(FieldError::invalid(&field, BadValue::Str(ty), &detail));
    }
}

/// Items of a set must be scalars, atomic lists or atomic maps.
fn check_set_items(items: &Node, path: &str, errors: &mut Vec<FieldError>) {
    let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
    match items.ty.as_deref() {
        Some("array") => {
            if let Some(lt) = items.list_type.as_deref()
                && lt != "atomic"
            {
                errors.push(FieldError::invalid(
                    &format!("{path}.items.x-kubernetes-list-type"),
                    BadValue::Str(lt),
                    detail,
                ));
            }
        }
        // the real server passes the item's (nil) list type as the bad value
        Some("object")
            if items
                .raw
                .get("x-kubernetes-map-type")
                .and_then(Value::as_str)
                != Some("atomic") =>
        {
            errors.push(FieldError::invalid(
                &format!("{path}.items.x-kubernetes-map-type"),
                BadValue::Json(&Value::Null),
                detail,
            ));
        }
        _ => {}
    }
}

fn check_map_list(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    let keys_path = format!("{path}.x-kubernetes-list-map-keys");
    if node.list_map_keys.is_empty() {
        errors.push(FieldError::required(
            &keys_path,
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = node.items.as_deref() else {
        errors.push(FieldError::required(
            &format!("{path}.items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    let item_type = items.ty.as_deref().unwrap_or("");
    if item_type != "object" {
        errors.push(FieldError::invalid(
            &format!("{path}.items.type"),
            BadValue::Str(item_type),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let keys_go = format!(
        "[]string{{{}}}",
        node.list_map_keys
            .iter()
            .map(|k| go_quote(k))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut seen: Vec<&str> = Vec::new();
    for key in &node.list_map_keys {
        match items.properties.get(key) {
            Some(prop) => {
                if matches!(prop.ty.as_deref(), Some("array" | "object")) {
                    errors.push(FieldError::invalid(
                        &format!("{path}.items.properties[{key}].type"),
                        BadValue::Str("object"),
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
            }
            None => errors.push(FieldError::invalid(
                &keys_path,
                BadValue::Raw(&keys_go),
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(&key.as_str()) {
            errors.push(FieldError::invalid(
                &keys_path,
                BadValue::Raw(&keys_go),
                "must not contain duplicate entries",
            ));
        }
        seen.push(key);
    }
}

/// `validateMapListKeysMapSet`: set/map items are not nullable; map keys are required or
/// defaulted and not nullable.
fn check_map_set_keys(
    node: &Node,
    items: &Node,
    list_type: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if items.nullable {
        errors.push(FieldError::forbidden(
            &format!("{path}.items.nullable"),
            &format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type != "map" {
        return;
    }
    for key in &node.list_map_keys {
        let Some(prop) = items.properties.get(key) else {
            continue;
        };
        if !items.required.contains(key) && prop.default.is_none() {
            errors.push(FieldError::required(
                &format!("{path}.items.properties[{key}].default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if prop.nullable {
            errors.push(FieldError::forbidden(
                &format!("{path}.items.properties[{key}].nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

/// Transition rules (`oldSelf`) are refused below items of lists that are not list-type map:
/// their elements cannot be correlated with the old object.
pub(crate) fn check_old_self(
    node: &Node,
    path: &str,
    uncorrelatable: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    if let Some(list_path) = uncorrelatable {
        for rule in node.rules.iter().filter(|r| r.uses_old_self) {
            errors.push(FieldError::invalid(
                &format!("{path}.x-kubernetes-validations[{}].rule", rule.index),
                BadValue::Str(&rule.rule),
                &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list_path}"),
            ));
        }
    }
    for (key, prop) in &node.properties {
        check_old_self(
            prop,
            &format!("{path}.properties[{key}]"),
            uncorrelatable,
            errors,
        );
    }
    if let Some(values) = node.additional_properties.as_deref() {
        check_old_self(
            values,
            &format!("{path}.additionalProperties"),
            uncorrelatable,
            errors,
        );
    }
    if let Some(items) = node.items.as_deref() {
        let within = match uncorrelatable {
            Some(p) => Some(p),
            None if node.list_type.as_deref() != Some("map") => Some(path),
            None => None,
        };
        check_old_self(items, &format!("{path}.items"), within, errors);
    }
}

/// JSON-schema keywords CRDs do not support (`specStandardValidatorV3.validate`).
pub(crate) fn check_unsupported_keywords(
    raw: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let present = |key: &str| match raw.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Object(o)) => key == "additionalItems" || !o.is_empty(),
        Some(_) => true,
    };
    for (key, detail) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if present(key) {
            errors.push(FieldError::forbidden(&format!("{path}.{key}"), detail));
        }
    }
    if raw.get("type").and_then(Value::as_str) == Some("null") {
        errors.push(FieldError::forbidden(
            &format!("{path}.type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    if raw.get("items").is_some_and(Value::is_array) {
        errors.push(FieldError::forbidden(
            &format!("{path}.items"),
            "items must be a schema object and not an array",
        ));
    }
}

/// Defaults are forbidden anywhere under the root's `metadata`, `apiVersion` and `kind`.
pub(crate) fn check_top_level_meta_defaults(
    node: &Node,
    property: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if node.default.is_some() {
        errors.push(FieldError::forbidden(
            &format!("{path}.default"),
            &format!("must not be set in top-level {property}"),
        ));
    }
    for (key, prop) in &node.properties {
        check_top_level_meta_defaults(prop, property, &format!("{path}.properties[{key}]"), errors);
    }
    if let Some(items) = node.items.as_deref() {
        check_top_level_meta_defaults(items, property, &format!("{path}.items"), errors);
    }
    if let Some(values) = node.additional_properties.as_deref() {
        check_top_level_meta_defaults(
            values,
            property,
            &format!("{path}.additionalProperties"),
            errors,
        );
    }
}

/// Structural completeness (`complete.go`): every property or items a root value
/// validation (allOf/anyOf/oneOf/not) mentions must exist in the structural part.
/// Upstream only checks the root's value validations; so does this.
pub(crate) fn check_completeness(root: &Node, path: &str, errors: &mut Vec<FieldError>) {
    value_validation_completeness(root, Some(root), path, path, errors);
}

fn value_validation_completeness(
    vv: &Node,
    structural: Option<&Node>,
    s_path: &str,
    v_path: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(not) = vv.not.as_deref() {
        nested_completeness(not, structural, s_path, &format!("{v_path}.not"), errors);
    }
    for (key, list) in [
        ("allOf", &vv.all_of),
        ("anyOf", &vv.any_of),
        ("oneOf", &vv.one_of),
    ] {
        for (i, sub) in list.iter().enumerate() {
            nested_completeness(
                sub,
                structural,
                s_path,
                &format!("{v_path}.{key}[{i}]"),
                errors,
            );
        }
    }
}

fn nested_completeness(
    vv: &Node,
    structural: Option<&Node>,
    s_path: &str,
    v_path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(s) = structural else {
        errors.push(FieldError::required(
            s_path,
            &format!("because it is defined in {v_path}"),
        ));
        return;
    };
    value_validation_completeness(vv, Some(s), s_path, v_path, errors);
    if let Some(items) = vv.items.as_deref() {
        nested_completeness(
            items,
            s.items.as_deref(),
            &format!("{s_path}.items"),
            &format!("{v_path}.items"),
            errors,
        );
    }
    for (key, prop) in &vv.properties {
        let s_prop_path = format!("{s_path}.properties[{key}]");
        let v_prop_path = format!("{v_path}.properties[{key}]");
        match s.properties.get(key) {
            Some(s_prop) => {
                nested_completeness(prop, Some(s_prop), &s_prop_path, &v_prop_path, errors)
            }
            None => errors.push(FieldError::required(
                &s_prop_path,
                &format!("because it is defined in {v_prop_path}"),
            )),
        }
    }
}

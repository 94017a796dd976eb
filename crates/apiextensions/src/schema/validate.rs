//! OpenAPI value validation with kube-openapi's messages and order, turned into field errors
//! the way apiextensions-apiserver does (`kubeOpenAPIResultToFieldErrors`), with validation
//! ratcheting on update (an unchanged, correlatable value is not re-validated).

use serde_json::Value;

use super::correlate::{old_item, old_property};
use super::formats;
use super::parse::Node;
use super::path::Path;
use crate::error::{BadValue, FieldError, go_float, go_number, go_quote};

/// The field of an error whose kube-openapi name is `name` (`<nil>` for the root),
/// rendered only for an error.
fn field_of(name: &Path<'_>) -> String {
    let name = name.to_string();
    if name.is_empty() || name == "." {
        "<nil>".to_owned()
    } else {
        name.trim_start_matches('.').to_owned()
    }
}

/// kube-openapi's name for a JSON value's type.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A float with no fractional part within ±2^53 counts as an integer (`IsFloat64AJSONInteger`).
fn is_json_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_991.0),
        Value::Number(_) => true,
        _ => false,
    }
}

/// Validates `value` at `name` against `node`; `old` is the correlated old value on update.
pub(crate) fn validate_value(
    node: &Node,
    name: &Path<'_>,
    value: &Value,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    if old.is_some_and(|o| o == value) {
        return; // ratcheting: an unchanged value keeps passing
    }
    if value.is_null() {
        check_type(node, name, value, errors);
        check_enum(node, name, value, errors);
        return;
    }
    check_type(node, name, value, errors);
    check_composition(node, name, value, errors);
    match value {
        Value::String(s) => check_string(node, name, s, value, errors),
        Value::Number(_) => check_number(node, name, value, errors),
        Value::Array(items) => check_array(node, name, items, old, errors),
        _ => {}
    }
    check_enum(node, name, value, errors);
    if let Value::Object(map) = value {
        check_object(node, name, map, old, errors);
    }
}

fn check_type(node: &Node, name: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    let expected: &str = if node.int_or_string {
        "integer,string"
    } else if let Some(ty) = node.ty.as_deref() {
        ty
    } else {
        return;
    };
    let actual = type_name(value);
    let ok = match actual {
        "null" => node.nullable,
        "number" => {
            expected == "number"
                || ((expected == "integer" || expected == "integer,string")
                    && is_json_integer(value))
        }
        "integer" => expected == "integer" || expected == "number" || expected == "integer,string",
        "string" => expected == "string" || expected == "integer,string",
        other => expected == other,
    };
    if !ok {
        let message = format!(
            "{name} in body must be of type {expected}: {}",
            go_quote(actual)
        );
        errors.push(FieldError::type_invalid(
            &field_of(name),
            BadValue::Str(actual),
            &message,
        ));
    }
}

fn check_composition(node: &Node, name: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    let run = |n: &Node| {
        let mut found = Vec::new();
        validate_value(n, name, value, None, &mut found);
        found
    };
    if !node.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.any_of.iter().map(run).collect();
        if results.iter().all(|r| !r.is_empty()) {
            errors.push(composite_error(&format!(
                "{} must validate at least one schema (anyOf)",
                go_quote(&name.to_string())
            )));
            if let Some(first) = results.into_iter().next() {
                errors.extend(first);
            }
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node.one_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            let detail = if valid == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {valid} valid alternatives")
            };
            errors.push(composite_error(&format!(
                "{} must validate one and only one schema (oneOf). {detail}",
                go_quote(&name.to_string())
            )));
            if valid == 0
                && let Some(first) = results.into_iter().next()
            {
                errors.extend(first);
            }
        }
    }
    if !node.all_of.is_empty() {
        let mut validated = 0;
        for sub in &node.all_of {
            let found = run(sub);
            if found.is_empty() {
                validated += 1;
            }
            errors.extend(found);
        }
        if validated != node.all_of.len() {
            let suffix = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            errors.push(composite_error(&format!(
                "{} must validate all the schemas (allOf){suffix}",
                go_quote(&name.to_string())
            )));
        }
    }
    if let Some(not) = node.not.as_deref()
        && run(not).is_empty()
    {
        errors.push(composite_error(&format!(
            "{} must not validate the schema (not)",
            go_quote(&name.to_string())
        )));
    }
}

/// A kube-openapi composite error: no name, so apimachinery reports it at `<nil>`.
fn composite_error(message: &str) -> FieldError {
    FieldError::invalid("<nil>", BadValue::Str(""), message)
}

fn check_string(
    node: &Node,
    name: &Path<'_>,
    s: &str,
    value: &Value,
    errors: &mut Vec<FieldError>,
) {
    let field = || field_of(name);
    let length = s.chars().count() as i64;
    if let Some(max) = node.max_length
        && length > max
    {
        errors.push(FieldError::too_long(&field(), max));
    } else if let Some(min) = node.min_length
        && length < min
    {
        let message = format!("{name} in body should be at least {min} chars long");
        errors.push(FieldError::invalid(
            &field(),
            BadValue::Json(value),
            &message,
        ));
    } else if let Some((pattern, re)) = &node.pattern
        && !re.is_match(s)
    {
        let message = format!("{name} in body should match '{pattern}'");
        errors.push(FieldError::invalid(
            &field(),
            BadValue::Json(value),
            &message,
        ));
    }
    if let Some(format) = node.format.as_deref()
        && node.ty.as_deref().is_none_or(|t| t == "string")
        && !formats::is_valid(&format.replace('-', ""), s)
    {
        let message = format!("{name} in body must be of type {format}: {}", go_quote(s));
        errors.push(FieldError::type_invalid(
            &field(),
            BadValue::Str(s),
            &message,
        ));
    }
}

fn check_number(node: &Node, name: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    let field = || field_of(name);
    let Some(number) = value.as_f64() else { return };
    let ty = node.ty.as_deref().unwrap_or("number");
    if ty == "integer" && node.format.as_deref() == Some("int32") && value.is_i64() {
        let out_of_range = value.as_i64().is_some_and(|i| i32::try_from(i).is_err());
        if out_of_range {
            let message =
                format!("Checked value must be of type integer with format int32 in {name}");
            errors.push(FieldError::invalid("<nil>", BadValue::Str(""), &message));
        }
    }
    let bound = |b: f64| -> String {
        // kube-openapi prints the bound as an int64 when the value is an integer
        if value.is_i64() || value.is_u64() {
            format!("{}", b as i64)
        } else {
            go_float(b)
        }
    };
    if let Some(factor) = node.multiple_of
        && factor > 0.0
        && (number / factor).fract().abs() > f64::EPSILON
    {
        let message = format!(
            "{name} in body should be a multiple of {}",
            go_float(factor)
        );
        errors.push(FieldError::invalid(
            &field(),
            BadValue::Json(value),
            &message,
        ));
    }
    if let Some(min) = node.minimum {
        let failed = if node.exclusive_minimum {
            number <= min
        } else {
            number < min
        };
        if failed {
            let relation = if node.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let message = format!("{name} in body should be {relation} {}", bound(min));
            errors.push(FieldError::invalid(
                &field(),
                BadValue::Json(value),
                &message,
            ));
        }
    }
    if let Some(max) = node.maximum {
        let failed = if node.exclusive_maximum {
            number >= max
        } else {
            number > max
        };
        if failed {
            let relation = if node.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            let message = format!("{name} in body should be {relation} {}", bound(max));
            errors.push(FieldError::invalid(
                &field(),
                BadValue::Json(value),
                &message,
            ));
        }
    }
}

fn check_array(
    node: &Node,
    name: &Path<'_>,
    items: &[Value],
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    if let Some(item_node) = node.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            let old = old_item(node, old, item);
            validate_value(item_node, &name.index(i), item, old, errors);
        }
    }
    let field = || field_of(name);
    let size = items.len() as i64;
    if let Some(min) = node.min_items
        && size < min
    {
        let message = format!("{name} in body should have at least {min} items");
        errors.push(FieldError::invalid(&field(), BadValue::Int(size), &message));
    }
    if let Some(max) = node.max_items
        && size > max
    {
        errors.push(FieldError::too_many(&field(), size, max));
    }
}

fn check_enum(node: &Node, name: &Path<'_>, value: &Value, errors: &mut Vec<FieldError>) {
    let Some(allowed) = node.enumeration.as_deref() else {
        return;
    };
    if allowed.is_empty() || allowed.iter().any(|a| enum_equal(a, value)) {
        return;
    }
    let supported: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            Value::Number(n) => go_number(n),
            other => other.to_string(),
        })
        .collect();
    errors.push(FieldError::not_supported(
        &field_of(name),
        value,
        &supported,
    ));
}

fn enum_equal(allowed: &Value, value: &Value) -> bool {
    match (allowed, value) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => allowed == value,
    }
}

fn check_object(
    node: &Node,
    name: &Path<'_>,
    map: &serde_json::Map<String, Value>,
    old: Option<&Value>,
    errors: &mut Vec<FieldError>,
) {
    let field = || field_of(name);
    let count = map.len() as i64;
    if let Some(min) = node.min_properties
        && count < min
    {
        let message = format!("{name} in body should have at least {min} properties");
        errors.push(FieldError::invalid(
            &field(),
            BadValue::Int(count),
            &message,
        ));
    }
    if let Some(max) = node.max_properties
        && count > max
    {
        errors.push(FieldError::too_many(&field(), count, max));
    }
    if let Some(values) = node.additional_properties.as_deref() {
        for (key, value) in map {
            if !node.properties.contains_key(key) {
                validate_value(
                    values,
                    &name.field(key),
                    value,
                    old_property(old, key),
                    errors,
                );
            }
        }
    }
    for (key, prop) in &node.properties {
        if let Some(value) = map.get(key) {
            validate_value(
                prop,
                &name.field(key),
                value,
                old_property(old, key),
                errors,
            );
        }
    }
    for key in &node.required {
        if !map.contains_key(key) {
            errors.push(FieldError::required(&name.field(key).to_string(), ""));
        }
    }
}

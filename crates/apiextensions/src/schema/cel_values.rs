//! JSON to CEL values following the schema (apiserver `cel/common/values.go`).

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::Value as CelValue;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use super::parse::Node;

const CEL_RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Kubernetes' CEL property-name escaping; None when the name cannot be accessed from CEL.
pub(crate) fn escape_property(name: &str) -> Option<String> {
    if CEL_RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let valid_first = first.is_ascii_alphabetic() || matches!(first, '_' | '.' | '-' | '/');
    let valid_rest = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !valid_first || !valid_rest {
        return None;
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

/// Converts a JSON value to CEL following the schema (`UnstructuredToVal`): integers are
/// `int`, numbers `double`, `date-time`/`date`/`duration`/`byte` strings become timestamps,
/// durations and bytes, object property names are escaped, map keys are not.
pub(crate) fn to_cel(value: &Value, node: Option<&Node>) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let wants_double = node.is_some_and(|n| n.ty.as_deref() == Some("number"));
            match (n.as_i64(), wants_double) {
                (Some(i), false) => CelValue::Int(i),
                _ => match n.as_f64() {
                    Some(f) if !wants_double && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                        CelValue::Int(f as i64)
                    }
                    Some(f) => CelValue::Float(f),
                    None => CelValue::UInt(n.as_u64().unwrap_or(u64::MAX)),
                },
            }
        }
        Value::String(s) => string_to_cel(s, node.and_then(|n| n.format.as_deref())),
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            CelValue::List(Arc::new(
                items.iter().map(|v| to_cel(v, item_node)).collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, CelValue> = HashMap::with_capacity(map.len());
            let is_map = node.is_some_and(Node::is_map);
            for (k, v) in map {
                let child = node.and_then(|n| n.child(k));
                let key = if is_map && !node.is_some_and(|n| n.properties.contains_key(k)) {
                    Some(k.clone())
                } else {
                    escape_property(k)
                };
                if let Some(key) = key {
                    out.insert(Key::String(Arc::new(key)), to_cel(v, child));
                }
            }
            CelValue::Map(Map { map: Arc::new(out) })
        }
    }
}

fn string_to_cel(s: &str, format: Option<&str>) -> CelValue {
    match format.map(|f| f.replace('-', "")).as_deref() {
        Some("datetime") => {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
                return CelValue::Timestamp(t);
            }
        }
        Some("date") => {
            if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                && let Some(midnight) = d.and_hms_opt(0, 0, 0)
            {
                return CelValue::Timestamp(midnight.and_utc().fixed_offset());
            }
        }
        Some("duration") => {
            if let Some(d) = super::formats::parse_go_duration(s) {
                return CelValue::Duration(d);
            }
        }
        Some("byte") => {
            if let Some(bytes) = super::formats::decode_base64(s) {
                return CelValue::Bytes(Arc::new(bytes));
            }
        }
        _ => {}
    }
    CelValue::String(Arc::new(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_names_escape_like_kubernetes() {
        assert_eq!(
            escape_property("foo-bar").as_deref(),
            Some("foo__dash__bar")
        );
        assert_eq!(
            escape_property("namespace").as_deref(),
            Some("__namespace__")
        );
        assert_eq!(
            escape_property("a.b/c").as_deref(),
            Some("a__dot__b__slash__c")
        );
        assert_eq!(escape_property("1abc"), None);
    }
}

//! The boundary to field management (`apimachinery::managed_fields`): server-side apply
//! and managedFields bookkeeping for Update-type writes.
//!
//! TEMPORARY: until the apimachinery crate lands, apply is a JSON merge of the
//! configuration onto the live object and managedFields only record the manager.

use serde_json::Value;

use crate::status::ApiError;

/// How a list is merged by server-side apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// A set of scalars.
    Set,
    /// A map keyed by these fields.
    Map(Vec<String>),
}

/// Records an Update-type write by `manager` in `new`'s managedFields.
pub fn update(
    _old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    record(new, manager, "Update", subresource, now);
}

/// Server-side apply of `config` by `manager` onto `live`.
///
/// # Errors
/// 409 Conflict with `FieldManagerConflict` causes; 422/400 for an invalid configuration.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
    _force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let mut out = live.cloned().unwrap_or_else(|| serde_json::json!({}));
    crate::compat::merge_patch(&mut out, &strip_nulls(config));
    record(&mut out, manager, "Apply", subresource, now);
    Ok(out)
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn record(obj: &mut Value, manager: &str, operation: &str, subresource: Option<&str>, now: &str) {
    let api_version = obj["apiVersion"].clone();
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let entries = meta
        .entry("managedFields")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(list) = entries.as_array_mut() else {
        return;
    };
    let sub = subresource.unwrap_or("");
    if let Some(e) = list.iter_mut().find(|e| {
        e["manager"] == manager
            && e["operation"] == operation
            && e["subresource"].as_str().unwrap_or("") == sub
    }) {
        e["time"] = Value::String(now.to_string());
        return;
    }
    let mut entry = serde_json::json!({
        "manager": manager, "operation": operation, "apiVersion": api_version,
        "time": now, "fieldsType": "FieldsV1", "fieldsV1": {}
    });
    if !sub.is_empty() {
        entry["subresource"] = Value::String(sub.to_string());
    }
    list.push(entry);
}

//! `meta.k8s.io/v1` Tables for kubectl: additionalPrinterColumns of CRDs, else NAME and AGE.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Req;
use super::render::{metadata_value, object_value};
use crate::registry::Resource;
use crate::store::StoredObject;

/// `kubectl`'s short age format (`5s`, `3m`, `2h`, `4d`).
#[must_use]
pub fn age(created: &str) -> String {
    let Ok(then) = chrono::DateTime::parse_from_rfc3339(created) else {
        return "<unknown>".into();
    };
    let secs = (chrono::Utc::now() - then.with_timezone(&chrono::Utc))
        .num_seconds()
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn cell(value: &Value, column_type: &str) -> Value {
    match (column_type, value) {
        ("date", Value::String(s)) => json!(age(s)),
        (_, Value::Null) => json!("<none>"),
        (_, v) => v.clone(),
    }
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`, `.a[?(@.type=="Ready")].status`).
#[must_use]
pub fn json_path(value: &Value, path: &str) -> Option<Value> {
    let path = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim_start_matches('$');
    let mut cur = value.clone();
    let mut rest = path;
    while !rest.is_empty() {
        rest = rest.strip_prefix('.').unwrap_or(rest);
        if let Some(inner) = rest.strip_prefix("[?(@.") {
            let end = inner.find(")]")?;
            let cond = &inner[..end];
            rest = &inner[end + 2..];
            let (field, want) = cond.split_once("==")?;
            let want = want.trim().trim_matches('"').trim_matches('\'');
            cur = cur
                .as_array()?
                .iter()
                .find(|e| e[field.trim()].as_str() == Some(want))?
                .clone();
            continue;
        }
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            let index: usize = inner[..end].parse().ok()?;
            cur = cur.get(index)?.clone();
            rest = &inner[end + 1..];
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        if end > 0 {
            cur = cur.get(&rest[..end])?.clone();
        }
        rest = &rest[end..];
    }
    Some(cur)
}

/// The Table of some objects.
#[must_use]
pub fn table(
    res: &Resource,
    items: &[Arc<StoredObject>],
    rv: u64,
    continue_token: Option<&str>,
    req: &Req,
) -> Value {
    let mut columns = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0}),
    ];
    for c in &res.printer_columns {
        columns.push(json!({"name": c.name, "type": c.type_, "format": c.format.clone().unwrap_or_default(), "description": c.description, "priority": c.priority}));
    }
    let has_age = res
        .printer_columns
        .iter()
        .any(|c| c.name.eq_ignore_ascii_case("age"));
    if !has_age {
        columns.push(json!({"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
    }
    let include = req.params.include_object.as_deref().unwrap_or("Metadata");
    let rows: Vec<Value> = items
        .iter()
        .map(|stored| {
            let value = object_value(res, stored);
            let mut cells = vec![json!(stored.name)];
            for c in &res.printer_columns {
                cells.push(
                    json_path(&value, &c.json_path).map_or(json!("<none>"), |v| cell(&v, &c.type_)),
                );
            }
            if !has_age {
                cells.push(json!(age(value["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default())));
            }
            let mut row = json!({"cells": cells});
            match include {
                "None" => {}
                "Object" => row["object"] = value,
                _ => row["object"] = metadata_value(stored),
            }
            row
        })
        .collect();
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": columns, "rows": rows})
}

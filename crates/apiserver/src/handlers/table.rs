//! `meta.k8s.io/v1` Tables for kubectl: a CRD's additionalPrinterColumns (the real
//! server's default being NAME and AGE), the real server's printers for built-in kinds
//! ([`super::printers`]).

use std::sync::Arc;

use serde_json::{Value, json};

use super::Req;
use super::render::{metadata_value, object_value};
use crate::registry::Resource;
use crate::store::StoredObject;

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.";

fn age(value: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    let created = value["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap_or_default();
    match chrono::DateTime::parse_from_rfc3339(created) {
        Ok(then) => json!(apiextensions::human_duration(
            now - then.with_timezone(&chrono::Utc)
        )),
        Err(_) => json!("<unknown>"),
    }
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
    table_with(
        res,
        items,
        rv,
        continue_token,
        req.params.include_object.as_deref(),
        true,
    )
}

/// The Table of some objects; without `headers` the column definitions are left out (as
/// in every watch event after the first).
#[must_use]
pub fn table_with(
    res: &Resource,
    items: &[Arc<StoredObject>],
    rv: u64,
    continue_token: Option<&str>,
    include_object: Option<&str>,
    headers: bool,
) -> Value {
    let now = chrono::Utc::now();
    let printer = super::printers::printer(res);
    let columns = match (&res.printer_columns, &printer) {
        (Some(columns), _) => columns.column_definitions(),
        (None, Some(printer)) => printer.columns.clone(),
        (None, None) => vec![
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0}),
            json!({"name": "Age", "type": "date", "format": "", "description": AGE_DESCRIPTION, "priority": 0}),
        ],
    };
    let columns = if headers {
        Value::Array(columns)
    } else {
        Value::Array(Vec::new())
    };
    let include = include_object.unwrap_or("Metadata");
    let rows: Vec<Value> = items
        .iter()
        .map(|stored| {
            let value = object_value(res, stored);
            let cells = match (&res.printer_columns, &printer) {
                (Some(columns), _) => columns.cells(&value, now),
                // Printers read the stored form (core/v1 for both kinds of Event).
                (None, Some(printer)) => (printer.cells)(&stored.value(), now),
                (None, None) => vec![json!(stored.name()), age(&value, now)],
            };
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

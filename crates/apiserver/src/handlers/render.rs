//! Rendering stored objects for a served version and filtering them by scope and selectors.

use serde_json::{Value, json};

use super::params::{Params, Render};
use crate::paths::ResourcePath;
use crate::registry::Resource;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};
use crate::store::StoredObject;

/// Whether objects of `res` must be parsed to be served (defaults on read, version rewrite).
#[must_use]
pub fn needs_transform(res: &Resource) -> bool {
    (res.custom && (res.schema.is_some() || res.version != res.storage_version))
        || crate::semantics::events::is_events_v1(res)
}

/// The full object as served by `res` (defaults applied, apiVersion of the served version).
#[must_use]
pub fn object_value(res: &Resource, stored: &StoredObject) -> Value {
    let mut value = crate::semantics::events::served(res, stored.value());
    if res.custom {
        if let Some(schema) = &res.schema {
            schema.apply_defaults(&mut value);
        }
        value["apiVersion"] = Value::String(res.api_version());
    }
    value
}

/// `PartialObjectMetadata` of an object.
#[must_use]
pub fn metadata_value(stored: &StoredObject) -> Value {
    let value = stored.value();
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The object rendered for a request (Tables render as full objects here).
#[must_use]
pub fn render_value(res: &Resource, stored: &StoredObject, render: Render) -> Value {
    match render {
        Render::Metadata => metadata_value(stored),
        Render::Full | Render::Table => object_value(res, stored),
    }
}

/// Whether the stored bytes of an object are what `res` serves of it ([`object_value`]),
/// so they need not be parsed, defaulted and serialized again: always when `res` serves
/// its objects untouched; for a custom resource with a schema, served in its storage
/// version, when the schema pass of `res` itself made the object (defaulting it again
/// changes nothing; an object stored otherwise may predate the schema's defaults) and it
/// is stored under the served apiVersion. Its content outside `metadata` then carries
/// the mark of `res`'s schema ([`StoredObject::schema_mark`]), whichever write stored
/// it: the one through `res`, and a later write of its metadata alone (a deletion's
/// timestamp, a finalizer taken away); so a write's answer, a watch's line and a read
/// (a GET, a list, a watch's replay) serve the bytes alike.
#[must_use]
pub fn serves_stored_bytes(res: &Resource, stored: &StoredObject) -> bool {
    if !needs_transform(res) {
        return true;
    }
    let made_by_schema = stored.schema_mark != 0
        && res
            .schema
            .as_deref()
            .is_some_and(|schema| schema.mark() == stored.schema_mark);
    if !made_by_schema
        || !res.custom
        || crate::semantics::events::is_events_v1(res)
        || res.version != res.storage_version
    {
        return false;
    }
    let api_version = res.api_version();
    stored
        .json
        .strip_prefix(b"{\"apiVersion\":\"")
        .and_then(|rest| rest.strip_prefix(api_version.as_bytes()))
        .is_some_and(|rest| rest.starts_with(b"\""))
}

/// Appends the rendered object's JSON to `out` (splicing stored bytes when possible).
pub fn write_rendered(out: &mut Vec<u8>, res: &Resource, stored: &StoredObject, render: Render) {
    if render == Render::Full && serves_stored_bytes(res, stored) {
        out.extend_from_slice(&stored.json);
    } else {
        let value = render_value(res, stored, render);
        // Serializing a Value cannot fail.
        let _ = serde_json::to_writer(&mut *out, &value);
    }
}

/// Which objects a list or watch returns.
#[derive(Debug, Clone)]
pub struct Filter {
    events_v1: bool,
    namespace: Option<String>,
    name: Option<String>,
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

fn allowed_field(res: &Resource, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    if res.selectable_fields.iter().any(|f| f == field) {
        return true;
    }
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "events") => {
            field.starts_with("involvedObject.")
                || matches!(field, "reason" | "reportingComponent" | "source" | "type")
        }
        ("events.k8s.io", "events") => {
            field.starts_with("regarding.")
                || matches!(field, "reason" | "reportingController" | "type")
        }
        ("", "secrets") => field == "type",
        ("", "namespaces") => field == "status.phase",
        ("", "pods") => matches!(
            field,
            "spec.nodeName" | "status.phase" | "spec.serviceAccountName"
        ),
        _ => false,
    }
}

impl Filter {
    /// Whether a label or field selector narrows the objects.
    #[must_use]
    pub fn has_selectors(&self) -> bool {
        self.labels.is_some() || self.fields.is_some()
    }

    /// Builds the filter of a request.
    ///
    /// # Errors
    /// 400 for selectors that do not parse or name unsupported fields.
    pub fn new(res: &Resource, path: &ResourcePath, params: &Params) -> ApiResult<Self> {
        let labels =
            match &params.label_selector {
                Some(s) => Some(LabelSelector::parse(s).map_err(|e| {
                    ApiError::bad_request(format!("unable to parse requirement: {e}"))
                })?),
                None => None,
            };
        let fields = match &params.field_selector {
            Some(s) => {
                let selector = FieldSelector::parse(s)
                    .map_err(|e| ApiError::bad_request(format!("invalid field selector: {e}")))?;
                for field in selector.field_names() {
                    if !allowed_field(res, field) {
                        return Err(ApiError::bad_request(format!(
                            "field label not supported: {field}"
                        )));
                    }
                }
                Some(selector)
            }
            None => None,
        };
        Ok(Self {
            events_v1: crate::semantics::events::is_events_v1(res),
            namespace: path.namespace.clone(),
            name: path.name.clone(),
            labels,
            fields,
        })
    }

    /// The namespace scope, if any.
    #[must_use]
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether the object is in scope and matches the selectors.
    #[must_use]
    pub fn matches(&self, stored: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace
            && stored.namespace() != ns
        {
            return false;
        }
        if let Some(name) = &self.name
            && stored.name() != name
        {
            return false;
        }
        if let Some(labels) = &self.labels
            && !labels.matches(stored.labels())
        {
            return false;
        }
        if let Some(fields) = &self.fields {
            let parsed = fields
                .field_names()
                .iter()
                .any(|f| !matches!(*f, "metadata.name" | "metadata.namespace"))
                .then(|| stored.value());
            return fields.matches(|field| match field {
                "metadata.name" => Some(stored.name().to_owned()),
                "metadata.namespace" => Some(stored.namespace().to_owned()),
                other if self.events_v1 => parsed
                    .as_ref()
                    .and_then(|v| field_value(v, &crate::semantics::events::stored_field(other))),
                other => parsed.as_ref().and_then(|v| field_value(v, other)),
            });
        }
        true
    }
}

/// The string form of a dotted field path in an object.
#[must_use]
pub fn field_value(value: &Value, field: &str) -> Option<String> {
    let mut cur = value;
    for part in field.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

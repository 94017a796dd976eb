//! The boundary to field management (`apimachinery::managed_fields`): server-side apply
//! and managedFields bookkeeping for Update-type writes.

use apimachinery::managed_fields::{self, SchemaTypes};
use serde_json::Value;

pub use apimachinery::managed_fields::ListType;

use crate::registry::Resource;
use crate::status::{ApiError, Cause};

/// The list types of built-in kinds (stored without a schema) that controllers and Helm
/// meet under server-side apply: the pod template's keyed lists, as the real server's
/// OpenAPI declares them (`x-kubernetes-list-type: map`). Every other list is atomic.
#[derive(Debug, Clone, Copy, Default)]
struct BuiltinLists;

const CONTAINER_LISTS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

impl SchemaTypes for BuiltinLists {
    fn list_type(&self, path: &[&str]) -> ListType {
        let by = |key: &str| ListType::Map(vec![key.to_string()]);
        match path {
            [.., "spec", last] if CONTAINER_LISTS.contains(last) || *last == "volumes" => {
                by("name")
            }
            [.., container, "env"] if CONTAINER_LISTS.contains(container) => by("name"),
            [.., container, "volumeMounts"] if CONTAINER_LISTS.contains(container) => {
                by("mountPath")
            }
            _ => ListType::Atomic,
        }
    }
}

fn types(res: &Resource) -> &dyn SchemaTypes {
    match &res.schema {
        Some(schema) => schema.as_ref(),
        None => &BuiltinLists,
    }
}

/// Records an Update-type write by `manager` in `new`'s managedFields.
pub fn update(
    res: &Resource,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    managed_fields::update(old, new, manager, subresource, types(res), now);
}

/// What of an apply configuration a write to `subresource` takes: the main endpoint
/// ignores `.status` of kinds with a status subresource, `/status` takes only `.status`.
#[must_use]
pub fn scope_config(res: &Resource, config: &Value, subresource: Option<&str>) -> Value {
    let mut scoped = config.clone();
    match (subresource, scoped.as_object_mut()) {
        (Some(_), Some(map)) => {
            map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace"));
            }
        }
        (None, Some(map)) if res.has_status => {
            map.remove("status");
        }
        _ => {}
    }
    scoped
}

/// Server-side apply of `config` by `manager` onto `live`.
///
/// # Errors
/// 409 Conflict with `FieldManagerConflict` causes; 400 for an invalid configuration.
pub fn apply(
    res: &Resource,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let config = scope_config(res, config, subresource);
    managed_fields::apply(live, &config, manager, subresource, force, types(res), now).map_err(
        |e| match e {
            managed_fields::ApplyError::Conflicts(conflicts) => {
                let mut err = ApiError::new(409, "Conflict", e_text(&conflicts));
                err.causes = conflicts
                    .iter()
                    .map(|c| Cause {
                        reason: "FieldManagerConflict".into(),
                        field: c.field.clone(),
                        message: c.cause_message(),
                    })
                    .collect();
                err.group = Some(res.group.clone());
                err.kind = Some(res.plural.clone());
                err.name = live
                    .and_then(|l| l["metadata"]["name"].as_str())
                    .or_else(|| config["metadata"]["name"].as_str())
                    .map(str::to_string);
                err
            }
            managed_fields::ApplyError::Invalid(message) => ApiError::bad_request(message),
        },
    )
}

fn e_text(conflicts: &[managed_fields::Conflict]) -> String {
    managed_fields::ApplyError::Conflicts(conflicts.to_vec()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_template_lists_are_keyed_and_the_rest_atomic() {
        let deployment = ["spec", "template", "spec"];
        let at = |tail: &[&'static str]| {
            let path: Vec<&str> = deployment.iter().chain(tail).copied().collect();
            BuiltinLists.list_type(&path)
        };
        let by = |key: &str| ListType::Map(vec![key.to_string()]);
        assert_eq!(at(&["containers"]), by("name"));
        assert_eq!(at(&["initContainers", "env"]), by("name"));
        assert_eq!(at(&["containers", "volumeMounts"]), by("mountPath"));
        assert_eq!(at(&["volumes"]), by("name"));
        assert_eq!(at(&["containers", "args"]), ListType::Atomic);
        assert_eq!(at(&["containers", "ports"]), ListType::Atomic);
        assert_eq!(BuiltinLists.list_type(&["rules"]), ListType::Atomic);
        assert_eq!(BuiltinLists.list_type(&["containers"]), ListType::Atomic);
    }
}

//! CustomResourceDefinition checks and the status the real apiextensions controllers set.

use serde_json::{Value, json};

use crate::registry::resources_of_crd;
use crate::semantics::prepare::now;
use crate::status::{ApiError, ApiResult, Cause};

const GROUP: &str = "apiextensions.k8s.io";
const KIND: &str = "CustomResourceDefinition";

/// Adds the cleanup finalizer the real server puts on every new CRD.
pub fn on_create(crd: &mut Value) {
    let meta = crate::semantics::prepare::meta_mut(crd);
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        let f = json!(crate::semantics::gc::CRD_CLEANUP_FINALIZER);
        if !list.contains(&f) {
            list.push(f);
        }
    }
}

/// Validates a CRD and sets its status (acceptedNames, NamesAccepted and Established True).
///
/// # Errors
/// 422 Invalid naming what is wrong.
pub fn on_write(crd: &mut Value) -> ApiResult<()> {
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let invalid = |field: &str, message: String| {
        ApiError::invalid(
            GROUP,
            KIND,
            &name,
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                field: field.into(),
                message,
            }],
        )
    };
    let resources =
        resources_of_crd(crd).map_err(|causes| ApiError::invalid(GROUP, KIND, &name, causes))?;
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
    let expected = format!("{plural}.{group}");
    if name != expected {
        return Err(invalid(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let Some(first) = resources.first() else {
        return Err(invalid(
            "spec.versions",
            "Invalid value: must have at least one served version".into(),
        ));
    };
    let mut accepted = crd["spec"]["names"].clone();
    accepted["singular"] = json!(first.singular);
    accepted["listKind"] = json!(first.list_kind);
    let stamp = now();
    let condition = |type_: &str, reason: &str, message: &str| json!({"type": type_, "status": "True", "lastTransitionTime": stamp, "reason": reason, "message": message});
    let storage = first.storage_version.clone();
    let mut stored_versions: Vec<Value> = crd["status"]["storedVersions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !stored_versions.iter().any(|v| v == &json!(storage)) {
        stored_versions.push(json!(storage));
    }
    crd["status"] = json!({
        "acceptedNames": accepted,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": stored_versions,
    });
    Ok(())
}

//! ObjectMeta validation every kind gets: label and annotation keys and values,
//! finalizer names and ownerReferences, with the real server's messages.

use apimachinery::selector::validation::{is_qualified_name, is_valid_label_value};
use serde_json::Value;

use crate::registry::Resource;
use crate::status::{ApiError, ApiResult, Cause};

const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// `TotalAnnotationSizeLimitB` (k8s.io/apimachinery/pkg/api/validation/objectmeta.go).
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

fn invalid(causes: &mut Vec<Cause>, field: String, value: &str, problems: &[String]) {
    if !problems.is_empty() {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            field,
            message: format!("Invalid value: {value:?}: {}", problems.join("; ")),
        });
    }
}

fn string_map<'a>(meta: &'a Value, key: &str) -> ApiResult<Vec<(&'a String, &'a str)>> {
    match &meta[key] {
        Value::Null => Ok(Vec::new()),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                v.as_str().map(|s| (k, s)).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "json: cannot unmarshal {v} into Go struct field ObjectMeta.metadata.{key} of type string"
                    ))
                })
            })
            .collect(),
        other => Err(ApiError::bad_request(format!(
            "json: cannot unmarshal {other} into Go struct field ObjectMeta.metadata.{key} of type map[string]string"
        ))),
    }
}

/// Checks an object's metadata.
///
/// # Errors
/// 400 for values of the wrong type (the real server fails to decode them), 422 Invalid
/// with causes for bad keys, values, finalizers or ownerReferences.
pub fn validate(res: &Resource, object: &Value) -> ApiResult<()> {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    for (key, value) in string_map(meta, "labels")? {
        invalid(
            &mut causes,
            "metadata.labels".into(),
            key,
            &is_qualified_name(key),
        );
        invalid(
            &mut causes,
            "metadata.labels".into(),
            value,
            &is_valid_label_value(value),
        );
    }
    let annotations = string_map(meta, "annotations")?;
    for (key, _) in &annotations {
        invalid(
            &mut causes,
            "metadata.annotations".into(),
            key,
            &is_qualified_name(&key.to_lowercase()),
        );
    }
    // `ValidateAnnotationsSize`: keys and values together at most 256 KiB.
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            field: "metadata.annotations".into(),
            message: format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        });
    }
    match &meta["finalizers"] {
        Value::Null => {}
        Value::Array(list) => {
            for (i, f) in list.iter().enumerate() {
                let Some(f) = f.as_str() else {
                    return Err(ApiError::bad_request(
                        "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type string",
                    ));
                };
                if !STANDARD_FINALIZERS.contains(&f) {
                    invalid(
                        &mut causes,
                        format!("metadata.finalizers[{i}]"),
                        f,
                        &is_qualified_name(f),
                    );
                }
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type []string",
            ));
        }
    }
    match &meta["ownerReferences"] {
        Value::Null => {}
        Value::Array(refs) => {
            let mut controllers = 0;
            for (i, r) in refs.iter().enumerate() {
                for key in ["apiVersion", "kind", "name", "uid"] {
                    if r[key].as_str().is_none_or(str::is_empty) {
                        causes.push(Cause {
                            reason: if r[key].is_null() {
                                "FieldValueRequired"
                            } else {
                                "FieldValueInvalid"
                            }
                            .into(),
                            field: format!("metadata.ownerReferences[{i}].{key}"),
                            message: if key == "uid" {
                                "Invalid value: \"\": uid must not be empty".into()
                            } else {
                                format!("Invalid value: \"\": {key} must not be empty")
                            },
                        });
                    }
                }
                if r["controller"].as_bool() == Some(true) {
                    controllers += 1;
                }
            }
            if controllers > 1 {
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    field: "metadata.ownerReferences".into(),
                    message:
                        "Invalid value: []: Only one reference can have Controller set to true"
                            .into(),
                });
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "metadata.ownerReferences must be a list",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&res.group, &res.kind, name, causes))
    }
}

//! CRD-level checks around a version's schema that need more than the schema itself:
//! the root restrictions when the status subresource is enabled, and printer column
//! definitions (apiextensions `validation.go`).

use serde_json::Value;

use crate::error::{BadValue, FieldError};
use crate::jsonpath::parse_printer_column_path;

/// Go field names of `JSONSchemaProps` allowed at the root with a status subresource.
const ALLOWED_AT_ROOT: &[&str] = &[
    "Description",
    "Type",
    "Format",
    "Title",
    "Maximum",
    "ExclusiveMaximum",
    "Minimum",
    "ExclusiveMinimum",
    "MaxLength",
    "MinLength",
    "Pattern",
    "MaxItems",
    "MinItems",
    "UniqueItems",
    "MultipleOf",
    "Required",
    "Items",
    "Properties",
    "ExternalDocs",
    "Example",
    "XPreserveUnknownFields",
    "XValidations",
];

/// The JSON keys matching [`ALLOWED_AT_ROOT`].
const ALLOWED_JSON_AT_ROOT: &[&str] = &[
    "description",
    "type",
    "format",
    "title",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "required",
    "items",
    "properties",
    "externalDocs",
    "example",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
];

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

/// Checks a version's `openAPIV3Schema` (at `path`, e.g.
/// `spec.versions[0].schema.openAPIV3Schema`) for a CRD version that enables the status
/// subresource: the root may only be an object with the fields above, never `nullable`.
#[must_use]
pub fn validate_status_subresource_root(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(map) = schema.as_object() else {
        return errors;
    };
    for (key, value) in map {
        if is_zero(value) {
            continue;
        }
        if key == "type" {
            if value.as_str() != Some("object") {
                errors.push(FieldError::invalid(
                    &format!("{path}.type"),
                    BadValue::Json(value),
                    r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
                ));
                break;
            }
            continue;
        }
        if !ALLOWED_JSON_AT_ROOT.contains(&key.as_str()) {
            errors.push(FieldError::invalid(
                path,
                BadValue::Omit,
                &format!(
                    "only [{}] fields are allowed at the root of the schema if the status subresource is enabled",
                    ALLOWED_AT_ROOT.join(" ")
                ),
            ));
            break;
        }
    }
    errors
}

const PRINTER_COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const PRINTER_COLUMN_FORMATS: &[&str] = &[
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// Checks one `additionalPrinterColumns` entry at `path` (e.g.
/// `spec.versions[0].additionalPrinterColumns[1]`) as the real server does, and that its
/// JSONPath is in the subset [`crate::printer_column_value`] evaluates.
#[must_use]
pub fn validate_printer_column(column: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |key: &str| column.get(key).and_then(Value::as_str).unwrap_or_default();
    if text("name").is_empty() {
        errors.push(FieldError::required(&format!("{path}.name"), ""));
    }
    let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
    match text("type") {
        "" => errors.push(FieldError::required(&format!("{path}.type"), &types)),
        t if !PRINTER_COLUMN_TYPES.contains(&t) => {
            errors.push(FieldError::invalid(
                &format!("{path}.type"),
                BadValue::Str(t),
                &types,
            ));
        }
        _ => {}
    }
    let format = text("format");
    if !format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&format) {
        let detail = format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(","));
        errors.push(FieldError::invalid(
            &format!("{path}.format"),
            BadValue::Str(format),
            &detail,
        ));
    }
    let json_path = text("jsonPath");
    let json_path_field = format!("{path}.JSONPath");
    if json_path.is_empty() {
        errors.push(FieldError::required(&json_path_field, ""));
    } else if !json_path.starts_with('.') {
        errors.push(FieldError::invalid(
            &json_path_field,
            BadValue::Str(json_path),
            "must be a simple json path starting with .",
        ));
    } else if let Err(e) = parse_printer_column_path(json_path) {
        errors.push(FieldError::invalid(
            &json_path_field,
            BadValue::Str(json_path),
            &e.reason,
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_subresource_root_allows_only_some_fields() {
        let ok = json!({"type": "object", "properties": {}, "description": "d", "x-kubernetes-validations": []});
        assert!(validate_status_subresource_root(&ok, "s").is_empty());
        let bad = json!({"type": "object", "additionalProperties": {"type": "string"}});
        let errors =
            validate_status_subresource_root(&bad, "spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .message
                .starts_with("Invalid value: only [Description Type"),
            "{}",
            errors[0].message
        );
    }

    #[test]
    fn printer_columns_are_checked() {
        assert!(
            validate_printer_column(
                &json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
                "c"
            )
            .is_empty()
        );
        let errors = validate_printer_column(
            &json!({"name": "X", "type": "text", "jsonPath": "spec.x"}),
            "c",
        );
        let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "c.type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
                "c.JSONPath: Invalid value: \"spec.x\": must be a simple json path starting with .",
            ]
        );
    }
}

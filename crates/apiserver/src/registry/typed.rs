//! Built-in kinds decoded through their k8s-openapi type on every write, as the real
//! server decodes every body into its Go type: a value of the wrong type is 400 BadRequest
//! ("ConfigMap in version "v1" cannot be handled as a ConfigMap: ...", from
//! `transformDecodeError` in k8s.io/apiserver/pkg/endpoints/handlers/rest.go), a missing
//! required field is 422 Invalid (the kind's validation), and what the type does not know
//! is an unknown field, dropped or refused per `fieldValidation`.
//!
//! k8s-openapi's types ignore unknown fields when they deserialize, so the unknown fields
//! are found by comparing the object before and after the round trip.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// How one built-in kind is decoded, and its schema for OpenAPI.
#[derive(Clone, Copy)]
pub struct Typed {
    round_trip: fn(Value) -> Result<Value, DecodeError>,
    /// The OpenAPI definition name (`io.k8s.api.core.v1.ConfigMap`).
    pub schema_name: fn() -> Cow<'static, str>,
    /// The kind's JSON schema (its references land in the generator's definitions).
    pub json_schema: fn(&mut SchemaGenerator) -> Schema,
}

impl std::fmt::Debug for Typed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Typed").field(&(self.schema_name)()).finish()
    }
}

/// The typed codec of `T`.
#[must_use]
pub const fn typed<T: DeserializeOwned + Serialize + JsonSchema>() -> Typed {
    stored_as::<T, T>()
}

/// A kind stored in the form of `S` and served as `T` (events.k8s.io/v1 Events are stored
/// as core/v1 Events): decoded as `S`, published with `T`'s schema.
#[must_use]
pub const fn stored_as<S: DeserializeOwned + Serialize, T: JsonSchema>() -> Typed {
    Typed {
        round_trip: round_trip::<S>,
        schema_name: <T as JsonSchema>::schema_name,
        json_schema: <T as JsonSchema>::json_schema,
    }
}

/// Why a body does not decode into its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A required field is absent: the kind's validation says "Required value".
    Missing {
        /// The dotted path of the field.
        field: String,
    },
    /// A value of the wrong type (or an unparseable one: bad base64, a bad timestamp).
    Type {
        /// The dotted path of the value.
        path: String,
        /// What went wrong, without the offending value (it may be a Secret's).
        problem: String,
    },
}

/// The result of decoding a built-in object.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The object as its type encodes it (unknown fields and nulls gone).
    pub object: Value,
    /// Paths of the fields the type does not know.
    pub unknown: Vec<String>,
}

impl Typed {
    /// Decodes `object` through the type and encodes it again.
    ///
    /// # Errors
    /// [`DecodeError`] when the object does not fit the type.
    pub fn decode(&self, object: &Value) -> Result<Decoded, DecodeError> {
        let decoded = (self.round_trip)(object.clone())?;
        let mut unknown = Vec::new();
        unknown_fields(object, &decoded, "", &mut unknown);
        Ok(Decoded {
            object: decoded,
            unknown,
        })
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(object: Value) -> Result<Value, DecodeError> {
    let typed: T = serde_path_to_error::deserialize(object).map_err(|e| {
        let path = e.path().to_string();
        describe(path, e.inner())
    })?;
    serde_json::to_value(&typed).map_err(|e| DecodeError::Type {
        path: String::new(),
        problem: e.to_string(),
    })
}

/// Turns a serde error into what the caller may show: the missing field, or the problem
/// with its value left out (serde quotes string values, which may be secret).
fn describe(path: String, error: &serde_json::Error) -> DecodeError {
    let message = error.to_string();
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        let at = path.trim_end_matches('.').trim_start_matches('.');
        let field = if at.is_empty() || at == "?" {
            field.to_string()
        } else {
            format!("{at}.{field}")
        };
        return DecodeError::Missing { field };
    }
    DecodeError::Type {
        path: if path == "." { String::new() } else { path },
        problem: without_values(&message),
    }
}

/// Drops quoted values from a serde message: `invalid type: string "x", expected ...` ->
/// `invalid type: string, expected ...`.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find(['"', '`']) {
        let quote = rest[start..].chars().next().unwrap_or('"');
        let Some(len) = rest[start + 1..].find(quote) else {
            break;
        };
        out.push_str(rest[..start].trim_end());
        rest = &rest[start + 1 + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Paths present (and not null) in `before` but gone from `after`.
fn unknown_fields(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            for (key, value) in before {
                if value.is_null() {
                    continue;
                }
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match after.get(key) {
                    None => out.push(at),
                    Some(decoded) => unknown_fields(value, decoded, &at, out),
                }
            }
        }
        (Value::Array(before), Value::Array(after)) => {
            for (i, (value, decoded)) in before.iter().zip(after).enumerate() {
                unknown_fields(value, decoded, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_wrong_type_is_named_by_path_without_its_value() {
        let codec = typed::<Secret>();
        let error = codec
            .decode(
                &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                "data": "c2VjcmV0LXZhbHVl"}),
            )
            .unwrap_err();
        let DecodeError::Type { path, problem } = error else {
            panic!("{error:?}")
        };
        assert_eq!(path, "data");
        assert!(!problem.contains("c2VjcmV0"), "{problem}");
        assert!(problem.contains("invalid type: string"), "{problem}");
    }

    #[test]
    fn bad_base64_in_a_secret_is_a_type_error() {
        let codec = typed::<Secret>();
        let error = codec
            .decode(&json!({"metadata": {"name": "s"}, "data": {"k": "not base64!"}}))
            .unwrap_err();
        assert!(
            matches!(error, DecodeError::Type { ref path, .. } if path == "data.k"),
            "{error:?}"
        );
    }

    #[test]
    fn unknown_fields_are_found_at_any_depth() {
        let codec = typed::<Deployment>();
        let decoded = codec
            .decode(&json!({"metadata": {"name": "d", "junk": 1},
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "colour": "red"}]}}},
                "extra": null}))
            .unwrap();
        assert_eq!(
            decoded.unknown,
            vec![
                "metadata.junk".to_string(),
                "spec.template.spec.containers[0].colour".to_string()
            ]
        );
        assert!(decoded.object["metadata"].get("junk").is_none());
    }

    #[test]
    fn a_missing_required_field_gets_its_zero_value_as_in_go() {
        let codec = typed::<Deployment>();
        let decoded = codec
            .decode(&json!({"metadata": {"name": "d"},
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"image": "x"}]}}}}))
            .unwrap();
        assert_eq!(
            decoded.object["spec"]["template"]["spec"]["containers"][0]["name"],
            ""
        );
    }

    #[test]
    fn known_objects_come_back_unchanged() {
        let codec = typed::<ConfigMap>();
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "b"}, "creationTimestamp": "2024-01-02T03:04:05Z"},
            "data": {"k": "v"}});
        let decoded = codec.decode(&object).unwrap();
        assert_eq!(decoded.object, object);
        assert!(decoded.unknown.is_empty());
    }
}

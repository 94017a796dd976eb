//! Field errors in the shape of k8s.io/apimachinery `field.Error`, and schema errors.

use serde_json::Value;

/// The type of a field error; [`FieldErrorKind::reason`] is the `causes[].reason` a real
/// server puts in a 422 `Invalid` Status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueNotSupported` (enum): "Unsupported value".
    Unsupported,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueTypeInvalid`: "Invalid value" (a value of the wrong type).
    TypeInvalid,
    /// `InternalError`: "Internal error".
    Internal,
}

impl FieldErrorKind {
    /// The Kubernetes cause type (`FieldValueInvalid`, ...).
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::Required => "FieldValueRequired",
            Self::Unsupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::Internal => "InternalError",
        }
    }

    /// The human text apimachinery prints for the type ("Invalid value", "Required value", ...).
    #[must_use]
    pub const fn text(&self) -> &'static str {
        match self {
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::Required => "Required value",
            Self::Unsupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::Internal => "Internal error",
        }
    }
}

/// One validation error: `field` is the path (`spec.contracts[0].name`), `message` is what
/// apimachinery's `ErrorBody()` prints (`Invalid value: 0: spec.x in body should be ...`), which
/// is also the `causes[].message` of a real server. [`std::fmt::Display`] gives `field: message`,
/// the form used in the Status `message`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path in apimachinery form; `<nil>` for errors about the whole object.
    pub field: String,
    /// The error type.
    pub kind: FieldErrorKind,
    /// The error body, e.g. `Required value` or `Unsupported value: "x": supported values: "A", "B"`.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl FieldError {
    /// apimachinery's aggregate of a list of errors (`ErrorList.ToAggregate().Error()`): one
    /// error as is, several as `[a, b]`, identical texts once.
    #[must_use]
    pub fn aggregate(errors: &[FieldError]) -> String {
        let mut seen: Vec<String> = Vec::new();
        for text in errors.iter().map(ToString::to_string) {
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        match seen.len() {
            0 => String::new(),
            1 => seen.remove(0),
            _ => format!("[{}]", seen.join(", ")),
        }
    }

    /// The `message` of a 422 `Invalid` Status for these errors, as `errors.NewInvalid`
    /// writes it: `NodeClaim.socialweb.computer "n1" is invalid: spec.x: Required value`
    /// (the kind alone when the group is empty).
    #[must_use]
    pub fn invalid_status_message(
        kind: &str,
        group: &str,
        name: &str,
        errors: &[FieldError],
    ) -> String {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        format!(
            "{qualified} {} is invalid: {}",
            go_quote(name),
            Self::aggregate(errors)
        )
    }
}

/// The bad value of a field error, as apimachinery prints it.
#[derive(Debug, Clone)]
pub(crate) enum BadValue<'a> {
    /// Printed as nothing (`field.OmitValueType`).
    Omit,
    /// A JSON value: strings quoted, numbers and booleans bare, the rest as JSON.
    Json(&'a Value),
    /// A Go string (quoted).
    Str(&'a str),
    /// A Go integer.
    Int(i64),
    /// Already in Go syntax (e.g. `[]string{"name"}`).
    Raw(&'a str),
}

impl FieldError {
    fn with_value(field: &str, kind: FieldErrorKind, value: BadValue<'_>, detail: &str) -> Self {
        let mut message = kind.text().to_string();
        match value {
            BadValue::Omit => {}
            BadValue::Json(v) => {
                message.push_str(": ");
                message.push_str(&render_value(v));
            }
            BadValue::Str(s) => {
                message.push_str(": ");
                message.push_str(&go_quote(s));
            }
            BadValue::Int(i) => {
                message.push_str(&format!(": {i}"));
            }
            BadValue::Raw(raw) => {
                message.push_str(": ");
                message.push_str(raw);
            }
        }
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        Self {
            field: field.to_string(),
            kind,
            message,
        }
    }

    /// `field.Invalid(path, value, detail)`.
    pub(crate) fn invalid(field: &str, value: BadValue<'_>, detail: &str) -> Self {
        Self::with_value(field, FieldErrorKind::Invalid, value, detail)
    }

    /// `field.TypeInvalid(path, value, detail)`.
    pub(crate) fn type_invalid(field: &str, value: BadValue<'_>, detail: &str) -> Self {
        Self::with_value(field, FieldErrorKind::TypeInvalid, value, detail)
    }

    /// `field.Required(path, detail)`.
    pub(crate) fn required(field: &str, detail: &str) -> Self {
        Self::with_value(field, FieldErrorKind::Required, BadValue::Omit, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self::with_value(field, FieldErrorKind::Forbidden, BadValue::Omit, detail)
    }

    /// `field.Duplicate(path, value)`.
    pub(crate) fn duplicate(field: &str, value: BadValue<'_>) -> Self {
        Self::with_value(field, FieldErrorKind::Duplicate, value, "")
    }

    /// `field.NotSupported(path, value, supported)`.
    pub(crate) fn not_supported(field: &str, value: &Value, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::with_value(
            field,
            FieldErrorKind::Unsupported,
            BadValue::Json(value),
            &detail,
        )
    }

    /// `field.TooLong(path, _, max)`.
    pub(crate) fn too_long(field: &str, max: i64) -> Self {
        Self::with_value(
            field,
            FieldErrorKind::TooLong,
            BadValue::Omit,
            &format!("may not be more than {max} bytes"),
        )
    }

    /// `field.TooMany(path, actual, max)`.
    pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> Self {
        Self::with_value(
            field,
            FieldErrorKind::TooMany,
            BadValue::Int(actual),
            &format!("must have at most {max} items"),
        )
    }
}

/// Renders a JSON value the way apimachinery 1.32 prints a bad value: strings quoted
/// (`%q`), numbers and booleans bare (`%v`), `null` as the string `"null"`, and arrays and
/// objects with Go's `%#v` (`map[string]interface {}{"name":"a"}`).
pub(crate) fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        Value::Number(n) => go_number(n),
        Value::Bool(b) => b.to_string(),
        Value::Null => go_quote("null"),
        Value::Array(_) | Value::Object(_) => go_sharp_v(value),
    }
}

/// Go's `%#v` of a decoded JSON value.
fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}

/// Go's `%q` for a string (close enough: JSON escaping, which agrees for printable text).
pub(crate) fn go_quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Go's `%v` for a JSON number: integers as decimals, floats like `%g` with shortest digits.
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    go_float(n.as_f64().unwrap_or(f64::NAN))
}

/// Go's `%v` for a float64: shortest digits, exponent form when the exponent is < -4 or >= 6
/// (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub(crate) fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. `1.5e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// Why a CRD version's schema cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema is not structural or has invalid value validations; each error carries the
    /// field path within the CRD (prefixed by the path given to the parser).
    #[error("invalid schema: {}", join_errors(.0))]
    Invalid(Vec<FieldError>),
}

impl SchemaError {
    /// The individual field errors, for a 422 Status with causes.
    #[must_use]
    pub fn field_errors(&self) -> &[FieldError] {
        match self {
            Self::Invalid(errors) => errors,
        }
    }
}

fn join_errors(errors: &[FieldError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    if parts.len() == 1 {
        parts.join("")
    } else {
        format!("[{}]", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_match_apimachinery() {
        assert_eq!(FieldError::required("spec.a", "").message, "Required value");
        assert_eq!(
            FieldError::not_supported("spec.a", &json!("x"), &["A".into(), "B".into()]).message,
            "Unsupported value: \"x\": supported values: \"A\", \"B\""
        );
        assert_eq!(
            FieldError::too_long("spec.a", 5).message,
            "Too long: may not be more than 5 bytes"
        );
        assert_eq!(
            FieldError::too_many("spec.a", 3, 1).message,
            "Too many: 3: must have at most 1 items"
        );
        assert_eq!(
            FieldError::invalid("spec.a", BadValue::Json(&json!(0)), "d").to_string(),
            "spec.a: Invalid value: 0: d"
        );
        assert_eq!(
            FieldError::invalid("x", BadValue::Omit, "msg").message,
            "Invalid value: msg"
        );
    }

    #[test]
    fn status_message_aggregates_like_apimachinery() {
        let a = FieldError::required("spec.a", "");
        let b = FieldError::forbidden("spec.b", "no");
        assert_eq!(
            FieldError::invalid_status_message("Thing", "x.io", "n1", &[a.clone(), a.clone()]),
            "Thing.x.io \"n1\" is invalid: spec.a: Required value"
        );
        assert_eq!(
            FieldError::invalid_status_message("Thing", "", "n1", &[a, b]),
            "Thing \"n1\" is invalid: [spec.a: Required value, spec.b: Forbidden: no]"
        );
    }

    #[test]
    fn floats_print_like_go() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(123_456.0), "123456");
    }
}

//! Kubernetes `Status` errors: every failure the server answers is one of these.
//!
//! kube decides `get_opt` -> `None` from `reason` alone, and kubectl prints `message`,
//! so each constructor mirrors the wording and reason of the real kube-apiserver.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// One field-level cause of an error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The machine-readable cause, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// The field path, e.g. `spec.replicas`.
    pub field: String,
    /// What is wrong, for humans.
    pub message: String,
}

/// An error answer: rendered as a `Status` object with the matching HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Kubernetes `reason` (NotFound, AlreadyExists, Conflict, Invalid, ...).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind`.
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` and the `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// `<plural>.<group> "name"` as the real server names an object in messages.
#[must_use]
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    /// A bare error with code, reason and message.
    #[must_use]
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    fn with_target(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(kind.to_string());
        self.name = Some(name.to_string());
        self
    }

    /// 404 NotFound for an object.
    #[must_use]
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(plural, group)),
        )
        .with_target(group, plural, name)
    }

    /// 404 NotFound for a path the server does not serve.
    #[must_use]
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 AlreadyExists.
    #[must_use]
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(plural, group)),
        )
        .with_target(group, plural, name)
    }

    /// 409 Conflict for a stale resourceVersion or a failed precondition.
    #[must_use]
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(plural, group)
            ),
        )
        .with_target(group, plural, name)
    }

    /// 409 Conflict for a resourceVersion that moved on.
    #[must_use]
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes.
    #[must_use]
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect::<Vec<_>>();
        let summary = if summary.len() == 1 {
            summary.join("")
        } else {
            format!("[{}]", summary.join(", "))
        };
        let target = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut err = Self::new(
            422,
            "Invalid",
            format!("{target} \"{name}\" is invalid: {summary}"),
        )
        .with_target(group, kind, name);
        err.causes = causes;
        err
    }

    /// 422 Invalid with one cause.
    #[must_use]
    pub fn invalid_field(
        group: &str,
        kind: &str,
        name: &str,
        reason: &str,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::invalid(
            group,
            kind,
            name,
            vec![Cause {
                reason: reason.to_string(),
                field: field.to_string(),
                message: message.into(),
            }],
        )
    }

    /// 400 BadRequest.
    #[must_use]
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 403 Forbidden.
    #[must_use]
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 405 MethodNotAllowed.
    #[must_use]
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 410 Expired (a continue token or resourceVersion that is too old).
    #[must_use]
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    #[must_use]
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 UnsupportedMediaType.
    #[must_use]
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 406 NotAcceptable.
    #[must_use]
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 500 InternalError.
    #[must_use]
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `Status` object of this error.
    #[must_use]
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // StatusReasonUnknown is "" and omitted, as the real server's plain errors are.
            if let Some(fields) = status.as_object_mut() {
                fields.remove("reason");
            }
        }
        let mut details = serde_json::Map::new();
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        if let Some(group) = &self.group {
            details.insert("group".into(), json!(group));
        }
        if let Some(kind) = &self.kind {
            details.insert("kind".into(), json!(kind));
        }
        if !self.causes.is_empty() {
            let causes = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect::<Vec<_>>();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(after) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(after));
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = self.to_status().to_string();
        let mut response = (code, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(after) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&after.to_string())
        {
            headers.insert(header::RETRY_AFTER, value);
        }
        response
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_qualified_resource() {
        let status = ApiError::not_found("example.com", "widgets", "w1").to_status();
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(status["code"], 404);
        assert_eq!(status["message"], "widgets.example.com \"w1\" not found");
        assert_eq!(status["details"]["name"], "w1");
    }

    #[test]
    fn invalid_lists_causes() {
        let err = ApiError::invalid_field(
            "",
            "ConfigMap",
            "c",
            "FieldValueInvalid",
            "metadata.name",
            "bad",
        );
        let status = err.to_status();
        assert_eq!(status["code"], 422);
        assert_eq!(status["details"]["causes"][0]["field"], "metadata.name");
        assert_eq!(
            status["message"],
            "ConfigMap \"c\" is invalid: metadata.name: bad"
        );
    }
}

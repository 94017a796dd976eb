//! The permission-check APIs, answered from the server's own authentication, so
//! `kubectl auth can-i` and `kubectl auth whoami` work (issue 15 item 6).
//!
//! A request reaches a handler only with the token ([`crate::auth`]), and the token holder
//! ([`USER_NAME`] in [`USER_GROUPS`]) may do everything. So, as kube-apiserver with its
//! authorizer, each review is created and answered, never stored (k8s.io/kubernetes
//! pkg/registry/authorization and authentication, 1.32):
//!
//! - `SelfSubjectAccessReview`: `allowed: true`;
//! - `SubjectAccessReview` (and the namespaced `LocalSubjectAccessReview`): `allowed: true`
//!   for the token holder's user or group, else `allowed: false` (no one else can
//!   authenticate here);
//! - `SelfSubjectRulesReview`: every verb on every resource and URL;
//! - `SelfSubjectReview` (authentication.k8s.io/v1): the token holder's user info.
//!
//! The body goes through the kind's k8s-openapi type and the upstream validation (exactly
//! one of resourceAttributes and nonResourceAttributes, a user or group for the subject
//! reviews, empty metadata); the answer is the review with its `status`, 201 Created.

use std::sync::Arc;

use axum::response::Response;
use http::{Method, StatusCode};
use k8s_openapi::api::{authentication::v1 as authn, authorization::v1 as authz};
use serde_json::{Map, Value, json};

use crate::App;
use crate::auth::{USER_GROUPS, USER_NAME};
use crate::handlers::{Req, json_response};
use crate::paths::ResourcePath;
use crate::registry::{Resource, Typed, typed::typed};
use crate::schema::WriteKind;
use crate::semantics::prepare::FieldValidation;
use crate::status::{ApiError, ApiResult, Cause};

/// One review kind the server answers.
#[derive(Debug, Clone, Copy)]
pub struct ReviewKind {
    /// API group.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural (the URL segment).
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether it is created in a namespace.
    pub namespaced: bool,
    /// Its k8s-openapi type.
    pub typed: Typed,
}

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// The review kinds, served with the single verb `create`.
pub static KINDS: &[ReviewKind] = &[
    ReviewKind {
        group: AUTHORIZATION,
        version: "v1",
        plural: "selfsubjectaccessreviews",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        typed: typed::<authz::SelfSubjectAccessReview>(),
    },
    ReviewKind {
        group: AUTHORIZATION,
        version: "v1",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
        typed: typed::<authz::SubjectAccessReview>(),
    },
    ReviewKind {
        group: AUTHORIZATION,
        version: "v1",
        plural: "localsubjectaccessreviews",
        kind: "LocalSubjectAccessReview",
        namespaced: true,
        typed: typed::<authz::LocalSubjectAccessReview>(),
    },
    ReviewKind {
        group: AUTHORIZATION,
        version: "v1",
        plural: "selfsubjectrulesreviews",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        typed: typed::<authz::SelfSubjectRulesReview>(),
    },
    ReviewKind {
        group: AUTHENTICATION,
        version: "v1",
        plural: "selfsubjectreviews",
        kind: "SelfSubjectReview",
        namespaced: false,
        typed: typed::<authn::SelfSubjectReview>(),
    },
];

/// What every allowed answer says.
const ALLOWED_REASON: &str = "the embedded API server allows its token holder everything (no authorization beyond the token)";

/// Serves a request to a review resource: POST to the collection creates and answers.
///
/// # Errors
/// 405 for any other method or path; 400 for a body that does not decode or a wrong
/// kind; 422 when the review is invalid.
pub fn serve(
    _app: &Arc<App>,
    res: &Resource,
    path: &ResourcePath,
    req: &Req,
) -> ApiResult<Response> {
    if req.method != Method::POST || path.name.is_some() || path.subresource.is_some() {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method, path.plural
        )));
    }
    let mut review = req.body_object()?;
    crate::semantics::prepare::check_type(res, &review)?;
    if let Some(typed) = &res.typed {
        crate::schema::typed_pass(
            res,
            typed,
            &mut review,
            FieldValidation::from_param(req.params.field_validation.as_deref()),
            WriteKind::Body,
        )?;
    }
    review["apiVersion"] = json!(res.api_version());
    review["kind"] = json!(res.kind);
    let status = match res.kind.as_str() {
        "SelfSubjectReview" => {
            review["metadata"] = json!({"creationTimestamp": crate::semantics::prepare::now()});
            json!({"userInfo": {"username": USER_NAME, "groups": USER_GROUPS}})
        }
        "SelfSubjectRulesReview" => {
            check_metadata(res, &review, false)?;
            if review["spec"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
            {
                return Err(ApiError::bad_request("no namespace on request"));
            }
            json!({
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": false,
            })
        }
        kind => {
            let local = kind == "LocalSubjectAccessReview";
            if local {
                place_in_namespace(&mut review, path)?;
            }
            check_metadata(res, &review, local)?;
            check_spec(
                res,
                &review["spec"],
                review["metadata"]["namespace"].as_str(),
            )?;
            access_decision(kind, &review["spec"])
        }
    };
    if review["metadata"].as_object().is_none_or(Map::is_empty) {
        review["metadata"] = json!({"creationTimestamp": null});
    }
    review["status"] = status;
    Ok(json_response(StatusCode::CREATED, &review))
}

/// The URL's namespace is the review's; another one in the body is 400, as for any create.
fn place_in_namespace(review: &mut Value, path: &ResourcePath) -> ApiResult<()> {
    let namespace = path.namespace.clone().unwrap_or_default();
    let given = review["metadata"]["namespace"].as_str().unwrap_or_default();
    if !given.is_empty() && given != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["metadata"]["namespace"] = json!(namespace);
    Ok(())
}

fn invalid(res: &Resource, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        &res.group,
        &res.kind,
        "",
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            field: field.into(),
            message: message.into(),
        }],
    )
}

/// A review's metadata must be empty (managedFields aside; a local review's namespace too).
fn check_metadata(res: &Resource, review: &Value, local: bool) -> ApiResult<()> {
    let set = review["metadata"].as_object().is_some_and(|meta| {
        meta.iter().any(|(key, value)| {
            !value.is_null() && key != "managedFields" && !(local && key == "namespace")
        })
    });
    if set {
        let what = if local {
            "must be empty except for namespace"
        } else {
            "must be empty"
        };
        return Err(invalid(res, "metadata", &format!("Invalid value: {what}")));
    }
    Ok(())
}

/// Upstream's ValidateSubjectAccessReviewSpec and its self and local variants.
fn check_spec(res: &Resource, spec: &Value, namespace: Option<&str>) -> ApiResult<()> {
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (resource, non_resource) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                res,
                "spec.nonResourceAttributes",
                "Invalid value: cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                res,
                "spec.resourceAttributes",
                "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        _ => {}
    }
    if res.kind != "SelfSubjectAccessReview" {
        let user = spec["user"].as_str().unwrap_or_default();
        let groups = spec["groups"].as_array().map_or(0, Vec::len);
        if user.is_empty() && groups == 0 {
            return Err(invalid(
                res,
                "spec.user",
                "Invalid value: \"\": at least one of user or group must be specified",
            ));
        }
    }
    if let Some(namespace) = namespace {
        if non_resource.is_some() {
            return Err(invalid(
                res,
                "spec.nonResourceAttributes",
                "Invalid value: disallowed on this kind of request",
            ));
        }
        let asked = spec["resourceAttributes"]["namespace"]
            .as_str()
            .unwrap_or_default();
        if asked != namespace {
            return Err(invalid(
                res,
                "spec.resourceAttributes.namespace",
                &format!("Invalid value: {asked:?}: must match metadata.namespace"),
            ));
        }
    }
    Ok(())
}

/// The token holder may do everything; nobody else can make a request here.
fn access_decision(kind: &str, spec: &Value) -> Value {
    let is_holder = kind == "SelfSubjectAccessReview"
        || spec["user"].as_str() == Some(USER_NAME)
        || spec["groups"]
            .as_array()
            .is_some_and(|groups| groups.iter().any(|g| g.as_str() == Some(USER_GROUPS[0])));
    if is_holder {
        json!({"allowed": true, "reason": ALLOWED_REASON})
    } else {
        json!({
            "allowed": false,
            "reason": format!(
                "the embedded API server authenticates only its token holder ({USER_NAME}, group {}); no other user can make a request",
                USER_GROUPS[0]
            ),
        })
    }
}

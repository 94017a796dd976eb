//! DELETE of one object and deletecollection.

use std::sync::Arc;

use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

use super::read::{key_of, page};
use super::render::object_value;
use super::{Req, json_response};
use crate::App;
use crate::paths::ResourcePath;
use crate::registry::Resource;
use crate::semantics::delete::{DeleteOptions, Deletion, Propagation, delete};
use crate::status::{ApiError, ApiResult};

fn options(req: &Req) -> ApiResult<DeleteOptions> {
    let body: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else if req.content_type() == "application/vnd.kubernetes.protobuf" {
        super::parse_protobuf(&req.body)?
    } else {
        serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("the body of the request was not valid JSON: {e}"))
        })?
    };
    let policy = body["propagationPolicy"]
        .as_str()
        .map(str::to_string)
        .or_else(|| req.params.propagation_policy.clone())
        .or_else(|| {
            // The legacy orphanDependents flag.
            body["orphanDependents"]
                .as_bool()
                .map(|o| if o { "Orphan" } else { "Background" }.to_string())
        });
    let dry_run = req.params.dry_run
        || body["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        propagation: policy.as_deref().map(Propagation::parse).transpose()?,
        uid: body["preconditions"]["uid"].as_str().map(str::to_string),
        resource_version: body["preconditions"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
        dry_run,
    })
}

const PROTECTED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// DELETE one object.
///
/// # Errors
/// 404 when absent, 409 for failed preconditions, 403 for system namespaces.
pub async fn delete_one(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    name: &str,
    req: &Req,
) -> ApiResult<Response> {
    if res.group.is_empty() && res.plural == "namespaces" && PROTECTED_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    let options = options(req)?;
    match delete(app, res, &key_of(path, name), &options).await? {
        Deletion::Marked(stored) => Ok(json_response(StatusCode::OK, &object_value(res, &stored))),
        Deletion::Gone(stored) => Ok(json_response(
            StatusCode::OK,
            &json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": res.group, "kind": res.plural, "uid": stored.uid()},
            }),
        )),
    }
}

/// DELETE a collection (with selectors): answers the list of deleted or marked objects.
///
/// # Errors
/// 400 for bad selectors.
pub async fn delete_collection(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    req: &Req,
) -> ApiResult<Response> {
    let options = options(req)?;
    let mut listing = Req {
        method: req.method.clone(),
        headers: req.headers.clone(),
        params: req.params.clone(),
        body: bytes::Bytes::new(),
        user_agent: req.user_agent.clone(),
    };
    listing.params.limit = 0;
    listing.params.continue_token = None;
    let page = page(app, res, path, &listing)?;
    let mut items = Vec::new();
    for stored in page.items {
        match delete(app, res, &stored.key(), &options).await {
            Ok(Deletion::Gone(s) | Deletion::Marked(s)) => items.push(object_value(res, &s)),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({"apiVersion": res.api_version(), "kind": res.list_kind, "metadata": {"resourceVersion": app.store.current_rv().to_string()}, "items": items}),
    ))
}

//! Minimal OpenAPI: enough for `kubectl apply` to send `fieldValidation=Strict` and for
//! `kubectl explain` to show custom resource field descriptions.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::status::{ApiError, ApiResult};

/// `/openapi/v2`: an empty but valid Swagger document.
#[must_use]
pub fn v2(_registry: &Registry) -> Value {
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": {}, "definitions": {}})
}

/// `/openapi/v3`: the index of group-version documents.
#[must_use]
pub fn v3_index(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": "/openapi/v3/api/v1"}),
    );
    for (group, versions) in registry.groups() {
        if group.is_empty() {
            continue;
        }
        for v in versions {
            let key = format!("apis/{group}/{v}");
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/g/v>`.
///
/// # Errors
/// 404 for an unknown group/version.
pub fn v3_document(registry: &Registry, group: &str, version: &str) -> ApiResult<Value> {
    let resources = registry.group_version(group, version);
    if resources.is_empty() {
        return Err(ApiError::no_route(&format!("openapi/v3 {group}/{version}")));
    }
    // One PATCH operation per kind, tagged with its group/version/kind and offering
    // `fieldValidation`: client-go's query-param verifier (kubectl apply, Helm) looks
    // for exactly this before it sends `fieldValidation=Strict`; without it Helm falls
    // back to the protobuf /openapi/v2 and refuses to install.
    let mut paths = serde_json::Map::new();
    for r in &resources {
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        paths.insert(
            path,
            json!({"patch": {
                "operationId": format!("patch{}", r.kind),
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"description": "OK"}},
            }}),
        );
    }
    let mut schemas = serde_json::Map::new();
    for r in &resources {
        let Some(schema) = &r.schema else {
            continue;
        };
        let mut schema = schema.raw().clone();
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        let reversed: Vec<&str> = r.group.split('.').rev().collect();
        schemas.insert(
            format!("{}.{}.{}", reversed.join("."), r.version, r.kind),
            schema,
        );
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

//! Minimal OpenAPI: enough for `kubectl apply` to send `fieldValidation=Strict` and for
//! `kubectl explain` to show field descriptions: of custom resources (their CRD schema with
//! apiVersion, kind and metadata added, as the real server publishes it) and of built-in
//! kinds (their k8s-openapi schemas).

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
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut schemas = serde_json::Map::new();
    for r in &resources {
        let (name, mut schema) = if let Some(typed) = &r.typed {
            let schema = (typed.json_schema)(&mut generator);
            let schema = finished(&mut generator, schema);
            ((typed.schema_name)().into_owned(), schema)
        } else if let Some(schema) = &r.schema {
            let reversed: Vec<&str> = r.group.split('.').rev().collect();
            let name = format!("{}.{}.{}", reversed.join("."), r.version, r.kind);
            (
                name,
                with_type_and_object_meta(&mut generator, schema.raw()),
            )
        } else {
            continue;
        };
        schema["x-kubernetes-group-version-kind"] =
            json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        schemas.insert(name, schema);
    }
    for (name, definition) in generator.take_definitions(true) {
        schemas.entry(name).or_insert(definition);
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// A schema after the generator's OpenAPI 3 transforms (`$ref` siblings into `allOf`...).
fn finished(generator: &mut schemars::SchemaGenerator, mut schema: schemars::Schema) -> Value {
    for transform in generator.transforms_mut() {
        transform.transform(&mut schema);
    }
    schema.to_value()
}

/// A CRD's schema as the real server publishes it: with `apiVersion`, `kind` and
/// `metadata` (a reference to ObjectMeta, whose schema joins the document), so `kubectl
/// explain <kind> --recursive` and `kubectl explain <kind>.metadata` work.
fn with_type_and_object_meta(generator: &mut schemars::SchemaGenerator, raw: &Value) -> Value {
    let mut schema = raw.clone();
    let meta = generator
        .subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>()
        .to_value();
    let properties = schema
        .as_object_mut()
        .map(|s| s.entry("properties").or_insert_with(|| json!({})));
    if let Some(Value::Object(properties)) = properties {
        properties.entry("apiVersion").or_insert_with(|| {
            json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"})
        });
        properties.entry("kind").or_insert_with(|| {
            json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"})
        });
        properties.insert(
            "metadata".into(),
            json!({"allOf": [meta], "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
        );
    }
    schema
}

//! HTTP entry: one fallback handler parses the Kubernetes path and dispatches.

pub mod delete;
pub mod discovery;
pub mod feed;
pub mod openapi;
mod pace;
pub mod params;
pub mod printers;
pub mod read;
pub mod render;
pub mod table;
pub mod watch;
pub mod write;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::Value;

use crate::App;
use crate::audit::RequestRecord;
use crate::paths::{self, ResourcePath, Route};
use crate::registry::Resource;
use crate::status::{ApiError, ApiResult};
use params::Params;

/// The largest request body accepted (as the real server: 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// A parsed request.
pub struct Req {
    /// Method.
    pub method: Method,
    /// Headers.
    pub headers: HeaderMap,
    /// Query parameters.
    pub params: Params,
    /// Body bytes.
    pub body: Bytes,
    /// User-Agent.
    pub user_agent: String,
}

impl Req {
    /// The Content-Type's media type (lowercase, without parameters).
    #[must_use]
    pub fn content_type(&self) -> String {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    }

    /// The field manager: the parameter, else the user agent's first segment.
    #[must_use]
    pub fn manager(&self) -> String {
        self.params.field_manager.clone().unwrap_or_else(|| {
            let agent = self.user_agent.split('/').next().unwrap_or_default();
            if agent.is_empty() {
                "unknown".into()
            } else {
                agent.to_string()
            }
        })
    }

    /// Parses the body as a JSON (or YAML) object.
    ///
    /// # Errors
    /// 415 for an unknown content type, 400 for malformed bodies.
    pub fn body_object(&self) -> ApiResult<Value> {
        let value = match self.content_type().as_str() {
            "application/json" | "" | "*/*" => serde_json::from_slice::<Value>(&self.body)
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "the body of the request was not valid JSON: {e}"
                    ))
                })?,
            "application/yaml" | "application/x-yaml" | "text/yaml" => parse_yaml(&self.body)?,
            // Typed client-go clients (Helm's release storage) send built-in kinds as protobuf.
            "application/vnd.kubernetes.protobuf" => parse_protobuf(&self.body)?,
            other => return Err(ApiError::unsupported_media_type(other)),
        };
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        }
        Ok(value)
    }
}

/// Decodes a Kubernetes protobuf body into JSON: 415 for kinds not served as protobuf
/// (custom resources, as on a real server), 400 when malformed.
///
/// # Errors
/// See above.
pub fn parse_protobuf(body: &[u8]) -> ApiResult<Value> {
    crate::protobuf::decode_object(body).map_err(|e| match e {
        crate::protobuf::ProtobufError::UnsupportedKind { .. } => {
            ApiError::unsupported_media_type("application/vnd.kubernetes.protobuf")
        }
        other => ApiError::bad_request(format!(
            "the body of the request was not valid protobuf: {other}"
        )),
    })
}

/// Parses YAML (or JSON, which is YAML) into JSON.
///
/// # Errors
/// 400 when malformed.
pub fn parse_yaml(body: &[u8]) -> ApiResult<Value> {
    // Most such bodies are JSON (client libraries send apply patches as JSON under the
    // apply-patch+yaml type); the JSON parser reads them several times faster, to the
    // same value (a repeated key: the last one wins in both). Anything it refuses (YAML
    // proper, flow YAML that is not JSON) is read by the YAML parser, as before.
    if body.trim_ascii_start().starts_with(b"{")
        && let Ok(value) = serde_json::from_slice::<Value>(body)
    {
        return Ok(value);
    }
    serde_yaml::from_slice::<Value>(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request was not valid YAML: {e}"))
    })
}

/// A JSON response.
#[must_use]
pub fn json_response(code: StatusCode, value: &Value) -> Response {
    bytes_response(code, Bytes::from(value.to_string()))
}

/// A JSON response from serialized bytes.
#[must_use]
pub fn bytes_response(code: StatusCode, body: Bytes) -> Response {
    let mut response = (code, Body::from(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

struct Described {
    verb: &'static str,
    resource: String,
    namespace: String,
}

fn describe(method: &Method, route: &Route, params: &Params) -> Described {
    let Route::Resource(p) = route else {
        return Described {
            verb: "",
            resource: String::new(),
            namespace: String::new(),
        };
    };
    let verb = match (method.as_str(), p.name.is_some()) {
        ("GET", _) if params.watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "",
    };
    let resource = match &p.subresource {
        Some(sub) => format!("{}/{sub}", p.plural),
        None => p.plural.clone(),
    };
    Described {
        verb,
        resource,
        namespace: p.namespace.clone().unwrap_or_default(),
    }
}

/// The fallback handler serving every path.
pub async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let route = paths::parse(parts.uri.path());
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let params = Params::parse(parts.uri.query());
    let described = describe(
        &parts.method,
        &route,
        params.as_ref().unwrap_or(&Params::default()),
    );
    let field_manager = params
        .as_ref()
        .ok()
        .and_then(|p| p.field_manager.clone())
        .unwrap_or_default();
    let result = async {
        let params = params?;
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|n| n > MAX_BODY) {
            return Err(ApiError::too_large("the request body is larger than 3 MiB"));
        }
        let body = axum::body::to_bytes(body, MAX_BODY)
            .await
            .map_err(|_| ApiError::too_large("the request body is larger than 3 MiB or was cut"))?;
        let req = Req {
            method: parts.method.clone(),
            headers: parts.headers.clone(),
            params,
            body,
            user_agent: user_agent.clone(),
        };
        let mut answer_applied_with_error = false;
        if let Route::Resource(_) = &route {
            let faults = app.faults.get();
            if !faults.latency.is_zero() {
                tokio::time::sleep(faults.latency).await;
            }
            let is_write = !matches!(req.method, Method::GET);
            if let Some(error) = app.faults.pick_error(is_write) {
                return Err(error);
            }
            answer_applied_with_error = app.faults.pick_applied_error(is_write);
        }
        // A bug must answer a Status, not reset the connection.
        let answer = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(dispatch(
            &app, route, req,
        )))
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::internal(
                "the server panicked while handling the request",
            ))
        });
        match answer {
            // Writes answer once durable: the write stays, only its answer is lost.
            Ok(response) if answer_applied_with_error && response.status().is_success() => {
                Err(crate::faults::applied_error())
            }
            answer => answer,
        }
    }
    .await;
    let response = result.unwrap_or_else(IntoResponse::into_response);
    app.audit.record(RequestRecord {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        verb: described.verb.to_string(),
        resource: described.resource,
        namespace: described.namespace,
        field_manager,
        user_agent,
        status: response.status().as_u16(),
    });
    response
}

async fn dispatch(app: &Arc<App>, route: Route, req: Req) -> ApiResult<Response> {
    let get_only = |req: &Req| {
        if req.method == Method::GET {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({})",
                req.method
            )))
        }
    };
    match route {
        Route::Version => {
            get_only(&req)?;
            Ok(json_response(StatusCode::OK, &discovery::version()))
        }
        Route::Health { endpoint, check } => {
            get_only(&req)?;
            Ok(health(app, &endpoint, check.as_deref(), req.params.verbose))
        }
        Route::CoreVersions => {
            get_only(&req)?;
            Ok(json_response(StatusCode::OK, &discovery::core_versions()))
        }
        Route::Groups => {
            get_only(&req)?;
            Ok(json_response(
                StatusCode::OK,
                &discovery::groups(&app.registry.read()),
            ))
        }
        Route::Group(group) => {
            get_only(&req)?;
            discovery::group(&app.registry.read(), &group)
                .map(|v| json_response(StatusCode::OK, &v))
        }
        Route::ResourceList { group, version } => {
            get_only(&req)?;
            discovery::resource_list(&app.registry.read(), &group, &version)
                .map(|v| json_response(StatusCode::OK, &v))
        }
        Route::OpenApiV2 => {
            get_only(&req)?;
            Ok(json_response(
                StatusCode::OK,
                &openapi::v2(&app.registry.read()),
            ))
        }
        Route::OpenApiV3Index => {
            get_only(&req)?;
            Ok(json_response(
                StatusCode::OK,
                &openapi::v3_index(&app.registry.read()),
            ))
        }
        Route::OpenApiV3 { group, version } => {
            get_only(&req)?;
            openapi::v3_document(&app.registry.read(), &group, &version)
                .map(|v| json_response(StatusCode::OK, &v))
        }
        Route::Resource(path) => resource(app, path, req).await,
        Route::Unknown => Err(ApiError::no_route("unknown path")),
    }
}

/// `/healthz`, `/livez`, `/readyz` as the real server answers them (k8s.io/apiserver/pkg/
/// server/healthz): `ok`, or with `?verbose` one `[+]<check> ok` line per check and
/// `<endpoint> check passed`; a failed check is `[-]<check> failed: reason withheld` and a
/// 500. Only `readyz` has the `shutdown` check (the server is stopping).
fn health(app: &App, endpoint: &str, only: Option<&str>, verbose: bool) -> Response {
    let stopping = app.shutdown.is_cancelled();
    let mut checks = vec![("ping", true), ("log", true), ("store", true)];
    if endpoint == "readyz" {
        checks.push(("shutdown", !stopping));
    }
    if let Some(only) = only {
        return match checks.iter().find(|(name, _)| *name == only) {
            Some((_, true)) => (StatusCode::OK, "ok").into_response(),
            Some((name, false)) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal server error: {name} check failed"),
            )
                .into_response(),
            None => ApiError::no_route(&format!("{endpoint}/{only}")).into_response(),
        };
    }
    let passed = checks.iter().all(|(_, ok)| *ok);
    let code = if passed {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    if !verbose && passed {
        return (code, "ok").into_response();
    }
    let mut text = String::new();
    for (name, ok) in &checks {
        if *ok {
            text.push_str(&format!("[+]{name} ok\n"));
        } else {
            text.push_str(&format!("[-]{name} failed: reason withheld\n"));
        }
    }
    text.push_str(&format!(
        "{endpoint} check {}\n",
        if passed { "passed" } else { "failed" }
    ));
    (code, text).into_response()
}

/// The served resource of a path, checking scope.
///
/// # Errors
/// 404 when the resource is not served or the scope does not fit.
pub fn lookup(app: &App, path: &ResourcePath) -> ApiResult<Arc<Resource>> {
    let resource = app
        .registry
        .read()
        .get(&path.group, &path.version, &path.plural)
        .ok_or_else(|| ApiError::no_route(&format!("{}.{}", path.plural, path.group)))?;
    if path.namespace.is_some() && !resource.namespaced {
        return Err(ApiError::no_route(&path.plural));
    }
    Ok(resource)
}

async fn resource(app: &Arc<App>, path: ResourcePath, req: Req) -> ApiResult<Response> {
    let res = lookup(app, &path)?;
    if res.review {
        return crate::reviews::serve(app, &res, &path, &req);
    }
    let sub = path.subresource.as_deref();
    if let Some(s) = sub
        && (s != "status" || !res.has_status)
    {
        return Err(ApiError::no_route(&format!("{}/{s}", path.plural)));
    }
    let needs_namespace = res.namespaced && path.name.is_some();
    if needs_namespace && path.namespace.is_none() {
        return Err(ApiError::no_route(&path.plural));
    }
    match (&req.method, &path.name) {
        (&Method::GET, None) if req.params.watch => watch::serve(app, &res, &path, &req),
        (&Method::GET, Some(_)) if req.params.watch => watch::serve(app, &res, &path, &req),
        (&Method::GET, None) => read::list(app, &res, &path, &req),
        (&Method::GET, Some(name)) => read::get(app, &res, &path, name, &req),
        (&Method::POST, None) => {
            if res.namespaced && path.namespace.is_none() {
                return Err(ApiError::no_route(&path.plural));
            }
            write::create(app, &res, &path, &req).await
        }
        (&Method::PUT, Some(name)) => write::update(app, &res, &path, name, sub, &req).await,
        (&Method::PATCH, Some(name)) => write::patch(app, &res, &path, name, sub, &req).await,
        (&Method::DELETE, Some(name)) if sub.is_none() => {
            delete::delete_one(app, &res, &path, name, &req).await
        }
        (&Method::DELETE, None) => delete::delete_collection(app, &res, &path, &req).await,
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({} {})",
            req.method, path.plural
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn a_json_body_of_an_apply_reads_as_the_yaml_parser_reads_it() {
        let body =
            br#" {"apiVersion":"x.io/v1","kind":"Thing","metadata":{"name":"a","labels":{"k":"v"}},
            "spec":{"n":-3,"big":18446744073709551615,"f":1.5,"e":1e3,"t":true,"z":null,
            "s":"a\"b\u00e9\n","list":[1,{"x":[]},"y"],"empty":{}}}"#;
        let yaml: Value = serde_yaml::from_slice(body).unwrap();
        assert_eq!(parse_yaml(body).unwrap(), yaml);
        assert_eq!(parse_yaml(body).unwrap()["spec"]["s"], "a\"b\u{e9}\n");
    }

    #[test]
    fn a_repeated_key_keeps_the_last_value_as_the_yaml_parser_does() {
        let body = br#"{"metadata":{"name":"a","name":"b"}}"#;
        let yaml: Value = serde_yaml::from_slice(body).unwrap();
        assert_eq!(yaml["metadata"]["name"], "b");
        assert_eq!(parse_yaml(body).unwrap(), yaml);
    }

    #[test]
    fn yaml_proper_and_malformed_json_still_go_to_the_yaml_parser() {
        assert_eq!(
            parse_yaml(b"kind: Thing\nspec:\n  n: 1\n").unwrap(),
            serde_json::json!({"kind": "Thing", "spec": {"n": 1}})
        );
        // Flow YAML that is not JSON (an unquoted key) is YAML's to read.
        assert_eq!(
            parse_yaml(b"{kind: Thing}").unwrap(),
            serde_json::json!({"kind": "Thing"})
        );
        assert_eq!(parse_yaml(b"{\"kind\": ").unwrap_err().code, 400);
    }
}

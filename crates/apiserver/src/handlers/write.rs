//! create, update (PUT), patch (merge, JSON, server-side apply) and `/status` writes.

use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde_json::Value;

use super::read::key_of;
use super::render::{object_value, serves_stored_bytes};
use super::{Req, bytes_response, json_response, parse_yaml};
use crate::App;
use crate::fields;
use crate::paths::ResourcePath;
use crate::registry::{CRD_STORAGE, Resource};
use crate::schema::WriteKind;
use crate::semantics::prepare::FieldValidation;
use crate::semantics::{crd, events, meta, prepare};
use crate::status::{ApiError, ApiResult};
use crate::store::{Expect, ObjKey, Op, StoredObject, WriteError};
use apimachinery::patch::{check_merge_patch, json_patch, merge_patch};

/// What a mutation decided.
pub enum Outcome {
    /// Store this object.
    Store(Value),
    /// Store this object, which differs from the current one in `metadata` only (so
    /// keeps its [`StoredObject::schema_mark`]).
    StoreMetadata(Value),
    /// Remove the object (its last finalizer went away); the DELETED event shows this
    /// final state when given.
    Remove,
    /// Remove the object, whose final state is this.
    RemoveAs(Value),
    /// Nothing changed: no write, no event, no new resourceVersion.
    Unchanged,
}

/// Answers with an object and any warnings (its stored bytes when its schema's mark says
/// they are what `res` serves: [`serves_stored_bytes`]).
#[must_use]
pub fn respond(
    code: StatusCode,
    res: &Resource,
    stored: &StoredObject,
    warnings: &[String],
) -> Response {
    let mut response = if serves_stored_bytes(res, stored) {
        bytes_response(code, Bytes::copy_from_slice(&stored.json))
    } else {
        json_response(code, &object_value(res, stored))
    };
    for warning in warnings {
        if let Ok(value) = HeaderValue::from_bytes(warning_header(warning).as_bytes()) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

/// A `Warning` header value as kube-apiserver writes it (`net.NewWarningHeader`,
/// k8s.io/apimachinery/pkg/util/net/http.go): code 299, agent `-`, the text quoted with
/// `"` and `\` escaped and control characters a space, so kubectl prints the text as it was.
fn warning_header(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 8);
    quoted.push_str("299 - \"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if c.is_control() => quoted.push(' '),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Stores an error of the store as an API error.
#[must_use]
pub fn store_error(res: &Resource, name: &str, error: WriteError) -> ApiError {
    match error {
        WriteError::Exists => ApiError::already_exists(&res.group, &res.plural, name),
        WriteError::Missing => ApiError::not_found(&res.group, &res.plural, name),
        WriteError::Stale => ApiError::stale(&res.group, &res.plural, name),
        WriteError::Encode => ApiError::internal("the object could not be encoded"),
    }
}

/// 404 when the namespace is missing, 403 when it is terminating.
///
/// # Errors
/// As above.
pub fn check_namespace(app: &App, res: &Resource, namespace: &str, name: &str) -> ApiResult<()> {
    let ns_key = crate::registry::storage_key("", "namespaces");
    match app
        .store
        .get(&ns_key, &(String::new(), namespace.to_string()))
    {
        None => Err(ApiError::not_found("", "namespaces", namespace)),
        Some(ns) if ns.deleting => {
            let mut err = ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                crate::status::qualified(&res.plural, &res.group)
            ));
            err.reason = "Forbidden".into();
            Err(err)
        }
        Some(_) => Ok(()),
    }
}

/// Stores a prepared new object.
///
/// # Errors
/// 404/403 for the namespace, 409 AlreadyExists, 422 for schema violations.
pub async fn create_object(
    app: &Arc<App>,
    res: &Arc<Resource>,
    mut object: Value,
    req: &Req,
    applied: bool,
) -> ApiResult<Response> {
    let validation = FieldValidation::from_param(req.params.field_validation.as_deref());
    meta::validate(res, &object)?;
    let write = if applied {
        WriteKind::Apply
    } else {
        WriteKind::Body
    };
    let warnings = prepare::schema_pass(res, &mut object, None, validation, write)?;
    let schema_mark = schema_mark_of(res);
    if &*res.storage == CRD_STORAGE {
        crd::on_write(&mut object)?;
        crd::on_create(&mut object);
    }
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if res.namespaced {
        check_namespace(app, res, &namespace, &name)?;
    }
    if !applied {
        fields::update(
            res,
            None,
            &mut object,
            &req.manager(),
            None,
            &prepare::now(),
        );
    }
    if req.params.dry_run {
        let mut stored =
            StoredObject::new(&object, 0).ok_or_else(|| ApiError::internal("encode"))?;
        stored.schema_mark = schema_mark;
        return Ok(respond(StatusCode::CREATED, res, &stored, &warnings));
    }
    let generated = object["metadata"]["generateName"]
        .as_str()
        .filter(|prefix| name.len() == prefix.len() + 5 && name.starts_with(prefix))
        .map(str::to_string);
    let mut key: ObjKey = (namespace, name.clone());
    let mut attempts = 0;
    let mut written = loop {
        // Only a generated name may need a second try (and so a copy of the object).
        let attempt = if generated.is_some() {
            object.clone()
        } else {
            std::mem::take(&mut object)
        };
        match app.store.write_marked(
            &res.storage,
            &key,
            Op::Put(attempt),
            Expect::Absent,
            schema_mark,
        ) {
            // A generated name that collides is generated again, as the real server retries.
            Err(WriteError::Exists) if generated.is_some() && attempts < 8 => {
                attempts += 1;
                let prefix = generated.clone().unwrap_or_default();
                let fresh = format!("{prefix}{}", prepare::random_suffix());
                object["metadata"]["name"] = Value::String(fresh.clone());
                key.1 = fresh;
            }
            result => break result.map_err(|e| store_error(res, &key.1, e))?,
        }
    };
    written.wait_durable().await;
    app.after_write(&written.change);
    Ok(respond(
        StatusCode::CREATED,
        res,
        &written.change.object,
        &warnings,
    ))
}

/// POST to a collection.
///
/// # Errors
/// See [`create_object`].
pub async fn create(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    req: &Req,
) -> ApiResult<Response> {
    let body = req.body_object()?;
    let object = events::stored(res, prepare::create(res, body, path.namespace.as_deref())?);
    create_object(app, res, object, req, false).await
}

/// Runs a read-modify-write until it lands on the object it read.
///
/// # Errors
/// 404 when absent, or the mutation's error.
pub async fn mutate<F>(
    app: &Arc<App>,
    res: &Resource,
    key: &ObjKey,
    dry_run: bool,
    mutation: F,
) -> ApiResult<Arc<StoredObject>>
where
    F: FnMut(&StoredObject) -> ApiResult<Outcome>,
{
    mutate_via(app, res, key, dry_run, None, mutation).await
}

/// As [`mutate`], for a mutation whose stored objects went through the schema pass of
/// `via` (the served resource): they carry its schema's mark, which lets every answer,
/// watch line and read serve their stored bytes ([`serves_stored_bytes`]).
///
/// # Errors
/// As [`mutate`].
pub async fn mutate_via<F>(
    app: &Arc<App>,
    res: &Resource,
    key: &ObjKey,
    dry_run: bool,
    via: Option<&Arc<Resource>>,
    mut mutation: F,
) -> ApiResult<Arc<StoredObject>>
where
    F: FnMut(&StoredObject) -> ApiResult<Outcome>,
{
    for _ in 0..64 {
        let current = app
            .store
            .get(&res.storage, key)
            .ok_or_else(|| ApiError::not_found(&res.group, &res.plural, &key.1))?;
        let outcome = mutation(&current)?;
        let mut schema_mark = 0;
        let op = match outcome {
            Outcome::Unchanged => return Ok(current),
            Outcome::Store(v) => {
                schema_mark = via.map_or(0, |res| schema_mark_of(res));
                Op::Put(v)
            }
            Outcome::StoreMetadata(v) => {
                schema_mark = current.schema_mark;
                Op::Put(v)
            }
            Outcome::Remove => Op::Delete(None),
            Outcome::RemoveAs(v) => {
                // Made by the schema pass of `via` when there is one (an update or a
                // patch that took the last finalizer away); unknown otherwise.
                schema_mark = via.map_or(0, |res| schema_mark_of(res));
                Op::Delete(Some(v))
            }
        };
        if dry_run {
            // Marked as the store would mark it (`Store::write_marked`).
            let (preview, mark) = match op {
                Op::Put(v) | Op::Delete(Some(v)) => (v, schema_mark),
                Op::Delete(None) => (current.value(), current.schema_mark),
            };
            let mut preview = StoredObject::new(&preview, current.rv)
                .ok_or_else(|| ApiError::internal("encode"))?;
            preview.schema_mark = mark;
            return Ok(Arc::new(preview));
        }
        match app
            .store
            .write_marked(&res.storage, key, op, Expect::Rv(current.rv), schema_mark)
        {
            Ok(mut written) => {
                written.wait_durable().await;
                app.after_write(&written.change);
                return Ok(written.change.object.clone());
            }
            Err(WriteError::Stale | WriteError::Missing) => {}
            Err(e) => return Err(store_error(res, &key.1, e)),
        }
    }
    Err(ApiError::stale(&res.group, &res.plural, &key.1))
}

/// The mark an object written through `res` after its schema pass carries.
fn schema_mark_of(res: &Resource) -> u32 {
    res.schema
        .as_deref()
        .map_or(0, crate::schema::CrdSchema::mark)
}

/// The common tail of updates: schema, managed fields, finalization, no-op detection.
/// `old_mark` is the stored object's [`StoredObject::schema_mark`].
#[allow(clippy::too_many_arguments)] // the update's parts, each used once
fn finish(
    res: &Resource,
    old: &Value,
    old_mark: u32,
    mut new: Value,
    req: &Req,
    sub: Option<&str>,
    write: WriteKind,
    warnings: &mut Vec<String>,
) -> ApiResult<Outcome> {
    let applied = write == WriteKind::Apply;
    if &*res.storage == CRD_STORAGE && sub.is_none() {
        crd::on_write(&mut new)?;
    }
    let validation = FieldValidation::from_param(req.params.field_validation.as_deref());
    *warnings = prepare::schema_pass(res, &mut new, Some((old, old_mark)), validation, write)?;
    if !old["metadata"]["deletionTimestamp"].is_null()
        && new["metadata"]["finalizers"].is_null()
        && !blocks_namespace(res, &new)
    {
        return Ok(Outcome::RemoveAs(new));
    }
    meta::validate(res, &new)?;
    if prepare::is_noop(old, &new) {
        return Ok(Outcome::Unchanged);
    }
    if !applied {
        fields::update(
            res,
            Some(old),
            &mut new,
            &req.manager(),
            sub,
            &prepare::now(),
        );
    }
    Ok(Outcome::Store(new))
}

/// A terminating namespace stays while its `spec.finalizers` are not empty.
fn blocks_namespace(res: &Resource, object: &Value) -> bool {
    res.group.is_empty()
        && res.plural == "namespaces"
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

fn pinned_rv(object: &Value) -> ApiResult<Option<u64>> {
    match object["metadata"]["resourceVersion"].as_str() {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}"))),
    }
}

/// PUT an object or its status.
///
/// # Errors
/// 404, 409 on a stale resourceVersion, 422 for a custom resource without resourceVersion.
pub async fn update(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    name: &str,
    sub: Option<&str>,
    req: &Req,
) -> ApiResult<Response> {
    let body = req.body_object()?;
    let pinned = pinned_rv(&body)?;
    if pinned.is_none() && res.custom {
        return Err(ApiError::invalid_field(
            &res.group,
            &res.kind,
            name,
            "FieldValueInvalid",
            "metadata.resourceVersion",
            "Invalid value: 0x0: must be specified for an update",
        ));
    }
    let mut warnings = Vec::new();
    let key = key_of(path, name);
    let stored = mutate_via(app, res, &key, req.params.dry_run, Some(res), |current| {
        if pinned.is_some_and(|rv| rv != current.rv) {
            return Err(ApiError::stale(&res.group, &res.plural, name));
        }
        if let Some(uid) = body["metadata"]["uid"]
            .as_str()
            .filter(|u| !u.is_empty() && *u != current.uid())
        {
            return Err(ApiError::conflict(
                &res.group,
                &res.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.uid()
                ),
            ));
        }
        let old = events::served(res, current.value());
        let sent = if sub.is_some() {
            prepare::status_body(&body)
        } else {
            body.clone()
        };
        let new = prepare::update(res, &old, sent, sub.is_some())?;
        let outcome = finish(
            res,
            &events::stored(res, old),
            current.schema_mark,
            events::stored(res, new),
            req,
            sub,
            WriteKind::Body,
            &mut warnings,
        )?;
        Ok(outcome)
    })
    .await?;
    Ok(respond(StatusCode::OK, res, &stored, &warnings))
}

/// An apply patch names the endpoint's exact apiVersion and kind. Upstream (1.32): the
/// version check is a 400 in the field manager (`structuredMergeManager.Apply`,
/// k8s.io/apimachinery/pkg/util/managedfields/internal/structuredmerge.go); another kind has
/// no type to convert the patch to, a plain error answered 500.
fn check_apply_type(
    res: &Resource,
    path: &ResourcePath,
    name: &str,
    patch: &Value,
) -> ApiResult<()> {
    let expected = res.api_version();
    let specified = patch["apiVersion"].as_str().unwrap_or_default();
    if specified != expected {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {specified}, expected: {expected}"
        )));
    }
    let kind = patch["kind"].as_str().unwrap_or_default();
    if kind != res.kind {
        let namespace = path.namespace.as_deref().unwrap_or_default();
        let gvk = format!("{}/{}, Kind={kind}", res.group, res.version);
        return Err(ApiError::new(
            500,
            "",
            format!(
                "failed to create typed patch object ({namespace}/{name}; {gvk}): no corresponding type for {gvk}"
            ),
        ));
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

/// PATCH an object or its status.
///
/// # Errors
/// 415 for unknown patch types (and strategic merge on custom resources), 400/422 for bad
/// patches, 409 for apply conflicts or a stale pinned resourceVersion.
pub async fn patch(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    name: &str,
    sub: Option<&str>,
    req: &Req,
) -> ApiResult<Response> {
    let content_type = req.content_type();
    let kind = match content_type.as_str() {
        "application/merge-patch+json" => PatchKind::Merge,
        "application/json-patch+json" => PatchKind::Json,
        // Built-in kinds only (semantics::strategic); custom resources refuse it, as the
        // real server does.
        "application/strategic-merge-patch+json" if !res.custom => PatchKind::Strategic,
        "application/apply-patch+yaml" | "application/apply-patch+json" => PatchKind::Apply,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    let patch: Value = match kind {
        PatchKind::Apply => parse_yaml(&req.body)?,
        _ => serde_json::from_slice(&req.body).map_err(|e| {
            ApiError::bad_request(format!("the body of the request was not valid JSON: {e}"))
        })?,
    };
    let manager = req.manager();
    if kind == PatchKind::Apply {
        if req.params.field_manager.is_none() {
            return Err(ApiError::invalid_field(
                "meta.k8s.io",
                "PatchOptions",
                "",
                "FieldValueRequired",
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        if !patch.is_object() {
            return Err(ApiError::bad_request(
                "an apply configuration must be an object",
            ));
        }
        if !patch["metadata"]["managedFields"].is_null() {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        check_apply_type(res, path, name, &patch)?;
    } else if matches!(kind, PatchKind::Merge | PatchKind::Strategic) {
        check_merge_patch(&patch).map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let key = key_of(path, name);
    if kind == PatchKind::Apply && sub.is_none() && app.store.get(&res.storage, &key).is_none() {
        let applied = fields::apply(
            res,
            None,
            &patch,
            &manager,
            None,
            req.params.force,
            &prepare::now(),
        )?;
        let object = events::stored(
            res,
            prepare::create(res, applied, path.namespace.as_deref())?,
        );
        if object["metadata"]["name"] != Value::String(name.to_string()) {
            return Err(ApiError::bad_request(format!(
                "the name of the object does not match the name on the URL ({name})"
            )));
        }
        // create() reset metadata; keep the apply's managedFields entry.
        return create_object(app, res, object, req, true).await;
    }
    let mut warnings = Vec::new();
    let stored = mutate_via(app, res, &key, req.params.dry_run, Some(res), |current| {
        let old = events::served(res, current.value());
        let patched = match kind {
            PatchKind::Merge => {
                let mut v = old.clone();
                merge_patch(&mut v, &patch);
                v
            }
            PatchKind::Strategic => {
                let mut v = old.clone();
                crate::semantics::strategic::merge(&mut v, &patch);
                v
            }
            PatchKind::Json => {
                let mut v = old.clone();
                json_patch(&mut v, &patch).map_err(|e| {
                    if e.is_bad_request() {
                        ApiError::bad_request(e.to_string())
                    } else {
                        ApiError::new(422, "Invalid", e.to_string())
                    }
                })?;
                v
            }
            PatchKind::Apply => fields::apply(
                res,
                Some(&old),
                &patch,
                &manager,
                sub,
                req.params.force,
                &prepare::now(),
            )?,
        };
        if let Some(rv) = pinned_rv(&patched)?
            && rv != current.rv
        {
            return Err(ApiError::stale(&res.group, &res.plural, name));
        }
        let new = prepare::update(res, &old, patched, sub.is_some())?;
        let outcome = finish(
            res,
            &events::stored(res, old),
            current.schema_mark,
            events::stored(res, new),
            req,
            sub,
            if kind == PatchKind::Apply {
                WriteKind::Apply
            } else {
                WriteKind::Patch
            },
            &mut warnings,
        )?;
        Ok(outcome)
    })
    .await?;
    Ok(respond(StatusCode::OK, res, &stored, &warnings))
}

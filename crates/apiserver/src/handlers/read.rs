//! GET of one object and LIST with selectors and consistent pagination.

use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::params::{Render, render_of};
use super::render::{Filter, render_value, write_rendered};
use super::{Req, bytes_response, json_response, table};
use crate::App;
use crate::paths::ResourcePath;
use crate::registry::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{ObjKey, StoredObject};

/// The store key of a path's object.
#[must_use]
pub fn key_of(path: &ResourcePath, name: &str) -> ObjKey {
    (path.namespace.clone().unwrap_or_default(), name.to_string())
}

/// GET one object (also for `/status`).
///
/// # Errors
/// 404 when absent.
pub fn get(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    name: &str,
    req: &Req,
) -> ApiResult<Response> {
    let stored = app
        .store
        .get(&res.storage, &key_of(path, name))
        .ok_or_else(|| ApiError::not_found(&res.group, &res.plural, name))?;
    let render = render_of(&req.headers);
    if render == Render::Table {
        let rv = stored.rv;
        return Ok(json_response(
            StatusCode::OK,
            &table::table(res, &[stored], rv, None, req),
        ));
    }
    let mut out = Vec::with_capacity(stored.json.len());
    write_rendered(&mut out, res, &stored, render);
    Ok(bytes_response(StatusCode::OK, Bytes::from(out)))
}

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let token =
        json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{}\u{0}{}", last.0, last.1)});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, ObjKey)> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = value["rv"].as_u64().ok_or_else(bad)?;
    let start = value["start"].as_str().ok_or_else(bad)?;
    let (ns, name) = start.split_once('\u{0}').ok_or_else(bad)?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

/// One page of a list.
pub struct Page {
    /// The snapshot's resourceVersion.
    pub rv: u64,
    /// The items.
    pub items: Vec<Arc<StoredObject>>,
    /// The continue token, when more remain.
    pub continue_token: Option<String>,
    /// How many items follow this page, when known: as on the real server, only for lists
    /// without a label or field selector (`ListMeta.remainingItemCount`).
    pub remaining: Option<usize>,
}

/// Reads a page from a consistent snapshot.
///
/// # Errors
/// 400 for bad selectors or tokens; 410 Expired when the token's snapshot is gone.
pub fn page(app: &App, res: &Resource, path: &ResourcePath, req: &Req) -> ApiResult<Page> {
    let filter = Filter::new(res, path, &req.params)?;
    let (rv, table, after) = match &req.params.continue_token {
        Some(token) => {
            let (rv, after) = decode_continue(token)?;
            let table = app.store.find_snapshot(&res.storage, rv).ok_or_else(|| {
                ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
            })?;
            (rv, table, Some(after))
        }
        None => {
            if req.params.resource_version_match.as_deref() == Some("Exact") {
                let wanted = req.params.rv_number()?;
                if wanted.is_some_and(|w| w != app.store.current_rv()) {
                    return Err(ApiError::expired("too old resource version"));
                }
            }
            let (rv, table) = app.store.snapshot(&res.storage);
            (rv, table, None)
        }
    };
    let limit = usize::try_from(req.params.limit).unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut more = false;
    let mut range: Box<dyn Iterator<Item = (&ObjKey, &Arc<StoredObject>)>> =
        match (&after, filter.namespace()) {
            (Some(after), _) => Box::new(
                table
                    .range((
                        std::ops::Bound::Excluded(after.clone()),
                        std::ops::Bound::Unbounded,
                    ))
                    .filter(|(k, _)| filter.namespace().is_none_or(|ns| k.0 == ns)),
            ),
            (None, Some(ns)) => {
                let ns = ns.to_string();
                Box::new(
                    table
                        .range((ns.clone(), String::new())..)
                        .take_while(move |(k, _)| k.0 == ns),
                )
            }
            (None, None) => Box::new(table.iter()),
        };
    for (_, stored) in range.by_ref() {
        if !filter.matches(stored) {
            continue;
        }
        if limit > 0 && items.len() >= limit {
            more = true;
            break;
        }
        items.push(stored.clone());
    }
    let remaining = (more && !filter.has_selectors())
        .then(|| 1 + range.filter(|(_, stored)| filter.matches(stored)).count());
    let continue_token = if more {
        app.store.keep_snapshot(&res.storage, rv, table.clone());
        items.last().map(|last| encode_continue(rv, &last.key()))
    } else {
        None
    };
    Ok(Page {
        rv,
        items,
        continue_token,
        remaining,
    })
}

/// LIST a collection.
///
/// # Errors
/// See [`page`].
pub fn list(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    req: &Req,
) -> ApiResult<Response> {
    let page = page(app, res, path, req)?;
    let render = render_of(&req.headers);
    if render == Render::Table {
        return Ok(json_response(
            StatusCode::OK,
            &table::table(
                res,
                &page.items,
                page.rv,
                page.continue_token.as_deref(),
                req,
            ),
        ));
    }
    let (api_version, kind) = match render {
        Render::Metadata => (
            "meta.k8s.io/v1".to_string(),
            "PartialObjectMetadataList".to_string(),
        ),
        _ => (res.api_version(), res.list_kind.clone()),
    };
    let mut metadata = json!({"resourceVersion": page.rv.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let mut out =
        Vec::with_capacity(page.items.iter().map(|i| i.json.len() + 1).sum::<usize>() + 256);
    out.extend_from_slice(
        format!(
            "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{},\"items\":[",
            Value::String(api_version),
            Value::String(kind),
            metadata
        )
        .as_bytes(),
    );
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_rendered(&mut out, res, item, render);
    }
    out.extend_from_slice(b"]}");
    Ok(bytes_response(StatusCode::OK, Bytes::from(out)))
}

/// The rendered full object (used by write answers).
#[must_use]
pub fn rendered(res: &Resource, stored: &StoredObject) -> Value {
    render_value(res, stored, Render::Full)
}

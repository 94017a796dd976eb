//! WATCH: newline-delimited JSON events, flushed one by one, with bookmarks, selector
//! transitions, initial events and the 410 ERROR event for a too-old resourceVersion.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::Req;
use super::params::{Render, render_of};
use super::render::{Filter, write_rendered};
use crate::App;
use crate::paths::ResourcePath;
use crate::registry::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::{Change, ChangeType, StoredObject};

struct Watcher {
    /// Whether a Table event with column definitions went out (later ones omit them).
    table_headers_sent: std::cell::Cell<bool>,
    include_object: Option<String>,
    res: Arc<Resource>,
    filter: Filter,
    render: Render,
    tx: mpsc::Sender<Bytes>,
}

impl Watcher {
    fn event_line(&self, kind: &str, stored: &StoredObject) -> Bytes {
        let mut out = Vec::with_capacity(stored.json.len() + 32);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        if self.render == Render::Table {
            let headers = !self.table_headers_sent.replace(true);
            let table = super::table::table_with(
                &self.res,
                &[Arc::new(stored.clone())],
                stored.rv,
                None,
                self.include_object.as_deref(),
                headers,
            );
            let _ = serde_json::to_writer(&mut out, &table);
        } else {
            write_rendered(&mut out, &self.res, stored, self.render);
        }
        out.extend_from_slice(b"}\n");
        Bytes::from(out)
    }

    fn bookmark_line(&self, rv: u64, initial_end: bool) -> Bytes {
        let (api_version, kind) = match self.render {
            Render::Table => ("meta.k8s.io/v1".to_string(), "Table".to_string()),
            Render::Metadata => (
                "meta.k8s.io/v1".to_string(),
                "PartialObjectMetadata".to_string(),
            ),
            _ => (self.res.api_version(), self.res.kind.clone()),
        };
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let event = json!({"type": "BOOKMARK", "object": {"apiVersion": api_version, "kind": kind, "metadata": metadata}});
        Bytes::from(format!("{event}\n"))
    }

    /// The line for a change, if this watcher sees it.
    fn change_line(&self, change: &Change) -> Option<Bytes> {
        if change.storage != self.res.storage {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let before = change
            .previous
            .as_ref()
            .is_some_and(|p| self.filter.matches(p));
        match change.change {
            ChangeType::Added => now.then(|| self.event_line("ADDED", &change.object)),
            ChangeType::Deleted => before.then(|| self.event_line("DELETED", &change.object)),
            ChangeType::Modified => match (before, now) {
                (true, true) => Some(self.event_line("MODIFIED", &change.object)),
                (false, true) => Some(self.event_line("ADDED", &change.object)),
                (true, false) => Some(self.event_line("DELETED", &change.object)),
                (false, false) => None,
            },
        }
    }
}

fn expired_line(rv: &str) -> Bytes {
    let status = ApiError::expired(format!("too old resource version: {rv}")).to_status();
    Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": status})))
}

fn stream_response(rx: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|line| (Ok::<Bytes, std::convert::Infallible>(line), rx))
    });
    let body = Body::from_stream(stream);
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    response
}

/// Serves a watch.
///
/// # Errors
/// 400 for bad selectors or parameters.
pub fn serve(
    app: &Arc<App>,
    res: &Arc<Resource>,
    path: &ResourcePath,
    req: &Req,
) -> ApiResult<Response> {
    let filter = Filter::new(res, path, &req.params)?;
    let params = &req.params;
    let send_initial = params.send_initial_events == Some(true);
    if send_initial && params.resource_version_match.as_deref() != Some("NotOlderThan") {
        return Err(ApiError::invalid_field(
            "meta.k8s.io",
            "ListOptions",
            "",
            "FieldValueForbidden",
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    let requested = params.rv_number()?;
    let from = if send_initial { None } else { requested };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let watcher = Watcher {
        table_headers_sent: std::cell::Cell::new(false),
        include_object: req.params.include_object.clone(),
        res: res.clone(),
        filter,
        render: render_of(&req.headers),
        tx,
    };
    let subscription = match app.store.subscribe(&res.storage, from) {
        Ok(s) if !res.watch_too_old(from) => s,
        _ => {
            let line = expired_line(params.resource_version.as_deref().unwrap_or_default());
            let tx = watcher.tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(line).await;
            });
            return Ok(stream_response(rx));
        }
    };
    let timeout = Duration::from_secs(params.timeout_seconds.unwrap_or(1800).max(1));
    let bookmarks = params.allow_bookmarks;
    let bookmark_every = app.options.bookmark_interval;
    let faults = app.faults.get();
    let shutdown = app.shutdown.clone();
    tokio::spawn(async move {
        let watcher = watcher;
        let mut sent: u64 = 0;
        let mut last_rv = subscription.rv;
        let started = tokio::time::Instant::now();
        let mut initial = Vec::new();
        if from.is_none() {
            for stored in subscription.snapshot.values() {
                if watcher.filter.matches(stored) {
                    initial.push(watcher.event_line("ADDED", stored));
                }
            }
        } else {
            for change in &subscription.replay {
                if let Some(line) = watcher.change_line(change) {
                    initial.push(line);
                }
            }
        }
        for line in initial {
            if watcher.tx.send(line).await.is_err() {
                return;
            }
            sent += 1;
            if faults.drop_watch_after_events.is_some_and(|n| sent >= n) {
                return;
            }
        }
        if send_initial
            && bookmarks
            && watcher
                .tx
                .send(watcher.bookmark_line(last_rv, true))
                .await
                .is_err()
        {
            return;
        }
        let mut live = subscription.live;
        let deadline = started + timeout;
        let drop_at = faults.drop_watch_after.map(|d| started + d);
        let mut ticker = tokio::time::interval_at(started + bookmark_every, bookmark_every);
        loop {
            if faults.drop_watch_after_events.is_some_and(|n| sent >= n) {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return,
                () = async { match drop_at { Some(t) => tokio::time::sleep_until(t).await, None => futures::future::pending().await } } => return,
                _ = ticker.tick() => {
                    if bookmarks && watcher.tx.send(watcher.bookmark_line(last_rv, false)).await.is_err() {
                        return;
                    }
                }
                received = live.recv() => match received {
                    Ok(change) => {
                        last_rv = change.rv;
                        if let Some(line) = watcher.change_line(&change) {
                            if watcher.tx.send(line).await.is_err() {
                                return;
                            }
                            sent += 1;
                        }
                    }
                    // A watcher too slow for the fan-out is closed; the client resumes
                    // from its last resourceVersion (or relists on 410).
                    Err(RecvError::Lagged(_) | RecvError::Closed) => return,
                },
                () = watcher.tx.closed() => return,
                () = shutdown.cancelled() => return,
            }
        }
    });
    Ok(stream_response(rx))
}

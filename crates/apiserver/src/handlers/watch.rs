//! WATCH: newline-delimited JSON events, flushed as they come, with bookmarks, selector
//! transitions, initial events and the 410 ERROR event for a too-old resourceVersion.
//!
//! Fan-out cost: the watches of the same resource, scope, selectors and form read one
//! shared log of lines ([`super::feed`]), whose task matches and renders each change once
//! (the line itself shared with other forms and feeds through [`crate::store::lines`]);
//! lines that queue up for a slow connection go out in one write, and while a watch's
//! lines come fast it holds its next chunk for the lines that come meanwhile
//! ([`super::pace`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use tokio::time::Instant;

use super::Req;
use super::feed::{Available, Cursor, Feed, FeedKey};
use super::pace::{self, Pace};
use super::params::{Render, render_of};
use super::render::{Filter, write_rendered};
use crate::App;
use crate::paths::ResourcePath;
use crate::registry::Resource;
use crate::status::{ApiError, ApiResult};
use crate::store::lines::LineKey;
use crate::store::{Change, ChangeType, LiveChange, StoredObject};

/// The most bytes of queued lines sent in one write.
const BATCH_BYTES: usize = 64 * 1024;

struct Watcher {
    app: Arc<App>,
    /// Whether a Table event with column definitions went out (later ones omit them).
    table_headers_sent: std::cell::Cell<bool>,
    include_object: Option<String>,
    res: Arc<Resource>,
    filter: Filter,
    render: Render,
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

    /// A copy of this watcher to render its feed's lines.
    fn renderer(&self) -> Self {
        Self {
            app: Arc::clone(&self.app),
            table_headers_sent: std::cell::Cell::new(self.table_headers_sent.get()),
            include_object: self.include_object.clone(),
            res: Arc::clone(&self.res),
            filter: self.filter.clone(),
            render: self.render,
        }
    }

    /// What other watches must share with this one to read the same feed; none for
    /// Tables (their column headers go out once per watch).
    fn feed_key(&self, path: &ResourcePath, req: &Req) -> Option<FeedKey> {
        let form = self.line_key("ADDED")?.form;
        Some(FeedKey {
            resource: Arc::as_ptr(&self.res) as usize,
            form,
            namespace: path.namespace.clone(),
            name: path.name.clone(),
            labels: req.params.label_selector.clone(),
            fields: req.params.field_selector.clone(),
        })
    }

    /// The key of the line shared by every watcher that sends the same one; none for
    /// Tables (they carry per-watcher column headers and are rendered for each).
    fn line_key(&self, kind: &'static str) -> Option<LineKey<'_>> {
        let form = match self.render {
            Render::Full => 0,
            Render::Metadata => 1,
            Render::Table => return None,
        };
        Some(LineKey {
            event: kind,
            form,
            resource: &self.res,
        })
    }

    /// The line for a change, if this watcher sees it.
    fn change_line(&self, change: &Change) -> Option<Bytes> {
        let kind = self.event_kind(change)?;
        let render = || self.event_line(kind, &change.object);
        Some(match self.line_key(kind) {
            Some(key) => self
                .app
                .store
                .with_watch_line(change.rv, &key, render, Bytes::clone),
            None => render(),
        })
    }

    /// Appends the line for a live change to `out`, if this watcher sees it; true if it
    /// did.
    fn append_live_line(&self, live: &LiveChange, out: &mut BytesMut) -> bool {
        let change = &live.change;
        let Some(kind) = self.event_kind(change) else {
            return false;
        };
        let render = || self.event_line(kind, &change.object);
        let mut copy = |line: &Bytes| out.extend_from_slice(line);
        match self.line_key(kind) {
            Some(key) => self.app.store.with_live_line(live, &key, render, copy),
            None => copy(&render()),
        }
        true
    }

    /// The event a change is for this watcher (a selector it starts or stops matching
    /// makes it ADDED or DELETED), if any.
    fn event_kind(&self, change: &Change) -> Option<&'static str> {
        if !Arc::ptr_eq(&change.storage, &self.res.storage) && change.storage != self.res.storage {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let before = change
            .previous
            .as_ref()
            .is_some_and(|p| self.filter.matches(p));
        match change.change {
            ChangeType::Added => now.then_some("ADDED"),
            ChangeType::Deleted => before.then_some("DELETED"),
            ChangeType::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
        }
    }
}

impl super::feed::Render for Watcher {
    fn append(&self, live: &LiveChange, out: &mut BytesMut) -> bool {
        self.append_live_line(live, out)
    }
}

fn expired_line(rv: &str) -> Bytes {
    let status = ApiError::expired(format!("too old resource version: {rv}")).to_status();
    Bytes::from(format!("{}\n", json!({"type": "ERROR", "object": status})))
}

fn stream_response<S>(chunks: S) -> Response
where
    S: futures::Stream<Item = Bytes> + Send + 'static,
{
    let body = Body::from_stream(chunks.map(Ok::<Bytes, std::convert::Infallible>));
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

/// When a watch's next BOOKMARK goes: every `every`, and once 2 s before the watch's
/// deadline, so a client that resumes after the timeout holds a recent resourceVersion;
/// none once that moment has passed. Upstream: `cacheWatcher.nextBookmarkTime`
/// (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go).
fn next_bookmark(now: Instant, every: Duration, deadline: Instant) -> Option<Instant> {
    let heartbeat = now + every;
    let before_deadline = deadline.checked_sub(Duration::from_secs(2))?;
    let at = heartbeat.min(before_deadline);
    (at > now).then_some(at)
}

/// A running watch: the body stream pulls its chunks from here, reading the feed's log
/// straight to the socket without another task or queue in between. A chunk of the
/// feed's lines is a few slices of its buffers, each a frame of the body: hyper queues
/// the frames a body has ready and writes them at once (one vectored write, which
/// rustls seals into one record per 16 KiB), so no watch copies or joins them.
struct Stream {
    watcher: Watcher,
    /// Lines ready to go before the feed's (the initial events or the replay), each marked
    /// whether it is an event (bookmarks do not count for the fault).
    ready: VecDeque<(Bytes, bool)>,
    /// The rest of the chunk being sent: slices of the feed's buffers, returned at once
    /// after its first, so hyper writes them in the same write as frames of their own.
    frames: std::vec::IntoIter<Bytes>,
    feed: Arc<Feed>,
    /// Where this watch is in `feed`; its resourceVersion is the bookmarks'.
    cursor: Cursor,
    /// The recent rate of live lines: whether the next chunk waits for more.
    pace: Pace,
    /// Events sent (for the `drop_watch_after_events` fault).
    sent: u64,
    drop_after_events: Option<u64>,
    deadline: Instant,
    drop_at: Option<Instant>,
    bookmarks: bool,
    /// When the next BOOKMARK goes, if any ([`next_bookmark`]).
    next_bookmark: Option<Instant>,
    bookmark_every: Duration,
    shutdown: tokio_util::sync::CancellationToken,
    /// Where a watch a drop fault closes is counted.
    app: Arc<App>,
}

impl Stream {
    /// The next chunk: the ready lines (up to [`BATCH_BYTES`]), else the feed's lines this
    /// watch has yet to send, so a connection that fell behind catches up in one write.
    /// None ends the watch.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(frame) = self.frames.next() {
            return Some(frame);
        }
        loop {
            if self.drop_after_events.is_some_and(|n| self.sent >= n) {
                self.app.faults.count_dropped_watch();
                return None;
            }
            if !self.ready.is_empty() {
                return Some(self.chunk());
            }
            let feed = Arc::clone(&self.feed);
            let grew = feed.grew();
            tokio::pin!(grew);
            // Registered before the log is read: a line appended after it wakes this watch.
            grew.as_mut().enable();
            match feed.available(&mut self.cursor) {
                Available::Ended => return None,
                Available::Bytes(bytes) => match self.live_chunk(bytes).await {
                    Some(chunk) => return Some(chunk),
                    None => continue,
                },
                Available::Nothing => {}
            }
            tokio::select! {
                () = tokio::time::sleep_until(self.deadline) => return None,
                () = async { match self.drop_at { Some(t) => tokio::time::sleep_until(t).await, None => futures::future::pending().await } } => {
                    self.app.faults.count_dropped_watch();
                    return None;
                }
                () = self.shutdown.cancelled() => return None,
                () = async { match self.next_bookmark { Some(t) => tokio::time::sleep_until(t).await, None => futures::future::pending().await } } => {
                    let now = Instant::now();
                    self.next_bookmark = next_bookmark(now, self.bookmark_every, self.deadline);
                    if self.bookmarks {
                        return Some(self.watcher.bookmark_line(self.cursor.rv, false));
                    }
                }
                () = &mut grew => {}
            }
        }
    }

    /// The feed's next lines for this watch, `available` bytes of them there now; held
    /// while lines come fast ([`pace`]) for those that come meanwhile. None if the feed
    /// had none after all.
    async fn live_chunk(&mut self, available: usize) -> Option<Bytes> {
        let now = Instant::now();
        if available < BATCH_BYTES && self.pace.holds(now) {
            tokio::time::sleep_until(now + pace::HOLD).await;
        }
        let room = self
            .drop_after_events
            .map_or(u64::MAX, |n| n.saturating_sub(self.sent));
        let (frames, lines) = self.feed.take(&mut self.cursor, room, BATCH_BYTES);
        if lines == 0 {
            return None;
        }
        self.sent += u64::from(lines);
        self.pace.sent(Instant::now(), lines);
        self.frames = frames.into_iter();
        self.frames.next()
    }

    /// Joins ready lines into one chunk, stopping at the fault's event limit.
    fn chunk(&mut self) -> Bytes {
        let room = self
            .drop_after_events
            .map_or(u64::MAX, |n| n.saturating_sub(self.sent));
        let (mut lines, mut events, mut size) = (0, 0, 0);
        for (line, event) in &self.ready {
            if (*event && events >= room) || (lines > 0 && size + line.len() > BATCH_BYTES) {
                break;
            }
            lines += 1;
            events += u64::from(*event);
            size += line.len();
        }
        self.sent += events;
        if lines == 1 {
            let line = self.ready.pop_front().map(|(line, _)| line);
            return line.unwrap_or_default();
        }
        let mut chunk = BytesMut::with_capacity(size);
        for (line, _) in self.ready.drain(..lines) {
            chunk.extend_from_slice(&line);
        }
        chunk.freeze()
    }
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
    let watcher = Watcher {
        app: app.clone(),
        table_headers_sent: std::cell::Cell::new(false),
        include_object: req.params.include_object.clone(),
        res: res.clone(),
        filter,
        render: render_of(&req.headers),
    };
    let subscription = match app.store.subscribe(&res.storage, from) {
        Ok(s) if !res.watch_too_old(from) => s,
        _ => {
            let line = expired_line(params.resource_version.as_deref().unwrap_or_default());
            return Ok(stream_response(futures::stream::iter([line])));
        }
    };
    let mut ready = VecDeque::new();
    if from.is_none() {
        for stored in subscription.snapshot.values() {
            if watcher.filter.matches(stored) {
                ready.push_back((watcher.event_line("ADDED", stored), true));
            }
        }
    } else {
        for change in &subscription.replay {
            if let Some(line) = watcher.change_line(change) {
                ready.push_back((line, true));
            }
        }
    }
    let bookmarks = params.allow_bookmarks;
    if send_initial && bookmarks {
        ready.push_back((watcher.bookmark_line(subscription.rv, true), false));
    }
    let started = Instant::now();
    let timeout = Duration::from_secs(params.timeout_seconds.unwrap_or(1800).max(1));
    let bookmark_every = app.options.bookmark_interval;
    let faults = app.faults.get();
    let (feed, cursor) = app.feeds.join(
        watcher.feed_key(path, req),
        subscription.live,
        subscription.rv,
        || Box::new(watcher.renderer()),
    );
    let stream = Stream {
        watcher,
        ready,
        frames: Vec::new().into_iter(),
        feed,
        cursor,
        pace: Pace::default(),
        sent: 0,
        drop_after_events: faults.drop_watch_after_events,
        deadline: started + timeout,
        drop_at: faults.drop_watch_after.map(|d| started + d),
        bookmarks,
        next_bookmark: next_bookmark(started, bookmark_every, started + timeout),
        bookmark_every,
        shutdown: app.shutdown.clone(),
        app: Arc::clone(app),
    };
    let chunks = futures::stream::unfold(stream, |mut stream| async move {
        stream.next_chunk().await.map(|chunk| (chunk, stream))
    });
    Ok(stream_response(chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_come_every_interval_and_once_two_seconds_before_the_deadline() {
        let now = Instant::now();
        let minute = Duration::from_secs(60);
        let long = now + Duration::from_secs(600);
        assert_eq!(next_bookmark(now, minute, long), Some(now + minute));
        let short = now + Duration::from_secs(10);
        assert_eq!(
            next_bookmark(now, minute, short),
            Some(now + Duration::from_secs(8))
        );
        // At the pre-deadline bookmark, no other follows; nor under a 2 s timeout.
        let at = now + Duration::from_secs(8);
        assert_eq!(
            next_bookmark(at + Duration::from_millis(1), minute, short),
            None
        );
        assert_eq!(
            next_bookmark(now, minute, now + Duration::from_secs(1)),
            None
        );
    }
}

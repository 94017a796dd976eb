//! One shared log of watch lines per watched resource, selector and form: the watchers of
//! the same thing read slices of it.
//!
//! Without it every watch received every change of every resource from the store's
//! broadcast, matched it against its selectors and copied its line into its next chunk:
//! per line and per watcher. With a feed one task per (resource, scope, selectors, form)
//! does that once per change and appends the line to a log of shared buffers; a watch
//! wakes when its feed grew, and its chunk is slices of the log's buffers (a reference
//! count each, no copy), which the watch sends as the frames of one write. The log keeps
//! its newest buffers in sizes that halve from the oldest to the newest, merging the
//! small ones as they come (each byte copied a few times for the feed, never once per
//! watch), so a chunk spans a few buffers.
//!
//! The log keeps the lines some watch has yet to read, and at most [`MAX_LINES`] (the
//! store's broadcast capacity, how far a watch could lag before): a watch that falls
//! further behind ends, and its client resumes from its last resourceVersion.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::store::LiveChange;

/// The most lines a feed keeps for its slowest watch.
pub const MAX_LINES: usize = 4096;
/// The most changes the feed's task takes from the broadcast before it publishes them.
const BATCH_CHANGES: usize = 512;
/// The most buffers in one chunk: hyper's HTTP/1.1 writer queues at most 16 frames
/// before it writes them, so a longer chunk would be two writes (it ends at a buffer's
/// end instead, and the watch sends the rest at once after it).
pub const MAX_FRAMES: usize = 16;
/// Buffers are merged up to this size (a TLS record holds 16 KiB).
const MERGED_BYTES: usize = 16 * 1024;

/// What makes two watches read the same lines: the served resource (by address: the feed
/// keeps it alive, so the address is not reused meanwhile), the form, the scope and the
/// selectors as spelled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeedKey {
    /// The address of the served resource's descriptor.
    pub resource: usize,
    /// The rendering (full object, metadata only).
    pub form: u8,
    /// The namespace of the request, if any.
    pub namespace: Option<String>,
    /// The object name of the request, if any.
    pub name: Option<String>,
    /// The label selector as given.
    pub labels: Option<String>,
    /// The field selector as given.
    pub fields: Option<String>,
}

/// Renders the line of a change for a feed, if the feed's watches see it.
pub trait Render: Send + 'static {
    /// Appends the change's line to `out`; true if it did.
    fn append(&self, live: &LiveChange, out: &mut BytesMut) -> bool;
}

/// Where a watch is in its feed.
#[derive(Debug)]
pub struct Cursor {
    /// The number of the next line to read; shared with the log so it keeps that line.
    next: Arc<AtomicU64>,
    /// The resourceVersion up to which this watch has everything (lines at or below it
    /// are skipped: the watch had them from its replay or initial events).
    pub rv: u64,
}

/// A chunk's slices of the log's buffers, in order.
pub type Frames = Vec<Bytes>;

/// A line in the log: its change's resourceVersion and where it starts.
#[derive(Debug, Clone, Copy)]
struct Mark {
    rv: u64,
    start: u64,
}

/// The lines, numbered from `first_line`, and the bytes they live in.
#[derive(Debug, Default)]
struct Log {
    /// Shared buffers by the offset of their first byte, in order, without gaps.
    segments: VecDeque<(u64, Bytes)>,
    marks: VecDeque<Mark>,
    first_line: u64,
    /// The offset after the last line.
    end: u64,
    /// Changes at or below this resourceVersion may be missing (trimmed, or before the
    /// feed started).
    floor_rv: u64,
    /// Every change up to this resourceVersion was looked at.
    seen_rv: u64,
    /// The feed lagged behind the store and stopped.
    broken: bool,
    readers: Vec<Weak<AtomicU64>>,
}

/// What a watch finds in its feed.
#[derive(Debug, PartialEq, Eq)]
pub enum Available {
    /// Nothing new.
    Nothing,
    /// Lines of this many bytes are there to read.
    Bytes(usize),
    /// The watch must end: the feed stopped, or dropped lines the watch had not read.
    Ended,
}

impl Log {
    fn total(&self) -> u64 {
        self.first_line + self.marks.len() as u64
    }

    fn mark(&self, line: u64) -> Option<Mark> {
        let index = usize::try_from(line.checked_sub(self.first_line)?).ok()?;
        self.marks.get(index).copied()
    }

    fn start_of(&self, line: u64) -> u64 {
        self.mark(line).map_or(self.end, |m| m.start)
    }

    /// The number of the first line above `rv`.
    fn line_after(&self, rv: u64) -> u64 {
        self.first_line + self.marks.partition_point(|m| m.rv <= rv) as u64
    }

    fn join(&mut self, rv: u64) -> Option<Cursor> {
        if rv < self.floor_rv || self.broken {
            return None;
        }
        let next = Arc::new(AtomicU64::new(self.line_after(rv)));
        self.readers.push(Arc::downgrade(&next));
        Some(Cursor { next, rv })
    }

    /// Moves `cursor` past lines it already has; what is left to read.
    fn available(&self, cursor: &mut Cursor) -> Available {
        let mut next = cursor.next.load(Ordering::Relaxed);
        if next < self.first_line {
            return Available::Ended;
        }
        while self.mark(next).is_some_and(|m| m.rv <= cursor.rv) {
            next += 1;
        }
        cursor.next.store(next, Ordering::Relaxed);
        if next >= self.total() {
            cursor.rv = cursor.rv.max(self.seen_rv);
            return if self.broken {
                Available::Ended
            } else {
                Available::Nothing
            };
        }
        Available::Bytes(usize::try_from(self.end - self.start_of(next)).unwrap_or(usize::MAX))
    }

    /// Up to `max_lines` lines (at least one) of at most `max_bytes` (at least one line)
    /// from `cursor`, as slices of at most [`MAX_FRAMES`] of the log's buffers (in
    /// order, without a copy), and how many lines they hold.
    fn take(&mut self, cursor: &mut Cursor, max_lines: u64, max_bytes: usize) -> (Frames, u32) {
        if !matches!(self.available(cursor), Available::Bytes(_)) || max_lines == 0 {
            return (Frames::new(), 0);
        }
        let first = cursor.next.load(Ordering::Relaxed);
        let total = self.total();
        let start = self.start_of(first);
        let limit = start.saturating_add(max_bytes as u64);
        // Line `l` ends where line `l + 1` starts: the lines before `below` start within
        // the limit (the marks are in order).
        let below = self.first_line + self.marks.partition_point(|m| m.start <= limit) as u64;
        let fit = if below >= total && self.end <= limit {
            total
        } else {
            below.saturating_sub(1)
        };
        let mut last = fit.min(first.saturating_add(max_lines)).max(first + 1);
        let (frames, end) = self.slices(start, self.start_of(last));
        if end < self.start_of(last) {
            // Cut at a buffer's end, which is a line's start.
            last = self.first_line + self.marks.partition_point(|m| m.start < end) as u64;
        }
        if let Some(mark) = self.mark(last - 1) {
            cursor.rv = mark.rv;
        }
        cursor.next.store(last, Ordering::Relaxed);
        if last >= total {
            cursor.rv = cursor.rv.max(self.seen_rv);
        }
        let lines = u32::try_from(last - first).unwrap_or(u32::MAX);
        (frames, lines)
    }

    /// The bytes from `start` to `end` as slices of the buffers that hold them, at most
    /// [`MAX_FRAMES`] (then they end before `end`), and where they end.
    fn slices(&self, start: u64, end: u64) -> (Frames, u64) {
        let first = self
            .segments
            .partition_point(|(s, _)| *s <= start)
            .saturating_sub(1);
        let mut frames = Frames::new();
        let mut to = start;
        for (segment_start, bytes) in self.segments.range(first..) {
            if to >= end || frames.len() == MAX_FRAMES {
                break;
            }
            let segment_end = segment_start + bytes.len() as u64;
            let from = usize::try_from(to - segment_start).unwrap_or_default();
            let upto = usize::try_from(end.min(segment_end) - segment_start).unwrap_or_default();
            frames.push(bytes.slice(from..upto));
            to = end.min(segment_end);
        }
        (frames, to)
    }

    /// Adds a buffer of lines (their resourceVersions and offsets in it), having looked at
    /// every change up to `seen_rv`; then drops what no watch needs.
    fn append(&mut self, bytes: Bytes, lines: &[(u64, usize)], seen_rv: u64) {
        let base = self.end;
        for (rv, offset) in lines {
            self.marks.push_back(Mark {
                rv: *rv,
                start: base + *offset as u64,
            });
        }
        if !bytes.is_empty() {
            self.end += bytes.len() as u64;
            self.segments.push_back((base, bytes));
        }
        self.seen_rv = self.seen_rv.max(seen_rv);
        self.trim();
        self.merge_newest();
    }

    /// Merges the newest buffer into the one before while that one is no larger and both
    /// fit in [`MERGED_BYTES`]: the sizes halve towards the newest, as the bits of a
    /// counter, so each byte is copied at most log2(`MERGED_BYTES` / line) times for the
    /// feed (never per watch), and a chunk spans a few buffers. Watches that hold slices
    /// of the buffers merged keep them.
    fn merge_newest(&mut self) {
        loop {
            let n = self.segments.len();
            let (Some((start, before)), Some((_, newest))) = (
                self.segments.get(n.wrapping_sub(2)),
                self.segments.get(n.wrapping_sub(1)),
            ) else {
                return;
            };
            if before.len() > newest.len() || before.len() + newest.len() > MERGED_BYTES {
                return;
            }
            let mut merged = BytesMut::with_capacity(before.len() + newest.len());
            merged.extend_from_slice(before);
            merged.extend_from_slice(newest);
            let start = *start;
            self.segments.truncate(n - 2);
            self.segments.push_back((start, merged.freeze()));
        }
    }

    /// Drops the lines every watch has read, and those past [`MAX_LINES`].
    fn trim(&mut self) {
        let mut needed = self.total();
        self.readers.retain(|reader| match reader.upgrade() {
            Some(next) => {
                needed = needed.min(next.load(Ordering::Relaxed));
                true
            }
            None => false,
        });
        let needed = needed.max(self.total().saturating_sub(MAX_LINES as u64));
        while self.first_line < needed {
            let Some(mark) = self.marks.pop_front() else {
                break;
            };
            self.floor_rv = mark.rv;
            self.first_line += 1;
        }
        let keep_from = self.start_of(self.first_line);
        while self
            .segments
            .front()
            .is_some_and(|(start, bytes)| start + bytes.len() as u64 <= keep_from)
        {
            self.segments.pop_front();
        }
    }
}

struct Shared {
    log: Mutex<Log>,
    grew: Notify,
}

/// A feed, kept alive by the watches that read it; its task stops with the last of them.
pub struct Feed {
    shared: Arc<Shared>,
    _stop: DropGuard,
}

impl Feed {
    /// Starts a feed of the lines `render` makes of the changes `live` receives: every
    /// change after `rv`, the resourceVersion `live` was subscribed at. Returns it with a
    /// cursor for the watch that has every change up to `rv`.
    pub fn start(
        live: broadcast::Receiver<Arc<LiveChange>>,
        rv: u64,
        render: Box<dyn Render>,
    ) -> (Arc<Self>, Cursor) {
        let mut log = Log {
            floor_rv: rv,
            seen_rv: rv,
            ..Log::default()
        };
        let next = Arc::new(AtomicU64::new(0));
        log.readers.push(Arc::downgrade(&next));
        let shared = Arc::new(Shared {
            log: Mutex::new(log),
            grew: Notify::new(),
        });
        let stop = CancellationToken::new();
        tokio::spawn(run(live, render, Arc::clone(&shared), stop.clone()));
        let feed = Arc::new(Self {
            shared,
            _stop: stop.drop_guard(),
        });
        (feed, Cursor { next, rv })
    }

    /// A cursor for a watch that has every change up to `rv`; none if the feed cannot
    /// give it every change after `rv`.
    pub fn join(&self, rv: u64) -> Option<Cursor> {
        self.shared.log.lock().join(rv)
    }

    /// What `cursor` has to read.
    pub fn available(&self, cursor: &mut Cursor) -> Available {
        self.shared.log.lock().available(cursor)
    }

    /// The next lines for `cursor` (see [`Log::take`]).
    pub fn take(&self, cursor: &mut Cursor, max_lines: u64, max_bytes: usize) -> (Frames, u32) {
        self.shared.log.lock().take(cursor, max_lines, max_bytes)
    }

    /// Resolves once the feed grew after it was enabled (or first polled).
    pub fn grew(&self) -> Notified<'_> {
        self.shared.grew.notified()
    }
}

/// The feed's task: takes changes from the store's broadcast, renders the lines of those
/// the feed's watches see, appends them to the log and wakes the watches.
async fn run(
    mut live: broadcast::Receiver<Arc<LiveChange>>,
    render: Box<dyn Render>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    let mut lines = Vec::new();
    loop {
        let first = tokio::select! {
            () = stop.cancelled() => return,
            received = live.recv() => received,
        };
        let mut out = BytesMut::new();
        lines.clear();
        let mut seen_rv = 0;
        let mut next = first.map_err(|e| matches!(e, RecvError::Lagged(_)));
        let mut taken = 0;
        let broken = loop {
            match next {
                Ok(change) => {
                    seen_rv = change.change.rv;
                    let offset = out.len();
                    if render.append(&change, &mut out) {
                        lines.push((change.change.rv, offset));
                    }
                }
                Err(_) => break true,
            }
            taken += 1;
            if taken >= BATCH_CHANGES {
                break false;
            }
            next = match live.try_recv() {
                Ok(change) => Ok(change),
                Err(TryRecvError::Empty) => break false,
                Err(TryRecvError::Lagged(_) | TryRecvError::Closed) => Err(true),
            };
        };
        {
            let mut log = shared.log.lock();
            log.append(out.freeze(), &lines, seen_rv);
            log.broken |= broken;
        }
        shared.grew.notify_waiters();
        if broken {
            return;
        }
    }
}

/// The running feeds, so watches of the same thing share one.
#[derive(Default)]
pub struct Feeds(Mutex<HashMap<FeedKey, Weak<Feed>>>);

impl Feeds {
    /// The feed for `key` and a cursor in it for a watch that has every change up to `rv`:
    /// the running one, else a new one from `live` (subscribed at `rv`). Without a key the
    /// new feed is the watch's own.
    pub fn join(
        &self,
        key: Option<FeedKey>,
        live: broadcast::Receiver<Arc<LiveChange>>,
        rv: u64,
        render: impl FnOnce() -> Box<dyn Render>,
    ) -> (Arc<Feed>, Cursor) {
        let Some(key) = key else {
            return Feed::start(live, rv, render());
        };
        let mut feeds = self.0.lock();
        if let Some(feed) = feeds.get(&key).and_then(Weak::upgrade)
            && let Some(cursor) = feed.join(rv)
        {
            return (feed, cursor);
        }
        // The new feed serves later watches (it goes back further than the running one,
        // or that one stopped).
        let (feed, cursor) = Feed::start(live, rv, render());
        feeds.retain(|_, feed| feed.strong_count() > 0);
        feeds.insert(key, Arc::downgrade(&feed));
        (feed, cursor)
    }
}

#[cfg(test)]
#[path = "feed_tests.rs"]
mod tests;

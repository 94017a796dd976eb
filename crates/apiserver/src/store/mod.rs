//! The object store: one global resourceVersion counter, persistent (structurally shared)
//! maps per resource so list pages read one consistent snapshot, a bounded window of
//! change events to resume watches, and a fan-out of changes that never blocks writers.
//!
//! Every write also keeps, under the same lock, what the background controllers need so
//! they never scan the store: the garbage collector's index and work ([`gc_index`]) and
//! the Events' expiry queue (the Event TTL, as kube-apiserver's `--event-ttl`).

pub mod gc_index;
pub mod history_log;
pub mod lines;
pub mod object;
pub mod wal;

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use imbl::OrdMap;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};
use tokio::time::Instant;

pub use gc_index::{EVENTS_STORAGE, GcWork, Location};
pub use object::{ObjKey, StoredObject};

use crate::registry::StorageKey;

/// The kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// The object was created.
    Added,
    /// The object was updated.
    Modified,
    /// The object was removed.
    Deleted,
}

impl ChangeType {
    /// The watch event type name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion of the write.
    pub rv: u64,
    /// Which resource.
    pub storage: StorageKey,
    /// What happened.
    pub change: ChangeType,
    /// The object after the write (for a delete: its last state with the deletion's rv).
    pub object: Arc<StoredObject>,
    /// The object before the write.
    pub previous: Option<Arc<StoredObject>>,
}

/// A table of one resource.
pub type Table = OrdMap<ObjKey, Arc<StoredObject>>;

/// A write to one object.
#[derive(Debug, Clone)]
pub enum Op {
    /// Create or replace with this object.
    Put(Value),
    /// Remove; the DELETED event carries this final state (default: the stored object).
    Delete(Option<Value>),
}

/// What a write expects of the current object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// It must not exist.
    Absent,
    /// It must exist with this resourceVersion.
    Rv(u64),
}

/// Why a write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The object exists already.
    Exists,
    /// The object does not exist.
    Missing,
    /// The object changed since it was read.
    Stale,
    /// The object could not be serialized.
    Encode,
}

/// A committed write: the stored object and a ticket that resolves once it is durable.
#[derive(Debug)]
pub struct Written {
    /// The change.
    pub change: Change,
    /// Resolves when the write is on disk (None without a data dir).
    pub durable: Option<oneshot::Receiver<()>>,
}

impl Written {
    /// Waits until the write is durable.
    pub async fn wait_durable(&mut self) {
        if let Some(rx) = self.durable.take() {
            let _ = rx.await;
        }
    }
}

/// Why a watch cannot start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld;

/// A change as the live fan-out hands it to every watcher: one allocation shared by all
/// of them (a clone per watcher would bump three reference counts the server's threads
/// contend for), with the line most of them send ([`lines::FirstLine`]).
pub struct LiveChange {
    /// The change.
    pub change: Change,
    /// The first line a watcher rendered for it.
    pub line: lines::FirstLine,
}

/// A started watch: the events to replay, then the live receiver.
pub struct Subscription {
    /// Changes after the requested rv that are still in the window (all resources).
    pub replay: Vec<Change>,
    /// Live changes (all resources).
    pub live: broadcast::Receiver<Arc<LiveChange>>,
    /// The rv at subscription time.
    pub rv: u64,
    /// The resource's objects at subscription time (for initial events).
    pub snapshot: Table,
}

struct State {
    rv: u64,
    tables: HashMap<StorageKey, Table>,
    /// Kept by value: a change is three pointers and a number, and a separate allocation
    /// per write would cost more than the change itself.
    window: VecDeque<Change>,
    window_cap: usize,
    /// A watch may resume from any rv >= this (all later events are in the window).
    oldest_resumable: u64,
    snapshots: VecDeque<(StorageKey, u64, Table)>,
    history: Vec<Arc<Change>>,
    history_cap: usize,
    /// The resources the history keeps (None: all).
    history_resources: Option<Vec<StorageKey>>,
    /// Where the history is also written, with a data directory ([`history_log`]).
    history_log: Option<history_log::HistoryLog>,
    writes_since_snapshot: u64,
    gc: gc_index::GcIndex,
    /// How long an Event lives after its last write (None: for ever).
    event_ttl: Option<Duration>,
    /// Events by expiry, oldest first: (deadline, key, the resourceVersion of that write).
    /// A later write of the same Event adds its own entry; the older one is then stale.
    event_expiry: VecDeque<(Instant, ObjKey, u64)>,
}

/// The store.
pub struct Store {
    state: Mutex<State>,
    tx: broadcast::Sender<Arc<LiveChange>>,
    wal: Option<wal::Wal>,
    compact_every: u64,
    lines: lines::LineCache,
}

const SNAPSHOTS_KEPT: usize = 64;

impl Store {
    /// An in-memory store.
    #[must_use]
    pub fn in_memory(window_cap: usize) -> Self {
        Self::from_parts(window_cap, 0, HashMap::new(), None, 10_000)
    }

    /// A store persisted in `dir`, recovering what is there.
    ///
    /// # Errors
    /// I/O errors reading or opening the log.
    pub fn open(dir: &Path, window_cap: usize, compact_every: u64) -> std::io::Result<Self> {
        let (rv, tables, wal) = wal::Wal::open(dir)?;
        Ok(Self::from_parts(
            window_cap,
            rv,
            tables,
            Some(wal),
            compact_every,
        ))
    }

    fn from_parts(
        window_cap: usize,
        rv: u64,
        tables: HashMap<StorageKey, Table>,
        wal: Option<wal::Wal>,
        compact_every: u64,
    ) -> Self {
        let (tx, _) = broadcast::channel(4096);
        // Recovered objects: the collector looks at all of them once (an owner may have
        // gone while the server was down).
        let mut gc = gc_index::GcIndex::default();
        for (storage, table) in &tables {
            for (key, object) in table {
                gc.record(storage, key, None, Some(object));
            }
        }
        Self {
            state: Mutex::new(State {
                rv,
                tables,
                window: VecDeque::new(),
                window_cap: window_cap.max(1),
                oldest_resumable: rv,
                snapshots: VecDeque::new(),
                history: Vec::new(),
                history_cap: 0,
                history_resources: None,
                history_log: None,
                writes_since_snapshot: 0,
                gc,
                event_ttl: None,
                event_expiry: VecDeque::new(),
            }),
            tx,
            wal,
            compact_every: compact_every.max(1),
            lines: lines::LineCache::default(),
        }
    }

    /// Events expire `ttl` after their last write (zero: never), as kube-apiserver's
    /// `--event-ttl`. Events already stored (recovered from disk) get a full `ttl` from now.
    pub fn set_event_ttl(&self, ttl: Duration) {
        let mut state = self.state.lock();
        state.event_ttl = (!ttl.is_zero()).then_some(ttl);
        state.event_expiry.clear();
        if let Some(ttl) = state.event_ttl {
            let deadline = Instant::now() + ttl;
            let expiry: VecDeque<_> = state
                .tables
                .get(EVENTS_STORAGE)
                .map(|events| {
                    events
                        .iter()
                        .map(|(key, event)| (deadline, key.clone(), event.rv))
                        .collect()
                })
                .unwrap_or_default();
            state.event_expiry = expiry;
        }
    }

    /// The Events whose TTL ran out by `now` and that were not written since: their keys
    /// and the resourceVersions to delete them at (a write in between makes the delete a
    /// harmless conflict).
    #[must_use]
    pub fn expired_events(&self, now: Instant) -> Vec<(ObjKey, u64)> {
        let mut state = self.state.lock();
        let mut expired = Vec::new();
        while state
            .event_expiry
            .front()
            .is_some_and(|(deadline, _, _)| *deadline <= now)
        {
            let Some((_, key, rv)) = state.event_expiry.pop_front() else {
                break;
            };
            let current = state
                .tables
                .get(EVENTS_STORAGE)
                .and_then(|events| events.get(&key))
                .map(|event| event.rv);
            if current == Some(rv) {
                expired.push((key, rv));
            }
        }
        expired
    }

    /// The garbage collector's work recorded since the last call.
    #[must_use]
    pub fn take_gc_work(&self) -> Vec<GcWork> {
        self.state.lock().gc.take().into_iter().collect()
    }

    /// Puts back garbage-collector work that failed, to be tried on the next pass.
    pub fn requeue_gc_work(&self, work: GcWork) {
        self.state.lock().gc.requeue(work);
    }

    /// Whether the garbage collector has work.
    #[must_use]
    pub fn has_gc_work(&self) -> bool {
        self.state.lock().gc.has_work()
    }

    /// The objects whose ownerReferences name `uid` (Events excepted).
    #[must_use]
    pub fn dependents_of(&self, uid: &str) -> Vec<Location> {
        self.state.lock().gc.dependents_of(uid)
    }

    /// Hands the watch line of a change in one form to `take`: rendered once for every
    /// watcher that sends the same line (see [`lines`]).
    pub fn with_watch_line<R>(
        &self,
        rv: u64,
        key: &lines::LineKey<'_>,
        render: impl FnOnce() -> bytes::Bytes,
        take: impl FnOnce(&bytes::Bytes) -> R,
    ) -> R {
        self.lines.with_line(rv, key, render, take)
    }

    /// Hands the line for a live change to `take`: the change's first line when it is the
    /// one for `key` (no lock), else as [`Self::with_watch_line`], offering the line as the
    /// change's first.
    pub fn with_live_line<R>(
        &self,
        live: &LiveChange,
        key: &lines::LineKey<'_>,
        render: impl FnOnce() -> bytes::Bytes,
        take: impl FnOnce(&bytes::Bytes) -> R,
    ) -> R {
        if let Some(line) = live.line.get(key) {
            return take(line);
        }
        self.lines.with_line(live.change.rv, key, render, |line| {
            live.line.offer(key, line);
            take(line)
        })
    }

    /// The current global resourceVersion.
    #[must_use]
    pub fn current_rv(&self) -> u64 {
        self.state.lock().rv
    }

    /// One object.
    #[must_use]
    pub fn get(&self, storage: &StorageKey, key: &ObjKey) -> Option<Arc<StoredObject>> {
        self.state
            .lock()
            .tables
            .get(storage)
            .and_then(|t| t.get(key).cloned())
    }

    /// A consistent snapshot of a resource and its rv.
    #[must_use]
    pub fn snapshot(&self, storage: &StorageKey) -> (u64, Table) {
        let state = self.state.lock();
        (
            state.rv,
            state.tables.get(storage).cloned().unwrap_or_default(),
        )
    }

    /// Snapshots of every resource (for the namespace controller).
    #[must_use]
    pub fn all_tables(&self) -> (u64, Vec<(StorageKey, Table)>) {
        let state = self.state.lock();
        let tables = state
            .tables
            .iter()
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        (state.rv, tables)
    }

    /// Keeps a list snapshot so later pages read the same state.
    pub fn keep_snapshot(&self, storage: &StorageKey, rv: u64, table: Table) {
        let mut state = self.state.lock();
        if state
            .snapshots
            .iter()
            .any(|(s, r, _)| s == storage && *r == rv)
        {
            return;
        }
        state.snapshots.push_back((storage.clone(), rv, table));
        while state.snapshots.len() > SNAPSHOTS_KEPT {
            state.snapshots.pop_front();
        }
    }

    /// A kept list snapshot, or None when it expired.
    #[must_use]
    pub fn find_snapshot(&self, storage: &StorageKey, rv: u64) -> Option<Table> {
        let state = self.state.lock();
        if let Some((_, _, t)) = state
            .snapshots
            .iter()
            .find(|(s, r, _)| s == storage && *r == rv)
        {
            return Some(t.clone());
        }
        // Nothing was written since: the current state is that snapshot.
        if state.rv == rv {
            return Some(state.tables.get(storage).cloned().unwrap_or_default());
        }
        None
    }

    /// Starts a watch from `from` (None: from now, with the current objects as snapshot).
    ///
    /// # Errors
    /// [`TooOld`] when events after `from` have left the window.
    pub fn subscribe(
        &self,
        storage: &StorageKey,
        from: Option<u64>,
    ) -> Result<Subscription, TooOld> {
        let state = self.state.lock();
        let replay = match from {
            Some(rv) if rv < state.oldest_resumable => return Err(TooOld),
            Some(rv) => state.window.iter().filter(|c| c.rv > rv).cloned().collect(),
            None => Vec::new(),
        };
        Ok(Subscription {
            replay,
            live: self.tx.subscribe(),
            rv: state.rv,
            snapshot: state.tables.get(storage).cloned().unwrap_or_default(),
        })
    }

    /// Forgets the event window and list snapshots: resumed watches and continues get 410.
    pub fn compact(&self) {
        let mut state = self.state.lock();
        state.oldest_resumable = state.rv;
        state.window.clear();
        state.snapshots.clear();
    }

    /// Keeps up to `cap` writes in the history (0: none; the default).
    pub fn set_history_cap(&self, cap: usize) {
        self.state.lock().history_cap = cap;
    }

    /// Keeps only the writes of these resources in the history (None: every write).
    pub fn set_history_resources(&self, resources: Option<Vec<StorageKey>>) {
        self.state.lock().history_resources = resources;
    }

    /// Also writes the history into `dir` (the data directory), after taking back what
    /// is there from before a restart (see [`history_log`]).
    ///
    /// # Errors
    /// I/O errors reading or writing the history file.
    pub fn keep_history_in(&self, dir: &Path) -> std::io::Result<()> {
        let mut state = self.state.lock();
        let (recovered, log) = history_log::open(dir, state.rv)?;
        state.history = recovered.into_iter().map(Arc::new).collect();
        state.history_log = Some(log);
        Ok(())
    }

    /// Every write so far (bounded), oldest first.
    #[must_use]
    pub fn history(&self) -> Vec<Arc<Change>> {
        self.state.lock().history.clone()
    }

    /// Applies `op` if the expectation holds.
    ///
    /// # Errors
    /// [`WriteError`] when the expectation fails.
    pub fn write(
        &self,
        storage: &StorageKey,
        key: &ObjKey,
        op: Op,
        expect: Expect,
    ) -> Result<Written, WriteError> {
        self.write_marked(storage, key, op, expect, 0)
    }

    /// As [`Self::write`], for an object whose content outside metadata the schema marked
    /// `schema_mark` made ([`StoredObject::schema_mark`], 0 when unknown); a delete
    /// without a final state keeps the current object's mark.
    ///
    /// # Errors
    /// [`WriteError`] when the expectation fails.
    pub fn write_marked(
        &self,
        storage: &StorageKey,
        key: &ObjKey,
        op: Op,
        expect: Expect,
        schema_mark: u32,
    ) -> Result<Written, WriteError> {
        let mut state = self.state.lock();
        let current = state.tables.get(storage).and_then(|t| t.get(key).cloned());
        match (expect, &current) {
            (Expect::Absent, Some(_)) => return Err(WriteError::Exists),
            (Expect::Rv(_), None) => return Err(WriteError::Missing),
            (Expect::Rv(rv), Some(cur)) if cur.rv != rv => return Err(WriteError::Stale),
            _ => {}
        }
        let rv = state.rv + 1;
        let (change, stored) = match op {
            Op::Put(mut value) => {
                object::set_rv(&mut value, rv);
                let mut stored = StoredObject::new(&value, rv).ok_or(WriteError::Encode)?;
                stored.schema_mark = schema_mark;
                let stored = Arc::new(stored);
                let change = if current.is_some() {
                    ChangeType::Modified
                } else {
                    ChangeType::Added
                };
                state
                    .tables
                    .entry(storage.clone())
                    .or_default()
                    .insert(key.clone(), stored.clone());
                (change, stored)
            }
            Op::Delete(last) => {
                let Some(cur) = &current else {
                    return Err(WriteError::Missing);
                };
                // The final state given was made by this write (its mark is the
                // caller's); without one it is the current object's content.
                let mark = if last.is_some() {
                    schema_mark
                } else {
                    cur.schema_mark
                };
                let mut value = last.unwrap_or_else(|| cur.value());
                object::set_rv(&mut value, rv);
                let mut stored = StoredObject::new(&value, rv).ok_or(WriteError::Encode)?;
                stored.schema_mark = mark;
                let stored = Arc::new(stored);
                if let Some(table) = state.tables.get_mut(storage) {
                    table.remove(key);
                }
                (ChangeType::Deleted, stored)
            }
        };
        state.rv = rv;
        let after = (change != ChangeType::Deleted).then_some(&*stored);
        state.gc.record(storage, key, current.as_deref(), after);
        if &**storage == EVENTS_STORAGE
            && change != ChangeType::Deleted
            && let Some(ttl) = state.event_ttl
        {
            state
                .event_expiry
                .push_back((Instant::now() + ttl, key.clone(), rv));
        }
        let change = Change {
            rv,
            storage: storage.clone(),
            change,
            object: stored,
            previous: current,
        };
        state.window.push_back(change.clone());
        while state.window.len() > state.window_cap {
            if let Some(old) = state.window.pop_front() {
                state.oldest_resumable = old.rv;
            }
        }
        let kept = state
            .history_resources
            .as_ref()
            .is_none_or(|resources| resources.contains(storage));
        if kept && state.history.len() < state.history_cap {
            let entry = Arc::new(change.clone());
            // Before the WAL record is queued: see `history_log`.
            if let Some(log) = &mut state.history_log {
                log.append(&entry);
            }
            state.history.push(entry);
        }
        let _ = self.tx.send(Arc::new(LiveChange {
            change: change.clone(),
            line: lines::FirstLine::default(),
        }));
        let durable = match &self.wal {
            Some(wal) => {
                let ticket = wal.append(&change);
                state.writes_since_snapshot += 1;
                // A deleted or replaced Secret's data leaves the disk at once (wal docs).
                if state.writes_since_snapshot >= self.compact_every || wal::erases_secret(&change)
                {
                    state.writes_since_snapshot = 0;
                    let tables = state
                        .tables
                        .iter()
                        .map(|(k, t)| (k.clone(), t.clone()))
                        .collect();
                    wal.snapshot(state.rv, tables);
                }
                ticket
            }
            None => None,
        };
        Ok(Written { change, durable })
    }
}

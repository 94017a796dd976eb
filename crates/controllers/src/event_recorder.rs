//! Publishes events.k8s.io/v1 Events, folding a repeat into the first
//! Event's series as kube-runtime's `Recorder` does, with a cache of a few
//! bytes per series.
//!
//! # Why not kube-runtime's Recorder
//!
//! Its series cache keeps, for six minutes, a clone of every Event published
//! (the whole object, its reference, note and reporter strings) under a key
//! that clones the reference again: about 0.9 KiB per node in a scale-up
//! (heaptrack, plan 0016 C2), and it scans the whole cache on every Event.
//! Here a series is its key's 64-bit hash and three numbers: the first
//! Event's name is rebuilt from the reference and its time, and a repeat
//! patches only `series` (every other field of an Event is immutable on a
//! real API server, so the first Event's note stays, as with kube-runtime).
//! The cache is swept once per [`SERIES_TTL`], and time comes from the
//! injected clock.
//!
//! # Guarantees
//!
//! - A first Event (or one whose series ended more than [`SERIES_TTL`] ago)
//!   is created as kube-runtime names it (`<regarding name>.<nanoseconds in
//!   hex>`), in the reference's namespace (`default` without one).
//! - A repeat within [`SERIES_TTL`] of the series' last Event (same type,
//!   reason, action, reporter, regarding and related object) merge-patches
//!   the first Event's `series` (count 2, 3, ...; `lastObservedTime`).
//! - A series whose Event is gone from the server (expired, deleted) starts
//!   again with a new Event instead of failing.
//! - Two series whose keys hash alike (about one chance in 10^11 with 10,000
//!   series live) would share one Event: a wrong count on a courtesy
//!   object, never a wrong write elsewhere.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};

use crate::Clock;
use crate::time::to_micro_time;

/// How long after its last Event a series may still grow (kube-runtime's).
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// Publishes Events under one reporter; clones share the series cache.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    clock: Arc<dyn Clock>,
    series: Arc<Mutex<SeriesCache>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recorder({})", self.reporter.controller)
    }
}

/// One live series: what a repeat needs to patch the first Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Series {
    /// The first Event's time in nanoseconds since the epoch: its name's suffix.
    first_nanos: i128,
    /// How many Events the series holds.
    count: i32,
    /// When its last Event was published.
    last: SystemTime,
}

#[derive(Debug, Default)]
struct SeriesCache {
    by_key: HashMap<u64, Series>,
    /// When the cache was last swept of ended series.
    swept: Option<SystemTime>,
}

impl SeriesCache {
    /// The live series of `key` at `now`, sweeping ended ones once per TTL.
    fn live(&mut self, key: u64, now: SystemTime) -> Option<Series> {
        if self.swept.is_none_or(|swept| ended(swept, now)) {
            self.by_key.retain(|_, series| !ended(series.last, now));
            self.swept = Some(now);
        }
        self.by_key
            .get(&key)
            .copied()
            .filter(|series| !ended(series.last, now))
    }
}

fn ended(last: SystemTime, now: SystemTime) -> bool {
    now.duration_since(last).unwrap_or_default() >= SERIES_TTL
}

/// What makes two Events one series, as kube-runtime's key: type, action,
/// reason, reporter, regarding and related object (by kind, name, namespace, uid).
fn series_key(reporter: &Reporter, event: &Event, regarding: &ObjectReference) -> u64 {
    fn reference(r: &ObjectReference, hasher: &mut DefaultHasher) {
        (&r.api_version, &r.kind, &r.name, &r.namespace, &r.uid).hash(hasher);
    }
    // DefaultHasher::new has fixed keys: the same key hashes alike in every recorder.
    let mut hasher = DefaultHasher::new();
    matches!(event.type_, EventType::Warning).hash(&mut hasher);
    (&event.action, &event.reason).hash(&mut hasher);
    (&reporter.controller, &reporter.instance).hash(&mut hasher);
    reference(regarding, &mut hasher);
    event.secondary.is_some().hash(&mut hasher);
    if let Some(related) = &event.secondary {
        reference(related, &mut hasher);
    }
    hasher.finish()
}

fn nanos_since_epoch(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

impl Recorder {
    /// A recorder publishing as `reporter`, timing Events by `clock`.
    #[must_use]
    pub fn new(client: Client, reporter: Reporter, clock: Arc<dyn Clock>) -> Self {
        Self {
            client,
            reporter,
            clock,
            series: Arc::default(),
        }
    }

    /// How many series the cache holds (ended ones until the next sweep).
    #[must_use]
    pub fn cached_series(&self) -> usize {
        self.cache().by_key.len()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, SeriesCache> {
        // Each change below is one insert or retain: a panic cannot leave half of one.
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes `event` about `regarding`: a new Event, or the next count of
    /// its series.
    ///
    /// # Errors
    /// The API server's refusal of the create or the patch.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = self.clock.now();
        let key = series_key(&self.reporter, event, regarding);
        let live = self.cache().live(key, now);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        if let Some(series) = live {
            let count = series.count.saturating_add(1);
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: to_micro_time(now.into()) }
            });
            let name = self.event_name(regarding, series.first_nanos);
            match events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.remember(
                        key,
                        Series {
                            count,
                            last: now,
                            ..series
                        },
                    );
                    return Ok(());
                }
                // Gone from the server: the series starts again below.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let first_nanos = nanos_since_epoch(now);
        let created = self.first_event(event, regarding, now, first_nanos);
        events.create(&PostParams::default(), &created).await?;
        self.remember(
            key,
            Series {
                first_nanos,
                count: 1,
                last: now,
            },
        );
        Ok(())
    }

    fn remember(&self, key: u64, series: Series) {
        self.cache().by_key.insert(key, series);
    }

    /// kube-runtime's name for an Event first published at `first_nanos`.
    fn event_name(&self, regarding: &ObjectReference, first_nanos: i128) -> String {
        let name = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        format!("{name}.{first_nanos:x}")
    }

    fn first_event(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        now: SystemTime,
        first_nanos: i128,
    ) -> K8sEvent {
        let controller = &self.reporter.controller;
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(to_micro_time(now.into())),
            regarding: Some(regarding.clone()),
            note: event.note.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(self.event_name(regarding, first_nanos)),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| controller.clone()),
            ),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            related: event.secondary.clone(),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
#[path = "event_recorder_tests.rs"]
mod tests;

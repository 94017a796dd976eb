//! The recorder against the in-memory API server, time stepped by a manual clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use apiserver::testing::TestServer;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams};

use crate::ManualClock;

struct Setup {
    _server: TestServer,
    events: Api<K8sEvent>,
    clock: Arc<ManualClock>,
    recorder: Recorder,
}

async fn setup() -> Setup {
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    let clock = Arc::new(ManualClock::default());
    let reporter = Reporter {
        controller: "socialweb-test".to_owned(),
        instance: None,
    };
    Setup {
        events: Api::namespaced(client.clone(), "default"),
        recorder: Recorder::new(client, reporter, clock.clone()),
        clock,
        _server: server,
    }
}

fn regarding(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("socialweb.computer/v1alpha1".to_owned()),
        kind: Some("ComputeContract".to_owned()),
        name: Some(name.to_owned()),
        namespace: Some("default".to_owned()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn lost(note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: "GuestLost".to_owned(),
        note: Some(note.to_owned()),
        action: "Watch".to_owned(),
        secondary: None,
    }
}

/// (regarding name, note, series count) of every Event, by name.
async fn listed(events: &Api<K8sEvent>) -> Vec<(String, String, Option<i32>)> {
    let mut all: Vec<K8sEvent> = events.list(&ListParams::default()).await.unwrap().items;
    all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    all.into_iter()
        .map(|e| {
            (
                e.regarding.and_then(|r| r.name).unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.series.map(|s| s.count),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_repeat_within_the_ttl_counts_in_the_first_events_series() {
    let s = setup().await;
    s.recorder
        .publish(&lost("first"), &regarding("a"))
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(10));
    s.recorder
        .publish(&lost("second"), &regarding("a"))
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(10));
    s.recorder
        .publish(&lost("third"), &regarding("a"))
        .await
        .unwrap();
    s.recorder
        .publish(&lost("other"), &regarding("b"))
        .await
        .unwrap();
    assert_eq!(
        listed(&s.events).await,
        [
            ("a".to_owned(), "first".to_owned(), Some(3)),
            ("b".to_owned(), "other".to_owned(), None),
        ],
        "one Event per object, the repeats counted in its series"
    );
    let first = s.events.list(&ListParams::default()).await.unwrap().items;
    let series = first[0].series.as_ref().unwrap();
    assert_eq!(
        series.last_observed_time.0,
        Timestamp::try_from(s.clock.now()).unwrap(),
        "the series says when its last Event happened, by the injected clock"
    );
    let name = first[0].metadata.name.clone().unwrap();
    let start = nanos_since_epoch(s.clock.now() - Duration::from_secs(20));
    assert_eq!(name, format!("a.{start:x}"), "kube-runtime's name");
}

#[tokio::test]
async fn a_repeat_after_the_ttl_or_of_a_deleted_event_is_a_new_event() {
    let s = setup().await;
    s.recorder
        .publish(&lost("first"), &regarding("a"))
        .await
        .unwrap();
    s.clock.advance(SERIES_TTL);
    s.recorder
        .publish(&lost("later"), &regarding("a"))
        .await
        .unwrap();
    assert_eq!(listed(&s.events).await.len(), 2, "the series had ended");

    s.clock.advance(Duration::from_secs(1));
    s.events
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    s.recorder
        .publish(&lost("again"), &regarding("a"))
        .await
        .unwrap();
    assert_eq!(
        listed(&s.events).await,
        [("a".to_owned(), "again".to_owned(), None)],
        "a series whose Event is gone starts again"
    );
}

#[tokio::test]
async fn ended_series_leave_the_cache() {
    let s = setup().await;
    for name in ["a", "b", "c"] {
        s.recorder
            .publish(&lost("x"), &regarding(name))
            .await
            .unwrap();
    }
    assert_eq!(s.recorder.cached_series(), 3);
    s.clock.advance(SERIES_TTL);
    s.recorder
        .publish(&lost("x"), &regarding("d"))
        .await
        .unwrap();
    assert_eq!(
        s.recorder.cached_series(),
        1,
        "only the series that can still grow are kept"
    );
}

//! The collector and the Event TTL driven pass by pass on a server state (no HTTP, no
//! background task): what a pass does follows from the writes before it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{expire_events, pass};
use crate::registry::storage_key;
use crate::store::{ChangeType, EVENTS_STORAGE, Expect, Op};
use crate::{App, Options};
use tokio::time::Instant;

fn app(event_ttl: Duration) -> Arc<App> {
    let options = Options {
        event_ttl,
        history_cap: 1_000,
        ..Options::default()
    };
    App::new(options, None).unwrap()
}

fn configmap(name: &str, uid: &str, owners: &[(&str, &str)]) -> Value {
    let mut value = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "default", "name": name, "uid": uid}});
    if !owners.is_empty() {
        value["metadata"]["ownerReferences"] = owners
            .iter()
            .map(|(owner, uid)| {
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid})
            })
            .collect();
    }
    value
}

fn put(app: &App, storage: &str, name: &str, value: Value) -> u64 {
    let key = ("default".to_owned(), name.to_owned());
    let current = app.store.get(&Arc::from(storage), &key);
    let expect = current.map_or(Expect::Absent, |c| Expect::Rv(c.rv));
    let written = app
        .store
        .write(&Arc::from(storage), &key, Op::Put(value), expect)
        .unwrap();
    app.after_write(&written.change);
    written.change.rv
}

fn remove(app: &App, storage: &str, name: &str) {
    let key = ("default".to_owned(), name.to_owned());
    let rv = app.store.get(&Arc::from(storage), &key).unwrap().rv;
    let written = app
        .store
        .write(&Arc::from(storage), &key, Op::Delete(None), Expect::Rv(rv))
        .unwrap();
    app.after_write(&written.change);
}

fn exists(app: &App, storage: &str, name: &str) -> bool {
    let key = ("default".to_owned(), name.to_owned());
    app.store.get(&Arc::from(storage), &key).is_some()
}

const CONFIGMAPS: &str = "/configmaps";

fn event(name: &str, message: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}"),
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                          "name": "gone", "uid": "gone"}]},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"},
        "reason": "Test", "message": message})
}

#[tokio::test]
async fn dependents_go_once_their_last_owner_is_gone() {
    let app = app(Duration::ZERO);
    put(&app, CONFIGMAPS, "a", configmap("a", "uid-a", &[]));
    put(&app, CONFIGMAPS, "b", configmap("b", "uid-b", &[]));
    put(
        &app,
        CONFIGMAPS,
        "child-of-a",
        configmap("child-of-a", "c1", &[("a", "uid-a")]),
    );
    put(
        &app,
        CONFIGMAPS,
        "child-of-both",
        configmap("child-of-both", "c2", &[("a", "uid-a"), ("b", "uid-b")]),
    );
    // Same name as an owner, another uid: a reference to an object that is gone.
    put(
        &app,
        CONFIGMAPS,
        "stale",
        configmap("stale", "c3", &[("b", "uid-old-b")]),
    );
    pass(&app).await;
    assert!(!exists(&app, CONFIGMAPS, "stale"), "its owner is gone");
    assert!(exists(&app, CONFIGMAPS, "child-of-a"));
    remove(&app, CONFIGMAPS, "a");
    pass(&app).await;
    assert!(!exists(&app, CONFIGMAPS, "child-of-a"));
    assert!(exists(&app, CONFIGMAPS, "child-of-both"), "b still owns it");
    remove(&app, CONFIGMAPS, "b");
    pass(&app).await;
    assert!(!exists(&app, CONFIGMAPS, "child-of-both"));
    assert!(!app.store.has_gc_work(), "nothing left to look at");
}

#[tokio::test]
async fn an_owner_of_a_kind_that_is_not_served_is_never_taken_for_gone() {
    let app = app(Duration::ZERO);
    let mut orphan = configmap("kept", "k", &[]);
    orphan["metadata"]["ownerReferences"] = json!([{"apiVersion": "example.com/v1",
        "kind": "Unknown", "name": "x", "uid": "x"}]);
    put(&app, CONFIGMAPS, "kept", orphan);
    pass(&app).await;
    assert!(exists(&app, CONFIGMAPS, "kept"));
}

#[tokio::test(start_paused = true)]
async fn events_are_not_collected_but_expire_an_hour_after_their_last_write() {
    let hour = Duration::from_secs(3600);
    let app = app(hour);
    put(&app, EVENTS_STORAGE, "old", event("old", "first"));
    put(&app, EVENTS_STORAGE, "renewed", event("renewed", "first"));
    pass(&app).await;
    assert!(
        exists(&app, EVENTS_STORAGE, "old"),
        "an Event's owner reference does not make the collector delete it"
    );
    tokio::time::advance(Duration::from_secs(1800)).await;
    let renewed_rv = put(&app, EVENTS_STORAGE, "renewed", event("renewed", "second"));
    tokio::time::advance(Duration::from_secs(1799)).await;
    pass(&app).await;
    assert!(exists(&app, EVENTS_STORAGE, "old"), "not an hour old yet");
    tokio::time::advance(Duration::from_secs(1)).await;
    pass(&app).await;
    assert!(
        !exists(&app, EVENTS_STORAGE, "old"),
        "an hour without a write"
    );
    assert!(
        exists(&app, EVENTS_STORAGE, "renewed"),
        "its hour started again when it was written again"
    );
    tokio::time::advance(Duration::from_secs(1800)).await;
    pass(&app).await;
    assert!(!exists(&app, EVENTS_STORAGE, "renewed"));
    let deletions: Vec<_> = app
        .store
        .history()
        .into_iter()
        .filter(|c| c.change == ChangeType::Deleted)
        .collect();
    assert_eq!(deletions.len(), 2, "watchers see each expiry as DELETED");
    let renewed = deletions
        .iter()
        .find(|c| c.object.name() == "renewed")
        .unwrap();
    assert!(
        renewed.rv > renewed_rv,
        "an expiry is a write with its own resourceVersion"
    );
    assert_eq!(
        renewed.object.value()["message"],
        "second",
        "DELETED carries the last state"
    );
}

#[tokio::test]
async fn a_zero_ttl_keeps_events() {
    let app = app(Duration::ZERO);
    put(&app, EVENTS_STORAGE, "e", event("e", "m"));
    expire_events(&app, Instant::now() + Duration::from_secs(86_400 * 365));
    assert!(exists(&app, EVENTS_STORAGE, "e"));
}

#[test]
fn events_share_one_storage() {
    assert_eq!(&*storage_key("", "events"), EVENTS_STORAGE);
}

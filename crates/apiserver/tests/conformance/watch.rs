//! Section 1, watches: the stream, its events, bookmarks, timeouts, expiry, selectors,
//! streaming lists and metadata-only watches.

use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{
    CONFIGMAPS, MERGE, PATIENCE, RawWatch, changes_until, create_configmap, current_rv, delete,
    merge_patch, patch, type_and_name,
};

const METADATA_ACCEPT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

async fn watch_from(server: &TestServer, rv: u64, extra: &str) -> RawWatch {
    let watch = RawWatch::open(
        server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={rv}{extra}"),
    )
    .await;
    assert_eq!(watch.code, 200);
    watch
}

#[tokio::test]
async fn r1_4_a_watch_answers_200_at_once_then_streams_json_lines() {
    let server = TestServer::start().await.unwrap();
    let rv = current_rv(&server, CONFIGMAPS).await;
    // `open` fails unless the answer comes before any event exists.
    let mut watch = watch_from(&server, rv, "&timeoutSeconds=30").await;
    assert!(
        watch.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{:?}",
        watch.headers
    );
    let created = create_configmap(&server, "w", &json!({})).await;
    let added = watch.next_change().await.unwrap();
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["kind"], "ConfigMap");
    assert_eq!(added["object"]["apiVersion"], "v1");
    assert_eq!(
        added["object"]["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let patched = merge_patch(
        &server,
        &format!("{CONFIGMAPS}/w"),
        &json!({"data": {"k": "2"}}),
    )
    .await;
    let modified = watch.next_change().await.unwrap();
    assert_eq!(modified["type"], "MODIFIED");
    assert_eq!(modified["object"]["data"]["k"], "2");
    assert_eq!(
        modified["object"]["metadata"]["resourceVersion"],
        patched.body["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn r1_5_deleted_carries_the_last_state_with_the_deletions_resource_version() {
    let server = TestServer::start().await.unwrap();
    let created = create_configmap(&server, "d", &json!({"keep": "me"})).await;
    let created_rv = crate::kit::rv(&created);
    let mut watch = watch_from(&server, created_rv, "").await;
    delete(&server, &format!("{CONFIGMAPS}/d"), &Value::Null)
        .await
        .ok(200);
    let after = current_rv(&server, CONFIGMAPS).await;
    let deleted = watch.next_change().await.unwrap();
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(deleted["object"]["data"]["k"], "v", "the last state");
    assert_eq!(deleted["object"]["metadata"]["labels"]["keep"], "me");
    let deleted_rv = crate::kit::rv(&deleted["object"]);
    assert!(deleted_rv > created_rv, "the deletion has its own version");
    assert_eq!(deleted_rv, after, "the deletion was the last write");
}

#[tokio::test]
async fn r1_6_bookmarks_have_api_version_kind_and_resource_version_and_recur() {
    let server = TestServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    let created = create_configmap(&server, "b", &json!({})).await;
    let rv = crate::kit::rv(&created);
    let mut watch = watch_from(&server, rv, "&allowWatchBookmarks=true").await;
    for _ in 0..2 {
        let bookmark = watch.next().await.unwrap();
        assert_eq!(bookmark["type"], "BOOKMARK", "{bookmark}");
        let object = &bookmark["object"];
        assert_eq!(object["apiVersion"], "v1");
        assert_eq!(object["kind"], "ConfigMap");
        assert_eq!(crate::kit::rv(object), rv);
    }
    // Without allowWatchBookmarks, no bookmark: the stream just ends at its timeout.
    let mut plain = watch_from(&server, rv, "&timeoutSeconds=1").await;
    assert!(plain.next().await.is_none());
}

#[tokio::test]
async fn r1_7_a_watch_closes_at_timeout_seconds() {
    let server = TestServer::start().await.unwrap();
    let rv = current_rv(&server, CONFIGMAPS).await;
    let started = Instant::now();
    let mut watch = watch_from(&server, rv, "&timeoutSeconds=1").await;
    assert!(watch.next().await.is_none(), "no event, then the end");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < PATIENCE,
        "closed after {took:?}"
    );
}

#[tokio::test]
async fn r1_8_a_too_old_resource_version_is_one_error_event_then_the_end() {
    let server = TestServer::start().await.unwrap();
    let old = current_rv(&server, CONFIGMAPS).await;
    create_configmap(&server, "x", &json!({})).await;
    server.compact();
    let mut watch = watch_from(&server, old, "&allowWatchBookmarks=true").await;
    let error = watch.next().await.unwrap();
    assert_eq!(error["type"], "ERROR", "{error}");
    let status = &error["object"];
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 410);
    assert_eq!(status["reason"], "Expired");
    assert!(
        watch.next().await.is_none(),
        "the stream closes after the ERROR"
    );
}

#[tokio::test]
async fn r1_9_selector_transitions_are_added_and_deleted() {
    let server = TestServer::start().await.unwrap();
    let rv = current_rv(&server, CONFIGMAPS).await;
    let mut watch = watch_from(&server, rv, "&labelSelector=app%3Dx").await;
    let path = format!("{CONFIGMAPS}/s");
    create_configmap(&server, "s", &json!({"app": "y"})).await;
    let relabel = |app: &'static str| {
        let path = path.clone();
        let server = &server;
        async move {
            patch(
                server,
                &path,
                MERGE,
                &json!({"metadata": {"labels": {"app": app}}}),
            )
            .await
            .rv()
        }
    };
    let starts = relabel("x").await;
    let added = watch.next_change().await.unwrap();
    assert_eq!(
        added["type"], "ADDED",
        "starting to match is ADDED: {added}"
    );
    assert_eq!(crate::kit::rv(&added["object"]), starts);
    let stops = relabel("z").await;
    let left = watch.next_change().await.unwrap();
    assert_eq!(
        left["type"], "DELETED",
        "stopping to match is DELETED: {left}"
    );
    assert_eq!(
        crate::kit::rv(&left["object"]),
        stops,
        "with its new version"
    );
    assert_eq!(
        left["object"]["metadata"]["labels"]["app"], "z",
        "and its new state"
    );
    // A change outside the selector is not seen.
    patch(&server, &path, MERGE, &json!({"data": {"k": "3"}}))
        .await
        .ok(200);
    create_configmap(&server, "marker", &json!({"app": "x"})).await;
    assert_eq!(changes_until(&mut watch, "marker").await, []);
}

#[tokio::test]
async fn r1_10_a_streaming_list_ends_its_initial_events_with_an_annotated_bookmark() {
    let server = TestServer::start().await.unwrap();
    for name in ["a", "b"] {
        create_configmap(&server, name, &json!({})).await;
    }
    let mut watch = RawWatch::open(
        &server,
        &format!(
            "{CONFIGMAPS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion="
        ),
    )
    .await;
    assert_eq!(watch.code, 200);
    let mut added = Vec::new();
    let bookmark = loop {
        let event = watch.next().await.unwrap();
        match event["type"].as_str().unwrap() {
            "ADDED" => added.push(
                event["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            "BOOKMARK" => break event,
            other => panic!("unexpected {other}: {event}"),
        }
    };
    added.sort();
    assert_eq!(added, ["a", "b"]);
    assert_eq!(
        bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{bookmark}"
    );
    assert_eq!(
        crate::kit::rv(&bookmark["object"]),
        current_rv(&server, CONFIGMAPS).await
    );
    create_configmap(&server, "c", &json!({})).await;
    let later = watch.next_change().await.unwrap();
    assert_eq!(type_and_name(&later), (Some("ADDED"), Some("c")));
}

#[tokio::test]
async fn r1_11_metadata_only_lists_and_watches() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "m1", &json!({"a": "b"})).await;
    let list = crate::kit::call_with(
        &server,
        "GET",
        CONFIGMAPS,
        "application/json",
        Some(METADATA_LIST_ACCEPT),
        Vec::new(),
    )
    .await;
    let list = list.ok(200);
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].is_string());
    let item = &list["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(item["metadata"]["labels"]["a"], "b");
    assert!(item.get("data").is_none(), "metadata only: {item}");

    let rv = crate::kit::rv(list);
    let mut watch = RawWatch::open_accepting(
        &server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={rv}"),
        METADATA_ACCEPT,
    )
    .await;
    create_configmap(&server, "m2", &json!({})).await;
    let event = watch.next_change().await.unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(event["object"]["metadata"]["name"], "m2");
    assert!(event["object"].get("data").is_none(), "{event}");
}

/// Upstream (1.32, k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go `nextBookmarkTime`):
/// besides one about every minute, a watch that allows bookmarks gets one 2 s before its
/// `timeoutSeconds`, so a client resumes from a recent resourceVersion; a watch shorter
/// than that gets none.
#[tokio::test]
async fn r1_17_a_bookmark_comes_two_seconds_before_the_watch_times_out() {
    let server = TestServer::builder()
        .bookmark_interval(Duration::from_secs(60))
        .start()
        .await
        .unwrap();
    let rv = current_rv(&server, CONFIGMAPS).await;
    let mut watch = watch_from(&server, rv, "&allowWatchBookmarks=true&timeoutSeconds=3").await;
    let bookmark = watch.next().await.unwrap();
    assert_eq!(bookmark["type"], "BOOKMARK", "{bookmark}");
    assert_eq!(
        bookmark["object"]["metadata"]["resourceVersion"],
        rv.to_string()
    );
    assert!(watch.next().await.is_none(), "then the watch times out");

    let mut short = watch_from(&server, rv, "&allowWatchBookmarks=true&timeoutSeconds=1").await;
    assert!(short.next().await.is_none(), "no bookmark: {rv}");
}

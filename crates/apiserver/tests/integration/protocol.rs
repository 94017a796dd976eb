//! Protocol details through kube's own watcher (metadata-only and streaming lists, dropped
//! streams resumed, a forced compaction relisted), bad input, and durability across restarts. The rules of APISERVER.md
//! are tested one by one in tests/conformance.

use std::time::Duration;

use apiserver::faults::FaultConfig;
use apiserver::testing::TestServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use testkit::ListAll;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test]
async fn metadata_and_streaming_watches() {
    let server = TestServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    cms.create(&PostParams::default(), &cm("m1")).await.unwrap();
    let metadata_only: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::default_namespaced(server.client());
    let mut meta = watcher::watcher(metadata_only, watcher::Config::default()).boxed();
    let mut names = Vec::new();
    while let Some(event) = meta.try_next().await.unwrap() {
        match event {
            watcher::Event::InitApply(o) => names.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(names, ["m1"]);

    let mut streaming =
        watcher::watcher(cms.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut saw_init_done = false;
    let mut names = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(5), streaming.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        match event {
            watcher::Event::InitApply(o) => names.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => {
                saw_init_done = true;
                break;
            }
            _ => {}
        }
    }
    assert!(saw_init_done);
    assert_eq!(names, ["m1"]);
    cms.create(&PostParams::default(), &cm("m2")).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(5), streaming.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("m2")),
        other => panic!("unexpected {other:?}"),
    }
}

async fn raw(
    server: &TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .body(body)
        .unwrap();
    apiserver::testing::send(server.config(), request).await
}

#[tokio::test]
async fn bad_input_gets_a_status() {
    let server = TestServer::start().await.unwrap();
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, status) = raw(
        &server,
        "POST",
        cms,
        "application/json",
        b"{not json".to_vec(),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    let (code, status) = raw(
        &server,
        "POST",
        cms,
        "application/x-protobuf",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!((code, status["kind"].as_str()), (415, Some("Status")));
    let huge = format!(
        "{{\"metadata\":{{\"name\":\"big\"}},\"data\":{{\"k\":\"{}\"}}}}",
        "x".repeat(4 * 1024 * 1024)
    );
    let (code, _) = raw(&server, "POST", cms, "application/json", huge.into_bytes()).await;
    assert_eq!(code, 413);
    let (code, status) = raw(
        &server,
        "GET",
        "/apis/nope.example.com/v1/things",
        "application/json",
        Vec::new(),
    )
    .await;
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));
    let (code, status) = raw(
        &server,
        "POST",
        cms,
        "application/json",
        br#"{"metadata":{"name":"Bad_Name"}}"#.to_vec(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(status["details"]["causes"][0]["field"], "metadata.name");
    let (code, _) = raw(
        &server,
        "PATCH",
        &format!("{cms}/missing"),
        "application/merge-patch+json",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn restart_recovers_objects_and_resource_version() {
    let dir = tempfile::tempdir().unwrap();
    let rv_before;
    {
        let server = TestServer::builder()
            .data_dir(dir.path())
            .start()
            .await
            .unwrap();
        let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
        for i in 0..20 {
            cms.create(&PostParams::default(), &cm(&format!("d{i}")))
                .await
                .unwrap();
        }
        cms.delete("d3", &Default::default()).await.unwrap();
        rv_before = server.app().store.current_rv();
    }
    // A torn record at the end of the log is dropped.
    let log = dir.path().join("wal.log");
    let mut bytes = std::fs::read(&log).unwrap();
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3]);
    std::fs::write(&log, bytes).unwrap();
    let server = TestServer::builder()
        .data_dir(dir.path())
        .start()
        .await
        .unwrap();
    assert_eq!(server.app().store.current_rv(), rv_before);
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 19);
    let created = cms
        .create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    let rv: u64 = created.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > rv_before);
}

#[tokio::test]
async fn restart_after_snapshots_recovers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let rv_before;
    {
        let server = TestServer::builder()
            .data_dir(dir.path())
            .compact_every(7)
            .start()
            .await
            .unwrap();
        let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
        for i in 0..30 {
            cms.create(&PostParams::default(), &cm(&format!("s{i}")))
                .await
                .unwrap();
        }
        for i in 0..5 {
            cms.delete(&format!("s{i}"), &Default::default())
                .await
                .unwrap();
        }
        rv_before = server.app().store.current_rv();
        // Let the writer thread finish a queued snapshot before the next server opens the dir.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(dir.path().join("snapshot.jsonl").exists());
    let server = TestServer::builder()
        .data_dir(dir.path())
        .compact_every(7)
        .start()
        .await
        .unwrap();
    assert_eq!(server.app().store.current_rv(), rv_before);
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let names: Vec<String> = cms
        .list_all()
        .await
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(names.len(), 25);
    assert!(!names.contains(&"s0".to_string()));
}

#[tokio::test]
async fn dropped_watches_are_resumed_by_the_watcher() {
    let server = TestServer::start().await.unwrap();
    server.set_faults(FaultConfig {
        drop_watch_after_events: Some(1),
        ..FaultConfig::default()
    });
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut stream = watcher::watcher(cms.clone(), watcher::Config::default()).boxed();
    while !matches!(
        stream.try_next().await.unwrap(),
        Some(watcher::Event::InitDone)
    ) {}
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("r{i}")))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 3 {
        if let Some(watcher::Event::Apply(o)) =
            tokio::time::timeout(Duration::from_secs(10), stream.try_next())
                .await
                .unwrap()
                .unwrap()
        {
            seen.push(o.metadata.name.unwrap());
        }
    }
    assert_eq!(seen, ["r0", "r1", "r2"]);
    let watches = server
        .requests()
        .iter()
        .filter(|r| r.verb == "watch")
        .count();
    let log: Vec<String> = server
        .requests()
        .iter()
        .map(|r| format!("{} {} {}", r.verb, r.uri, r.status))
        .collect();
    assert!(watches >= 2, "each dropped watch was resumed: {log:#?}");
}

#[tokio::test]
async fn a_forced_compaction_makes_a_reflector_relist_and_converge() {
    use kube::runtime::{WatchStreamExt, reflector};

    let server = TestServer::start().await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(server.client());
    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    let (store, writer) = reflector::store();
    // The server ends each watch after a second, so the watcher must resume.
    let config = watcher::Config::default().timeout(1);
    let mut events = watcher::watcher(cms.clone(), config)
        .reflect(writer)
        .boxed();
    while !matches!(
        events.try_next().await.unwrap(),
        Some(watcher::Event::InitDone)
    ) {}
    let names = || {
        let mut names: Vec<String> = store
            .state()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(), ["a", "b"]);

    // While the watcher is not looking (its watch has ended), objects change and
    // the server forgets the history it would resume from.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cms.create(&PostParams::default(), &cm("c")).await.unwrap();
    cms.delete("a", &Default::default()).await.unwrap();
    server.compact();

    let mut relisted = false;
    let converged = tokio::time::timeout(Duration::from_secs(30), async {
        while names() != ["b", "c"] {
            match events.next().await {
                Some(Ok(watcher::Event::Init)) => relisted = true,
                // The 410 comes as an error item; the watcher lists again on the next poll.
                Some(Err(watcher::Error::WatchError(status))) => assert_eq!(status.code, 410),
                Some(Err(other)) => panic!("{other}"),
                Some(Ok(_)) => {}
                None => panic!("the watcher ended"),
            }
        }
    })
    .await;
    assert!(converged.is_ok(), "the store converged: {:?}", names());
    assert!(relisted, "the resume got 410 and the watcher listed again");
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "configmaps")
        .count();
    assert!(
        lists >= 2,
        "a second list after the compaction, saw {lists}"
    );
}

//! The debug endpoints of the standalone server (plan 0010 A8): off unless
//! `--debug-endpoints`; behind the token; faults set from outside are injected and
//! counted (an applied write answered 500 is still applied); a forced compaction makes
//! a resumed watch 410; the history of `--debug-history` survives a SIGKILL.

use std::path::Path;

use apiserver::faults::FaultConfig;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use testkit::apiserver_process::{ApiServerProcess, DebugClient};

fn start(dir: &Path, args: &[&str]) -> ApiServerProcess {
    let data = dir.join("data");
    ApiServerProcess::start(
        Path::new(env!("CARGO_BIN_EXE_apiserver")),
        &data,
        &dir.join("kubeconfig"),
        args,
    )
}

async fn client(server: &ApiServerProcess) -> kube::Client {
    kube::Client::try_from(server.config().await).unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn status_of(error: &kube::Error) -> u16 {
    match error {
        kube::Error::Api(status) => status.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn without_the_flag_there_are_no_debug_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let debug = DebugClient::new(client(&server).await);
    assert_eq!(status_of(&debug.faults().await.unwrap_err()), 404);
    assert_eq!(status_of(&debug.compact().await.unwrap_err()), 404);
}

#[tokio::test]
async fn the_debug_endpoints_need_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--debug-endpoints"]);
    let mut config = server.config().await;
    config.auth_info.token = None;
    let anonymous = DebugClient::new(kube::Client::try_from(config).unwrap());
    assert_eq!(status_of(&anonymous.faults().await.unwrap_err()), 401);
    assert_eq!(
        status_of(
            &anonymous
                .set_faults(&FaultConfig {
                    internal_error_rate: 1.0,
                    ..FaultConfig::default()
                })
                .await
                .unwrap_err()
        ),
        401
    );
    let debug = DebugClient::new(client(&server).await);
    assert_eq!(debug.faults().await.unwrap().config, FaultConfig::default());
}

#[tokio::test]
async fn faults_set_from_outside_are_injected_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--debug-endpoints"]);
    let client = client(&server).await;
    let debug = DebugClient::new(client.clone());
    let api: Api<ConfigMap> = Api::default_namespaced(client);

    let invalid = FaultConfig {
        conflict_rate: 1.5,
        ..FaultConfig::default()
    };
    assert_eq!(
        status_of(&debug.set_faults(&invalid).await.unwrap_err()),
        422
    );

    // 500 rather than 503: kube's client retries a 503 on its own.
    debug
        .set_faults(&FaultConfig {
            internal_error_rate: 1.0,
            ..FaultConfig::default()
        })
        .await
        .unwrap();
    let refused = api.create(&PostParams::default(), &cm("refused")).await;
    assert_eq!(status_of(&refused.unwrap_err()), 500);

    debug
        .set_faults(&FaultConfig {
            applied_error_rate: 1.0,
            ..FaultConfig::default()
        })
        .await
        .unwrap();
    let lost = api.create(&PostParams::default(), &cm("applied")).await;
    assert_eq!(status_of(&lost.unwrap_err()), 500);
    // Reads are never answered an applied error: the write is there.
    assert!(api.get_opt("applied").await.unwrap().is_some());
    assert!(api.get_opt("refused").await.unwrap().is_none());

    debug
        .set_faults(&FaultConfig {
            drop_watch_after: Some(std::time::Duration::from_millis(300)),
            ..FaultConfig::default()
        })
        .await
        .unwrap();
    let watch = api.watch(&WatchParams::default(), "0").await.unwrap();
    let events: Vec<_> = futures::StreamExt::collect(watch).await;
    assert!(
        !events.is_empty(),
        "the watch sent the objects before it was cut"
    );

    let state = debug.set_faults(&FaultConfig::default()).await.unwrap();
    assert_eq!(state.injected.internal_errors, 1);
    assert_eq!(state.injected.applied_errors, 1);
    assert_eq!(state.injected.watches_dropped, 1);
    assert_eq!(state.injected.total(), 3);
}

#[tokio::test]
async fn a_forced_compaction_makes_a_resumed_watch_410() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--debug-endpoints"]);
    let client = client(&server).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let first = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    api.create(&PostParams::default(), &cm("b")).await.unwrap();
    let from = first.metadata.resource_version.unwrap();

    let resumable = first_watch_event(&api, &from).await;
    assert!(matches!(resumable, WatchEvent::Added(_)), "{resumable:?}");
    DebugClient::new(client).compact().await.unwrap();
    match first_watch_event(&api, &from).await {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("a resumed watch after compaction got {other:?}"),
    }
}

async fn first_watch_event(api: &Api<ConfigMap>, from: &str) -> WatchEvent<ConfigMap> {
    use futures::StreamExt as _;
    let stream = api.watch(&WatchParams::default(), from).await.unwrap();
    let mut stream = std::pin::pin!(stream);
    stream.next().await.unwrap().unwrap()
}

#[tokio::test]
async fn the_history_survives_a_sigkill_and_holds_only_its_resources() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(
        dir.path(),
        &["--debug-endpoints", "--debug-history", "configmaps"],
    );
    let api: Api<ConfigMap> = Api::default_namespaced(client(&server).await);
    for name in ["one", "two"] {
        api.create(&PostParams::default(), &cm(name)).await.unwrap();
    }
    api.delete("one", &Default::default()).await.unwrap();
    server.kill();
    server.restart();

    let client = client(&server).await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("three"))
        .await
        .unwrap();
    let debug = DebugClient::new(client);
    let history = debug.history("/configmaps").await.unwrap();
    let seen: Vec<(String, String)> = history
        .iter()
        .map(|e| (format!("{:?}", e.change), e.name.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("Added".into(), "one".into()),
            ("Added".into(), "two".into()),
            ("Deleted".into(), "one".into()),
            ("Added".into(), "three".into()),
        ]
    );
    let versions: Vec<u64> = history.iter().map(|e| e.resource_version).collect();
    assert!(versions.is_sorted() && versions.windows(2).all(|w| w[0] < w[1]));
    assert!(
        debug.history("/secrets").await.unwrap().is_empty(),
        "only the resources asked for are kept"
    );
}

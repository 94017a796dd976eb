//! The HTTP port as Prometheus and the kubelet see it: a real socket, raw HTTP/1.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use controllers::metrics::Metrics;
use manager::http::{HttpServer, OPENMETRICS_CONTENT_TYPE, Readiness};
use prometheus_client::registry::Registry;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// GET on the manager's port; it answers within 5 s.
async fn get(addr: SocketAddr, path: &str) -> testkit::HttpReply {
    testkit::http_get(addr, path, Duration::from_secs(5)).await
}

struct Running {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), manager::http::HttpError>>,
}

async fn start(registry: Registry, readiness: Readiness) -> Running {
    let server = HttpServer::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(server.serve(Arc::new(registry), readiness, async move {
        let _ = stopped.await;
    }));
    Running { addr, stop, server }
}

#[tokio::test]
async fn healthz_answers_while_the_process_runs() {
    let running = start(Registry::default(), Readiness::new()).await;
    let reply = get(running.addr, "/healthz").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok\n");
}

#[tokio::test]
async fn readyz_follows_the_readiness_flag() {
    let readiness = Readiness::new();
    let running = start(Registry::default(), readiness.clone()).await;
    assert_eq!(get(running.addr, "/readyz").await.status, 503);
    readiness.set(true);
    assert_eq!(get(running.addr, "/readyz").await.status, 200);
    readiness.set(false);
    assert_eq!(get(running.addr, "/readyz").await.status, 503);
}

#[tokio::test]
async fn readiness_can_follow_a_watch_channel() {
    let readiness = Readiness::new();
    let (synced, ready) = tokio::sync::watch::channel(false);
    let following = tokio::spawn({
        let readiness = readiness.clone();
        async move { readiness.follow(ready).await }
    });
    tokio::task::yield_now().await;
    assert!(!readiness.is_ready());
    synced.send(true).unwrap();
    for _ in 0..100 {
        if readiness.is_ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(readiness.is_ready());
    drop(synced);
    following.await.unwrap();
    assert!(readiness.is_ready(), "keeps the last value");
}

#[tokio::test]
async fn metrics_serves_openmetrics_text_that_moves_when_recorded() {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let running = start(registry, Readiness::new()).await;

    let before = get(running.addr, "/metrics").await;
    assert_eq!(before.status, 200);
    assert!(
        before
            .headers
            .contains(&format!("content-type: {OPENMETRICS_CONTENT_TYPE}")),
        "{}",
        before.headers
    );
    assert!(
        before.body.contains("socialweb_leader 0\n"),
        "{}",
        before.body
    );
    assert!(before.body.ends_with("# EOF\n"));

    metrics.set_leader(true);
    drop(metrics.reconcile_started("infra"));
    let after = get(running.addr, "/metrics").await;
    assert!(
        after.body.contains("socialweb_leader 1\n"),
        "{}",
        after.body
    );
    assert!(
        after
            .body
            .contains("socialweb_reconcile_total{controller=\"infra\"} 1\n"),
        "{}",
        after.body
    );
}

#[tokio::test]
async fn unknown_paths_are_not_found() {
    let running = start(Registry::default(), Readiness::new()).await;
    assert_eq!(get(running.addr, "/debug").await.status, 404);
}

#[tokio::test]
async fn the_server_stops_when_shutdown_resolves() {
    let running = start(Registry::default(), Readiness::new()).await;
    running.stop.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), running.server)
        .await
        .expect("the server stops within 5s")
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(
        TcpStream::connect(running.addr).await.is_err(),
        "still listening"
    );
}

#[tokio::test]
async fn a_taken_port_is_a_bind_error_naming_the_address() {
    let first = HttpServer::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let error = HttpServer::bind(first.local_addr()).await.unwrap_err();
    assert!(
        error.to_string().contains(&first.local_addr().to_string()),
        "{error}"
    );
}

//! No Secret's data reaches the manager's logs when a Secret cannot be decoded.
//!
//! A Secret the typed client cannot decode (here written into the store behind the API
//! server's back, as a server without type checks would have accepted it) once made every
//! list of the join-Secret cache fail: kube-client logged the whole SecretList body at
//! WARN and the cache logged serde's error, which quotes values. The cache now decodes
//! each object on its own (`controllers::cache::decode`) and reports the one it cannot
//! read by name and field; the manager's filter (`telemetry::filter`) still keeps
//! kube-client's bodies out. Neither the manager's log nor an unfiltered WARN log may
//! hold the value.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiserver::store::{Expect, Op};
use apiserver::testing::TestServer;
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;

/// The value that must never be logged; not base64, so the Secret does not decode.
const SECRET_VALUE: &str = "hunter2-is-the-join-token";

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Lines {
    type Writer = Self;
    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

#[tokio::test]
async fn an_undecodable_secret_is_reported_by_name_never_by_value() {
    // The manager's filter, and beside it an unfiltered one that shows what kube-client
    // would log, so the test proves the leak exists before it proves the filter stops it.
    let ours = Lines::default();
    let unfiltered = Lines::default();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(ours.clone())
                .with_filter(manager::telemetry::filter("info,controllers=debug").unwrap()),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(unfiltered.clone())
                .with_filter(tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let server = TestServer::start().await.unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "join", "namespace": "default", "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {api::names::CONTRACT_LABEL: "c"}},
        "data": {"token": SECRET_VALUE}});
    server
        .app()
        .store
        .write(
            &apiserver::registry::storage_key("", "secrets"),
            &("default".to_string(), "join".to_string()),
            Op::Put(secret),
            Expect::Absent,
        )
        .unwrap();

    let caches = controllers::cache::SharedCaches::new(server.client(), "default");
    let running = tokio::spawn(caches.run());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ours.text().contains("cannot decode this object") {
        assert!(
            Instant::now() < deadline,
            "the join-Secret cache never reported the Secret it cannot decode: {}",
            ours.text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.abort();

    let logged = ours.text();
    let report = logged
        .lines()
        .find(|line| line.contains("cannot decode this object"))
        .unwrap_or_default();
    assert!(
        report.contains("kind=\"Secret\"")
            && report.contains("name=join")
            && report.contains("field=data.token"),
        "the report names the object and the field, so an operator can fix it: {report}"
    );
    for (which, text) in [
        ("the manager's", logged),
        ("an unfiltered WARN", unfiltered.text()),
    ] {
        assert!(
            !text.contains(SECRET_VALUE) && !text.contains("hunter2"),
            "a Secret's value reached {which} log: {text}"
        );
    }
}

//! Throughput check (ignored by default; run with `--ignored --nocapture`, best in release):
//! creates per second from 8 concurrent clients, in memory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: run explicitly"]
async fn creates_per_second_from_eight_clients() {
    let server = TestServer::start().await.unwrap();
    let per_client: u32 = 500;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..8 {
        let api: Api<ConfigMap> = Api::default_namespaced(server.client());
        tasks.push(tokio::spawn(async move {
            for i in 0..per_client {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("c{c}-{i}"), "labels": {"client": format!("c{c}")}},
                    "data": {"payload": "x".repeat(200)},
                }))
                .unwrap();
                api.create(&PostParams::default(), &cm).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total = f64::from(8 * per_client);
    println!("{total} creates in {elapsed:.2}s: {:.0}/s", total / elapsed);
    assert_eq!(
        server.counters().by_verb.get("create"),
        Some(&(8 * u64::from(per_client)))
    );
}

//! Benchmark of the embedded API server (`just bench-apiserver`, in release).
//!
//! Prints, without asserting on timings:
//! - creates/s of a tiny custom resource from 8 concurrent clients, in memory
//!   (target 5,000/s) and with a data dir, every write fsynced (target 1,000/s);
//! - the time for 100 watchers to all see 10,000 events, checking none is lost;
//! - resident memory (VmRSS delta of this process, the server runs in-process) per
//!   10,000 stored objects against their JSON size (target under 3x).
//!
//! `--scale F` multiplies every count (e.g. `--scale 0.1` for a quick debug run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::json;

const CLIENTS: usize = 8;
const WATCHERS: usize = 100;

fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.example.com", "v1", "Widget"),
        "widgets",
    )
}

fn client_for(server: &ApiServer) -> kube::Client {
    server.client().unwrap()
}

fn widgets(client: kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client, "default", &widget_resource())
}

/// Registers the tiny CRD and waits until its instances can be listed.
async fn register_widget_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.bench.example.com"},
        "spec": {
            "group": "bench.example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "color": {"type": "string"},
                    }},
                }}},
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let api = widgets(client.clone());
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.list(&ListParams::default().limit(1)).await.is_err() {
        assert!(Instant::now() < deadline, "the Widget CRD was never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn widget(name: &str, i: usize) -> DynamicObject {
    let mut object = DynamicObject::new(name, &widget_resource());
    object.data = json!({"spec": {"size": i, "color": "blue"}});
    object
}

/// Creates `total` widgets named `{prefix}-{n}` from `CLIENTS` concurrent clients;
/// returns the seconds taken.
async fn create_widgets(server: &ApiServer, prefix: &str, total: usize) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let api = widgets(client_for(server));
        let next = Arc::clone(&next);
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return;
                }
                api.create(&PostParams::default(), &widget(&format!("{prefix}-{i}"), i))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed().as_secs_f64()
}

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

async fn memory_per_objects(count: usize) {
    let server = ApiServer::builder().port(0).serve().await.unwrap();
    let client = client_for(&server);
    register_widget_crd(&client).await;
    // Warm the connection pools and allocator paths before the baseline.
    create_widgets(&server, "warm", 100).await;
    let before = resident_bytes();
    create_widgets(&server, "mem", count).await;
    let after = resident_bytes();
    let listed = widgets(client).list(&ListParams::default()).await.unwrap();
    let json_bytes: usize = listed
        .items
        .iter()
        .filter(|o| {
            o.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("mem-"))
        })
        .map(|o| serde_json::to_vec(o).unwrap().len())
        .sum();
    let delta = after.saturating_sub(before);
    #[allow(clippy::cast_precision_loss)]
    let ratio = delta as f64 / json_bytes as f64;
    println!(
        "memory: {count} objects, VmRSS +{:.1} MiB, JSON {:.1} MiB, ratio {ratio:.2}x (target < 3x)",
        delta as f64 / 1_048_576.0,
        json_bytes as f64 / 1_048_576.0,
    );
    server.stop();
}

async fn creates_per_second(
    label: &str,
    data_dir: Option<&std::path::Path>,
    total: usize,
    target: f64,
) {
    let mut builder = ApiServer::builder().port(0);
    if let Some(dir) = data_dir {
        builder = builder.data_dir(dir);
    }
    let server = builder.serve().await.unwrap();
    register_widget_crd(&client_for(&server)).await;
    let seconds = create_widgets(&server, "c", total).await;
    #[allow(clippy::cast_precision_loss)]
    let rate = total as f64 / seconds;
    println!(
        "creates ({label}): {total} from {CLIENTS} clients in {seconds:.2}s = {rate:.0}/s, {:.2}x the {target:.0}/s target",
        rate / target
    );
    server.stop();
}

/// One watcher: counts distinct `ev-` widgets it saw ADDED, resuming if the server
/// closes its stream (a watcher too slow for the fan-out is closed).
async fn watch_until(api: Api<DynamicObject>, mut rv: String, expected: usize) -> (usize, usize) {
    let mut seen = HashSet::with_capacity(expected);
    let mut resumes = 0;
    while seen.len() < expected {
        let params = WatchParams::default().timeout(290);
        let mut stream = api.watch(&params, &rv).await.unwrap().boxed();
        while let Some(event) = stream.try_next().await.unwrap_or(None) {
            match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    if let Some(v) = o.metadata.resource_version.clone() {
                        rv = v;
                    }
                    if let Some(name) = o.metadata.name
                        && name.starts_with("ev-")
                    {
                        seen.insert(name);
                    }
                }
                WatchEvent::Bookmark(b) => rv = b.metadata.resource_version,
                WatchEvent::Error(e) => panic!("watch error (events lost): {e:?}"),
            }
            if seen.len() >= expected {
                break;
            }
        }
        if seen.len() < expected {
            resumes += 1;
        }
    }
    (seen.len(), resumes)
}

async fn watchers_see_all_events(events: usize) {
    let server = ApiServer::builder().port(0).serve().await.unwrap();
    let client = client_for(&server);
    register_widget_crd(&client).await;
    let start_rv = widgets(client)
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let api = widgets(client_for(&server));
        watchers.push(tokio::spawn(watch_until(api, start_rv.clone(), events)));
    }
    let started = Instant::now();
    let write_seconds = create_widgets(&server, "ev", events).await;
    let mut total_seen = 0;
    let mut total_resumes = 0;
    for watcher in watchers {
        let (seen, resumes) = tokio::time::timeout(Duration::from_secs(300), watcher)
            .await
            .expect("a watcher never saw every event")
            .unwrap();
        total_seen += seen;
        total_resumes += resumes;
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "watch: {WATCHERS} watchers all saw {events} events in {seconds:.2}s (writes took {write_seconds:.2}s); \
         {total_seen}/{} deliveries, none lost; {total_resumes} resumes",
        WATCHERS * events
    );
    server.stop();
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale: f64 = args
        .iter()
        .position(|a| a == "--scale")
        .and_then(|i| args.get(i + 1))
        .map_or(1.0, |s| s.parse().expect("--scale takes a number"));
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let scaled = |n: usize| ((n as f64 * scale) as usize).max(1);
    println!(
        "bench-apiserver (scale {scale}, debug build: {})",
        cfg!(debug_assertions)
    );

    // Memory first, in a fresh process, so earlier phases' freed memory does not hide it.
    memory_per_objects(scaled(10_000)).await;
    creates_per_second("in memory", None, scaled(20_000), 5_000.0).await;
    let dir = tempfile::tempdir().unwrap();
    creates_per_second(
        "data dir, fsynced",
        Some(dir.path()),
        scaled(5_000),
        1_000.0,
    )
    .await;
    watchers_see_all_events(scaled(10_000)).await;
}

//! Benchmark of the embedded API server (`just bench-apiserver`, in release).
//!
//! Prints, without asserting on timings (the machine is shared: compare the ratios, each
//! measured within one run):
//! - resident memory (VmRSS delta of this process, the server runs in-process) per
//!   10,000 stored objects against their JSON size (target at most 2x);
//! - creates/s of a tiny custom resource from 8 concurrent clients, in memory
//!   (target 5,000/s) and with a data dir, every write fsynced (target 1,000/s);
//! - creates/s with 100 watchers of the resource attached, as a ratio of creates/s
//!   without them (target at least 0.5), checking every watcher saw every event once.
//!   The watchers read the raw stream (they count lines and check resourceVersions
//!   rise) rather than parse each event into an object: in this one process a parsing
//!   client would cost more CPU than the server and the figure would measure it.
//!
//! `--scale F` multiplies every count (e.g. `--scale 0.1` for a quick debug run);
//! `--only memory|creates|watchers|fsync` runs one part.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apiserver::ApiServer;
use futures::AsyncBufReadExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
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
    let apis: Vec<_> = (0..CLIENTS).map(|_| widgets(client_for(server))).collect();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for api in apis {
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

/// CPU seconds this process used so far (user + system, all threads).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command (which may hold spaces) start after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
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
        "memory: {count} objects, VmRSS +{:.1} MiB, JSON {:.1} MiB, ratio {ratio:.2}x (target at most 2x)",
        delta as f64 / 1_048_576.0,
        json_bytes as f64 / 1_048_576.0,
    );
    server.stop();
}

/// Creates `total` widgets on a fresh server (with a data dir when given); returns creates/s.
async fn creates_per_second(
    label: &str,
    data_dir: Option<&std::path::Path>,
    total: usize,
    target: f64,
) -> f64 {
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
    rate
}

/// Creates/s and CPU seconds per create (this process: server and clients) on a fresh
/// server without watchers.
async fn creates_unwatched(total: usize) -> (f64, f64) {
    let server = ApiServer::builder().port(0).serve().await.unwrap();
    register_widget_crd(&client_for(&server)).await;
    let cpu = cpu_seconds();
    let seconds = create_widgets(&server, "c", total).await;
    #[allow(clippy::cast_precision_loss)]
    let per_create = (cpu_seconds() - cpu) / total as f64;
    #[allow(clippy::cast_precision_loss)]
    let rate = total as f64 / seconds;
    println!(
        "creates (in memory, no watcher): {total} in {seconds:.2}s = {rate:.0}/s, {:.0} us CPU each",
        per_create * 1e6
    );
    server.stop();
    (rate, per_create)
}

/// The resourceVersion in a watch event line (the first one: the object's).
fn line_rv(line: &[u8]) -> Option<u64> {
    const KEY: &str = "\"resourceVersion\":\"";
    let text = std::str::from_utf8(line).ok()?;
    let at = text.find(KEY)? + KEY.len();
    let digits = text.get(at..)?;
    let end = digits.find('"')?;
    digits.get(..end)?.parse().ok()
}

/// Newlines in `bytes`, summed in bytes over runs of 255 so the compiler vectorizes it
/// (a plain `filter().count()` widens every byte and runs 8x slower: a client that
/// scans slowly costs more CPU than the server's fan-out it is there to measure).
fn count_newlines(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|run| {
            let newlines = run
                .iter()
                .map(|b| u8::from(*b == b'\n'))
                .fold(0u8, u8::wrapping_add);
            usize::from(newlines)
        })
        .sum()
}

/// One watcher reading the raw stream as cheaply as a client can: counts lines (every
/// line is an ADDED event: bookmarks are off and only widgets are created), checks at the
/// end of every read that the last event's resourceVersion is the start plus the events
/// counted (none lost, none repeated: every write bumps it by one), and resumes from
/// there if the server closes the stream (a watcher too slow for the fan-out is closed).
/// Returns the events seen and the resumes.
async fn watch_raw(client: kube::Client, start: u64, expected: usize) -> (usize, usize) {
    let mut seen = 0;
    let mut resumes = 0;
    // The start of a line cut by the end of a read.
    let mut partial: Vec<u8> = Vec::new();
    let mut line: Vec<u8> = Vec::new();
    while seen < expected {
        let uri = format!(
            "/apis/bench.example.com/v1/namespaces/default/widgets?watch=true&timeoutSeconds=290&resourceVersion={}",
            start + seen as u64
        );
        let request = http::Request::get(uri).body(Vec::new()).unwrap();
        let mut body = client.request_stream(request).await.unwrap();
        partial.clear();
        while seen < expected {
            let read = body.fill_buf().await.unwrap_or_default();
            if read.is_empty() {
                break;
            }
            let consumed = read.len();
            let Some(last_end) = read.iter().rposition(|b| *b == b'\n') else {
                partial.extend_from_slice(read);
                body.consume_unpin(consumed);
                continue;
            };
            let lines = count_newlines(read);
            // The last complete line of this read.
            line.clear();
            match read[..last_end].iter().rposition(|b| *b == b'\n') {
                Some(start) => line.extend_from_slice(&read[start + 1..=last_end]),
                None => {
                    line.append(&mut partial);
                    line.extend_from_slice(&read[..=last_end]);
                }
            }
            partial.clear();
            partial.extend_from_slice(&read[last_end + 1..]);
            body.consume_unpin(consumed);
            seen += lines;
            assert!(
                !line.starts_with(br#"{"type":"ERROR""#),
                "watch error (events lost): {}",
                String::from_utf8_lossy(&line)
            );
            let rv = line_rv(&line).expect("every event carries a resourceVersion");
            assert_eq!(rv, start + seen as u64, "events lost or repeated");
        }
        if seen < expected {
            resumes += 1;
        }
    }
    (seen, resumes)
}

/// Creates/s with [`WATCHERS`] watchers of the resource attached, on a fresh server;
/// prints it as a ratio of creates/s without watchers (same count), and the CPU a create
/// costs with its fan-out (until every watcher saw it) against the CPU without.
async fn creates_with_watchers(events: usize, (unwatched, unwatched_cpu): (f64, f64)) {
    let server = ApiServer::builder().port(0).serve().await.unwrap();
    let client = client_for(&server);
    register_widget_crd(&client).await;
    let start_rv: u64 = widgets(client)
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    // One client: its pool opens a connection per watch.
    let watch_client = client_for(&server);
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let client = watch_client.clone();
        watchers.push(tokio::spawn(watch_raw(client, start_rv, events)));
    }
    // Let every watch connect first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = cpu_seconds();
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
    #[allow(clippy::cast_precision_loss)]
    let per_create = (cpu_seconds() - cpu) / events as f64;
    #[allow(clippy::cast_precision_loss)]
    let rate = events as f64 / write_seconds;
    println!(
        "creates (in memory, {WATCHERS} watchers): {events} in {write_seconds:.2}s = {rate:.0}/s = {:.2}x creates/s without watchers (target at least 0.5x)",
        rate / unwatched
    );
    println!(
        "  CPU per create with its fan-out: {:.0} us; without watchers it costs {:.2}x that \
         (the same ratio by CPU, which a busy machine does not blur)",
        per_create * 1e6,
        unwatched_cpu / per_create,
    );
    println!(
        "  every watcher saw every event {seconds:.2}s after the first create: {total_seen}/{} deliveries, none lost or repeated; {total_resumes} resumes",
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

    // `--only memory|creates|watchers|fsync` runs one part (to profile it).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let runs = |part: &str| only.as_deref().is_none_or(|o| o == part);
    // Memory first, in a fresh process, so earlier phases' freed memory does not hide it.
    if runs("memory") {
        memory_per_objects(scaled(10_000)).await;
    }
    if runs("creates") {
        creates_per_second("in memory", None, scaled(20_000), 5_000.0).await;
    }
    if runs("watchers") {
        let events = scaled(10_000);
        let unwatched = creates_unwatched(events).await;
        creates_with_watchers(events, unwatched).await;
    }
    if runs("fsync") {
        let dir = tempfile::tempdir().unwrap();
        creates_per_second(
            "data dir, fsynced",
            Some(dir.path()),
            scaled(5_000),
            1_000.0,
        )
        .await;
    }
}

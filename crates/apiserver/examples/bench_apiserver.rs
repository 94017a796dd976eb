//! Benchmark of the embedded API server (`just bench-apiserver`, in release).
//!
//! Prints, without asserting on timings (the machine is shared: compare the ratios, each
//! measured within one run):
//! - resident memory (VmRSS delta of this process, the server runs in-process) per
//!   10,000 stored objects against their JSON size (target at most 2x);
//! - creates/s of a tiny custom resource from 8 concurrent clients, in memory
//!   (target 5,000/s) and with a data dir, every write fsynced (target 1,000/s);
//! - creates/s with 100 watchers of the resource attached, as a ratio of creates/s
//!   without them (target at least 0.5; the median of three rounds, each against the
//!   rounds without just before and after it), checking every watcher saw every event. The
//!   target is judged on watchers that drain their streams without decoding (read the
//!   bytes, count the lines): the server's fan-out, not a client's decode. Beside it, in
//!   the same run, the ratio with watchers that do what a kube-rs watch does with every
//!   event (the line copied into a string, decoded into a typed object) and the ratio by
//!   the CPU of the server's threads alone. Every watcher speaks HTTP/1.1 with a
//!   connection per watch, as kube's client, in this process on the same two cores, so
//!   creates/s also count their TLS reads (and the decode, for the decoding ones); the
//!   server runs on a runtime of its own, so its threads' CPU is printed apart.
//!
//! `--scale F` multiplies every count (e.g. `--scale 0.1` for a quick debug run);
//! `--only memory|creates|watchers|fsync` runs one part.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use apiserver::{ApiServer, ApiServerBuilder};
use futures::AsyncBufReadExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::json;

/// The allocator of the `apiserver` and `manager` binaries, which the server runs in.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLIENTS: usize = 8;
const WATCHERS: usize = 100;
/// The name of the server runtime's threads (at most 15 bytes: Linux cuts longer ones).
const SERVER_THREAD: &str = "bench-apiserver";

/// The server's own runtime: its threads' CPU is told apart from the clients'.
fn server_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(SERVER_THREAD)
            .enable_all()
            .build()
            .unwrap()
    })
}

/// Starts a server on [`server_runtime`] (its connections are served there too).
async fn serve(builder: ApiServerBuilder) -> ApiServer {
    server_runtime()
        .spawn(builder.serve())
        .await
        .unwrap()
        .unwrap()
}

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

/// CPU seconds (user + system) in a `stat` file of proc(5), and the thread's name.
fn stat_cpu(stat: &str) -> (f64, &str) {
    // The name is in parentheses (it may hold spaces); the other fields follow.
    let (head, rest) = stat.rsplit_once(')').unwrap_or_default();
    let name = head.split_once('(').map_or("", |(_, name)| name);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    ((ticks(11) + ticks(12)) / 100.0, name)
}

/// CPU seconds this process used so far (all threads).
fn cpu_seconds() -> f64 {
    stat_cpu(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default()).0
}

/// CPU seconds the server's threads used so far (those alive: the runtime keeps them).
fn server_cpu_seconds() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .map(|stat| match stat_cpu(&stat) {
            (cpu, SERVER_THREAD) => cpu,
            _ => 0.0,
        })
        .sum()
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
    let server = serve(ApiServer::builder().port(0)).await;
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
    let server = serve(builder).await;
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

/// What creates cost on one server: creates/s, and CPU seconds per create of the whole
/// process (server and clients) and of the server's threads alone.
#[derive(Clone, Copy)]
struct Cost {
    rate: f64,
    process_cpu: f64,
    server_cpu: f64,
}

/// Measures `create` (which returns the seconds the creates took) of `total` creates.
async fn cost_of(total: usize, create: impl Future<Output = f64>) -> Cost {
    let (process, server) = (cpu_seconds(), server_cpu_seconds());
    let seconds = create.await;
    #[allow(clippy::cast_precision_loss)]
    let per_create = |cpu: f64| cpu / total as f64;
    #[allow(clippy::cast_precision_loss)]
    Cost {
        rate: total as f64 / seconds,
        process_cpu: per_create(cpu_seconds() - process),
        server_cpu: per_create(server_cpu_seconds() - server),
    }
}

/// Creates/s and CPU per create on a fresh server without watchers.
async fn creates_unwatched(total: usize) -> Cost {
    let server = serve(ApiServer::builder().port(0)).await;
    register_widget_crd(&client_for(&server)).await;
    let cost = cost_of(total, create_widgets(&server, "c", total)).await;
    println!(
        "creates (in memory, no watcher): {total} = {:.0}/s, {:.0} us CPU each ({:.0} us of it the server's)",
        cost.rate,
        cost.process_cpu * 1e6,
        cost.server_cpu * 1e6,
    );
    server.stop();
    cost
}

/// A Widget as a controller's typed cache holds it: what a kube-rs watch decodes each
/// event into.
#[derive(Clone, serde::Deserialize)]
struct Widget {
    metadata: kube::core::ObjectMeta,
    #[allow(dead_code)] // decoded as a controller would; nothing here reads it
    spec: WidgetSpec,
}

#[derive(Clone, serde::Deserialize)]
#[allow(dead_code)] // decoded as a controller would; nothing here reads it
struct WidgetSpec {
    size: i64,
    color: String,
}

/// What one watcher saw.
#[derive(Default)]
struct Seen {
    events: usize,
    /// Reads of the stream that ended a line (about one per chunk the server sent).
    reads: usize,
    /// Watches started again after the server closed one.
    resumes: usize,
}

/// What a watcher does with each event it reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Watching {
    /// Reads the bytes and counts the lines: what the server's fan-out costs a client at
    /// least (TLS and HTTP reads), nothing of its own.
    Draining,
    /// Decodes every event as a kube-rs watch does.
    Decoding,
}

impl Watching {
    fn label(self) -> &'static str {
        match self {
            Self::Draining => "draining",
            Self::Decoding => "decoding",
        }
    }
}

/// One watcher. Decoding, it does what a kube-rs watch (`Api::watch`,
/// `Client::request_events`) does with every event: the line copied out of the stream
/// into a string of its own, then decoded into a `WatchEvent` of the typed object, and it
/// checks that every event's resourceVersion is the one after the last (none lost, none
/// repeated: every write bumps it by one). Draining, it only counts the lines. It reads
/// the body itself (rather than through `request_events`) to count the reads, and resumes
/// from the last event it saw if the server closes the stream (a watcher too slow for the
/// fan-out is closed). Returns what it saw.
async fn watch(client: kube::Client, start: u64, expected: usize, how: Watching) -> Seen {
    let mut seen = Seen::default();
    // The start of a line cut by the end of a read.
    let mut partial: Vec<u8> = Vec::new();
    while seen.events < expected {
        let uri = format!(
            "/apis/bench.example.com/v1/namespaces/default/widgets?watch=true&timeoutSeconds=290&resourceVersion={}",
            start + seen.events as u64
        );
        let request = http::Request::get(uri).body(Vec::new()).unwrap();
        let mut body = client.request_stream(request).await.unwrap();
        partial.clear();
        while seen.events < expected {
            let read = body.fill_buf().await.unwrap_or_default();
            if read.is_empty() {
                break;
            }
            let consumed = read.len();
            let lines = match how {
                Watching::Draining => count_lines(read),
                Watching::Decoding => decode_lines(read, &mut partial, start + seen.events as u64),
            };
            seen.events += lines;
            seen.reads += usize::from(lines > 0);
            body.consume_unpin(consumed);
        }
        if seen.events < expected {
            seen.resumes += 1;
        }
    }
    seen
}

/// Counts the lines a read ends (a line cut by a closed stream is not counted: the
/// resumed watch sends it again). With memchr's vector search, as a client that only
/// splits lines would: the byte-by-byte count compiled to four bytes a step and took
/// about a tenth of the machine's CPU while 100 watchers drained, a cost of this
/// benchmark's client charged to the server's fan-out.
fn count_lines(read: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', read).count()
}

/// Decodes the lines a read ends (the first continuing `partial`) as kube-rs does, each
/// an ADDED Widget whose resourceVersion follows `last_rv`; returns how many.
fn decode_lines(read: &[u8], partial: &mut Vec<u8>, last_rv: u64) -> usize {
    let mut lines = 0;
    for piece in read.split_inclusive(|b| *b == b'\n') {
        partial.extend_from_slice(piece);
        if !piece.ends_with(b"\n") {
            break;
        }
        // As kube's LinesCodec: the line becomes a String of its own.
        let line = String::from_utf8(std::mem::take(partial)).unwrap();
        let event: WatchEvent<Widget> =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("watch event {line}: {e}"));
        let WatchEvent::Added(widget) = event else {
            panic!("only widgets are created: {line}");
        };
        lines += 1;
        let rv: u64 = widget
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse().ok())
            .expect("every event carries a resourceVersion");
        assert_eq!(rv, last_rv + lines as u64, "events lost or repeated");
    }
    lines
}

/// Creates/s with [`WATCHERS`] watchers of the resource attached, on a fresh server, and
/// the CPU a create costs with its fan-out (until every watcher saw it), of the whole
/// process and of the server's threads alone; prints them against `unwatched`.
async fn creates_with_watchers(events: usize, how: Watching, unwatched: Cost) -> Cost {
    let server = serve(ApiServer::builder().port(0)).await;
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
        watchers.push(tokio::spawn(watch(client, start_rv, events, how)));
    }
    // Let every watch connect first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let mut write_seconds = 0.0;
    let mut seen = Seen::default();
    let cost = cost_of(events, async {
        write_seconds = create_widgets(&server, "ev", events).await;
        for watcher in watchers {
            let one = tokio::time::timeout(Duration::from_secs(300), watcher)
                .await
                .expect("a watcher never saw every event")
                .unwrap();
            seen.events += one.events;
            seen.reads += one.reads;
            seen.resumes += one.resumes;
        }
        write_seconds
    })
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let label = how.label();
    println!(
        "creates (in memory, {WATCHERS} {label} watchers): {events} in {write_seconds:.2}s = {:.0}/s = {:.2}x creates/s without watchers",
        cost.rate,
        cost.rate / unwatched.rate
    );
    println!(
        "  CPU per create with its fan-out: whole process {:.0} us ({:.2}x without), the server's threads {:.0} us ({:.2}x without)",
        cost.process_cpu * 1e6,
        unwatched.process_cpu / cost.process_cpu,
        cost.server_cpu * 1e6,
        unwatched.server_cpu / cost.server_cpu,
    );
    #[allow(clippy::cast_precision_loss)]
    let per_read = seen.events as f64 / seen.reads.max(1) as f64;
    assert_eq!(
        seen.events,
        WATCHERS * events,
        "every watcher sees every event"
    );
    println!(
        "  every watcher saw every event {seconds:.2}s after the first create: {}/{} deliveries in {} reads ({per_read:.1} events a read); {} resumes",
        seen.events,
        WATCHERS * events,
        seen.reads,
        seen.resumes,
    );
    server.stop();
    cost
}

/// Rounds of creates with draining watchers in one run, each between two rounds without.
/// One round's ratio moved from 0.45x to 0.60x between runs of one binary on a quiet
/// VM (creates/s without watchers alone moved 1.3x within a run), so the target is read
/// on the median of three, each against the mean of the rounds just before and after it.
const DRAINING_ROUNDS: usize = 3;

/// The mean of two measures: the baseline of a round between them.
fn mean_cost(before: Cost, after: Cost) -> Cost {
    Cost {
        rate: f64::midpoint(before.rate, after.rate),
        process_cpu: f64::midpoint(before.process_cpu, after.process_cpu),
        server_cpu: f64::midpoint(before.server_cpu, after.server_cpu),
    }
}

/// The median of `ratios` (an odd count), and their least and greatest.
fn median_of(mut ratios: Vec<f64>) -> (f64, f64, f64) {
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    (median, ratios[0], ratios[ratios.len() - 1])
}

/// Runs the watchers part: rounds with draining watchers, each between rounds without
/// (the baseline of each is the mean of the two: this VM's speed drifts within a run),
/// then one with decoding watchers, and prints the ratios side by side.
async fn watchers_part(events: usize) {
    let mut before = creates_unwatched(events).await;
    let mut draining_rates = Vec::new();
    let mut draining_server = Vec::new();
    for _ in 0..DRAINING_ROUNDS {
        let draining = creates_with_watchers(events, Watching::Draining, before).await;
        let after = creates_unwatched(events).await;
        let unwatched = mean_cost(before, after);
        draining_rates.push(draining.rate / unwatched.rate);
        draining_server.push(unwatched.server_cpu / draining.server_cpu);
        before = after;
    }
    let decoding = creates_with_watchers(events, Watching::Decoding, before).await;
    let after = creates_unwatched(events).await;
    let unwatched = mean_cost(before, after);
    let (rate, rate_least, rate_most) = median_of(draining_rates);
    let (server, server_least, server_most) = median_of(draining_server);
    println!(
        "watchers, each round against the mean of the rounds without just before and after it:"
    );
    println!(
        "  creates/s with {WATCHERS} draining watchers: {rate:.2}x, the median of {DRAINING_ROUNDS} rounds ({rate_least:.2}x to {rate_most:.2}x) (the target, at least 0.5x: the server's fan-out with clients that only read)"
    );
    println!(
        "  creates/s with {WATCHERS} decoding watchers: {:.2}x, one round (adds the kube-rs decode of every event, a client's cost, on the same cores)",
        decoding.rate / unwatched.rate
    );
    println!(
        "  the server's threads' CPU per create: {server:.2}x draining ({server_least:.2}x to {server_most:.2}x), {:.2}x decoding (the server's cost alone, which load does not blur)",
        unwatched.server_cpu / decoding.server_cpu,
    );
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
        watchers_part(scaled(10_000)).await;
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

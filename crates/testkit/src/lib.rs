//! What the end-to-end tests of every crate share, so each suite's support
//! module keeps only what is its own:
//!
//! - [`server_with_crds`]: the embedded API server with every CRD of the
//!   `api` crate installed and the namespaces a scenario needs;
//! - [`local_market`]: a seeded [`LocalMarket`] on the given clock, to share
//!   across simulated manager restarts;
//! - [`eventually`]: polling with a deadline, the only way these tests wait,
//!   and [`wait_gone`] and [`delete_and_wait`] on top of it;
//! - [`claim_json`] and [`node_claim`]: a NodeClaim as a user writes it;
//!   [`create_cluster`] and [`set_cluster_ready`]: its Cluster, as the
//!   tenant cluster's runner reports it;
//! - [`ListAll::list_all`]: every object of a kind as a test reads it, in one line;
//! - [`http_get`]: a raw HTTP/1.1 GET, as probes and Prometheus see a port;
//! - [`kubectl`]: the real kubectl against a `TestServer`, and
//!   [`tool_missing`]: what a missing tool means (a failure under CI);
//! - [`apiserver_process`]: the standalone `apiserver` binary as a child process
//!   that a test kills and restarts, and a client of its debug endpoints.
//!
//! It panics on failure, as test code does: a setup that cannot be made is a
//! failed test, said with what could not be done.
// Test code: a setup that fails is a failed test, so it panics with what failed.
#![allow(clippy::missing_panics_doc, clippy::expect_used)]

pub mod apiserver_process;
pub mod kubectl;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use market::{Clock, LocalMarket, LocalMarketConfig};
use serde_json::{Value, json};

/// How long one step of a scenario may take before the test fails. Generous:
/// CI runs the suites on two shared cores; a passing step takes well under a second.
pub const WAIT: Duration = Duration::from_secs(60);

/// How often [`eventually`] looks again.
const POLL: Duration = Duration::from_millis(50);

/// Polls `check` until it returns `Some`, or fails the test with `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(what, WAIT, check).await
}

/// [`eventually`] with its own deadline.
pub async fn eventually_within<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?}: {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// An embedded API server with every CRD of the `api` crate and these namespaces.
pub async fn server_with_crds(namespaces: &[&str]) -> TestServer {
    let server = TestServer::start()
        .await
        .expect("the embedded API server starts");
    let client = server.client();
    install_crds(&client).await;
    create_namespaces(&client, namespaces).await;
    server
}

/// Creates every CRD of the `api` crate.
pub async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        if let Err(error) = crds.create(&PostParams::default(), &crd).await {
            panic!("install the CRD {name}: {error}");
        }
    }
}

/// Creates these namespaces.
pub async fn create_namespaces(client: &Client, names: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in names {
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some((*name).to_owned());
        if let Err(error) = namespaces.create(&PostParams::default(), &namespace).await {
            panic!("create the namespace {name}: {error}");
        }
    }
}

/// A local market with this seed and no bidders of its own (the Requester's
/// replace them), on `clock`. Share the `Arc` across manager restarts.
pub fn local_market(seed: u64, clock: Arc<dyn Clock>) -> Arc<LocalMarket> {
    local_market_with(
        LocalMarketConfig {
            seed,
            ..LocalMarketConfig::default()
        },
        clock,
    )
}

/// A local market of this configuration, on `clock`.
pub fn local_market_with(config: LocalMarketConfig, clock: Arc<dyn Clock>) -> Arc<LocalMarket> {
    Arc::new(LocalMarket::new(config, clock).expect("the local market opens"))
}

/// An answer of [`http_get`].
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The header lines, lowercased, as sent.
    pub headers: String,
    /// The body.
    pub body: String,
}

/// GET over a fresh HTTP/1.1 connection (`Connection: close`), as Prometheus
/// and the kubelet's probes see the manager's port. Fails the test when no
/// answer comes `within` that long.
pub async fn http_get(addr: std::net::SocketAddr, path: &str, within: Duration) -> HttpReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the HTTP port");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    let mut raw = String::new();
    tokio::time::timeout(within, stream.read_to_string(&mut raw))
        .await
        .expect("the HTTP port answers in time")
        .expect("read the answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let (status_line, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    HttpReply {
        status,
        headers: headers.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// Waits until `name` is gone from `api` (its finalizers done), or fails the test.
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(&format!("{name} gone"), || async move {
        api.get_opt(name)
            .await
            .expect("read the object")
            .is_none()
            .then_some(())
    })
    .await;
}

/// Deletes `name` from `api` and waits until it is gone (its finalizers done).
pub async fn delete_and_wait<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, &kube::api::DeleteParams::default())
        .await
        .unwrap_or_else(|error| panic!("delete {name}: {error}"));
    wait_gone(api, name).await;
}

/// What a test reads from a list: every object of the kind, or a failed test.
pub trait ListAll<K> {
    /// Every object `self` lists now (default list parameters).
    fn list_all(&self) -> impl Future<Output = Vec<K>> + Send;
}

impl<K> ListAll<K> for Api<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync,
{
    async fn list_all(&self) -> Vec<K> {
        self.list(&kube::api::ListParams::default())
            .await
            .expect("list the objects")
            .items
    }
}

/// The JSON of a NodeClaim `namespace/name` of `cpus` CPUs (2 GiB of memory,
/// 10 GB of disk, 100 Mbit/s, in DE) on the Cluster `cluster`, as a user writes it.
pub fn claim_json(namespace: &str, name: &str, cluster: &str, cpus: u32) -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterName": cluster,
            "resources": {"cpus": cpus, "memory": 2048, "disk": 10, "network": 100},
            "location": {"country": "DE"},
        },
    })
}

/// [`claim_json`] as a typed NodeClaim.
pub fn node_claim(namespace: &str, name: &str, cluster: &str, cpus: u32) -> api::NodeClaim {
    serde_json::from_value(claim_json(namespace, name, cluster, cpus)).expect("a valid NodeClaim")
}

/// Creates the running Cluster `namespace/name` of the account `account`.
pub async fn create_cluster(
    client: &Client,
    namespace: &str,
    name: &str,
    account: &str,
) -> api::Cluster {
    let mut cluster = api::Cluster::new(
        name,
        api::ClusterSpec {
            account: account.to_owned(),
            running: true,
        },
    );
    cluster.metadata.namespace = Some(namespace.to_owned());
    Api::<api::Cluster>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap_or_else(|error| panic!("create the Cluster {namespace}/{name}: {error}"))
}

/// Reports the Cluster `namespace/name` Ready at `url`, with the CA `ca_data`
/// (base64 PEM) when given, as the tenant cluster's runner would.
pub async fn set_cluster_ready(
    client: &Client,
    namespace: &str,
    name: &str,
    url: &str,
    ca_data: Option<&str>,
) {
    let mut status = json!({"phase": "Ready", "url": url});
    if let Some(ca_data) = ca_data {
        status["caData"] = json!(ca_data);
    }
    Api::<api::Cluster>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::apply("test/cluster-runner").force(),
            &Patch::Apply(json!({
                "apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
                "metadata": {"name": name},
                "status": status,
            })),
        )
        .await
        .unwrap_or_else(|error| panic!("report the Cluster {namespace}/{name} Ready: {error}"));
}

/// Whether the tests run under CI, where a missing tool is a failure, not a skip.
#[must_use]
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A required tool is missing: under CI the test fails; elsewhere it prints
/// why and the caller returns early.
pub fn tool_missing(what: &str) {
    assert!(!under_ci(), "CI=true and {what}");
    eprintln!("SKIPPED: {what} (set CI=true to make this a failure)");
}

/// Reads a child process's `pipe` line by line into `lines` on a thread of
/// its own (so a chatty child never blocks on a full pipe), until it closes.
pub fn read_lines(
    pipe: impl std::io::Read + Send + 'static,
    lines: &Arc<std::sync::Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<()> {
    use std::io::BufRead as _;
    let lines = Arc::clone(lines);
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            lines.lock().expect("the lines are not poisoned").push(line);
        }
    })
}

/// The phase of every write in `history` that changed the status of `name`
/// (of the resource whose path ends in `resource`), in order ("none" for a
/// status without a phase): how a test counts an object's status writes.
pub fn status_writes(
    history: &[apiserver::testing::HistoryEntry],
    resource: &str,
    name: &str,
) -> Vec<String> {
    let mut last = Value::Null;
    let mut phases = Vec::new();
    for entry in history {
        if entry.name != name || !entry.resource.ends_with(resource) {
            continue;
        }
        let status = entry.object()["status"].clone();
        if status != last && !status.is_null() {
            phases.push(status["phase"].as_str().unwrap_or("none").to_owned());
            last = status;
        }
    }
    phases
}

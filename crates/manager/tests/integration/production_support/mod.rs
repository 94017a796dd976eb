//! Fixtures of the production tests: an embedded API server with the CRDs, a
//! shared local market, manager replicas run through the real `run` path
//! ([`manager::run::run_process`]: HTTP port, leader election, the wiring) each
//! on its own tokio runtime (so killing one is process death), and readers for
//! the request log and the Prometheus text.

pub mod process;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use api::{ComputeContract, NodeClaim, NodeClaimPhase};
use apiserver::audit::RequestRecord;
use apiserver::testing::TestServer;
use controllers::market_adapter::Injected;
use controllers::requester::Markets;
use controllers::{Clock, SystemClock};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use manager::http::HttpServer;
use manager::leader::LeaderConfig;
use manager::market_port::MarketPort;
use manager::run::{Process, run_process};
use manager::shutdown::Shutdown;
use manager::wiring::ControllerOptions;
use market::{ContractKey, LocalMarket};
use serde_json::json;

pub use testkit::eventually;

/// The tenant namespace of the Clusters and claims.
pub const NS: &str = "tenant-a";
/// Where Infras, ComputeContracts, join Secrets, the Requester and the Lease live.
pub const CONTRACT_NS: &str = api::DEFAULT_CONTRACT_NAMESPACE;

/// The Lease the replicas elect on (the default of `--lease-name`).
pub const LEASE: &str = manager::leader::DEFAULT_LEASE_NAME;
/// Short leases keep a failover to a few seconds.
pub const LEASE_DURATION: Duration = Duration::from_secs(3);
/// Renewal period of the short leases.
pub const LEASE_RENEW: Duration = Duration::from_secs(1);

/// The embedded API server, a client without identity, and the shared market.
pub struct World {
    pub server: TestServer,
    pub client: Client,
    pub market: Arc<LocalMarket>,
}

impl World {
    /// A server with the namespaces; the CRDs only when `crds` (readiness tests start without).
    pub async fn start(crds: bool) -> Self {
        crate::support::logs::capture();
        crate::support::logs::dump_on_panic();
        let server = TestServer::start().await.unwrap();
        let client = server.client();
        testkit::create_namespaces(&client, &[NS, CONTRACT_NS]).await;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let market = testkit::local_market(7, clock);
        let world = Self {
            server,
            client,
            market,
        };
        if crds {
            world.install_crds().await;
        }
        world
    }

    pub async fn install_crds(&self) {
        testkit::install_crds(&self.client).await;
    }

    /// The Requester `root`: three bidders that boot in `boot_millis`, its
    /// market state in `state_dir` when given (so it outlives a process).
    pub async fn create_requester(&self, boot_millis: u32, state_dir: Option<&Path>) {
        let mut local = json!({"seed": 7, "bidders": [
            {"did": "did:web:cheap.example", "cost": 90, "currency": "EUR",
             "capacity": 6, "bootDelayMillis": boot_millis},
            {"did": "did:web:fast.example", "cost": 120, "currency": "EUR",
             "capacity": 6, "bootDelayMillis": boot_millis},
        ]});
        if let Some(dir) = state_dir {
            local["stateDir"] = json!(dir.display().to_string());
        }
        crate::support::create_root_requester(&self.client, 20, json!({"local": local})).await;
    }

    /// A Cluster reported Ready with an endpoint and a CA.
    pub async fn create_ready_cluster(&self, name: &str) {
        create_ready_cluster(&self.client, name).await;
    }

    pub fn claims(&self) -> Api<NodeClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates claims of 2 CPUs on `cluster`.
    pub async fn create_claims(&self, cluster: &str, names: &[&str]) {
        for name in names {
            self.claims()
                .create(
                    &PostParams::default(),
                    &testkit::node_claim(NS, name, cluster, 2),
                )
                .await
                .unwrap();
        }
    }

    pub async fn claim_phase(&self, name: &str) -> Option<NodeClaimPhase> {
        crate::support::claim_phase(&self.claims(), name).await
    }

    pub async fn wait_joined(&self, names: &[&str]) {
        crate::support::wait_joined(&self.claims(), names).await;
    }

    pub async fn wait_claim_gone(&self, name: &str) {
        testkit::wait_gone(&self.claims(), name).await;
    }

    /// The market key of a claim's ComputeContract, once it has one.
    pub async fn contract_key(&self, claim: &str) -> ContractKey {
        eventually(&format!("a contract for {claim}"), || async move {
            let uid = self.claims().get(claim).await.ok()?.uid()?;
            let entry = api::names::entry_name(&uid);
            let contracts: Api<ComputeContract> = Api::namespaced(self.client.clone(), CONTRACT_NS);
            let listed = contracts
                .list(
                    &ListParams::default()
                        .labels(&format!("{}={entry}", api::names::CONTRACT_LABEL)),
                )
                .await
                .ok()?;
            let contract = listed.items.into_iter().next()?;
            Some(ContractKey::new(CONTRACT_NS, contract.name_any()))
        })
        .await
    }

    /// Who holds the Lease now.
    pub async fn lease_holder(&self) -> Option<String> {
        Api::<Lease>::namespaced(self.client.clone(), CONTRACT_NS)
            .get_opt(LEASE)
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    }

    /// Every request of `agent` other than to the Lease, with its place in the log.
    pub fn work_of(&self, agent: &str) -> Vec<(usize, RequestRecord)> {
        self.server
            .requests()
            .into_iter()
            .enumerate()
            .filter(|(_, r)| r.user_agent == agent && r.resource != "leases")
            .collect()
    }

    /// The writes among [`World::work_of`].
    pub fn writes_of(&self, agent: &str) -> Vec<(usize, RequestRecord)> {
        self.work_of(agent)
            .into_iter()
            .filter(|(_, r)| {
                matches!(
                    r.verb.as_str(),
                    "create" | "update" | "patch" | "delete" | "deletecollection"
                )
            })
            .collect()
    }
}

/// A Cluster in [`NS`] reported Ready with an endpoint and a CA, as the
/// tenant cluster's runner would; the production and chaos suites share it.
pub async fn create_ready_cluster(client: &Client, name: &str) {
    testkit::create_cluster(client, NS, name, "did:plc:tenant").await;
    let ca_data = crate::support::ca_data(name);
    testkit::set_cluster_ready(client, NS, name, crate::support::URL, Some(&ca_data)).await;
}

/// The shutdown deadline of a replica: longer than [`testkit::WAIT`], so a
/// replica that stops within WAIT stopped gracefully, not by the deadline.
pub const REPLICA_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(120);

/// One manager replica on its own runtime: dropping or [`Replica::kill`]ing it
/// stops every task it started at once, without releasing the Lease.
pub struct Replica {
    /// The User-Agent of every request it makes: how the request log tells replicas apart.
    pub agent: String,
    pub http: SocketAddr,
    /// Its market port (the atproto market's submitBid and submitEvent).
    pub market_port: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    /// Its shutdown, as SIGTERM would trigger it.
    shutdown: Shutdown,
    /// Resolves when `run_process` returned.
    exited: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Replica {
    /// Starts `manager run` in this process: election on [`LEASE`] unless `elect`
    /// is false, markets on `market` when given (else built from the Requester's spec).
    pub async fn start(
        world: &World,
        identity: &str,
        market: Option<Arc<LocalMarket>>,
        elect: bool,
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name(identity)
            .build()
            .unwrap();
        let agent = format!("socialweb-manager/{identity}");
        let config = world.server.config();
        let election = elect.then(|| LeaderConfig {
            namespace: CONTRACT_NS.to_owned(),
            lease_name: LEASE.to_owned(),
            identity: identity.to_owned(),
            duration: LEASE_DURATION,
            renew_period: LEASE_RENEW,
        });
        let (bound_tx, bound) = tokio::sync::oneshot::channel();
        let (exited_tx, exited) = tokio::sync::oneshot::channel();
        let header = agent.clone();
        // Far longer than any test waits: a graceful stop must not need it.
        let shutdown = Shutdown::new(REPLICA_SHUTDOWN_DEADLINE);
        let process_shutdown = shutdown.clone();
        runtime.spawn(async move {
            // Built on this runtime: the client's background tasks must die with it.
            let client = client_for(config, &header);
            let clock: Arc<dyn Clock> = Arc::new(SystemClock);
            let markets = Arc::new(match market {
                Some(market) => Markets::with_injected(Arc::clone(&clock), Injected::Local(market)),
                None => Markets::new(Arc::clone(&clock)),
            });
            let http = HttpServer::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let market_port = MarketPort::bind("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let _ = bound_tx.send((http.local_addr(), market_port.local_addr()));
            let process = Process {
                client,
                clock,
                markets,
                http,
                market_port: Some(market_port),
                shutdown: process_shutdown,
            };
            if let Err(error) = run_process(process, ControllerOptions::default(), election).await {
                tracing::error!("replica stopped: {error:#}");
            }
            let _ = exited_tx.send(());
        });
        let (http, market_port) = bound.await.unwrap();
        Self {
            agent,
            http,
            market_port,
            runtime: Some(runtime),
            shutdown,
            exited: Some(exited),
        }
    }

    /// What SIGTERM does, in-process: the shutdown is triggered and the
    /// replica must return on its own, its controllers stopped by that same
    /// shutdown, long before [`REPLICA_SHUTDOWN_DEADLINE`] would cut them.
    pub async fn stop_gracefully(&mut self) {
        self.shutdown.trigger();
        let exited = self.exited.take().expect("a running replica");
        tokio::time::timeout(testkit::WAIT, exited)
            .await
            .expect("the replica stopped without waiting for its deadline")
            .expect("run_process returned");
    }

    /// Process death: every task stops where it is; the Lease is not released.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let reply = testkit::http_get(self.http, path, Duration::from_secs(10)).await;
        (reply.status, reply.body)
    }

    /// The `error` a push to the market port is answered with (no JWT: a
    /// leader's inbox refuses it, a follower does not look at it), or
    /// `None` when the port does not answer.
    pub async fn market_port_error(&self) -> Option<String> {
        let url = format!(
            "http://{}/xrpc/com.publicdomainrelay.temp.market.submitBid",
            self.market_port
        );
        let answer = reqwest::Client::new()
            .post(url)
            .json(&serde_json::json!({}))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .ok()?;
        let body: serde_json::Value = answer.json().await.ok()?;
        body["error"].as_str().map(str::to_owned)
    }

    /// `/metrics`, parsed.
    pub async fn metrics(&self) -> Metrics {
        let (status, body) = self.get("/metrics").await;
        assert_eq!(status, 200, "/metrics answered {status}: {body}");
        Metrics::parse(&body)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A client of `config` (the test server's) that says `agent` in every request's
/// User-Agent (kube sets none of its own, so this is the only one the server sees).
pub fn client_for(mut config: kube::Config, agent: &str) -> Client {
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(agent).unwrap(),
    ));
    Client::try_from(config).unwrap()
}

/// A `/metrics` answer checked against the OpenMetrics text format: every
/// sample belongs to a family declared by `# TYPE`, has well-formed labels and
/// a number, and the text ends with `# EOF`.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Value by series (`name{label="value",...}` exactly as exposed).
    pub samples: BTreeMap<String, f64>,
    /// Type by family name.
    pub families: BTreeMap<String, String>,
}

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let mut samples = BTreeMap::new();
        let mut families = BTreeMap::new();
        let mut saw_eof = false;
        for line in text.lines() {
            assert!(!saw_eof, "text after # EOF: {line:?}");
            if line == "# EOF" {
                saw_eof = true;
                continue;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                let mut words = rest.splitn(3, ' ');
                let (keyword, family) = (words.next().unwrap(), words.next().unwrap());
                assert!(valid_name(family), "bad family name in {line:?}");
                match keyword {
                    "TYPE" => {
                        families.insert(family.to_owned(), words.next().unwrap().to_owned());
                    }
                    "HELP" | "UNIT" => {}
                    other => panic!("unknown metadata {other:?} in {line:?}"),
                }
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample has a value");
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("not a number in {line:?}"));
            let name = series.split('{').next().unwrap();
            assert!(valid_name(name), "bad metric name in {line:?}");
            if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
                assert!(valid_labels(labels), "bad labels in {line:?}");
            }
            let family = ["_total", "_bucket", "_count", "_sum", "_created", "_info"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| families.contains_key(*base))
                .unwrap_or(name);
            assert!(families.contains_key(family), "no # TYPE for {line:?}");
            assert!(
                samples.insert(series.to_owned(), value).is_none(),
                "series twice: {series}"
            );
        }
        assert!(saw_eof, "the text does not end with # EOF");
        Self { samples, families }
    }

    /// The value of one series, 0 when absent (a counter not yet touched).
    pub fn value(&self, series: &str) -> f64 {
        self.samples.get(series).copied().unwrap_or(0.0)
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `{k="v",k2="v2"}` with escaped quotes allowed inside values.
fn valid_labels(labels: &str) -> bool {
    let Some(inner) = labels.strip_prefix('{').and_then(|l| l.strip_suffix('}')) else {
        return false;
    };
    let mut rest = inner;
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once("=\"") else {
            return false;
        };
        if !valid_name(key) {
            return false;
        }
        let mut escaped = false;
        let Some(end) = after.char_indices().find_map(|(i, c)| {
            let closes = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            closes.then_some(i)
        }) else {
            return false;
        };
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    true
}

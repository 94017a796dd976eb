//! The chaos scenario's world: the standalone `apiserver` binary on a data
//! directory with its debug endpoints, `manager run` processes, a local market
//! kept in a state directory (so guests can be counted after every manager is
//! dead), and the [`Chaos`] driver that injects faults, forces compactions and
//! kills processes while the scenario runs.
//!
//! The scenario's own requests go through the same faulty server: every write
//! it makes is retried until the server says it happened ([`persist`]).

pub mod driver;

use std::path::{Path, PathBuf};
use std::time::Duration;

use api::{Cluster, NodeClaim, NodeClaimPhase};
use apiserver::faults::FaultConfig;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use market::{LocalMarket, LocalMarketConfig};
use serde_json::json;
use testkit::apiserver_process::{ApiServerProcess, DebugClient, apiserver_binary};

/// The tenant namespace.
pub const NS: &str = "tenant-a";
/// Where Infras, ComputeContracts, join Secrets and the Requester live.
pub const CONTRACT_NS: &str = api::DEFAULT_CONTRACT_NAMESPACE;
/// The one Cluster the claims join.
pub const CLUSTER: &str = "c1";
/// The storage key of ComputeContracts, the resource whose history the server keeps.
pub const CONTRACTS: &str = "socialweb.computer/computecontracts";
/// The market's seed (also the Requester's).
const SEED: u64 = 7;

/// The size and pace of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Claims at the top of the scale-up.
    pub peak: usize,
    /// Claims kept by the scale-down.
    pub plateau: usize,
    /// How long each manager process lives before its SIGKILL, in turn.
    pub manager_lifetimes: Vec<Duration>,
    /// Every third kill the next process has a new identity (a new pod, which
    /// waits out the dead one's Lease); otherwise the same one (a container
    /// restarted in its pod, which takes its Lease back at once).
    pub new_identity_every: usize,
    /// How often the server is told to compact.
    pub compact_every: Duration,
    /// What the server injects while the scenario runs.
    pub faults: FaultConfig,
    /// How long each phase may take to converge with the faults still on.
    pub deadlines: Deadlines,
}

/// How long each phase may take to converge, faults and kills going on.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// 0 -> peak, every claim Joined.
    pub up: Duration,
    /// peak -> plateau, the deleted claims gone.
    pub down: Duration,
    /// plateau -> 0 and the Cluster deleted: nothing left.
    pub zero: Duration,
}

/// The faults of every run: 5 % of requests fail (409, 500, 503), 5 % of the
/// writes that get through are applied and answered 500, and every watch is
/// cut after 2.5 s (managers live longer than that).
pub fn chaos_faults() -> FaultConfig {
    FaultConfig {
        conflict_rate: 0.02,
        internal_error_rate: 0.015,
        unavailable_rate: 0.015,
        applied_error_rate: 0.05,
        drop_watch_after: Some(Duration::from_millis(2500)),
        ..FaultConfig::default()
    }
}

/// A client of the server, its debug client, and the market's state directory.
/// (The server process itself belongs to the [`driver`], which kills it.)
pub struct World {
    pub client: Client,
    pub debug: DebugClient,
    pub market_dir: PathBuf,
    server_log: PathBuf,
    _dir: tempfile::TempDir,
}

impl World {
    /// Starts the server with its debug endpoints and the history of
    /// ComputeContracts, installs the CRDs, the namespaces, the Requester and a
    /// Ready Cluster, with no faults yet.
    pub async fn start() -> (Self, ApiServerProcess) {
        let dir = tempfile::tempdir().unwrap();
        let server = ApiServerProcess::start(
            &apiserver_binary(),
            &dir.path().join("apiserver"),
            &dir.path().join("kubeconfig"),
            &[
                "--debug-endpoints",
                "--debug-history",
                "computecontracts.socialweb.computer",
            ],
        );
        let client = client_of(&server).await;
        let market_dir = dir.path().join("market");
        let world = Self {
            debug: DebugClient::new(client.clone()),
            client,
            market_dir,
            server_log: server.log_path(),
            _dir: dir,
        };
        testkit::install_crds(&world.client).await;
        testkit::create_namespaces(&world.client, &[NS, CONTRACT_NS]).await;
        world.create_requester().await;
        world.create_ready_cluster().await;
        (world, server)
    }

    /// The Requester `root` on a local market with room for every claim.
    async fn create_requester(&self) {
        let market = json!({"local": {
            "seed": SEED,
            "stateDir": self.market_dir.display().to_string(),
            "bidders": [
                {"did": "did:web:cheap.example", "cost": 90, "currency": "EUR",
                 "capacity": 250, "bootDelayMillis": 200},
                {"did": "did:web:fast.example", "cost": 120, "currency": "EUR",
                 "capacity": 250, "bootDelayMillis": 0},
            ],
        }});
        crate::support::create_root_requester(&self.client, 50, market).await;
    }

    async fn create_ready_cluster(&self) {
        crate::production_support::create_ready_cluster(&self.client, CLUSTER).await;
    }

    pub fn claims(&self) -> Api<NodeClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn clusters(&self) -> Api<Cluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates `names` as claims of 2 CPUs on the Cluster, through the faults.
    pub async fn create_claims(&self, names: &[String]) {
        for name in names {
            let claim = &testkit::node_claim(NS, name, CLUSTER, 2);
            persist(&format!("create claim {name}"), || async move {
                match self.claims().create(&PostParams::default(), claim).await {
                    Ok(_) => Ok(()),
                    // An earlier attempt was applied and answered with an error.
                    Err(kube::Error::Api(s)) if s.reason == "AlreadyExists" => Ok(()),
                    Err(e) => Err(e),
                }
            })
            .await;
        }
    }

    /// Deletes `names` (claims), through the faults.
    pub async fn delete_claims(&self, names: &[String]) {
        for name in names {
            persist(&format!("delete claim {name}"), || {
                delete_ignoring_missing(self.claims(), name)
            })
            .await;
        }
    }

    /// Deletes the Cluster, through the faults.
    pub async fn delete_cluster(&self) {
        persist("delete the Cluster", || {
            delete_ignoring_missing(self.clusters(), CLUSTER)
        })
        .await;
    }

    /// The claims now (None when the list failed), as `(name, phase)`.
    pub async fn claim_phases(&self) -> Option<Vec<(String, Option<NodeClaimPhase>)>> {
        let claims = self.claims().list(&ListParams::default()).await.ok()?;
        Some(
            claims
                .items
                .iter()
                .map(|c| (c.name_any(), c.status.as_ref().and_then(|s| s.phase)))
                .collect(),
        )
    }

    /// The local market on its state directory; only once no manager runs.
    pub fn market(&self) -> LocalMarket {
        LocalMarket::new(
            LocalMarketConfig {
                seed: SEED,
                state_dir: Some(self.market_dir.clone()),
                ..LocalMarketConfig::default()
            },
            std::sync::Arc::new(market::SystemClock),
        )
        .unwrap()
    }

    /// Copies the server's log next to the managers' when the test is failing.
    pub fn keep_server_log(&self) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-logs");
        let file = dir.join(format!("{}-apiserver.log", std::process::id()));
        if std::fs::create_dir_all(&dir).is_ok() && std::fs::copy(&self.server_log, &file).is_ok() {
            eprintln!("the API server's log is in {}", file.display());
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.keep_server_log();
        }
    }
}

/// A client from the server's kubeconfig; a request that hangs fails in 10 s,
/// as one to a killed server would.
pub async fn client_of(server: &ApiServerProcess) -> Client {
    let mut config = server.config().await;
    config.read_timeout = Some(Duration::from_secs(10));
    Client::try_from(config).unwrap()
}

async fn delete_ignoring_missing<K>(api: Api<K>, name: &str) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Retries `attempt` until it succeeds: the scenario's own writes meet the
/// same faults and server deaths as the manager's.
pub async fn persist<F, Fut>(what: &str, mut attempt: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + testkit::WAIT;
    loop {
        match attempt().await {
            Ok(()) => return,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: still failing after {:?}: {e}",
                testkit::WAIT
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Claim names `w000`.. for `range`.
pub fn claim_names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("w{i:03}")).collect()
}

//! The embedded API server with the manager's three controllers, and the
//! helpers the NodeClaim end-to-end tests share.

pub mod lag;

use std::sync::Arc;
use std::time::Duration;

use api::{
    Cluster, ComputeContract, LocalBidder, NodeClaim, NodeClaimPhase, Requester, RequesterSpec,
};
use apiserver::testing::TestServer;
use controllers::market_adapter::Injected;
use controllers::metrics::Metrics;
use controllers::requester::{self, Markets, Timing};
use controllers::{Clock, SharedCaches, SystemClock, infra, nodeclaim};
use kube::Client;
use kube::api::{Api, PostParams};
use market::{LocalMarket, LocalMarketConfig};
use tokio::task::JoinHandle;

pub const NS: &str = "tenant-a";
/// A second tenant.
pub const OTHER_NS: &str = "tenant-b";
pub const CONTRACT_NS: &str = "socialweb-system";
pub const URL: &str = "https://c1.tenant-a.example:6443";
pub const CA: &str = "Q0EtU0VDUkVULUUyRQ==";

pub struct Env {
    pub server: TestServer,
    /// The test's own client: never delayed.
    pub client: Client,
    /// What the controllers talk through (a lagging client in some scenarios).
    manager_client: Client,
    clock: Arc<dyn Clock>,
    /// Shared across restarts of the controllers, as a real market outlives the manager.
    pub market: Arc<LocalMarket>,
    /// Where the NodeClaim controller counts.
    pub metrics: Metrics,
    tasks: Vec<JoinHandle<()>>,
}

/// What a scenario changes of the default environment.
#[derive(Default)]
pub struct Setup {
    /// The market (default: seed 7, nodes register at once).
    pub market: Option<LocalMarketConfig>,
    /// Every NodeClaim watch event reaches the controllers this late (a stale cache).
    pub claim_watch_lag: Option<Duration>,
    /// The NodeClaim controller's metrics (default: unregistered).
    pub metrics: Option<Metrics>,
}

impl Env {
    /// Starts the manager's three controllers over fresh shared caches.
    pub fn start_manager(&mut self) {
        self.start_controllers(true);
    }

    /// Starts the Infra and Requester controllers only: nothing composes or
    /// restores an Infra, so a test sees what the Infra controller alone
    /// does with a hand edit.
    pub fn start_without_nodeclaim_controller(&mut self) {
        self.start_controllers(false);
    }

    fn start_controllers(&mut self, with_nodeclaim: bool) {
        let client = &self.manager_client;
        let clock = &self.clock;
        let markets = Arc::new(Markets::with_injected(
            Arc::clone(clock),
            Injected::Local(Arc::clone(&self.market)),
        ));
        let mut requester_ctx =
            requester::Context::new(client.clone(), Arc::clone(clock), markets, CONTRACT_NS);
        requester_ctx.timing = fast_timing();
        let caches = SharedCaches::new(client.clone(), CONTRACT_NS);
        let infra_ctx =
            Arc::new(infra::IDENTITY.context(client.clone(), Arc::clone(clock), CONTRACT_NS));
        let mut claim_ctx =
            nodeclaim::IDENTITY.context(client.clone(), Arc::clone(clock), CONTRACT_NS);
        claim_ctx.metrics = self.metrics.clone();
        let claim_ctx = Arc::new(claim_ctx);
        let infra_run = infra::controller(infra_ctx, &caches);
        let claim_run = with_nodeclaim.then(|| nodeclaim::controller(claim_ctx, &caches));
        let requester_run = requester::controller(Arc::new(requester_ctx), &caches);
        self.tasks.extend([
            tokio::spawn(caches.run()),
            tokio::spawn(infra_run),
            tokio::spawn(requester_run),
        ]);
        self.tasks.extend(claim_run.map(tokio::spawn));
    }

    /// Kills the manager at whatever instant it is at.
    pub fn kill_manager(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

pub async fn start() -> Env {
    start_with(Setup::default()).await
}

pub async fn start_with(setup: Setup) -> Env {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = testkit::server_with_crds(&[NS, OTHER_NS, CONTRACT_NS]).await;
    let client = server.client();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let market_config = setup.market.unwrap_or(LocalMarketConfig {
        seed: 7,
        ..LocalMarketConfig::default()
    });
    let market = testkit::local_market_with(market_config, Arc::clone(&clock));
    create_requester(&client).await;
    let manager_client = match setup.claim_watch_lag {
        Some(lag) => lag::lagging_watches(client.clone(), "nodeclaims", lag),
        None => client.clone(),
    };
    let mut env = Env {
        server,
        client,
        manager_client,
        clock,
        market,
        metrics: setup.metrics.unwrap_or_default(),
        tasks: Vec::new(),
    };
    env.start_manager();
    env
}

/// The root Requester of the contract namespace: two local bidders, a 1 s bid window.
pub async fn create_requester(client: &Client) {
    let bidder = |did: &str, cost: u64| LocalBidder {
        did: did.to_owned(),
        cost,
        currency: "EUR".to_owned(),
        capacity: 8,
        boot_delay_millis: 50,
        failure_rate: 0,
    };
    let mut requester = Requester::new(
        "root",
        RequesterSpec {
            market: api::Market {
                local: Some(api::requester::LocalMarket {
                    seed: 7,
                    bidders: vec![
                        bidder("did:web:cheap.example", 3),
                        bidder("did:web:dear.example", 9),
                    ],
                    state_dir: None,
                }),
                atproto: None,
            },
            bid_window_seconds: 1,
            max_in_flight: 10,
        },
    );
    requester.metadata.namespace = Some(CONTRACT_NS.to_owned());
    Api::<Requester>::namespaced(client.clone(), CONTRACT_NS)
        .create(&PostParams::default(), &requester)
        .await
        .unwrap();
}

/// The Requester's polls, shortened so a scenario takes seconds.
pub fn fast_timing() -> Timing {
    Timing {
        retry_base: Duration::from_secs(1),
        retry_max: Duration::from_secs(2),
        boot_poll: Duration::from_millis(200),
        register_poll: Duration::from_millis(200),
        guest_poll: Duration::from_secs(5),
        release_poll: Duration::from_millis(200),
        slot_wait: Duration::from_millis(500),
        release_failed_after: 5,
    }
}

pub use testkit::eventually;

/// How many ComputeContracts the server's history shows `change`d (Added:
/// machines rented; Deleted: contracts gone).
pub fn contracts_changed(env: &Env, change: apiserver::store::ChangeType) -> usize {
    env.server
        .history()
        .iter()
        .filter(|e| e.resource.ends_with("/computecontracts") && e.change == change)
        .count()
}

pub async fn create_cluster(client: &Client, name: &str, with_url: bool) -> Cluster {
    let created = testkit::create_cluster(client, NS, name, "did:plc:tenant").await;
    if with_url {
        set_cluster_url(client, name).await;
    }
    created
}

pub async fn set_cluster_url(client: &Client, name: &str) {
    testkit::set_cluster_ready(client, NS, name, URL, Some(CA)).await;
}

pub async fn create_claim(client: &Client, name: &str, cluster: &str, cpus: u32) -> NodeClaim {
    let claim = testkit::node_claim(NS, name, cluster, cpus);
    claims(client)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
}

/// The status of the claim `name`, which must have one.
pub async fn claim_status(client: &Client, name: &str) -> api::NodeClaimStatus {
    claims(client).get(name).await.unwrap().status.unwrap()
}

pub fn claims(client: &Client) -> Api<NodeClaim> {
    Api::namespaced(client.clone(), NS)
}

pub fn contracts(client: &Client) -> Api<ComputeContract> {
    Api::namespaced(client.clone(), CONTRACT_NS)
}

pub async fn phase_of(client: &Client, claim: &str) -> Option<NodeClaimPhase> {
    claims(client)
        .get_opt(claim)
        .await
        .ok()
        .flatten()?
        .status?
        .phase
}

pub async fn two_claims_joined(env: &Env) -> (NodeClaim, NodeClaim) {
    let client = &env.client;
    create_cluster(client, "c1", true).await;
    let a = create_claim(client, "worker-a", "c1", 2).await;
    let b = create_claim(client, "worker-b", "c1", 4).await;
    for name in ["worker-a", "worker-b"] {
        eventually(&format!("{name} Joined"), || async move {
            (phase_of(client, name).await == Some(NodeClaimPhase::Joined)).then_some(())
        })
        .await;
    }
    (a, b)
}

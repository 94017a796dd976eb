//! Shared fixtures of the manager's end-to-end tests: an embedded API server
//! with the CRDs, a Requester on a shared local market with fast bidders, and
//! the REAL manager wiring (`Controllers::start`) that a test can kill (drop
//! its `done`) and start again on the same server and market.

pub mod atproto_market;
pub mod invariants;
pub mod logs;

use std::sync::Arc;

use api::{Cluster, ComputeContract, Infra, NodeClaim, NodeClaimPhase, Requester};
use apiserver::testing::TestServer;
use controllers::market_adapter::Injected;
use controllers::requester::Markets;
use controllers::{Clock, SystemClock, metrics::Metrics};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource as _, ResourceExt};
use manager::wiring::{ControllerOptions, Controllers};
use market::{LocalMarket, LocalMarketConfig};
use serde_json::json;
use tokio::task::JoinHandle;

/// The tenant namespace most scenarios use.
pub const NS: &str = "tenant-a";
/// A second tenant.
pub const OTHER_NS: &str = "tenant-b";
/// Where Infras, ComputeContracts, join Secrets and the Requester live.
pub const CONTRACT_NS: &str = "socialweb-system";
/// The endpoint a ready Cluster reports.
pub const URL: &str = "https://c1.tenant-a.example:6443";
pub use testkit::eventually;

/// The CA a Cluster reports: unique per call so a leak is attributed to its test.
pub fn ca_data(tag: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!(
        "-----BEGIN CERTIFICATE-----\nSECRET-CA-{tag}-{}\n-----END CERTIFICATE-----\n",
        uuid::Uuid::new_v4()
    ))
}

/// The server, the shared market and the running manager.
pub struct Env {
    pub server: TestServer,
    pub client: Client,
    pub clock: Arc<dyn Clock>,
    pub market: Arc<LocalMarket>,
    /// What the manager runs with (kept across restarts).
    pub options: ControllerOptions,
    /// The atproto market the Requester uses instead of `market`, if any.
    pub atproto: Option<atproto_market::AtprotoEnv>,
    manager: Option<JoinHandle<()>>,
    /// The metrics of the manager running now (a new process, new series).
    metrics: prometheus_client::registry::Registry,
    /// Keeps the market port answering while the manager runs.
    inbound: Option<manager::market_port::InboundGuard>,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(manager) = self.manager.take() {
            manager.abort();
        }
        self.inbound = None;
    }
}

impl Env {
    /// A server with the CRDs and namespaces, the Requester `root`, and the manager running.
    pub async fn start() -> Self {
        Self::start_with_market(LocalMarketConfig {
            seed: 7,
            ..LocalMarketConfig::default()
        })
        .await
    }

    /// [`Env::start`] on a market of this configuration (the Requester's bidders replace its own).
    pub async fn start_with_market(market: LocalMarketConfig) -> Self {
        Self::start_with(market, ControllerOptions::default()).await
    }

    /// [`Env::start`] on this market, the manager running with these options.
    pub async fn start_with(market: LocalMarketConfig, options: ControllerOptions) -> Self {
        Self::start_on(market, options, None).await
    }

    /// [`Env::start`], but the Requester `root` uses an atproto market of
    /// fake bidders (plan 0013), reached over loopback HTTP.
    pub async fn start_atproto(offers: &[manager::fake_market::FakeOffer]) -> Self {
        Self::start_on(
            LocalMarketConfig::default(),
            ControllerOptions::default(),
            Some(offers),
        )
        .await
    }

    /// The server, the Requester `root` (on the local market, or on fake
    /// atproto bidders of these offers) and the manager running.
    async fn start_on(
        market: LocalMarketConfig,
        options: ControllerOptions,
        atproto_offers: Option<&[manager::fake_market::FakeOffer]>,
    ) -> Self {
        logs::capture();
        logs::dump_on_panic();
        let server = TestServer::start().await.unwrap();
        let client = server.client();
        manager::dev::install_crds(&client).await.unwrap();
        testkit::create_namespaces(&client, &[NS, OTHER_NS, CONTRACT_NS]).await;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let market = testkit::local_market_with(market, Arc::clone(&clock));
        let atproto = match atproto_offers {
            Some(offers) => Some(atproto_market::AtprotoEnv::start(&client, offers).await),
            None => None,
        };
        let mut env = Self {
            server,
            client,
            clock,
            market,
            options,
            atproto,
            manager: None,
            metrics: prometheus_client::registry::Registry::default(),
            inbound: None,
        };
        match &env.atproto {
            Some(atproto) => atproto.create_requester(&env.client).await,
            None => env.create_requester().await,
        }
        env.start_manager();
        env
    }

    /// The atproto market of an [`Env::start_atproto`] environment.
    pub fn atproto_env(&self) -> &atproto_market::AtprotoEnv {
        self.atproto.as_ref().expect("an atproto environment")
    }

    /// Starts the manager through the real wiring on this server and market.
    pub fn start_manager(&mut self) {
        assert!(self.manager.is_none(), "the manager is already running");
        let markets = Arc::new(Markets::with_injected(
            Arc::clone(&self.clock),
            Injected::Local(Arc::clone(&self.market)),
        ));
        // A new process: a new inbox, whose router the market port serves
        // until the manager is killed.
        self.inbound = self.atproto.as_ref().map(|atproto| {
            atproto
                .inbound
                .open(market::atproto::router(markets.inbox()))
        });
        self.metrics = prometheus_client::registry::Registry::default();
        let running = Controllers {
            client: self.client.clone(),
            clock: Arc::clone(&self.clock),
            markets,
            metrics: Metrics::register(&mut self.metrics),
            options: self.options.clone(),
            // Killed by dropping `done`, never stopped gracefully.
            stop: controllers::StopSignal::never(),
        }
        .start();
        self.manager = Some(tokio::spawn(running.done));
    }

    /// Kills the manager: its `done` future is dropped mid-flight.
    pub async fn kill_manager(&mut self) {
        let manager = self.manager.take().expect("a running manager");
        manager.abort();
        let _ = manager.await;
        self.inbound = None;
    }

    async fn create_requester(&self) {
        let market = json!({"local": {"seed": 7, "bidders": [
            {"did": "did:web:cheap.example", "cost": 90, "currency": "EUR",
             "capacity": 6, "bootDelayMillis": 100},
            {"did": "did:web:fast.example", "cost": 120, "currency": "EUR",
             "capacity": 6, "bootDelayMillis": 0},
            {"did": "did:web:slow.example", "cost": 150, "currency": "EUR",
             "capacity": 6, "bootDelayMillis": 200},
        ]}});
        create_root_requester(&self.client, 20, market).await;
    }

    /// The value of one series (name and labels) of the running manager's
    /// metrics, as Prometheus would scrape it.
    pub fn metric(&self, series: &str) -> Option<f64> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.metrics).ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
    }

    pub fn requesters(&self) -> Api<Requester> {
        Api::namespaced(self.client.clone(), CONTRACT_NS)
    }
    pub fn contracts(&self) -> Api<ComputeContract> {
        Api::namespaced(self.client.clone(), CONTRACT_NS)
    }
    pub fn infras(&self) -> Api<Infra> {
        Api::namespaced(self.client.clone(), CONTRACT_NS)
    }
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), CONTRACT_NS)
    }
    pub fn claims(&self, ns: &str) -> Api<NodeClaim> {
        Api::namespaced(self.client.clone(), ns)
    }
    pub fn clusters(&self, ns: &str) -> Api<Cluster> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Creates a Cluster; with `ready`, reports it Ready with an endpoint and a CA.
    pub async fn create_cluster(&self, ns: &str, name: &str, ready: bool) -> Cluster {
        let created = testkit::create_cluster(&self.client, ns, name, "did:plc:tenant").await;
        if ready {
            self.set_cluster_ready(ns, name).await;
        }
        created
    }

    pub async fn set_cluster_ready(&self, ns: &str, name: &str) {
        testkit::set_cluster_ready(&self.client, ns, name, URL, Some(&ca_data(name))).await;
    }

    /// Creates a claim owned (controller ownerReference) by `owner` when given.
    pub async fn create_claim(
        &self,
        ns: &str,
        name: &str,
        cluster: &str,
        cpus: u32,
        owner: Option<&Cluster>,
    ) -> NodeClaim {
        let mut claim = testkit::node_claim(ns, name, cluster, cpus);
        if let Some(owner) = owner {
            claim.metadata.owner_references = Some(vec![
                owner
                    .controller_owner_ref(&())
                    .expect("a Cluster with a uid"),
            ]);
        }
        self.claims(ns)
            .create(&PostParams::default(), &claim)
            .await
            .unwrap()
    }

    pub async fn claim_phase(&self, ns: &str, name: &str) -> Option<NodeClaimPhase> {
        claim_phase(&self.claims(ns), name).await
    }

    /// Waits until every named claim of `ns` is Joined.
    pub async fn wait_joined(&self, ns: &str, names: &[&str]) {
        wait_joined(&self.claims(ns), names).await;
    }

    /// A ready Cluster `c1` in [`NS`] with the claims `worker-a` (2 CPUs)
    /// and `worker-b` (4 CPUs) it owns.
    pub async fn two_claims(&self) -> (Cluster, NodeClaim, NodeClaim) {
        let cluster = self.create_cluster(NS, "c1", true).await;
        let a = self
            .create_claim(NS, "worker-a", "c1", 2, Some(&cluster))
            .await;
        let b = self
            .create_claim(NS, "worker-b", "c1", 4, Some(&cluster))
            .await;
        (cluster, a, b)
    }

    /// [`Env::two_claims`], both Joined.
    pub async fn two_joined(&self) -> (Cluster, NodeClaim, NodeClaim) {
        let (cluster, a, b) = self.two_claims().await;
        self.wait_joined(NS, &["worker-a", "worker-b"]).await;
        (cluster, a, b)
    }

    /// [`Env::two_joined`], then the names of the claims' ComputeContracts.
    pub async fn two_joined_contracts(&self) -> [String; 2] {
        let (_, a, b) = self.two_joined().await;
        let mut names = Vec::new();
        for claim in [&a, &b] {
            let contract = self.contract_of(claim).await.expect("a contract per claim");
            names.push(contract.name_any());
        }
        [names.remove(0), names.remove(0)]
    }

    /// Deletes the claim `name` of [`NS`] (its deletion then takes its course).
    pub async fn delete_claim(&self, name: &str) {
        self.claims(NS)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Deletes the claims of [`Env::two_joined`] and waits until they are
    /// gone. No garbage collector runs the test's way: once their Cluster is
    /// gone the claims go when deleted (the server's may have taken them already).
    pub async fn delete_two_claims(&self) {
        for name in ["worker-a", "worker-b"] {
            let _ = self.claims(NS).delete(name, &DeleteParams::default()).await;
            self.wait_gone(&self.claims(NS), name).await;
        }
    }

    /// Waits until `ns/name` of `api` is gone.
    pub async fn wait_gone<K>(&self, api: &Api<K>, name: &str)
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        testkit::wait_gone(api, name).await;
    }

    /// The DID of the bidder whose bid won the claim's contract.
    pub async fn winner_of(&self, claim: &NodeClaim) -> String {
        let contract = self.contract_of(claim).await.expect("a contract");
        contract.status.unwrap().winner.expect("a winner").bidder
    }

    /// The ComputeContract of a claim's entry, if any.
    pub async fn contract_of(&self, claim: &NodeClaim) -> Option<ComputeContract> {
        let entry = api::names::entry_name(&claim.uid().unwrap());
        self.contracts()
            .list(
                &kube::api::ListParams::default()
                    .labels(&format!("{}={entry}", api::names::CONTRACT_LABEL)),
            )
            .await
            .unwrap()
            .items
            .into_iter()
            .next()
    }
}

/// The phase of the claim `name`, if it is there and has one.
pub async fn claim_phase(claims: &Api<NodeClaim>, name: &str) -> Option<NodeClaimPhase> {
    claims.get_opt(name).await.ok().flatten()?.status?.phase
}

/// Waits until every named claim is Joined.
pub async fn wait_joined(claims: &Api<NodeClaim>, names: &[&str]) {
    for name in names {
        eventually(&format!("{name} Joined"), || async move {
            (claim_phase(claims, name).await == Some(NodeClaimPhase::Joined)).then_some(())
        })
        .await;
    }
}

/// Creates the Requester `root` in [`CONTRACT_NS`] on `market` (the JSON of
/// an `api::Market`), with a bid window of 1 s.
pub async fn create_root_requester(client: &Client, max_in_flight: u32, market: serde_json::Value) {
    let requester: Requester = serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Requester",
        "metadata": {"name": "root", "namespace": CONTRACT_NS},
        "spec": {"bidWindowSeconds": 1, "maxInFlight": max_in_flight, "market": market},
    }))
    .unwrap();
    Api::<Requester>::namespaced(client.clone(), CONTRACT_NS)
        .create(&PostParams::default(), &requester)
        .await
        .unwrap();
}

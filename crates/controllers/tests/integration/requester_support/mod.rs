//! End-to-end fixtures for the Requester controller: an embedded API server
//! with the CRDs, a shared local market, and a controller that can be killed
//! and started again.

use std::sync::Arc;
use std::time::Duration;

use api::{
    ComputeContract, ComputeContractPhase, ComputeContractSpec, LocalBidder, Location, Requester,
    RequesterSpec, Resources, Role,
};
use apiserver::testing::TestServer;
use controllers::market_adapter::Injected;
use controllers::requester::{self, Context, Markets, Timing};
use controllers::{Clock, SharedCaches, SystemClock};
use kube::api::{Api, Patch, PatchParams, PostParams};
use market::{ContractKey, LocalMarket};
use serde_json::json;
use tokio::task::JoinHandle;

pub const NS: &str = "socialweb-system";
/// The field manager the tests write contract specs with, as the Infra controller would.
pub const TEST_INFRA: &str = "test/infra";

pub struct Env {
    pub server: TestServer,
    pub client: kube::Client,
    pub clock: Arc<dyn Clock>,
    pub market: Arc<LocalMarket>,
    /// The markets of the controller started last.
    markets: std::sync::Mutex<Option<Arc<Markets>>>,
}

impl Env {
    pub async fn start() -> Self {
        let server = testkit::server_with_crds(&[NS]).await;
        let client = server.client();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let market = testkit::local_market(7, Arc::clone(&clock));
        Self {
            server,
            client,
            clock,
            market,
            markets: std::sync::Mutex::default(),
        }
    }

    /// A server and the controller running on it.
    pub async fn running() -> (Self, JoinHandle<()>) {
        let env = Self::start().await;
        let controller = env.start_controller();
        (env, controller)
    }

    /// A server, the controller running, and the Requester `root` with the
    /// one bidder `did:web:a` (cost 5) and a bid window of 1 s.
    pub async fn running_with_root() -> (Self, JoinHandle<()>) {
        let (env, controller) = Self::running().await;
        env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
            .await;
        (env, controller)
    }

    /// Starts the controller (and its caches) on the shared market; abort the
    /// handle to kill it mid-flight.
    pub fn start_controller(&self) -> JoinHandle<()> {
        self.start_controller_with(fast_timing())
    }

    /// [`Env::start_controller`] with its own timing.
    pub fn start_controller_with(&self, timing: Timing) -> JoinHandle<()> {
        self.start_controller_measured(timing, controllers::metrics::Metrics::default())
    }

    /// [`Env::start_controller_with`], counting into `metrics`.
    pub fn start_controller_measured(
        &self,
        timing: Timing,
        metrics: controllers::metrics::Metrics,
    ) -> JoinHandle<()> {
        let markets = Arc::new(Markets::with_injected(
            Arc::clone(&self.clock),
            Injected::Local(Arc::clone(&self.market)),
        ));
        *self.markets.lock().unwrap() = Some(Arc::clone(&markets));
        let mut ctx = Context::new(self.client.clone(), Arc::clone(&self.clock), markets, NS);
        ctx.timing = timing;
        ctx.metrics = metrics;
        let caches = SharedCaches::new(self.client.clone(), NS);
        let controller = requester::controller(Arc::new(ctx), &caches);
        let reflectors = caches.run();
        tokio::spawn(async move {
            futures::join!(controller, reflectors);
        })
    }

    /// How many contracts' RFP ids the running controller remembers for the
    /// Requester `name`.
    pub async fn remembered_rfps(&self, name: &str) -> usize {
        let requester = self.requesters().get(name).await.unwrap();
        let markets = self
            .markets
            .lock()
            .unwrap()
            .clone()
            .expect("a controller started");
        markets
            .existing(&requester)
            .expect("the Requester's market is built")
            .remembered_rfps()
    }

    pub fn contracts(&self) -> Api<ComputeContract> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn requesters(&self) -> Api<Requester> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn create_requester(&self, name: &str, bidders: Vec<LocalBidder>, window: u32) {
        let mut requester = Requester::new(
            name,
            RequesterSpec {
                market: api::Market {
                    local: Some(api::requester::LocalMarket {
                        seed: 7,
                        bidders,
                        state_dir: None,
                    }),
                    atproto: None,
                },
                bid_window_seconds: window,
                max_in_flight: 10,
            },
        );
        requester.metadata.namespace = Some(NS.to_owned());
        self.requesters()
            .create(&PostParams::default(), &requester)
            .await
            .unwrap();
    }

    pub async fn set_bidders(&self, name: &str, bidders: Vec<LocalBidder>) {
        let patch = json!({"spec": {"market": {"local": {"bidders": bidders}}}});
        self.requesters()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Creates a contract as the Infra controller would (ownerless here),
    /// with the release finalizer.
    pub async fn create_contract(&self, name: &str, ttl: u32) {
        let mut contract = ComputeContract::new(name, contract_spec(ttl));
        contract.metadata.namespace = Some(NS.to_owned());
        contract.metadata.finalizers =
            Some(vec![api::names::CONTRACT_RELEASE_FINALIZER.to_owned()]);
        let params = PostParams {
            field_manager: Some(TEST_INFRA.to_owned()),
            ..PostParams::default()
        };
        self.contracts().create(&params, &contract).await.unwrap();
    }

    /// [`Env::create_contract`], then waits until it is Deployed.
    pub async fn create_deployed(&self, name: &str, ttl: u32) -> ComputeContract {
        self.create_contract(name, ttl).await;
        self.wait_phase(name, ComputeContractPhase::Deployed).await
    }

    /// Sets `spec.release`, as the Infra controller does.
    pub async fn release(&self, name: &str) {
        let params = PatchParams {
            field_manager: Some(TEST_INFRA.to_owned()),
            ..PatchParams::default()
        };
        self.contracts()
            .patch(
                name,
                &params,
                &Patch::Merge(json!({"spec": {"release": true}})),
            )
            .await
            .unwrap();
    }

    /// Polls the contract until `done` holds; panics with its last state after `timeout`.
    pub async fn wait_contract(
        &self,
        name: &str,
        timeout: Duration,
        done: impl Fn(&ComputeContract) -> bool,
    ) -> ComputeContract {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let current = self.contracts().get_opt(name).await.unwrap();
            if let Some(c) = &current
                && done(c)
            {
                return c.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "contract {name} did not get there in {timeout:?}; last: {:#?}",
                current.map(|c| c.status)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the contract's Ready condition has this reason.
    pub async fn wait_ready_reason(&self, name: &str, reason: &str) -> ComputeContract {
        self.wait_contract(name, Duration::from_secs(5), |c| {
            c.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, "Ready").is_some_and(|r| r.reason == reason)
            })
        })
        .await
    }

    pub async fn wait_phase(&self, name: &str, phase: ComputeContractPhase) -> ComputeContract {
        self.wait_contract(name, Duration::from_secs(10), |c| {
            phase_of(c) == Some(phase)
        })
        .await
    }

    /// Polls until `done` is true.
    pub async fn wait_until(&self, what: &str, timeout: Duration, done: impl AsyncFn() -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what} did not happen in {timeout:?}; the last writes:\n{}",
                self.last_writes(40)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The server's last `count` writes to objects other than Events, one a
    /// line: what a wait that ran out was left waiting on.
    pub fn last_writes(&self, count: usize) -> String {
        let writes: Vec<String> = self
            .server
            .history()
            .into_iter()
            .filter(|e| !e.resource.ends_with("/events"))
            .map(|e| {
                let object = e.object();
                let meta = &object["metadata"];
                let ready = object["status"]["conditions"]
                    .as_array()
                    .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                    .map(|c| c["reason"].clone())
                    .unwrap_or_default();
                format!(
                    "{} {:?} {} {} phase={} ready={ready} deleting={} finalizers={}",
                    e.resource_version,
                    e.change,
                    e.resource,
                    e.name,
                    object["status"]["phase"],
                    !meta["deletionTimestamp"].is_null(),
                    meta["finalizers"]
                )
            })
            .collect();
        writes[writes.len().saturating_sub(count)..].join("\n")
    }
}

pub fn fast_timing() -> Timing {
    Timing {
        retry_base: Duration::from_secs(1),
        retry_max: Duration::from_secs(2),
        boot_poll: Duration::from_millis(200),
        register_poll: Duration::from_millis(500),
        guest_poll: Duration::from_secs(5),
        release_poll: Duration::from_millis(200),
        slot_wait: Duration::from_millis(500),
        release_failed_after: 5,
    }
}

pub fn bidder(did: &str, cost: u64) -> LocalBidder {
    LocalBidder {
        did: did.to_owned(),
        cost,
        currency: "EUR".to_owned(),
        capacity: 4,
        boot_delay_millis: 50,
        failure_rate: 0,
    }
}

pub fn contract_spec(ttl: u32) -> ComputeContractSpec {
    ComputeContractSpec {
        resources: Resources {
            cpus: 2,
            memory: 4096,
            disk: 20,
            network: 100,
        },
        location: Location {
            country: "DE".to_owned(),
            region: None,
        },
        role: Role::Worker,
        secrets_ref: None,
        owner_did: Some("did:web:tenant.example".to_owned()),
        adopt: None,
        node_join: None,
        release: false,
        ttl_seconds_after_finished: ttl,
    }
}

pub fn phase_of(c: &ComputeContract) -> Option<ComputeContractPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

pub fn key(name: &str) -> ContractKey {
    ContractKey::new(NS, name)
}

pub fn market_receipt(c: &ComputeContract) -> market::Receipt {
    let r = c.status.as_ref().unwrap().receipt.clone().unwrap();
    market::Receipt {
        uri: r.uri,
        cid: r.cid,
    }
}

//! End-to-end: the NodeClaim, Infra and Requester controllers on the embedded
//! API server, with the Requester running the local simulated market (its
//! guests boot in 50 ms and register their node right after).
//!
//! DESIGN.md section 6: SCALE-UP-TWO, SCALE-DOWN-ONE, CLAIM-RECREATED,
//! CLUSTER-DELETE, BAD-INPUT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use api::names::{
    CLUSTER_FINALIZER, CLUSTER_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL, JOIN_SECRET_TYPE,
    NODECLAIM_FINALIZER, entry_name,
};
use api::{
    Cluster, ClusterSpec, ComputeContract, ComputeContractPhase, Infra, LocalBidder, Location,
    NodeClaim, NodeClaimPhase, NodeClaimSpec, Requester, RequesterSpec, Resources,
};
use apiserver::testing::TestServer;
use controllers::nodeclaim::conditions::{INFRA_COMPOSED, reason};
use controllers::requester::{self, MarketClock, Markets, Timing};
use controllers::{Clock, SharedCaches, SystemClock, infra, nodeclaim};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use market::{LocalMarket, LocalMarketConfig};
use serde_json::json;
use tokio::task::JoinHandle;

const NS: &str = "tenant-a";
const CONTRACT_NS: &str = "socialweb-system";
const URL: &str = "https://c1.tenant-a.example:6443";
const CA: &str = "Q0EtU0VDUkVULUUyRQ==";
const WAIT: Duration = Duration::from_secs(20);

struct Env {
    server: TestServer,
    client: Client,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn start() -> Env {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in [NS, CONTRACT_NS] {
        let mut n = Namespace::default();
        n.metadata.name = Some(ns.into());
        namespaces.create(&PostParams::default(), &n).await.unwrap();
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let market = Arc::new(
        LocalMarket::new(
            LocalMarketConfig {
                seed: 7,
                ..LocalMarketConfig::default()
            },
            Arc::new(MarketClock(Arc::clone(&clock))),
        )
        .unwrap(),
    );
    let markets = Arc::new(Markets::with_local_market(Arc::clone(&clock), market));
    let mut requester_ctx =
        requester::Context::new(client.clone(), Arc::clone(&clock), markets, CONTRACT_NS);
    requester_ctx.timing = fast_timing();
    create_requester(&client).await;

    let caches = SharedCaches::new(client.clone(), CONTRACT_NS);
    let infra_ctx = Arc::new(infra::Context::new(
        client.clone(),
        Arc::clone(&clock),
        CONTRACT_NS,
    ));
    let claim_ctx = Arc::new(nodeclaim::Context::new(client.clone(), clock, CONTRACT_NS));
    let infra_run = infra::controller(infra_ctx, &caches);
    let claim_run = nodeclaim::controller(claim_ctx, &caches);
    let requester_run = requester::controller(Arc::new(requester_ctx), &caches);
    let tasks = vec![
        tokio::spawn(caches.run()),
        tokio::spawn(infra_run),
        tokio::spawn(claim_run),
        tokio::spawn(requester_run),
    ];
    Env {
        server,
        client,
        tasks,
    }
}

/// The root Requester of the contract namespace: two local bidders, a 1 s bid window.
async fn create_requester(client: &Client) {
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
fn fast_timing() -> Timing {
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

/// Polls `check` until it returns `Some`, or fails the test with `what`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create_cluster(client: &Client, name: &str, with_url: bool) -> Cluster {
    let api: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            account: "did:plc:tenant".into(),
            running: true,
        },
    );
    c.metadata.namespace = Some(NS.into());
    let created = api.create(&PostParams::default(), &c).await.unwrap();
    if with_url {
        set_cluster_url(client, name).await;
    }
    created
}

async fn set_cluster_url(client: &Client, name: &str) {
    let api: Api<Cluster> = Api::namespaced(client.clone(), NS);
    api.patch_status(
        name,
        &PatchParams::apply("demo").force(),
        &Patch::Apply(json!({
            "apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
            "metadata": {"name": name},
            "status": {"phase": "Ready", "url": URL, "caData": CA},
        })),
    )
    .await
    .unwrap();
}

async fn create_claim(client: &Client, name: &str, cluster: &str, cpus: u32) -> NodeClaim {
    let api: Api<NodeClaim> = Api::namespaced(client.clone(), NS);
    let mut c = NodeClaim::new(
        name,
        NodeClaimSpec {
            cluster_name: cluster.into(),
            resources: Resources {
                cpus,
                memory: 2048,
                disk: 10,
                network: 100,
            },
            location: Location {
                country: "DE".into(),
                region: None,
            },
            owner_did: None,
            adopt: None,
            join_grace_seconds: 900,
            loss_grace_seconds: 300,
        },
    );
    c.metadata.namespace = Some(NS.into());
    api.create(&PostParams::default(), &c).await.unwrap()
}

fn claims(client: &Client) -> Api<NodeClaim> {
    Api::namespaced(client.clone(), NS)
}

fn contracts(client: &Client) -> Api<ComputeContract> {
    Api::namespaced(client.clone(), CONTRACT_NS)
}

async fn phase_of(client: &Client, claim: &str) -> Option<NodeClaimPhase> {
    claims(client)
        .get_opt(claim)
        .await
        .ok()
        .flatten()?
        .status?
        .phase
}

async fn two_claims_joined(env: &Env) -> (NodeClaim, NodeClaim) {
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

#[tokio::test]
async fn scale_up_two() {
    let env = start().await;
    let client = &env.client;
    let (a, b) = two_claims_joined(&env).await;

    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    let list = infras
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}=c1")))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "exactly one Infra for the Cluster");
    let infra = &list.items[0];
    assert_eq!(infra.name_any(), api::names::infra_name(NS, "c1"));
    let all = contracts(client)
        .list(&ListParams::default().labels(&format!("{INFRA_NAME_LABEL}={}", infra.name_any())))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2, "one ComputeContract per claim");
    for claim in [&a, &b] {
        let entry = entry_name(&claim.uid().unwrap());
        let c = all
            .items
            .iter()
            .find(|c| c.labels()[CONTRACT_LABEL] == entry)
            .unwrap();
        let join = c.spec.node_join.as_ref().expect("nodeJoin on the contract");
        assert_eq!(join.api_server, URL);
        assert_eq!(c.spec.owner_did.as_deref(), Some("did:plc:tenant"));
        let secret_name = c.spec.secrets_ref.as_ref().unwrap().name.clone();
        assert_eq!(secret_name, format!("join-{entry}"));
        assert_eq!(
            c.status.as_ref().unwrap().phase,
            Some(ComputeContractPhase::Deployed)
        );
        let secret: Secret = Api::namespaced(client.clone(), CONTRACT_NS)
            .get(&secret_name)
            .await
            .unwrap();
        assert_eq!(secret.type_.as_deref(), Some(JOIN_SECRET_TYPE));
        let status = claims(client)
            .get(&claim.name_any())
            .await
            .unwrap()
            .status
            .unwrap();
        assert_eq!(status.infra.unwrap().compute_contract, c.name_any());
        assert!(status.guest.unwrap().node_id.is_some(), "the node joined");
    }
    let cluster: Cluster = Api::namespaced(client.clone(), NS).get("c1").await.unwrap();
    assert!(cluster.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    assert_eq!(cluster.status.unwrap().nodes, Some(2));

    // Invariant 6: the token and CA are only in the join Secrets.
    let secret_values: Vec<String> = Api::<Secret>::namespaced(client.clone(), CONTRACT_NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|s| String::from_utf8(s.data.as_ref().unwrap()["token"].0.clone()).unwrap())
        .collect();
    for entry in env.server.history() {
        // The CA comes from the Cluster's status, where whoever runs the cluster puts it.
        if entry.resource.ends_with("/secrets") || entry.resource.ends_with("/clusters") {
            continue;
        }
        let text = entry.object().to_string();
        assert!(!text.contains(CA), "CA leaked into {}", entry.resource);
        for token in &secret_values {
            assert!(
                !text.contains(token),
                "token leaked into {}",
                entry.resource
            );
        }
    }

    // Invariant 8: converged means no writes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = env.server.history().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes: Vec<String> = env.server.history()[before..]
        .iter()
        .map(|e| format!("{} {}/{}", e.resource, e.namespace, e.name))
        .collect();
    assert!(writes.is_empty(), "writes after convergence: {writes:?}");
}

#[tokio::test]
async fn scale_down_one() {
    let env = start().await;
    let client = &env.client;
    let (a, b) = two_claims_joined(&env).await;
    let entry_a = entry_name(&a.uid().unwrap());
    let entry_b = entry_name(&b.uid().unwrap());
    let other_before = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_b}")))
        .await
        .unwrap()
        .items[0]
        .clone();

    claims(client)
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("worker-a gone", || async {
        claims(client)
            .get_opt("worker-a")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let left = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_a}")))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "its contract is deleted");
    let secret: Option<Secret> = Api::namespaced(client.clone(), CONTRACT_NS)
        .get_opt(&format!("join-{entry_a}"))
        .await
        .unwrap();
    assert!(secret.is_none(), "its join Secret is deleted");
    // Released before it was deleted (invariant 3), by the history.
    let name_a = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &entry_a);
    let history = env.server.history();
    let released = history
        .iter()
        .any(|e| e.name == name_a && e.object()["status"]["phase"] == json!("Released"));
    assert!(released, "the contract was Released before it went");

    let other_after = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_b}")))
        .await
        .unwrap()
        .items[0]
        .clone();
    assert_eq!(
        other_before.spec, other_after.spec,
        "the other is untouched"
    );
    assert_eq!(other_before.uid(), other_after.uid());
    assert_eq!(
        phase_of(client, "worker-b").await,
        Some(NodeClaimPhase::Joined)
    );
}

#[tokio::test]
async fn cluster_delete_releases_everything() {
    let env = start().await;
    let client = &env.client;
    two_claims_joined(&env).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("Cluster gone", || async {
        clusters
            .get_opt("c1")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    assert!(
        infras
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        contracts(client)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTRACT_NS);
    assert!(
        secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // The claims remain (no garbage collector here); deleting them is immediate.
    for name in ["worker-a", "worker-b"] {
        claims(client)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("claims gone", || async {
        claims(client)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_reported_and_disturbs_nothing() {
    let env = start().await;
    let client = &env.client;
    create_cluster(client, "c1", true).await;
    let good = create_claim(client, "good", "c1", 2).await;
    create_claim(client, "no-cluster", "missing", 2).await;
    create_claim(client, "too-big", "c1", 5000).await;
    create_cluster(client, "c2", false).await;
    create_claim(client, "waits", "c2", 2).await;
    for (name, want) in [
        ("no-cluster", reason::CLUSTER_NOT_FOUND),
        ("too-big", reason::IMPOSSIBLE_RESOURCES),
        ("waits", reason::CLUSTER_NOT_READY),
    ] {
        eventually(&format!("{name} reports {want}"), || async move {
            let c = claims(client).get(name).await.ok()?;
            let cond = api::find_condition(&c.status?.conditions, INFRA_COMPOSED)?.clone();
            (cond.reason == want).then_some(())
        })
        .await;
    }
    eventually("good Joined", || async {
        (phase_of(client, "good").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    let all = contracts(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "only the good claim rents a machine");
    assert_eq!(
        all.items[0].labels()[CONTRACT_LABEL],
        entry_name(&good.uid().unwrap())
    );
    // Bad claims hold no finalizer; the waiting one gets its node once the URL comes.
    let too_big = claims(client).get("too-big").await.unwrap();
    assert!(
        !too_big
            .finalizers()
            .iter()
            .any(|f| f == NODECLAIM_FINALIZER)
    );
    set_cluster_url(client, "c2").await;
    eventually("waits Joined", || async {
        (phase_of(client, "waits").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn claim_recreated_is_a_new_entry() {
    let env = start().await;
    let client = &env.client;
    let (a, _) = two_claims_joined(&env).await;
    let old_entry = entry_name(&a.uid().unwrap());
    claims(client)
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("old worker-a gone", || async {
        claims(client)
            .get_opt("worker-a")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let again = create_claim(client, "worker-a", "c1", 2).await;
    let new_entry = entry_name(&again.uid().unwrap());
    assert_ne!(new_entry, old_entry, "a recreated claim is a new entry");
    eventually("new worker-a Joined", || async {
        (phase_of(client, "worker-a").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    let status = claims(client)
        .get("worker-a")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.infra.unwrap().contract, new_entry);
    let old = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={old_entry}")))
        .await
        .unwrap();
    assert!(old.items.is_empty(), "the old contract is gone");
    let old_name = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &old_entry);
    let released = env
        .server
        .history()
        .iter()
        .any(|e| e.name == old_name && e.object()["status"]["phase"] == json!("Released"));
    assert!(released, "the old contract was released, never reused");
}

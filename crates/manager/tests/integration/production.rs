//! Issue 6's production tests: the manager as an operator team runs it.
//!
//! - Two replicas elect a leader on a real Lease of the embedded API server;
//!   only the leader works, and a killed leader is replaced without a contract
//!   requested twice, a second machine rented, or a release lost.
//! - `/metrics` is valid Prometheus text whose figures follow a scale-up, and
//!   `/readyz` turns ready only once the caches synced.
//! - SIGTERM during a scale-up: the `manager` process exits 0 within its
//!   deadline and the next process finishes the work; its JSON logs carry the
//!   object key on the reconcile spans.
//!
//! Replicas tell themselves apart in the request log by User-Agent: the field
//! managers are per controller (api::names) and must stay the same across
//! replicas, so that a new leader's server-side applies take over the old
//! leader's fields instead of conflicting with them.

use crate::production_support;

use std::time::Instant;

use kube::api::DeleteParams;
use market::{ContractKey, LocalMarket, LocalMarketConfig};
use production_support::process::ManagerProcess;
use production_support::{LEASE_DURATION, LEASE_RENEW, NS, Replica, World, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_works_and_a_killed_leader_is_replaced_without_double_rentals() {
    let world = World::start(true).await;
    world.create_requester(100, None).await;
    world.create_ready_cluster("c1").await;

    let mut a = Replica::start(&world, "replica-a", Some(world.market.clone()), true).await;
    eventually("replica-a leads", || async {
        (world.lease_holder().await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let b = Replica::start(&world, "replica-b", Some(world.market.clone()), true).await;

    world.create_claims("c1", &["worker-a", "worker-b"]).await;
    world.wait_joined(&["worker-a", "worker-b"]).await;
    assert_eq!(
        world.lease_holder().await.as_deref(),
        Some("replica-a"),
        "the leader kept its Lease"
    );
    assert!(
        !world.writes_of(&a.agent).is_empty(),
        "the leader did the work"
    );
    assert_eq!(
        world.work_of(&b.agent),
        vec![],
        "a follower touches nothing but the Lease"
    );
    assert_eq!(b.get("/readyz").await.0, 200, "a follower is ready");

    // Around the switch: a claim is deleted, then the leader dies mid-release.
    let key_a = world.contract_key("worker-a").await;
    let key_b = world.contract_key("worker-b").await;
    world
        .claims()
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    let killed_at = world.server.requests().len();
    let killed = Instant::now();
    a.kill();

    eventually("replica-b takes the Lease over", || async {
        (world.lease_holder().await.as_deref() == Some("replica-b")).then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    // The dead leader's hold runs out at most LEASE_DURATION after the kill; the
    // follower then needs one attempt (it retries every renew period).
    assert!(
        takeover <= LEASE_DURATION + 2 * LEASE_RENEW,
        "took {takeover:?} to take over"
    );
    let dead_work = world.work_of(&a.agent).len();

    // A scale step after the switch.
    world.create_claims("c1", &["worker-c"]).await;
    world.wait_joined(&["worker-b", "worker-c"]).await;
    world.wait_claim_gone("worker-a").await;
    let key_c = world.contract_key("worker-c").await;

    for key in [&key_a, &key_b, &key_c] {
        assert_eq!(world.market.rfps_published(key), 1, "RFPs of {key:?}");
        assert_eq!(world.market.guests_rented(key), 1, "machines of {key:?}");
    }
    eventually("worker-a's machine released", || async {
        (world.market.running_guests() == 2).then_some(())
    })
    .await;

    assert_eq!(
        world.work_of(&a.agent).len(),
        dead_work,
        "a killed replica made requests"
    );
    let b_writes = world.writes_of(&b.agent);
    assert!(!b_writes.is_empty(), "the new leader did the work");
    assert!(
        b_writes.iter().all(|(at, _)| *at >= killed_at),
        "replica-b wrote before the leader died"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_a_scale_up_and_readiness_waits_for_the_caches() {
    // Without the CRDs no cache can list: a leader stays not ready.
    let world = World::start(false).await;
    let replica = Replica::start(&world, "replica-m", Some(world.market.clone()), true).await;
    let (status, _) = replica.get("/healthz").await;
    assert_eq!(status, 200);
    eventually("replica-m leads", || async {
        (replica.metrics().await.value("socialweb_leader") == 1.0).then_some(())
    })
    .await;
    let (status, body) = replica.get("/readyz").await;
    assert_eq!(status, 503, "ready before any cache listed: {body}");

    world.install_crds().await;
    world.create_requester(100, None).await;
    eventually("ready once the caches synced", || async {
        (replica.get("/readyz").await.0 == 200).then_some(())
    })
    .await;

    world.create_ready_cluster("c1").await;
    let before = replica.metrics().await;
    let claims = ["worker-a", "worker-b", "worker-c"];
    world.create_claims("c1", &claims).await;
    world.wait_joined(&claims).await;

    let reconciles = |m: &production_support::Metrics, controller: &str| {
        m.value(&format!(
            "socialweb_reconcile_total{{controller=\"{controller}\"}}"
        ))
    };
    let deployed = r#"socialweb_computecontracts{phase="Deployed"}"#;
    // A claim's times are observed just after its status write, so a claim
    // seen Joined may not be counted yet.
    let timed = |m: &production_support::Metrics| {
        [
            "socialweb_nodeclaim_time_to_deployed_seconds_count",
            "socialweb_nodeclaim_time_to_joined_seconds_count",
        ]
        .iter()
        .all(|count| m.value(count) >= 3.0)
    };
    let after = eventually(
        "every contract counted Deployed, every claim timed",
        || async {
            let m = replica.metrics().await;
            (m.value(deployed) == 3.0 && timed(&m)).then_some(m)
        },
    )
    .await;
    for controller in ["nodeclaim", "infra", "requester"] {
        assert!(
            reconciles(&after, controller) > reconciles(&before, controller),
            "{controller} reconciles did not rise: {} -> {}",
            reconciles(&before, controller),
            reconciles(&after, controller)
        );
    }
    for histogram in [
        "socialweb_nodeclaim_time_to_deployed_seconds",
        "socialweb_nodeclaim_time_to_joined_seconds",
    ] {
        assert_eq!(
            after.families.get(histogram).map(String::as_str),
            Some("histogram")
        );
        let count = after.value(&format!("{histogram}_count"));
        assert!(count >= 3.0, "{histogram} has {count} samples for 3 claims");
        assert!(after.value(&format!("{histogram}_sum")) > 0.0);
    }
    assert!(
        after.value(r#"socialweb_market_request_duration_seconds_count{operation="publish"}"#)
            >= 3.0
    );
    // The Requester's window is there from the start, and nothing waits for
    // it once every contract is Deployed.
    assert_eq!(
        after
            .families
            .get("socialweb_reconcile_waiting")
            .map(String::as_str),
        Some("gauge")
    );
    assert_eq!(
        after
            .samples
            .get(r#"socialweb_reconcile_waiting{controller="requester"}"#),
        Some(&0.0)
    );

    // Shutdown in-process: the controllers stop on the manager's own shutdown,
    // so it returns and releases the Lease without waiting for its deadline.
    let mut replica = replica;
    replica.stop_gracefully().await;
    assert_eq!(world.lease_holder().await, None, "the Lease is released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_scale_up_exits_zero_and_the_next_process_finishes() {
    let world = World::start(true).await;
    let state = tempfile::tempdir().unwrap();
    // Slow boots: the scale-up is still running when SIGTERM comes.
    world.create_requester(3000, Some(state.path())).await;
    world.create_ready_cluster("c1").await;
    let kubeconfig = world.server.kubeconfig_path();

    let mut first = ManagerProcess::spawn(kubeconfig, "process-1");
    let claims = ["worker-a", "worker-b", "worker-c"];
    world.create_claims("c1", &claims).await;
    let mut keys = Vec::new();
    for claim in claims {
        keys.push(world.contract_key(claim).await);
    }
    let mut joined = 0;
    for claim in claims {
        joined += usize::from(world.claim_phase(claim).await == Some(api::NodeClaimPhase::Joined));
    }
    assert_eq!(joined, 0, "the scale-up finished before SIGTERM");

    first
        .stop_gracefully("the process exits within its shutdown deadline")
        .await;
    assert_eq!(world.lease_holder().await, None, "released on SIGTERM");

    let mut second = ManagerProcess::spawn(kubeconfig, "process-2");
    world.wait_joined(&claims).await;
    second
        .stop_gracefully("the second process exits within its shutdown deadline")
        .await;

    // Both processes used the market through its state directory.
    let market = LocalMarket::new(
        LocalMarketConfig {
            seed: 7,
            state_dir: Some(state.path().to_owned()),
            ..LocalMarketConfig::default()
        },
        std::sync::Arc::new(market::SystemClock),
    )
    .unwrap();
    for key in &keys {
        assert_eq!(market.rfps_published(key), 1, "RFPs of {key:?}");
        assert_eq!(market.guests_rented(key), 1, "machines of {key:?}");
    }
    assert_eq!(market.running_guests(), claims.len());

    assert_reconcile_spans_are_keyed(&[&first, &second], &keys);
}

/// Issue 6, logs: every log line of a reconcile carries its object's
/// namespace and name, and NodeClaim work names its Cluster as `namespace/name`.
///
/// kube-runtime's "reconciling object" span holds `Kind.version.group/name.namespace`;
/// our own reconcile spans inside it add the short key (the Cluster of NodeClaim
/// work, the contract, the Infra, the Requester).
fn assert_reconcile_spans_are_keyed(processes: &[&ManagerProcess], contracts: &[ContractKey]) {
    const OURS: [&str; 4] = [
        "reconcile_key",
        "reconcile_contract",
        "reconcile",
        "reconcile_requester",
    ];
    let lines: Vec<serde_json::Value> = processes.iter().flat_map(|p| p.json_lines()).collect();
    let field = |span: &serde_json::Value, name: &str| -> Option<String> {
        span.get(name)?.as_str().map(str::to_owned)
    };
    let mut keyed = Vec::new();
    for line in &lines {
        let Some(spans) = line.get("spans").and_then(|s| s.as_array()) else {
            continue;
        };
        let Some(ours) = spans
            .iter()
            .find(|s| field(s, "name").is_some_and(|n| OURS.contains(&n.as_str())))
        else {
            continue;
        };
        let object = spans
            .iter()
            .find(|s| field(s, "name").as_deref() == Some("reconciling object"))
            .and_then(|s| field(s, "object.ref"))
            .unwrap_or_else(|| panic!("a reconcile line without its object: {line}"));
        // `Kind.version.group/name.namespace`: the namespace follows the last dot.
        let (_, name_namespace) = object.split_once('/').unwrap();
        assert!(
            name_namespace
                .rsplit_once('.')
                .is_some_and(|(name, namespace)| !name.is_empty() && !namespace.is_empty()),
            "no namespace/name in {object}: {line}"
        );
        let ours_name = field(ours, "name").unwrap();
        // Our own span carries the whole key too, for collectors that read only `span`.
        if ours_name == "reconcile_key" {
            assert!(
                field(ours, "cluster").is_some_and(|c| c.contains('/')),
                "a NodeClaim span without namespace/cluster: {line}"
            );
        } else {
            assert!(
                field(ours, "namespace").is_some_and(|n| !n.is_empty()),
                "a {ours_name} span without its namespace: {line}"
            );
        }
        keyed.push((ours_name, ours.clone(), object));
    }
    let seen = |span: &str, key: &str, value: &str| {
        keyed
            .iter()
            .any(|(name, fields, _)| name == span && field(fields, key).as_deref() == Some(value))
    };
    assert!(
        seen("reconcile_key", "cluster", &format!("{NS}/c1")),
        "no NodeClaim reconcile line keyed by its Cluster"
    );
    for contract in contracts {
        assert!(
            seen("reconcile_contract", "contract", &contract.name)
                && seen("reconcile_contract", "namespace", &contract.namespace)
                && keyed.iter().any(|(_, _, object)| object
                    .ends_with(&format!("/{}.{}", contract.name, contract.namespace))),
            "no reconcile line of contract {contract:?}"
        );
    }
}

/// The market port of every replica answers, but only the leader's
/// controllers look at what arrives: a follower says NotLeader, and the
/// follower that takes the Lease over starts answering as the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_takes_market_pushes_and_the_next_leader_takes_over() {
    let world = World::start(true).await;
    let mut a = Replica::start(&world, "replica-a", Some(world.market.clone()), true).await;
    eventually("replica-a leads", || async {
        (world.lease_holder().await.as_deref() == Some("replica-a")).then_some(())
    })
    .await;
    let b = Replica::start(&world, "replica-b", Some(world.market.clone()), true).await;
    // The leader's inbox answers (no atproto market runs, so: not ready).
    eventually("the leader's inbox answers", || async {
        (a.market_port_error().await.as_deref() == Some("NotReady")).then_some(())
    })
    .await;
    assert_eq!(b.market_port_error().await.as_deref(), Some("NotLeader"));
    a.stop_gracefully().await;
    eventually("replica-b leads and its inbox answers", || async {
        (world.lease_holder().await.as_deref() == Some("replica-b")
            && b.market_port_error().await.as_deref() == Some("NotReady"))
        .then_some(())
    })
    .await;
    assert_eq!(
        a.market_port_error().await,
        None,
        "a stopped replica's port is closed"
    );
}

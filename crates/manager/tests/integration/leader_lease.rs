//! Leader election on a real `coordination.k8s.io` Lease, served by the embedded API server.
//!
//! Short leases (3 s, renewed every second) keep these tests to a few seconds each.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiserver::faults::FaultConfig;
use apiserver::testing::TestServer;
use controllers::metrics::Metrics;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use manager::leader::{LeaderConfig, run_while_leader};
use manager::shutdown::Shutdown;
use prometheus_client::registry::Registry;

const LEASE: &str = "socialweb-manager";

fn config(identity: &str) -> LeaderConfig {
    LeaderConfig {
        namespace: "default".into(),
        lease_name: LEASE.into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        renew_period: Duration::from_secs(1),
    }
}

/// One replica: its writes (as instants), its leader gauge, its shutdown.
struct Replica {
    writes: Arc<Mutex<Vec<Instant>>>,
    registry: Registry,
    shutdown: Shutdown,
    task: tokio::task::JoinHandle<Result<(), manager::leader::LeaderError>>,
}

impl Replica {
    fn start(server: &TestServer, identity: &str) -> Self {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let make_controllers = {
            let writes = Arc::clone(&writes);
            let shutdown = shutdown.clone();
            move || {
                let writes = Arc::clone(&writes);
                let signaled = shutdown.signaled();
                async move {
                    tokio::pin!(signaled);
                    loop {
                        writes.lock().unwrap().push(Instant::now());
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(5)) => {}
                            () = &mut signaled => return Ok(()),
                        }
                    }
                }
            }
        };
        let task = tokio::spawn(run_while_leader(
            server.client(),
            config(identity),
            metrics,
            make_controllers,
            shutdown.clone(),
        ));
        Self {
            writes,
            registry,
            shutdown,
            task,
        }
    }

    fn leading(&self) -> bool {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text.contains("socialweb_leader 1\n")
    }

    fn first_write(&self) -> Option<Instant> {
        self.writes.lock().unwrap().first().copied()
    }

    fn last_write(&self) -> Option<Instant> {
        self.writes.lock().unwrap().last().copied()
    }

    async fn wait_until(&self, leading: bool, within: Duration) -> Duration {
        let started = Instant::now();
        while self.leading() != leading {
            assert!(
                started.elapsed() < within,
                "not {} within {within:?}",
                if leading { "leading" } else { "following" }
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        started.elapsed()
    }
}

async fn holder(server: &TestServer) -> Option<String> {
    Api::<Lease>::namespaced(server.client(), "default")
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .and_then(|spec| spec.holder_identity)
}

#[tokio::test]
async fn a_clean_shutdown_hands_the_lease_over_without_overlap() {
    let server = TestServer::start().await.unwrap();
    let mut a = Replica::start(&server, "replica-a");
    a.wait_until(true, Duration::from_secs(5)).await;
    assert_eq!(holder(&server).await.as_deref(), Some("replica-a"));

    let b = Replica::start(&server, "replica-b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(a.leading(), "the leader kept renewing");
    assert!(
        !b.leading() && b.first_write().is_none(),
        "a follower wrote"
    );

    a.shutdown.trigger();
    (&mut a.task).await.unwrap().unwrap();
    let takeover = b.wait_until(true, Duration::from_secs(5)).await;
    assert!(takeover <= Duration::from_secs(4), "took {takeover:?}");
    assert!(
        a.last_write().unwrap() < b.first_write().unwrap(),
        "the new leader wrote before the old one stopped"
    );
    assert_eq!(holder(&server).await.as_deref(), Some("replica-b"));

    b.shutdown.trigger();
    b.task.await.unwrap().unwrap();
    assert_eq!(holder(&server).await, None, "released on shutdown");
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_writing_before_its_hold_runs_out() {
    let server = TestServer::start().await.unwrap();
    let a = Replica::start(&server, "replica-a");
    a.wait_until(true, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // Every request now hangs for longer than the lease: renewals never land.
    let cut_off = Instant::now();
    server.set_faults(FaultConfig {
        latency: Duration::from_secs(6),
        ..FaultConfig::default()
    });
    a.wait_until(false, Duration::from_secs(4)).await;
    let stopped = a.last_write().unwrap();
    // The last renewal happened at most one renew period before the cut; the hold
    // runs until 3 s after it, so stopping within 3 s of the cut is before anyone else may lead.
    assert!(
        stopped.duration_since(cut_off) < Duration::from_secs(3),
        "wrote {:?} after the cut",
        stopped.duration_since(cut_off)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        a.last_write(),
        Some(stopped),
        "wrote after it stopped leading"
    );

    // Reachable again: it waits for the Lease and leads again.
    server.set_faults(FaultConfig::default());
    a.wait_until(true, Duration::from_secs(15)).await;
    a.shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(15), a.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

//! The election loop with a fake Lease: who runs the controllers, when they stop, and what shutdown does.
//!
//! "No write after the lease is lost" is checked the way it matters: once the
//! replica reports it stopped leading (the leader gauge reads 0), the
//! controllers' writes have stopped for good.

use std::future::{Future, Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use controllers::metrics::Metrics;
use manager::leader::{LeaderError, LeaseLock, run_unelected, run_with_lock};
use manager::shutdown::Shutdown;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

const ME: &str = "replica-a";

/// The Lease as the test controls it.
struct World {
    holder: watch::Sender<Option<String>>,
    fences: watch::Sender<u64>,
    releases: AtomicUsize,
    connects: AtomicUsize,
}

impl World {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            holder: watch::Sender::new(None),
            fences: watch::Sender::new(0),
            releases: AtomicUsize::new(0),
            connects: AtomicUsize::new(0),
        })
    }

    fn grant(&self, to: &str) {
        self.holder.send_replace(Some(to.to_owned()));
    }

    /// The watchdog cannot confirm the hold (a hung renewal): fences the current lock only.
    fn hang_renewal(&self) {
        self.fences.send_modify(|count| *count += 1);
    }

    /// What the election is given to build its lock: a fresh one each term.
    fn locks(self: &Arc<Self>) -> impl FnMut() -> Ready<Result<FakeLease, LeaderError>> + use<> {
        let world = Arc::clone(self);
        move || ready(Ok(world.connect()))
    }

    fn connect(self: &Arc<Self>) -> FakeLease {
        self.connects.fetch_add(1, Ordering::SeqCst);
        FakeLease {
            world: Arc::clone(self),
            reported: AtomicBool::new(false),
            fences_at_start: *self.fences.borrow(),
        }
    }
}

struct FakeLease {
    world: Arc<World>,
    reported: AtomicBool,
    fences_at_start: u64,
}

impl LeaseLock for FakeLease {
    async fn changed(&self) -> Result<bool, LeaderError> {
        let mut holder = self.world.holder.subscribe();
        let was = self.reported.load(Ordering::SeqCst);
        let now = holder
            .wait_for(|holder| (holder.as_deref() == Some(ME)) != was)
            .await
            .map(|holder| holder.as_deref() == Some(ME))
            .unwrap();
        self.reported.store(now, Ordering::SeqCst);
        Ok(now)
    }

    async fn fenced(&self) {
        let start = self.fences_at_start;
        let _ = self
            .world
            .fences
            .subscribe()
            .wait_for(|count| *count > start)
            .await;
    }

    async fn release(&self) -> Result<(), LeaderError> {
        self.world.releases.fetch_add(1, Ordering::SeqCst);
        self.world.holder.send_if_modified(|holder| {
            let mine = holder.as_deref() == Some(ME);
            if mine {
                *holder = None;
            }
            mine
        });
        Ok(())
    }
}

/// Controllers that write every millisecond; `obey_shutdown` decides whether they stop on the signal.
#[derive(Clone)]
struct Writers {
    writes: Arc<AtomicU64>,
    terms: Arc<AtomicUsize>,
    finished_cleanly: Arc<AtomicBool>,
}

impl Writers {
    fn new() -> Self {
        Self {
            writes: Arc::new(AtomicU64::new(0)),
            terms: Arc::new(AtomicUsize::new(0)),
            finished_cleanly: Arc::new(AtomicBool::new(false)),
        }
    }

    fn make(
        &self,
        shutdown: &Shutdown,
        obey_shutdown: bool,
    ) -> impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + use<>
    {
        let writers = self.clone();
        let shutdown = shutdown.clone();
        move || {
            writers.terms.fetch_add(1, Ordering::SeqCst);
            let writers = writers.clone();
            let signaled = shutdown.signaled();
            Box::pin(async move {
                tokio::pin!(signaled);
                loop {
                    writers.writes.fetch_add(1, Ordering::SeqCst);
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(1)) => {}
                        () = &mut signaled, if obey_shutdown => {
                            // An in-flight reconcile finishing.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            writers.finished_cleanly.store(true, Ordering::SeqCst);
                            return Ok(());
                        }
                    }
                }
            })
        }
    }

    fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

/// A replica in the election on `world`'s Lease, its controllers [`Writers`].
struct Replica {
    registry: Arc<std::sync::Mutex<Registry>>,
    shutdown: Shutdown,
    writers: Writers,
    election: JoinHandle<Result<(), LeaderError>>,
}

impl Replica {
    /// Whether it reports that it leads (the leader gauge reads 1).
    fn leading(&self) -> bool {
        leading(&self.registry)
    }

    /// Spawns the election; `deadline` is the shutdown's, and `obey_shutdown` whether
    /// the controllers stop on its signal.
    fn start(world: &Arc<World>, deadline: Duration, obey_shutdown: bool) -> Self {
        let (registry, metrics) = metrics();
        let shutdown = Shutdown::new(deadline);
        let writers = Writers::new();
        let election = tokio::spawn(run_with_lock(
            world.locks(),
            metrics,
            writers.make(&shutdown, obey_shutdown),
            shutdown.clone(),
        ));
        Self {
            registry,
            shutdown,
            writers,
            election,
        }
    }
}

fn metrics() -> (Arc<std::sync::Mutex<Registry>>, Metrics) {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    (Arc::new(std::sync::Mutex::new(registry)), metrics)
}

fn leading(registry: &std::sync::Mutex<Registry>) -> bool {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry.lock().unwrap()).unwrap();
    text.contains("socialweb_leader 1\n")
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    for _ in 0..500 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Asserts that no write happens for a while.
async fn writes_have_stopped(writers: &Writers) {
    let before = writers.writes();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        writers.writes(),
        before,
        "a write happened after leadership was lost"
    );
}

#[tokio::test]
async fn a_follower_waits_leads_when_granted_and_stops_writing_when_the_lease_is_taken() {
    let world = World::new();
    world.grant("replica-b");
    let replica = Replica::start(&world, Duration::from_secs(5), true);

    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(replica.writers.writes(), 0, "a follower wrote");
    assert!(!replica.leading());

    world.grant(ME);
    eventually("the replica leads and writes", || {
        replica.leading() && replica.writers.writes() > 5
    })
    .await;

    world.grant("replica-b");
    eventually("the replica reports it stopped leading", || {
        !replica.leading()
    })
    .await;
    writes_have_stopped(&replica.writers).await;

    // It waits again and leads again in a new term.
    world.grant(ME);
    eventually("a second term", || {
        replica.writers.terms.load(Ordering::SeqCst) == 2 && replica.leading()
    })
    .await;

    replica.shutdown.trigger();
    replica.election.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_hold_that_cannot_be_confirmed_is_fenced_before_anyone_else_may_take_it() {
    let world = World::new();
    world.grant(ME);
    let replica = Replica::start(&world, Duration::from_secs(5), true);
    eventually("the replica leads", || {
        replica.leading() && replica.writers.writes() > 0
    })
    .await;

    world.hang_renewal();
    // The Lease still names this replica, yet it must stop: it cannot prove the hold.
    eventually("the term ends", || {
        replica.writers.terms.load(Ordering::SeqCst) == 2
    })
    .await;
    assert!(
        world.connects.load(Ordering::SeqCst) >= 2,
        "the next term starts from a fresh lock"
    );

    replica.shutdown.trigger();
    replica.election.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_lets_the_controllers_finish_then_releases_the_lease() {
    let world = World::new();
    world.grant(ME);
    let mut replica = Replica::start(&world, Duration::from_secs(5), true);
    eventually("the replica leads", || replica.leading()).await;

    replica.shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(2), &mut replica.election)
        .await
        .expect("returns well before the deadline")
        .unwrap()
        .unwrap();
    assert!(replica.writers.finished_cleanly.load(Ordering::SeqCst));
    assert_eq!(world.releases.load(Ordering::SeqCst), 1);
    assert_eq!(
        *world.holder.borrow(),
        None,
        "the Lease is free for the next leader"
    );
    assert!(!replica.leading());
}

#[tokio::test]
async fn controllers_that_ignore_shutdown_are_cut_at_the_deadline_and_the_lease_still_released() {
    let world = World::new();
    world.grant(ME);
    let replica = Replica::start(&world, Duration::from_millis(100), false);
    eventually("the replica leads", || replica.leading()).await;

    let started = std::time::Instant::now();
    replica.shutdown.trigger();
    replica.election.await.unwrap().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    writes_have_stopped(&replica.writers).await;
    assert_eq!(world.releases.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn shutdown_while_following_returns_without_ever_leading() {
    let world = World::new();
    world.grant("replica-b");
    let replica = Replica::start(&world, Duration::from_secs(5), true);
    tokio::time::sleep(Duration::from_millis(20)).await;
    replica.shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(1), replica.election)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(replica.writers.terms.load(Ordering::SeqCst), 0);
    assert_eq!(
        world.holder.borrow().as_deref(),
        Some("replica-b"),
        "another's hold is untouched"
    );
}

#[tokio::test]
async fn controllers_failing_while_leading_is_an_error_and_frees_the_lease() {
    let world = World::new();
    world.grant(ME);
    let (_registry, metrics) = metrics();
    let shutdown = Shutdown::new(Duration::from_secs(5));
    let outcome = run_with_lock(
        world.locks(),
        metrics,
        || async { Err(anyhow::anyhow!("cache stream ended")) },
        shutdown,
    )
    .await;
    let error = outcome.unwrap_err();
    assert!(error.to_string().contains("cache stream ended"), "{error}");
    assert_eq!(world.releases.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn controllers_stopping_on_the_same_sigterm_just_before_the_shutdown_is_a_clean_exit() {
    let world = World::new();
    world.grant(ME);
    let (_registry, metrics) = metrics();
    let shutdown = Shutdown::new(Duration::from_secs(5));
    let later = shutdown.clone();
    let outcome = run_with_lock(
        world.locks(),
        metrics,
        move || {
            let later = later.clone();
            async move {
                // kube-runtime's own signal handler stopped the controllers first.
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    later.trigger();
                });
                Ok(())
            }
        },
        shutdown,
    )
    .await;
    outcome.unwrap();
    assert_eq!(world.releases.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_lease_that_cannot_be_reached_is_retried_not_fatal() {
    let world = World::new();
    world.grant(ME);
    let (registry, metrics) = metrics();
    let shutdown = Shutdown::new(Duration::from_secs(5));
    let writers = Writers::new();
    let attempts = Arc::new(AtomicUsize::new(0));
    let election = tokio::spawn(run_with_lock(
        {
            let world = Arc::clone(&world);
            let attempts = Arc::clone(&attempts);
            move || {
                // The first attempt finds no API server.
                let attempt = attempts.fetch_add(1, Ordering::SeqCst);
                let lock = if attempt == 0 {
                    Err(LeaderError::Lease {
                        lease: "socialweb-system/socialweb-manager".into(),
                        source: kube_lease_manager::LeaseManagerError::InconsistentState(
                            "connection refused".into(),
                        ),
                    })
                } else {
                    Ok(world.connect())
                };
                ready(lock)
            }
        },
        metrics,
        writers.make(&shutdown, true),
        shutdown.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(5), async {
        while !leading(&registry) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("leads after the retry");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    shutdown.trigger();
    election.await.unwrap().unwrap();
}

#[tokio::test]
async fn without_election_the_controllers_run_at_once_and_stop_on_shutdown() {
    let (registry, metrics) = metrics();
    let shutdown = Shutdown::new(Duration::from_secs(5));
    let writers = Writers::new();
    let mut make = writers.make(&shutdown, true);
    let run = tokio::spawn(run_unelected(metrics, make(), shutdown.clone()));
    eventually("it runs", || leading(&registry) && writers.writes() > 0).await;
    shutdown.trigger();
    run.await.unwrap().unwrap();
    assert!(writers.finished_cleanly.load(Ordering::SeqCst));
    assert!(!leading(&registry));
}

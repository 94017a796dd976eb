//! `run`: the controllers against a real cluster, as the Helm chart starts them.
//!
//! # Expected flow
//!
//! 1. Connect (kubeconfig, else in-cluster), listen for SIGTERM/SIGINT.
//! 2. Bind the HTTP port (failing at once when it is taken) and serve `/metrics`,
//!    `/healthz` and `/readyz` for the life of the process; bind and serve the
//!    market port too when `--market-addr` is set ([`crate::market_port`]).
//! 3. Wait for the Lease (unless `--leader-elect=false`); while leading, run
//!    the three reconcilers through [`Controllers::start`].
//!
//! # Guarantees
//!
//! A follower is ready at once (it only waits); a leader turns ready once its
//! caches hold their initial lists, and back to ready-as-follower after its term.
//! The leader gauge turns 1 only after readiness went to not-ready.
//!
//! [`run_process`] is everything after the connection: tests run several
//! replicas in one process with their own [`Process`] (client, clock, markets).

use std::sync::Arc;

use anyhow::Context as _;
use controllers::{Clock, StopSignal, SystemClock, metrics::Metrics, requester::Markets};
use prometheus_client::registry::Registry;

use crate::{
    api_client::api_client,
    http::{HttpArgs, HttpServer, Readiness},
    leader::{self, LeaderArgs, LeaderConfig},
    market_port::{InboundSlot, MarketPort, MarketPortArgs},
    shutdown::{Shutdown, ShutdownArgs},
    wiring::{ControllerOptions, Controllers},
};

/// Flags of `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Namespaces and concurrency of the controllers.
    #[command(flatten)]
    pub controllers: ControllerOptions,
    /// The metrics and health port.
    #[command(flatten)]
    pub http: HttpArgs,
    /// The market port (the atproto market's submitBid and submitEvent).
    #[command(flatten)]
    pub market_port: MarketPortArgs,
    /// Leader election.
    #[command(flatten)]
    pub leader: LeaderArgs,
    /// Graceful shutdown.
    #[command(flatten)]
    pub shutdown: ShutdownArgs,
}

/// Runs until SIGTERM/SIGINT (exit 0) or until the controllers fail.
///
/// # Errors
///
/// When the cluster cannot be reached, a flag is unusable, the HTTP port
/// cannot be bound, or the controllers end on their own while leading.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = kube::Config::infer().await.context(
        "connect to the cluster (set KUBECONFIG, or run in a pod with a service account)",
    )?;
    let client = api_client(config).context("build the client to the cluster's API server")?;
    let shutdown = args.shutdown.shutdown();
    let _signals = shutdown
        .listen_for_signals()
        .context("listen for SIGTERM/SIGINT")?;
    let http = HttpServer::bind(args.http.http_addr)
        .await
        .context("the metrics and health port")?;
    let market_port = match args.market_port.market_addr {
        Some(addr) => Some(MarketPort::bind(addr).await.context("the market port")?),
        None => None,
    };
    let election = args
        .leader
        .config(&args.controllers.contract_namespace)
        .context("leader election settings")?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    // One set of markets for the process, so a second term finds the markets of the first.
    let markets = Arc::new(Markets::new(Arc::clone(&clock)));
    let process = Process {
        client,
        clock,
        markets,
        http,
        market_port,
        shutdown,
    };
    run_process(process, args.controllers, election).await
}

/// What [`run`] takes from its environment; tests build their own to run
/// several replicas in one test process.
pub struct Process {
    /// Every request of this replica goes through it.
    pub client: kube::Client,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
    /// The markets of the Requesters (built from their specs in [`run`]).
    pub markets: Arc<Markets>,
    /// The bound port for `/metrics`, `/healthz` and `/readyz`.
    pub http: HttpServer,
    /// The bound market port, when `--market-addr` is set.
    pub market_port: Option<MarketPort>,
    /// Ends the process: stop taking work, finish in flight, release the Lease.
    pub shutdown: Shutdown,
}

/// The body of [`run`]: serves the HTTP port and runs the controllers while
/// leading the election (at once when `election` is `None`).
///
/// # Errors
///
/// As [`run`], after the connection and the flags were checked.
pub async fn run_process(
    process: Process,
    options: ControllerOptions,
    election: Option<LeaderConfig>,
) -> anyhow::Result<()> {
    let Process {
        client,
        clock,
        markets,
        http,
        market_port,
        shutdown,
    } = process;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let readiness = Readiness::new();
    // Followers are ready: they serve health and wait for the Lease.
    readiness.set(true);
    let http = tokio::spawn(http.serve(Arc::new(registry), readiness.clone(), shutdown.signaled()));
    // Served by every replica; only the leader's controllers open the slot.
    let inbound = InboundSlot::new();
    let market_port =
        market_port.map(|port| tokio::spawn(port.serve(inbound.clone(), shutdown.signaled())));

    let make_controllers = {
        let shutdown_for_controllers = shutdown.clone();
        let client = client.clone();
        let metrics = metrics.clone();
        let readiness = readiness.clone();
        let inbound = inbound.clone();
        move || {
            let running = Controllers {
                client: client.clone(),
                clock: Arc::clone(&clock),
                markets: Arc::clone(&markets),
                metrics: metrics.clone(),
                options: options.clone(),
                // The manager's shutdown, so its deadline and Lease release see the same stop.
                stop: StopSignal::on(shutdown_for_controllers.signaled()),
            }
            .start();
            let readiness = readiness.clone();
            readiness.set(false);
            // While this term's controllers run, and not a moment longer
            // (the guard drops with this future, also when fencing aborts it).
            let inbound_guard = inbound.open(market::atproto::router(markets.inbox()));
            async move {
                let _inbound_guard = inbound_guard;
                // Joined, not spawned: aborting this future (fencing) stops everything.
                let follow_caches = async {
                    readiness.follow(running.ready).await;
                    futures::future::pending::<()>().await;
                };
                tokio::select! {
                    () = running.done => {}
                    () = follow_caches => {}
                }
                readiness.set(true);
                Ok(())
            }
        }
    };

    let outcome = match election {
        Some(config) => {
            leader::run_while_leader(client, config, metrics, make_controllers, shutdown).await
        }
        None => leader::run_unelected(metrics, make_controllers(), shutdown).await,
    };
    http.abort();
    if let Some(market_port) = market_port {
        market_port.abort();
    }
    outcome.context("the controllers stopped")
}

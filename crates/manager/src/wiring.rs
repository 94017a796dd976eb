//! One shared cache, four reconcilers: how the manager puts them together.
//!
//! `run`, `dev`, `demo` and the end-to-end tests all start the controllers
//! through [`Controllers::start`], so the tests exercise the real wiring.

use std::sync::Arc;
use std::time::Duration;

use controllers::reconciler::ReconcilerContext;
use controllers::{
    Clock, SharedCaches, StopSignal, infra, metrics::Metrics, nodeclaim, record, requester,
};
use kube::Client;
use tokio::sync::watch;

/// How the controllers run; every bound has an explicit default.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerOptions {
    /// Namespace of Infras, ComputeContracts, join Secrets and the Requester.
    #[arg(long, env = "CONTRACT_NAMESPACE", default_value = api::DEFAULT_CONTRACT_NAMESPACE)]
    pub contract_namespace: String,
    /// Infras reconciled at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub infra_concurrency: u16,
    /// ComputeContracts (and Requesters) reconciled at once. A contract's
    /// reconcile mostly waits (a read, a status write, a market call, the
    /// receipt's patch, one after another), and a bid window ends for a
    /// whole burst of contracts at once: at 8, 1,000 new contracts queued
    /// for up to a second behind each other before their windows opened;
    /// at 32, the 1,000 contracts one large Cluster's Infra creates at once
    /// still did (plan 0016 C6). At most the admission window
    /// (`controllers::admission::DEFAULT_WINDOW`): the controller is never
    /// handed more keys than that at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub requester_concurrency: u16,
    /// Clusters (NodeClaim keys) reconciled at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nodeclaim_concurrency: u16,
    /// Seconds between two health checks of a running guest with its market:
    /// bounds how late a lost node is noticed (its claim's loss grace starts then).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub guest_poll_seconds: u64,
}

// `--requester-concurrency` takes at most the admission window, written as
// a literal in its clap range: a window changed without it stops the build.
const _: () = assert!(controllers::admission::DEFAULT_WINDOW == 256);

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            contract_namespace: api::DEFAULT_CONTRACT_NAMESPACE.to_owned(),
            infra_concurrency: 4,
            requester_concurrency: 64,
            nodeclaim_concurrency: 4,
            guest_poll_seconds: 60,
        }
    }
}

/// What the controllers share: the client, the clock, the markets and the metrics.
pub struct Controllers {
    /// The API client every write goes through.
    pub client: Client,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
    /// The markets of the Requesters.
    pub markets: Arc<requester::Markets>,
    /// Where reconciles are counted.
    pub metrics: Metrics,
    /// Namespaces and concurrency.
    pub options: ControllerOptions,
    /// When the controllers stop taking new work: the manager's shutdown in
    /// `run`, Ctrl+C in `dev` and `demo`, never in tests that drop `done`.
    pub stop: StopSignal,
}

/// The running controllers: await `done`, or drop it to stop them at once.
pub struct Running {
    /// Resolves when every controller has stopped.
    pub done: futures::future::BoxFuture<'static, ()>,
    /// Turns true once every cache holds its initial list.
    pub ready: watch::Receiver<bool>,
}

impl Controllers {
    /// Subscribes the four reconcilers to one shared cache and returns the
    /// future that runs them and the cache.
    ///
    /// # Guarantees
    ///
    /// Dropping [`Running::done`] stops every reconcile and watch: no write is
    /// made after that (what leader election's fencing relies on).
    #[must_use]
    pub fn start(self) -> Running {
        let namespace = self.options.contract_namespace.clone();
        let caches = Arc::new(
            SharedCaches::new(self.client.clone(), &namespace).with_metrics(self.metrics.clone()),
        );

        // Every reconciler's context is built the same way: its own identity,
        // then the manager's concurrency, metrics and stop.
        let configured = |ctx: ReconcilerContext, concurrency: u16| {
            ctx.configured(concurrency, self.metrics.clone(), self.stop.clone())
        };
        let (client, clock) = (&self.client, &self.clock);
        let infra_ctx = configured(
            infra::IDENTITY.context(client.clone(), Arc::clone(clock), &namespace),
            self.options.infra_concurrency,
        );
        let nodeclaim_ctx = configured(
            nodeclaim::IDENTITY.context(client.clone(), Arc::clone(clock), &namespace),
            self.options.nodeclaim_concurrency,
        );
        let mut requester_ctx = requester::Context::with_shared(
            configured(
                requester::IDENTITY.context(client.clone(), Arc::clone(clock), &namespace),
                self.options.requester_concurrency,
            ),
            Arc::clone(&self.markets),
        );
        requester_ctx.timing.guest_poll = Duration::from_secs(self.options.guest_poll_seconds);

        let record_ctx = record::Context::with_shared(configured(
            record::IDENTITY.context(client.clone(), Arc::clone(clock), &namespace),
            record::CONCURRENCY,
        ));

        // Every controller subscribes before the reflectors start, so none misses the initial list.
        let infra = infra::controller(Arc::new(infra_ctx), &caches);
        let requester = requester::controller(Arc::new(requester_ctx), &caches);
        let nodeclaim = nodeclaim::controller(Arc::new(nodeclaim_ctx), &caches);
        let record = record::controller(Arc::new(record_ctx), &caches);
        let reflectors = caches.run();

        // A controller whose own cache never lists (a missing CRD, no rights)
        // holds its graceful shutdown until it lists, and a reconcile waiting
        // for the others waits as long: the process would sit out SIGTERM
        // until its deadline. Before every cache listed no reconcile got past
        // that wait (CacheReadiness), so nothing writes and they can simply go.
        let stopped_before_ready = {
            let caches = Arc::clone(&caches);
            let stop = self.stop.clone();
            async move {
                stop.signaled().await;
                if caches.readiness().is_ready() {
                    // Reconciles may be writing: let the controllers finish them.
                    futures::future::pending::<()>().await;
                }
            }
        };
        let (ready_tx, ready) = watch::channel(false);
        let readiness = {
            let caches = Arc::clone(&caches);
            async move {
                caches.wait_until_ready().await;
                let _ = ready_tx.send(true);
                tracing::info!("caches synced; reconciling");
                // Keep the sender so readers never see the channel close while running.
                futures::future::pending::<()>().await;
            }
        };
        let done = Box::pin(async move {
            tokio::select! {
                () = reflectors => tracing::warn!("the shared cache stopped"),
                ((), (), (), ()) = futures::future::join4(infra, requester, nodeclaim, record) => {}
                () = readiness => {}
                () = stopped_before_ready => {
                    tracing::info!("stopped before every cache listed: nothing was reconciled");
                }
            }
        });
        Running { done, ready }
    }
}

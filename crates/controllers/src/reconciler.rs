//! The shell every reconciler runs in: what it needs from the manager
//! ([`ReconcilerContext`]), what happens when a reconcile fails
//! ([`error_policy`]) and how the controller machinery's own outcomes are
//! logged ([`log_outcome`]). The Infra, NodeClaim and Requester reconcilers
//! share it; the Requester's context adds its markets and timing.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::{Action, Config, Error as ControllerError};
use kube::runtime::events::Reporter;
use kube::{Client, Resource};

use crate::admission::Admission;
use crate::event_recorder::Recorder;
use crate::metrics::Metrics;
use crate::{Clock, Error, StopSignal};

/// Who a reconciler is: the names it reports and writes under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The name Events are reported under (`socialweb-<controller>`).
    pub reporter: &'static str,
    /// The field manager of every write (`api::names::*_MANAGER`).
    pub manager: &'static str,
}

impl Identity {
    /// A context for this reconciler: see [`ReconcilerContext::new`].
    #[must_use]
    pub fn context(
        self,
        client: Client,
        clock: Arc<dyn Clock>,
        contract_namespace: impl Into<String>,
    ) -> ReconcilerContext {
        ReconcilerContext::new(client, clock, contract_namespace, self)
    }
}

/// The client, clock, Event recorder, namespace, concurrency and metrics of one reconciler.
pub struct ReconcilerContext {
    /// The Kubernetes client writes go through.
    pub client: Client,
    /// Where time comes from (condition transition times, graces).
    pub clock: Arc<dyn Clock>,
    /// Publishes events.k8s.io/v1 Events under the reconciler's reporter name.
    pub recorder: Recorder,
    /// The names the reconciler reports, writes and counts under.
    pub identity: Identity,
    /// Where Infras, ComputeContracts and join Secrets live.
    pub contract_namespace: String,
    /// How many keys are reconciled at once.
    pub concurrency: u16,
    /// Reconcile counts, durations and errors; metrics registered nowhere
    /// until the manager sets its own.
    pub metrics: Metrics,
    /// When the controller stops taking new work (by default SIGTERM/SIGINT).
    pub stop: StopSignal,
}

impl std::fmt::Debug for ReconcilerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (who, namespace) = (self.identity.reporter, &self.contract_namespace);
        write!(
            f,
            "ReconcilerContext({who} in {namespace}, {} at once)",
            self.concurrency
        )
    }
}

impl ReconcilerContext {
    /// A context for `identity`, with a concurrency of 4, metrics registered
    /// nowhere and the process's signals as its stop (the manager sets its own
    /// with [`Self::configured`]).
    #[must_use]
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        contract_namespace: impl Into<String>,
        identity: Identity,
    ) -> Self {
        let reporter = Reporter {
            controller: identity.reporter.to_owned(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter, clock.clone()),
            client,
            clock,
            identity,
            contract_namespace: contract_namespace.into(),
            concurrency: 4,
            metrics: Metrics::default(),
            stop: StopSignal::on_process_signal(),
        }
    }

    /// The same context reconciling `concurrency` keys at once, counting into
    /// `metrics` and stopping on `stop`: how the manager configures every reconciler.
    #[must_use]
    pub fn configured(mut self, concurrency: u16, metrics: Metrics, stop: StopSignal) -> Self {
        self.concurrency = concurrency;
        self.metrics = metrics;
        self.stop = stop;
        self
    }

    /// The current time of the injected clock.
    #[must_use]
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        crate::time::now(self.clock.as_ref())
    }
}

/// Counts a failed reconcile of the reconciler `label` by its error's
/// category, logs it (a conflict only at debug: a race lost, not a fault) and
/// requeues after the error's own delay. Every reconciler's error policy is this one.
pub fn error_policy<K: Resource>(
    metrics: &Metrics,
    label: &'static str,
    object: &K,
    error: &Error,
) -> Action {
    metrics.reconcile_failed(label, error.category());
    let name = object.meta().name.as_deref().unwrap_or_default();
    let namespace = object.meta().namespace.as_deref().unwrap_or_default();
    if error.is_conflict() {
        tracing::debug!(controller = label, %namespace, %name, %error, "conflict; requeue");
    } else {
        tracing::warn!(controller = label, %namespace, %name, category = error.category(), %error, "reconcile failed");
    }
    Action::requeue(error.retry_after())
}

/// What a reconciler's runtime state gives the shell: its context.
pub trait Shell: Send + Sync + 'static {
    /// The context of the reconciler.
    fn context(&self) -> &ReconcilerContext;
}

/// [`error_policy`] for the reconciler `label`, in the shape `Controller::run` takes.
pub fn policy<K, S>(label: &'static str) -> impl Fn(Arc<K>, &Error, Arc<S>) -> Action
where
    K: Resource,
    S: Shell,
{
    move |object, error, state| {
        error_policy(&state.context().metrics, label, object.as_ref(), error)
    }
}

/// Logs what the controller machinery itself reports for `label` (a
/// reconcile's own errors are counted and logged by [`error_policy`]).
pub fn log_outcome<T, E: std::fmt::Display>(
    label: &'static str,
) -> impl FnMut(Result<T, E>) -> futures::future::Ready<()> {
    move |result| {
        if let Err(error) = result {
            tracing::debug!(controller = label, %error, "controller");
        }
        futures::future::ready(())
    }
}

/// How long a key's triggers must pause before the NodeClaim and Infra
/// controllers reconcile it (kube-runtime's trailing-edge debounce). Both
/// gather many objects under one key: a Cluster's claims, an Infra's
/// contracts. Each new claim and each status step of a contract triggers its
/// key, and without a pause each trigger ran a reconcile of the whole key.
/// Ten claims of a Cluster arrive within a few milliseconds, so 10 ms took
/// them in one reconcile: reconciles to Deployed fell 4.29 -> 3.87 per node
/// under `bench_scale --throughput`, the manager's CPU 0.94x, and three
/// Clusters of 1,000 claims were Joined in 0.7x the time (plan 0016 C5).
/// Once the API server's answers stopped waiting on Nagle's algorithm, 20 ms
/// gathered more at no cost in throughput: 10 % fewer reconciles and 7 %
/// less manager CPU over a 10,000-node life, a fifth less time for one
/// Cluster of 1,000, for 20 ms more between a single claim and its
/// contract (plan 0016 C7). A reconcile starts at least this long after its
/// key's last trigger, so a key whose triggers never pause for 20 ms waits
/// until they do; a burst of claims or contract steps is what makes them,
/// and a burst ends.
pub const FAN_IN_DEBOUNCE: Duration = Duration::from_millis(20);

/// A controller's queue: `concurrency` keys at once, each reconciled as soon
/// as it is triggered.
#[must_use]
pub fn queue(concurrency: u16) -> Config {
    Config::default().concurrency(concurrency)
}

/// A queue as [`queue`] whose keys wait for their triggers to pause for
/// [`FAN_IN_DEBOUNCE`]: for controllers that gather many objects under one key.
#[must_use]
pub fn fan_in_queue(concurrency: u16) -> Config {
    queue(concurrency).debounce(FAN_IN_DEBOUNCE)
}

/// Runs `controller` as every reconciler runs: its keys taken as `queue` says,
/// taking no new work once the context's stop is signaled, each failure
/// through [`error_policy`] under `label`, the machinery's own outcomes
/// logged by [`log_outcome`], and each reconcile's end told to `admission`
/// (the window the controller's triggers come through, if they do). Ends
/// when the controller's streams end.
pub fn run<K, S, Fut>(
    controller: kube::runtime::Controller<K>,
    label: &'static str,
    queue: Config,
    reconcile: impl FnMut(Arc<K>, Arc<S>) -> Fut,
    state: Arc<S>,
    admission: Option<Admission>,
) -> impl std::future::Future<Output = ()>
where
    K: Clone + Resource + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + std::fmt::Debug + Unpin,
    S: Shell,
    Fut: futures::TryFuture<Ok = Action, Error = Error> + Send + 'static,
{
    use futures::StreamExt;
    let stop = state.context().stop.signaled();
    let mut log = log_outcome(label);
    controller
        .with_config(queue)
        .graceful_shutdown_on(stop)
        .run(reconcile, policy::<K, S>(label), state)
        .for_each(move |outcome| {
            if let Some(admission) = &admission {
                // The key the outcome names; the queue's own errors name none.
                let reconciled = match &outcome {
                    Ok((object, _)) => Some((&object.name, object.namespace.as_deref())),
                    Err(
                        ControllerError::ObjectNotFound(object)
                        | ControllerError::ReconcilerFailed(_, object),
                    ) => Some((&object.name, object.namespace.as_deref())),
                    Err(_) => None,
                };
                if let Some((name, namespace)) = reconciled {
                    admission.finished(name, namespace);
                }
            }
            log(outcome)
        })
}

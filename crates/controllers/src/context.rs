//! What a reconciler needs from the manager: the one shape the Infra and
//! NodeClaim reconcilers share (the Requester's adds its markets and timing).

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::{Recorder, Reporter};

use crate::metrics::Metrics;
use crate::{Clock, StopSignal};

/// The client, clock, Event recorder, namespace, concurrency and metrics of one reconciler.
pub struct ReconcilerContext {
    /// The Kubernetes client writes go through.
    pub client: Client,
    /// Where time comes from (condition transition times, graces).
    pub clock: Arc<dyn Clock>,
    /// Publishes events.k8s.io/v1 Events under the reconciler's reporter name.
    pub recorder: Recorder,
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

impl ReconcilerContext {
    /// A context with Events reported as `reporter`, a concurrency of 4 and
    /// metrics registered nowhere (set `metrics` to the manager's to export them).
    #[must_use]
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        contract_namespace: impl Into<String>,
        reporter: &str,
    ) -> Self {
        let reporter = Reporter {
            controller: reporter.to_owned(),
            instance: None,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            clock,
            contract_namespace: contract_namespace.into(),
            concurrency: 4,
            metrics: Metrics::default(),
            stop: StopSignal::on_process_signal(),
        }
    }
}

//! The manager's Prometheus metrics, registered once and shared by every reconciler.
//!
//! Every label value is a `&'static str` from a fixed set (a controller name,
//! an [`Error::category`](crate::Error::category), a market operation, a
//! contract phase), so no uid, DID, address, object name or secret can ever
//! become a label: a value read from an object is a `String` and does not fit.
//! The series count is bounded by the sets, not by the cluster's size.
//!
//! ```
//! use controllers::metrics::Metrics;
//! use prometheus_client::registry::Registry;
//!
//! let mut registry = Registry::default();
//! let metrics = Metrics::register(&mut registry);
//! {
//!     let _timer = metrics.reconcile_started("infra"); // observes the duration on drop
//! }
//! metrics.reconcile_failed("infra", "kube");
//! ```

use std::time::{Duration, Instant};

use api::ComputeContractPhase;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::cache::CachedContract;

/// The prefix of every metric name.
pub const PREFIX: &str = "socialweb";

/// Labels of the per-controller families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The reconciler: `infra`, `requester`, `nodeclaim`, ….
    pub controller: &'static str,
}

/// Labels of the reconcile error counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The reconciler.
    pub controller: &'static str,
    /// [`Error::category`](crate::Error::category): `kube`, `conflict`, `invalid`, a market category, ….
    pub category: &'static str,
}

/// Labels of the ComputeContract phase gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// The phase name (`Pending` … `Failed`), or `Unset` before the Requester wrote a status.
    pub phase: &'static str,
}

/// Labels of the shared cache's families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The kind the cache holds: `Infra`, `ComputeContract`, `NodeClaim`, `Secret`, ….
    pub kind: &'static str,
}

/// Labels of the market latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MarketLabels {
    /// The market operation: `publish`, `bids`, `accept`, `status`, `release`, ….
    pub operation: &'static str,
}

/// Labels of the finished-release counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseLabels {
    /// What the market could say: `confirmed`, `acknowledged`, `unconfirmed`, `nothing_rented`.
    pub outcome: &'static str,
}

/// The label value of a contract without a phase yet.
pub const PHASE_UNSET: &str = "Unset";

/// Every phase label value, so the gauge shows zeros instead of stale numbers.
const PHASES: [&str; 8] = [
    PHASE_UNSET,
    "Pending",
    "Bidding",
    "Accepted",
    "Deployed",
    "Releasing",
    "Released",
    "Failed",
];

/// The bounded label value of a phase.
#[must_use]
pub const fn phase_label(phase: Option<ComputeContractPhase>) -> &'static str {
    match phase {
        None => PHASE_UNSET,
        Some(ComputeContractPhase::Pending) => "Pending",
        Some(ComputeContractPhase::Bidding) => "Bidding",
        Some(ComputeContractPhase::Accepted) => "Accepted",
        Some(ComputeContractPhase::Deployed) => "Deployed",
        Some(ComputeContractPhase::Releasing) => "Releasing",
        Some(ComputeContractPhase::Released) => "Released",
        Some(ComputeContractPhase::Failed) => "Failed",
    }
}

/// Builds histograms with fixed buckets inside a [`Family`].
#[derive(Clone, Copy, Debug)]
pub struct Buckets {
    start: f64,
    factor: f64,
    count: u16,
}

impl Buckets {
    /// Reconciles: 5 ms .. ~40 s.
    pub const RECONCILE: Self = Self::new(0.005, 2.0, 14);
    /// Market round trips: 1 ms .. ~65 s.
    pub const MARKET: Self = Self::new(0.001, 2.0, 17);
    /// Node provisioning: 1 s .. ~2.3 h.
    pub const PROVISIONING: Self = Self::new(1.0, 2.0, 14);

    const fn new(start: f64, factor: f64, count: u16) -> Self {
        Self {
            start,
            factor,
            count,
        }
    }

    fn histogram(self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, self.factor, self.count))
    }
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        self.histogram()
    }
}

/// All metrics of the manager. Cloning is cheap and every clone records into the same series.
#[derive(Clone, Debug)]
pub struct Metrics {
    reconciles: Family<ControllerLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: Family<ControllerLabels, Histogram, Buckets>,
    contract_phases: Family<PhaseLabels, Gauge>,
    market_latency: Family<MarketLabels, Histogram, Buckets>,
    nodeclaim_to_deployed: Histogram,
    nodeclaim_to_joined: Histogram,
    leader: Gauge,
    contract_releases: Family<ReleaseLabels, Counter>,
    cache_undecodable: Family<KindLabels, Gauge>,
    cache_decode_failures: Family<KindLabels, Counter>,
    reconcile_waiting: Family<ControllerLabels, Gauge>,
}

impl Default for Metrics {
    /// Metrics registered nowhere: for tests and tools that do not export them.
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl Metrics {
    /// Creates the metrics and registers them under [`PREFIX`] in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(Buckets::RECONCILE),
            contract_phases: Family::default(),
            market_latency: Family::new_with_constructor(Buckets::MARKET),
            nodeclaim_to_deployed: Buckets::PROVISIONING.histogram(),
            nodeclaim_to_joined: Buckets::PROVISIONING.histogram(),
            leader: Gauge::default(),
            contract_releases: Family::default(),
            cache_undecodable: Family::default(),
            cache_decode_failures: Family::default(),
            reconcile_waiting: Family::default(),
        };
        metrics.set_contract_phases([]);
        let registry = registry.sub_registry_with_prefix(PREFIX);
        registry.register(
            "reconcile",
            "Reconciles started, by controller",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and error category",
            metrics.reconcile_errors.clone(),
        );
        registry.register_with_unit(
            "reconcile_duration",
            "How long a reconcile took, by controller",
            Unit::Seconds,
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "computecontracts",
            "ComputeContracts in the contract namespace, by status phase",
            metrics.contract_phases.clone(),
        );
        registry.register_with_unit(
            "market_request_duration",
            "Round-trip time of a market call, by operation",
            Unit::Seconds,
            metrics.market_latency.clone(),
        );
        registry.register_with_unit(
            "nodeclaim_time_to_deployed",
            "Time from a NodeClaim's creation to its guest being Deployed",
            Unit::Seconds,
            metrics.nodeclaim_to_deployed.clone(),
        );
        registry.register_with_unit(
            "nodeclaim_time_to_joined",
            "Time from a NodeClaim's creation to its node having Joined",
            Unit::Seconds,
            metrics.nodeclaim_to_joined.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and runs the reconcilers, else 0",
            metrics.leader.clone(),
        );
        registry.register(
            "contract_releases",
            "ComputeContract releases finished, by what the market could say (confirmed, acknowledged, unconfirmed: the provider's records show the release was lost and the machine may still run; nothing_rented)",
            metrics.contract_releases.clone(),
        );
        registry.register(
            "cache_undecodable_objects",
            "Objects the shared cache holds no readable version of (or an old one), by kind: left out of every reconcile until fixed",
            metrics.cache_undecodable.clone(),
        );
        registry.register(
            "cache_decode_failures",
            "Object versions the shared cache could not decode, by kind",
            metrics.cache_decode_failures.clone(),
        );
        registry.register(
            "reconcile_waiting",
            "Objects triggered and waiting for room in the controller's window of unfinished reconciles, by controller (the Requester's contracts after a restart on a fleet): how far behind it is",
            metrics.reconcile_waiting.clone(),
        );
        metrics
    }

    /// Counts a reconcile of `controller` and times it until the returned guard is dropped.
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        let labels = ControllerLabels { controller };
        self.reconciles.get_or_create(&labels).inc();
        ReconcileTimer {
            histogram: self.reconcile_duration.get_or_create_owned(&labels),
            started: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `controller` by its error category.
    pub fn reconcile_failed(&self, controller: &'static str, category: &'static str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                controller,
                category,
            })
            .inc();
    }

    /// Sets the ComputeContract gauge from a cache snapshot: one item per contract.
    ///
    /// Phases absent from the snapshot are set to 0, so a finished phase does not linger.
    pub fn set_contract_phases(
        &self,
        phases: impl IntoIterator<Item = Option<ComputeContractPhase>>,
    ) {
        self.set_contract_phase_counts(phases.into_iter().map(|phase| (phase, 1)));
    }

    /// Sets the ComputeContract gauge from counts by phase (a cache index's);
    /// phases absent are set to 0.
    pub fn set_contract_phase_counts(
        &self,
        counts_by_phase: impl IntoIterator<Item = (Option<ComputeContractPhase>, usize)>,
    ) {
        let mut counts = [0_i64; PHASES.len()];
        for (phase, count) in counts_by_phase {
            let label = phase_label(phase);
            if let Some(index) = PHASES.iter().position(|known| *known == label) {
                counts[index] += i64::try_from(count).unwrap_or(i64::MAX);
            }
        }
        for (phase, count) in PHASES.iter().zip(counts) {
            self.contract_phases
                .get_or_create(&PhaseLabels { phase })
                .set(count);
        }
    }

    /// Sets the ComputeContract gauge from the contracts themselves (e.g. a cache's `state()`).
    pub fn set_contract_phases_from<'a>(
        &self,
        contracts: impl IntoIterator<Item = &'a CachedContract>,
    ) {
        self.set_contract_phases(
            contracts
                .into_iter()
                .map(|contract| contract.status.as_ref().and_then(|status| status.phase)),
        );
    }

    /// Refreshes the ComputeContract gauge from `contracts` (the shared cache) every `every`, forever.
    ///
    /// Run it next to the controllers (it only reads the cache) and drop it on shutdown.
    pub async fn publish_contract_phases(self, contracts: Store<CachedContract>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.set_contract_phases_from(contracts.state().iter().map(AsRef::as_ref));
        }
    }

    /// Records one market round trip of `operation`.
    pub fn observe_market(&self, operation: &'static str, duration: Duration) {
        self.market_latency
            .get_or_create(&MarketLabels { operation })
            .observe(duration.as_secs_f64());
    }

    /// Records the time from a NodeClaim's creation to its guest being Deployed (once per claim).
    pub fn observe_nodeclaim_deployed(&self, since_creation: Duration) {
        self.nodeclaim_to_deployed
            .observe(since_creation.as_secs_f64());
    }

    /// Records the time from a NodeClaim's creation to its node having Joined (once per claim).
    pub fn observe_nodeclaim_joined(&self, since_creation: Duration) {
        self.nodeclaim_to_joined
            .observe(since_creation.as_secs_f64());
    }

    /// Sets how many objects of `kind` the cache cannot decode now.
    pub fn set_undecodable(&self, kind: &'static str, count: usize) {
        self.cache_undecodable
            .get_or_create(&KindLabels { kind })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts one object version of `kind` the cache could not decode.
    pub fn decode_failed(&self, kind: &'static str) {
        self.cache_decode_failures
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// Counts a finished release by its outcome label (see [`ReleaseLabels`]).
    pub fn contract_released(&self, outcome: &'static str) {
        self.contract_releases
            .get_or_create(&ReleaseLabels { outcome })
            .inc();
    }

    /// The gauge of the objects of `controller` waiting for its window
    /// ([`Admission`](crate::admission::Admission)); a clone records into the
    /// same series.
    #[must_use]
    pub fn reconcile_waiting(&self, controller: &'static str) -> Gauge {
        self.reconcile_waiting
            .get_or_create_owned(&ControllerLabels { controller })
    }

    /// Sets the leader gauge. A replica that stops leading also counts no
    /// contracts in any phase and no undecodable objects (as before it first
    /// led: its caches are gone): it no longer watches them, and the counts
    /// of its last term would go on adding to the leader's in a sum (or hold
    /// an alert such as Releasing > 0 for 30 minutes) for as long as it runs.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.set_contract_phases([]);
            self.cache_undecodable.clear();
        }
    }
}

/// Times one reconcile; observes the elapsed time into the duration histogram when dropped.
#[derive(Debug)]
#[must_use = "the reconcile is timed until this guard is dropped"]
pub struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests;

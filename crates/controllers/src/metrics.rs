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

use api::{ComputeContract, ComputeContractPhase};
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

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

/// Labels of the market latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MarketLabels {
    /// The market operation: `publish`, `bids`, `accept`, `status`, `release`, ….
    pub operation: &'static str,
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
        let mut counts = [0_i64; PHASES.len()];
        for phase in phases {
            let label = phase_label(phase);
            if let Some(index) = PHASES.iter().position(|known| *known == label) {
                counts[index] += 1;
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
        contracts: impl IntoIterator<Item = &'a ComputeContract>,
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
    pub async fn publish_contract_phases(self, contracts: Store<ComputeContract>, every: Duration) {
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

    /// Sets the leader gauge.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use prometheus_client::encoding::text::encode;

    use super::*;

    fn setup() -> (Registry, Metrics) {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        (registry, metrics)
    }

    fn text(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).unwrap();
        out
    }

    /// The value of the one sample line that starts with `series` (name plus labels).
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(|value| value.parse().unwrap())
    }

    #[test]
    fn every_family_is_in_the_openmetrics_text() {
        let (registry, metrics) = setup();
        let untouched = text(&registry);
        // Gauges exist from the start, so an alert sees 0 rather than no data.
        assert_eq!(sample(&untouched, "socialweb_leader"), Some(0.0));
        assert_eq!(
            sample(
                &untouched,
                r#"socialweb_computecontracts{phase="Deployed"}"#
            ),
            Some(0.0)
        );
        // Labelled families appear with their first series.
        drop(metrics.reconcile_started("nodeclaim"));
        metrics.reconcile_failed("nodeclaim", "kube");
        metrics.observe_market("release", Duration::from_millis(5));
        let text = text(&registry);
        for family in [
            "socialweb_reconcile counter",
            "socialweb_reconcile_errors counter",
            "socialweb_reconcile_duration_seconds histogram",
            "socialweb_computecontracts gauge",
            "socialweb_market_request_duration_seconds histogram",
            "socialweb_nodeclaim_time_to_deployed_seconds histogram",
            "socialweb_nodeclaim_time_to_joined_seconds histogram",
            "socialweb_leader gauge",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family}")),
                "{family} missing in:\n{text}"
            );
        }
        assert!(text.ends_with("# EOF\n"), "not OpenMetrics text:\n{text}");
    }

    #[test]
    fn a_reconcile_counts_and_is_timed_when_the_guard_drops() {
        let (registry, metrics) = setup();
        let timer = metrics.reconcile_started("infra");
        let before_drop = text(&registry);
        assert_eq!(
            sample(
                &before_drop,
                r#"socialweb_reconcile_total{controller="infra"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &before_drop,
                r#"socialweb_reconcile_duration_seconds_count{controller="infra"}"#
            ),
            Some(0.0),
        );
        drop(timer);
        let after = text(&registry);
        assert_eq!(
            sample(
                &after,
                r#"socialweb_reconcile_duration_seconds_count{controller="infra"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &after,
                r#"socialweb_reconcile_total{controller="requester"}"#
            ),
            None
        );
    }

    #[test]
    fn failures_are_counted_by_controller_and_category() {
        let (registry, metrics) = setup();
        metrics.reconcile_failed("requester", "market_unavailable");
        metrics.reconcile_failed("requester", "market_unavailable");
        metrics.reconcile_failed("infra", "conflict");
        let text = text(&registry);
        assert_eq!(
            sample(
                &text,
                r#"socialweb_reconcile_errors_total{controller="requester",category="market_unavailable"}"#
            ),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"socialweb_reconcile_errors_total{controller="infra",category="conflict"}"#
            ),
            Some(1.0)
        );
    }

    #[test]
    fn contract_phases_follow_the_latest_snapshot_and_drop_to_zero() {
        let (registry, metrics) = setup();
        metrics.set_contract_phases([
            Some(ComputeContractPhase::Deployed),
            Some(ComputeContractPhase::Deployed),
            None,
        ]);
        let first = text(&registry);
        assert_eq!(
            sample(&first, r#"socialweb_computecontracts{phase="Deployed"}"#),
            Some(2.0)
        );
        assert_eq!(
            sample(&first, r#"socialweb_computecontracts{phase="Unset"}"#),
            Some(1.0)
        );
        assert_eq!(
            sample(&first, r#"socialweb_computecontracts{phase="Failed"}"#),
            Some(0.0)
        );

        metrics.set_contract_phases([Some(ComputeContractPhase::Releasing)]);
        let second = text(&registry);
        assert_eq!(
            sample(&second, r#"socialweb_computecontracts{phase="Deployed"}"#),
            Some(0.0)
        );
        assert_eq!(
            sample(&second, r#"socialweb_computecontracts{phase="Releasing"}"#),
            Some(1.0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_phase_gauge_follows_the_cache() {
        use kube::runtime::watcher::Event;

        let (registry, metrics) = setup();
        let (store, mut writer) = kube::runtime::reflector::store::<ComputeContract>();
        let contract = |name: &str, phase: Option<ComputeContractPhase>| {
            let mut contract: ComputeContract = serde_json::from_value(serde_json::json!({
                "apiVersion": "socialweb.computer/v1alpha1",
                "kind": "ComputeContract",
                "metadata": {"name": name, "namespace": "socialweb-system"},
                "spec": {
                    "resources": {"cpus": 1, "memory": 1024, "disk": 10, "network": 1},
                    "location": {"country": "DE"},
                },
            }))
            .unwrap();
            contract.status = phase.map(|phase| api::ComputeContractStatus {
                phase: Some(phase),
                ..Default::default()
            });
            contract
        };
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(contract(
            "a",
            Some(ComputeContractPhase::Deployed),
        )));
        writer.apply_watcher_event(&Event::InitApply(contract("b", None)));
        writer.apply_watcher_event(&Event::InitDone);
        let publisher = tokio::spawn(
            metrics
                .clone()
                .publish_contract_phases(store, Duration::from_secs(10)),
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
        let first = text(&registry);
        assert_eq!(
            sample(&first, r#"socialweb_computecontracts{phase="Deployed"}"#),
            Some(1.0)
        );
        assert_eq!(
            sample(&first, r#"socialweb_computecontracts{phase="Unset"}"#),
            Some(1.0)
        );

        writer.apply_watcher_event(&Event::Apply(contract(
            "a",
            Some(ComputeContractPhase::Releasing),
        )));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let later = text(&registry);
        assert_eq!(
            sample(&later, r#"socialweb_computecontracts{phase="Deployed"}"#),
            Some(0.0)
        );
        assert_eq!(
            sample(&later, r#"socialweb_computecontracts{phase="Releasing"}"#),
            Some(1.0)
        );
        publisher.abort();
    }

    #[test]
    fn every_phase_has_its_own_label() {
        let all = [
            ComputeContractPhase::Pending,
            ComputeContractPhase::Bidding,
            ComputeContractPhase::Accepted,
            ComputeContractPhase::Deployed,
            ComputeContractPhase::Releasing,
            ComputeContractPhase::Released,
            ComputeContractPhase::Failed,
        ];
        let mut labels: Vec<&str> = all.iter().map(|phase| phase_label(Some(*phase))).collect();
        labels.push(phase_label(None));
        labels.sort_unstable();
        let mut known = PHASES.to_vec();
        known.sort_unstable();
        assert_eq!(labels, known);
        for phase in all {
            assert_eq!(format!("{phase:?}"), phase_label(Some(phase)));
        }
    }

    #[test]
    fn market_latency_provisioning_times_and_leadership_are_recorded() {
        let (registry, metrics) = setup();
        metrics.observe_market("publish", Duration::from_millis(30));
        metrics.observe_nodeclaim_deployed(Duration::from_secs(90));
        metrics.observe_nodeclaim_joined(Duration::from_secs(150));
        metrics.set_leader(true);
        let text = text(&registry);
        assert_eq!(
            sample(
                &text,
                r#"socialweb_market_request_duration_seconds_count{operation="publish"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"socialweb_market_request_duration_seconds_sum{operation="publish"}"#
            ),
            Some(0.03)
        );
        assert_eq!(
            sample(&text, "socialweb_nodeclaim_time_to_deployed_seconds_sum"),
            Some(90.0)
        );
        assert_eq!(
            sample(&text, "socialweb_nodeclaim_time_to_joined_seconds_count"),
            Some(1.0)
        );
        assert_eq!(sample(&text, "socialweb_leader"), Some(1.0));
        metrics.set_leader(false);
        assert_eq!(
            sample(&self::text(&registry), "socialweb_leader"),
            Some(0.0)
        );
    }
}

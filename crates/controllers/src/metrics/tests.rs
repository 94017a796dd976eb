//! The metrics as Prometheus reads them: every family, label and value.
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
    metrics.reconcile_waiting("requester").set(7);
    let text = text(&registry);
    assert_eq!(
        sample(
            &text,
            r#"socialweb_reconcile_waiting{controller="requester"}"#
        ),
        Some(7.0)
    );
    for family in [
        "socialweb_reconcile counter",
        "socialweb_reconcile_errors counter",
        "socialweb_reconcile_duration_seconds histogram",
        "socialweb_computecontracts gauge",
        "socialweb_market_request_duration_seconds histogram",
        "socialweb_nodeclaim_time_to_deployed_seconds histogram",
        "socialweb_nodeclaim_time_to_joined_seconds histogram",
        "socialweb_leader gauge",
        "socialweb_reconcile_waiting gauge",
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
    let (store, mut writer) = kube::runtime::reflector::store::<CachedContract>();
    let contract = |name: &str, phase: Option<ComputeContractPhase>| {
        let mut contract: CachedContract = serde_json::from_value(serde_json::json!({
            "apiVersion": "socialweb.computer/v1alpha1",
            "kind": "ComputeContract",
            "metadata": {"name": name, "namespace": "socialweb-system"},
            "spec": {
                "resources": {"cpus": 1, "memory": 1024, "disk": 10, "network": 1},
                "location": {"country": "DE"},
            },
        }))
        .unwrap();
        contract.status = phase.map(|phase| crate::cache::CachedContractStatus {
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

#[test]
fn a_replica_that_stops_leading_counts_no_contracts_and_no_undecodable_objects() {
    let (registry, metrics) = setup();
    metrics.set_leader(true);
    metrics.set_contract_phase_counts([
        (Some(ComputeContractPhase::Releasing), 2),
        (Some(ComputeContractPhase::Deployed), 5),
    ]);
    metrics.set_undecodable("NodeClaim", 1);
    let releasing = r#"socialweb_computecontracts{phase="Releasing"}"#;
    let undecodable = r#"socialweb_cache_undecodable_objects{kind="NodeClaim"}"#;
    assert_eq!(sample(&text(&registry), releasing), Some(2.0));
    assert_eq!(sample(&text(&registry), undecodable), Some(1.0));
    metrics.set_leader(false);
    let text = text(&registry);
    assert_eq!(sample(&text, releasing), Some(0.0));
    assert_eq!(sample(&text, undecodable), None);
    assert_eq!(
        sample(&text, r#"socialweb_computecontracts{phase="Deployed"}"#),
        Some(0.0)
    );
}

#[test]
fn undecodable_objects_are_counted_by_kind() {
    let (registry, metrics) = setup();
    metrics.decode_failed("NodeClaim");
    metrics.decode_failed("NodeClaim");
    metrics.set_undecodable("NodeClaim", 1);
    metrics.set_undecodable("Infra", 0);
    let text = text(&registry);
    assert_eq!(
        sample(
            &text,
            r#"socialweb_cache_decode_failures_total{kind="NodeClaim"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"socialweb_cache_undecodable_objects{kind="NodeClaim"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"socialweb_cache_undecodable_objects{kind="Infra"}"#
        ),
        Some(0.0)
    );
}

#[test]
fn finished_releases_are_counted_by_what_the_market_could_say() {
    let (registry, metrics) = setup();
    metrics.contract_released("acknowledged");
    metrics.contract_released("acknowledged");
    metrics.contract_released("unconfirmed");
    let out = text(&registry);
    assert_eq!(
        sample(
            &out,
            r#"socialweb_contract_releases_total{outcome="acknowledged"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &out,
            r#"socialweb_contract_releases_total{outcome="unconfirmed"}"#
        ),
        Some(1.0)
    );
}

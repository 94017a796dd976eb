//! Every reconciler of the Requester controller counts its failures in
//! `socialweb_reconcile_errors` under its own label, through the one shell
//! error policy (the contract reconciler once did not count at all).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

use super::root::ignored;
use super::test_fixtures::{contract, requester_with};
use super::{Context, Markets, Runtime};
use crate::metrics::Metrics;
use crate::reconciler::policy;
use crate::{Error, SharedCaches, SystemClock};

/// A runtime on a client that is never called, with metrics in `registry`.
fn runtime(registry: &mut Registry) -> Arc<Runtime> {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let clock = Arc::new(SystemClock);
    let markets = Arc::new(Markets::new(clock.clone()));
    let mut ctx = Context::new(client.clone(), clock, markets, "socialweb-system");
    ctx.metrics = Metrics::register(registry);
    let caches = SharedCaches::new(client, "socialweb-system");
    Arc::new(Runtime {
        ctx: Arc::new(ctx),
        contracts: caches.contracts.store(),
        requesters: caches.requesters.store(),
        infras: caches.infras.store(),
        indexes: caches.indexes.clone(),
        count_pace: crate::status_pace::StatusPace::default(),
        own_writes: crate::own_writes::OwnWrites::default(),
        ready: caches.readiness(),
    })
}

fn failure() -> Error {
    Error::kube(
        "write the status of ComputeContract socialweb-system/c1",
        kube::Error::Api(kube::core::Status::failure("boom", "InternalError").boxed()),
    )
}

fn errors(registry: &Registry, controller: &str) -> Option<f64> {
    let mut text = String::new();
    encode(&mut text, registry).unwrap();
    let series = format!(
        r#"socialweb_reconcile_errors_total{{controller="{controller}",category="kube"}} "#
    );
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map(|value| value.parse().unwrap())
}

#[tokio::test]
async fn every_requester_reconciler_counts_its_failures() {
    let mut registry = Registry::default();
    let rt = runtime(&mut registry);
    let contracts = policy::<crate::cache::CachedContract, Runtime>(super::CONTRACT_METRICS_LABEL);
    contracts(Arc::new((&contract()).into()), &failure(), Arc::clone(&rt));
    contracts(Arc::new((&contract()).into()), &failure(), Arc::clone(&rt));
    let requester = Arc::new(requester_with("root", vec![]));
    let roots = policy::<api::Requester, Runtime>(super::ROOT_METRICS_LABEL);
    roots(Arc::clone(&requester), &failure(), Arc::clone(&rt));
    let ignored = policy::<api::Requester, Runtime>(ignored::METRICS_LABEL);
    ignored(requester, &failure(), rt);
    assert_eq!(errors(&registry, super::CONTRACT_METRICS_LABEL), Some(2.0));
    assert_eq!(errors(&registry, super::ROOT_METRICS_LABEL), Some(1.0));
    assert_eq!(errors(&registry, ignored::METRICS_LABEL), Some(1.0));
}

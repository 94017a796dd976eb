//! The Requester object: its market, its status, and its finalizer, which
//! keeps the root delete order.
//!
//! # Expected flow
//!
//! A live Requester gets the finalizer `requester.socialweb.computer/root-delete-order`,
//! its market is built (or its bidders reconfigured) and its status says
//! whether the market is configured and how many contracts the namespace has.
//!
//! When it is deleted (and it is the Requester that runs the namespace):
//! 1. every Infra of the namespace is deleted (their own finalizers release
//!    and delete their contracts);
//! 2. every contract is released: the contract controller treats a deleting
//!    Requester as a release request for every guest, and keeps sending
//!    releases and confirming them;
//! 3. once no Infra remains, contracts that are Released (or finished without
//!    a guest) are deleted by this finalizer, so ownerless leftovers do not
//!    block it;
//! 4. when no ComputeContract remains, the finalizer is removed and the
//!    Requester goes last.
//!
//! # Guarantees
//!
//! The finalizer is removed only when no ComputeContract is left in the
//! namespace, so no guest loses the component that releases it. A Requester
//! that does not run the namespace (another, older one does) lets go at once.

use std::sync::Arc;
use std::time::Duration;

use api::{ComputeContract, ConditionStatus as S, Infra, Requester, RequesterStatus, names};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use tracing::{info, warn};

use super::Runtime;
use super::conditions as cond;
use super::markets::select_requester;
use super::ttl::finished_without_guest;
use crate::market_adapter::{MarketAdapter, Readiness};
use crate::{Error, Result};

/// How often a deleting Requester checks on its Infras and contracts.
const CLEANUP_POLL: Duration = Duration::from_secs(2);

/// Reconciles one Requester.
///
/// # Errors
/// A failed write to the API server; a conflict is a quick requeue.
#[tracing::instrument(skip_all, fields(namespace = %requester.namespace().unwrap_or_default(), requester = %requester.name_any()))]
pub(super) async fn reconcile_requester(
    requester: Arc<Requester>,
    rt: Arc<Runtime>,
) -> Result<Action> {
    // An unsynced cache would make "no contract remains" true too early.
    rt.wait_until_ready().await;
    let _timer = rt.ctx.metrics.reconcile_started(super::ROOT_METRICS_LABEL);
    let namespace = requester.namespace().unwrap_or_default();
    rt.ctx.metrics.set_contract_phases(
        contracts_in(&rt, &namespace)
            .iter()
            .map(|c| c.status.as_ref().and_then(|s| s.phase)),
    );
    let api: Api<Requester> = Api::namespaced(rt.ctx.client.clone(), &namespace);
    let has_finalizer = requester
        .finalizers()
        .iter()
        .any(|f| f == names::REQUESTER_FINALIZER);
    if requester.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return cleanup(&api, &requester, &rt, &namespace).await;
    }
    if !has_finalizer {
        add_finalizer(&api, &requester).await?;
        // The write triggers a new reconcile with the fresh object.
        return Ok(Action::await_change());
    }
    let status = live_status(&requester, &rt, &namespace);
    write_status_if_changed(&api, &requester, status).await?;
    Ok(Action::await_change())
}

fn contracts_in(rt: &Runtime, namespace: &str) -> Vec<Arc<ComputeContract>> {
    rt.contracts
        .state()
        .into_iter()
        .filter(|c| c.namespace().as_deref() == Some(namespace))
        .collect()
}

/// The status of a Requester that is not being deleted.
fn live_status(requester: &Requester, rt: &Runtime, namespace: &str) -> RequesterStatus {
    let now = crate::time::now(rt.ctx.clock.as_ref());
    let mut status = requester.status.clone().unwrap_or_default();
    status.observed_generation = requester.metadata.generation;
    status.contracts = u32::try_from(contracts_in(rt, namespace).len()).unwrap_or(u32::MAX);
    status.market = requester.spec.market.kind();
    let requesters = rt.requesters.state();
    let runner = select_requester(requesters.iter().map(AsRef::as_ref), namespace);
    let market = match runner {
        Some(runner) if runner.name_any() != requester.name_any() => Ok(()),
        _ => rt
            .ctx
            .markets
            .for_requester(requester)
            .map(|_| ())
            .map_err(|error| error.to_string()),
    };
    let (ready, reason, message) = live_ready(requester, runner, market);
    cond::set(
        &mut status.conditions,
        cond::READY,
        ready,
        reason,
        &message,
        requester.metadata.generation,
        now,
    );
    status
}

/// The Ready condition of a live Requester: `runner` is the Requester that
/// runs its namespace, `market` whether its market could be built (the error
/// said as a person reads it).
///
/// # Guarantees
/// True only for the Requester that runs the namespace, with a market that
/// was built and has at least one bidder: a market nobody bids on rents nothing.
fn live_ready(
    requester: &Requester,
    runner: Option<&Requester>,
    market: Result<(), String>,
) -> (S, &'static str, String) {
    if let Some(runner) = runner.filter(|r| r.name_any() != requester.name_any()) {
        return (
            S::False,
            cond::SUPERSEDED,
            format!(
                "Requester {} (the oldest in this namespace) runs its contracts; delete this one",
                runner.name_any()
            ),
        );
    }
    if let Err(error) = market {
        return (
            S::False,
            cond::NO_MARKET,
            format!("{error}; fix spec.market"),
        );
    }
    match MarketAdapter::readiness(&requester.spec.market) {
        Readiness::NoBidders(message) => (S::False, cond::NO_BIDDERS, message),
        Readiness::Ready(message) => (S::True, cond::MARKET_CONFIGURED, message),
    }
}

/// One step of the root delete order; requeues until it is done.
async fn cleanup(
    api: &Api<Requester>,
    requester: &Requester,
    rt: &Runtime,
    namespace: &str,
) -> Result<Action> {
    let requesters = rt.requesters.state();
    let runs_namespace = select_requester(requesters.iter().map(AsRef::as_ref), namespace)
        .is_some_and(|r| r.name_any() == requester.name_any());
    if !runs_namespace {
        info!("another Requester runs this namespace; letting go at once");
        remove_finalizer(api, requester).await?;
        rt.ctx.markets.forget(namespace, &requester.name_any());
        return Ok(Action::await_change());
    }
    let infras: Vec<Arc<Infra>> = rt
        .infras
        .state()
        .into_iter()
        .filter(|i| i.namespace().as_deref() == Some(namespace))
        .collect();
    let infra_api: Api<Infra> = Api::namespaced(rt.ctx.client.clone(), namespace);
    for infra in infras
        .iter()
        .filter(|i| i.metadata.deletion_timestamp.is_none())
    {
        info!(infra = %infra.name_any(), "root delete order: deleting Infra");
        delete_ignoring_missing(&infra_api, &infra.name_any(), infra.uid()).await?;
    }
    let contracts = contracts_in(rt, namespace);
    if infras.is_empty() {
        let contract_api: Api<ComputeContract> = Api::namespaced(rt.ctx.client.clone(), namespace);
        for contract in contracts
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && finished_without_guest(c))
        {
            info!(contract = %contract.name_any(), "root delete order: deleting a finished contract");
            delete_ignoring_missing(&contract_api, &contract.name_any(), contract.uid()).await?;
        }
    }
    let mut status = requester.status.clone().unwrap_or_default();
    status.contracts = u32::try_from(contracts.len()).unwrap_or(u32::MAX);
    cond::set(
        &mut status.conditions,
        cond::READY,
        S::False,
        cond::DELETING,
        &format!(
            "deleting in the root delete order: {} Infras and {} ComputeContracts remain; releases are \
             still being sent",
            infras.len(),
            contracts.len()
        ),
        requester.metadata.generation,
        crate::time::now(rt.ctx.clock.as_ref()),
    );
    write_status_if_changed(api, requester, status).await?;
    if !infras.is_empty() || !contracts.is_empty() {
        return Ok(Action::requeue(CLEANUP_POLL));
    }
    info!("root delete order complete: no Infra and no ComputeContract left");
    remove_finalizer(api, requester).await?;
    rt.ctx.markets.forget(namespace, &requester.name_any());
    Ok(Action::await_change())
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str, uid: Option<String>) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("delete {name}"), e)),
    }
}

fn describe(requester: &Requester) -> String {
    format!(
        "Requester {}/{}",
        requester.namespace().unwrap_or_default(),
        requester.name_any()
    )
}

/// Adds the finalizer; the resourceVersion guards the list against a concurrent change.
async fn add_finalizer(api: &Api<Requester>, requester: &Requester) -> Result<()> {
    let mut finalizers = requester.finalizers().to_vec();
    finalizers.push(names::REQUESTER_FINALIZER.to_owned());
    patch_finalizers(api, requester, &finalizers, "add the finalizer to").await
}

async fn remove_finalizer(api: &Api<Requester>, requester: &Requester) -> Result<()> {
    let finalizers: Vec<String> = requester
        .finalizers()
        .iter()
        .filter(|f| *f != names::REQUESTER_FINALIZER)
        .cloned()
        .collect();
    patch_finalizers(api, requester, &finalizers, "remove the finalizer from").await
}

async fn patch_finalizers(
    api: &Api<Requester>,
    requester: &Requester,
    finalizers: &[String],
    action: &str,
) -> Result<()> {
    super::finalizers::set_finalizers(api, requester, finalizers)
        .await
        .map_err(|e| Error::kube(format!("{action} {}", describe(requester)), e))
}

/// Replaces the Requester's status when it differs (PUT on /status with the
/// resourceVersion read, so a stale decision is a 409); a Requester gone is fine.
pub(super) async fn write_status_if_changed(
    api: &Api<Requester>,
    requester: &Requester,
    status: RequesterStatus,
) -> Result<()> {
    if requester.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut next = requester.clone();
    next.metadata.managed_fields = None;
    next.status = Some(status);
    let params = PostParams {
        field_manager: Some(names::REQUESTER_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api
        .replace_status(&requester.name_any(), &params, &next)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(
            format!("write the status of {}", describe(requester)),
            e,
        )),
    }
}

/// Logs a failed reconcile and requeues after the error's own delay.
pub(super) fn error_policy(requester: Arc<Requester>, error: &Error, rt: Arc<Runtime>) -> Action {
    rt.ctx
        .metrics
        .reconcile_failed(super::ROOT_METRICS_LABEL, error.category());
    if !error.is_conflict() {
        warn!(requester = %requester.name_any(), category = error.category(), %error, "reconcile failed");
    }
    Action::requeue(error.retry_after())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::requester::test_fixtures::requester_with;

    #[test]
    fn a_market_without_bidders_is_not_ready() {
        let none = requester_with("root", vec![]);
        let (ready, reason, message) = live_ready(&none, Some(&none), Ok(()));
        assert_eq!((ready, reason), (S::False, cond::NO_BIDDERS));
        assert!(message.contains("spec.market.local.bidders"), "{message}");

        let one = requester_with(
            "root",
            vec![crate::requester::test_fixtures::bidder("did:web:a")],
        );
        let (ready, reason, message) = live_ready(&one, Some(&one), Ok(()));
        assert_eq!((ready, reason), (S::True, cond::MARKET_CONFIGURED));
        assert!(message.contains("1 bidders"), "{message}");
    }

    #[test]
    fn a_broken_market_and_a_superseded_requester_are_not_ready() {
        let root = requester_with(
            "root",
            vec![crate::requester::test_fixtures::bidder("did:web:a")],
        );
        let (ready, reason, _) = live_ready(&root, Some(&root), Err("no market".to_owned()));
        assert_eq!((ready, reason), (S::False, cond::NO_MARKET));
        let older = requester_with("older", vec![]);
        let (ready, reason, message) = live_ready(&root, Some(&older), Ok(()));
        assert_eq!((ready, reason), (S::False, cond::SUPERSEDED));
        assert!(message.contains("older"), "{message}");
    }
}

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

pub(super) mod count_pace;
pub(super) mod ignored;

use std::sync::Arc;
use std::time::Duration;

use api::{ComputeContract, ConditionStatus as S, Infra, Requester, RequesterStatus, names};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::info;

use crate::Result;
use crate::market_adapter::Readiness;
use crate::requester::Runtime;
use crate::requester::conditions as cond;
use crate::requester::contract::ttl::finished_without_guest;
use crate::requester::markets::select_requester;
use crate::write::{self, Seen};

/// How often a deleting Requester checks on its Infras and contracts.
const CLEANUP_POLL: Duration = Duration::from_secs(2);
/// How often a ready atproto Requester re-reads its Secrets and asks its
/// market whether it still logs in and finds bidders.
const ATPROTO_RECHECK: Duration = Duration::from_secs(300);
/// How soon an atproto Requester that is not ready looks again.
const ATPROTO_RETRY: Duration = Duration::from_secs(15);

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
    let _timer = rt
        .ctx
        .metrics
        .reconcile_started(crate::requester::ROOT_METRICS_LABEL);
    let namespace = requester.namespace().unwrap_or_default();
    let client = &rt.ctx.client;
    let seen = Seen::of(requester.as_ref());
    let has_finalizer = seen.has_finalizer(names::REQUESTER_FINALIZER);
    if requester.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return cleanup(&requester, &rt, &namespace).await;
    }
    if !has_finalizer {
        write::add_finalizer::<Requester>(client, MANAGER, &seen, names::REQUESTER_FINALIZER)
            .await?;
        // The write triggers a new reconcile with the fresh object.
        return Ok(Action::await_change());
    }
    let status = live_status(&requester, &rt, &namespace).await;
    let ready = status
        .conditions
        .iter()
        .any(|c| c.type_ == cond::READY && c.status == S::True);
    let written = requester.status.clone().unwrap_or_default();
    if written != status {
        let only_count = RequesterStatus {
            contracts: written.contracts,
            ..status.clone()
        } == written;
        let uid = requester.uid().unwrap_or_default();
        if let Some(wait) = rt
            .count_pace
            .wait_before_writing(&uid, only_count, rt.ctx.clock.now())
        {
            return Ok(Action::requeue(wait));
        }
    }
    write_status_if_changed(client, &requester, status).await?;
    if requester.spec.market.atproto.is_some() {
        // A market outside the cluster changes without an event here: a
        // rotated Secret, a PDS that came back, a bidder that appeared.
        return Ok(Action::requeue(if ready {
            ATPROTO_RECHECK
        } else {
            ATPROTO_RETRY
        }));
    }
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
async fn live_status(requester: &Requester, rt: &Runtime, namespace: &str) -> RequesterStatus {
    let now = rt.ctx.now();
    let mut status = requester.status.clone().unwrap_or_default();
    status.observed_generation = requester.metadata.generation;
    let contracts: usize = rt
        .indexes
        .contract_phases(namespace)
        .iter()
        .map(|(_, count)| count)
        .sum();
    status.contracts = u32::try_from(contracts).unwrap_or(u32::MAX);
    status.market = requester.spec.market.kind();
    let runner = {
        let requesters = rt.requesters.state();
        select_requester(requesters.iter().map(AsRef::as_ref), namespace).map(|r| r.name_any())
    };
    let readiness = match &runner {
        Some(runner) if *runner != requester.name_any() => None,
        _ => Some(market_readiness(requester, rt).await),
    };
    let (ready, reason, message) = live_ready(runner.as_deref(), readiness);
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

/// Reads the market's Secrets again, builds (or rebuilds) the market, and
/// asks it whether it can rent.
async fn market_readiness(requester: &Requester, rt: &Runtime) -> Readiness {
    let markets = &rt.ctx.markets;
    if let Err(error) = markets
        .read_credentials(&rt.ctx.client, requester, true)
        .await
    {
        return error.readiness();
    }
    if let Err(error) = markets.for_requester(requester) {
        return Readiness::NoMarket(format!("{error}; fix spec.market"));
    }
    markets.readiness(requester).await
}

/// The Ready condition of a live Requester: `runner` is the name of the
/// Requester that runs its namespace, `readiness` what its market says
/// (`None` when another Requester runs the namespace).
///
/// # Guarantees
/// True only for the Requester that runs the namespace, with a market that
/// was built and can rent: a market nobody bids on rents nothing.
fn live_ready(runner: Option<&str>, readiness: Option<Readiness>) -> (S, &'static str, String) {
    let Some(readiness) = readiness else {
        return (
            S::False,
            cond::SUPERSEDED,
            format!(
                "Requester {} (the oldest in this namespace) runs its contracts; delete this one",
                runner.unwrap_or_default()
            ),
        );
    };
    match readiness {
        Readiness::Ready(message) => (S::True, cond::MARKET_CONFIGURED, message),
        Readiness::NoBidders(message) => (S::False, cond::NO_BIDDERS, message),
        Readiness::NoMarket(message) => (S::False, cond::NO_MARKET, message),
        Readiness::SecretMissing(message) => (S::False, cond::SECRET_MISSING, message),
        Readiness::InvalidCredentials(message) => (S::False, cond::INVALID_CREDENTIALS, message),
        Readiness::PdsUnreachable(message) => (S::False, cond::PDS_UNREACHABLE, message),
    }
}

/// One step of the root delete order; requeues until it is done.
async fn cleanup(requester: &Requester, rt: &Runtime, namespace: &str) -> Result<Action> {
    let client = &rt.ctx.client;
    let seen = Seen::of(requester);
    let requesters = rt.requesters.state();
    let runs_namespace = select_requester(requesters.iter().map(AsRef::as_ref), namespace)
        .is_some_and(|r| r.name_any() == requester.name_any());
    if !runs_namespace {
        info!("another Requester runs this namespace; letting go at once");
        write::remove_finalizer::<Requester>(client, MANAGER, &seen, names::REQUESTER_FINALIZER)
            .await?;
        rt.ctx.markets.forget(namespace, &requester.name_any());
        return Ok(Action::await_change());
    }
    let infras: Vec<Arc<Infra>> = rt
        .infras
        .state()
        .into_iter()
        .filter(|i| i.namespace().as_deref() == Some(namespace))
        .collect();
    for infra in infras
        .iter()
        .filter(|i| i.metadata.deletion_timestamp.is_none())
    {
        info!(infra = %infra.name_any(), "root delete order: deleting Infra");
        write::delete_if_present::<Infra>(client, &Seen::of(infra.as_ref()).any_version()).await?;
    }
    let contracts = contracts_in(rt, namespace);
    if infras.is_empty() {
        for contract in contracts
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none() && finished_without_guest(c))
        {
            info!(contract = %contract.name_any(), "root delete order: deleting a finished contract");
            write::delete_if_present::<ComputeContract>(
                client,
                &Seen::of(contract.as_ref()).any_version(),
            )
            .await?;
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
        rt.ctx.now(),
    );
    write_status_if_changed(client, requester, status).await?;
    if !infras.is_empty() || !contracts.is_empty() {
        return Ok(Action::requeue(CLEANUP_POLL));
    }
    info!("root delete order complete: no Infra and no ComputeContract left");
    write::remove_finalizer::<Requester>(client, MANAGER, &seen, names::REQUESTER_FINALIZER)
        .await?;
    rt.ctx.markets.forget(namespace, &requester.name_any());
    rt.count_pace.forget(&requester.uid().unwrap_or_default());
    Ok(Action::await_change())
}

/// The field manager of every write of the Requester controller.
const MANAGER: &str = crate::requester::IDENTITY.manager;

/// Replaces the Requester's status when it differs, guarded by the
/// resourceVersion read (a stale decision is a 409); a Requester gone is fine.
pub(super) async fn write_status_if_changed(
    client: &kube::Client,
    requester: &Requester,
    status: RequesterStatus,
) -> Result<()> {
    if requester.status.as_ref() != Some(&status) {
        write::replace_status(client, MANAGER, requester, status).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn each_market_readiness_is_its_own_reason() {
        let cases = [
            (
                Readiness::Ready("ok".into()),
                S::True,
                cond::MARKET_CONFIGURED,
            ),
            (Readiness::NoBidders("b".into()), S::False, cond::NO_BIDDERS),
            (Readiness::NoMarket("m".into()), S::False, cond::NO_MARKET),
            (
                Readiness::SecretMissing("s".into()),
                S::False,
                cond::SECRET_MISSING,
            ),
            (
                Readiness::InvalidCredentials("c".into()),
                S::False,
                cond::INVALID_CREDENTIALS,
            ),
            (
                Readiness::PdsUnreachable("p".into()),
                S::False,
                cond::PDS_UNREACHABLE,
            ),
        ];
        for (readiness, status, reason) in cases {
            let expected_message = match &readiness {
                Readiness::Ready(m)
                | Readiness::NoBidders(m)
                | Readiness::NoMarket(m)
                | Readiness::SecretMissing(m)
                | Readiness::InvalidCredentials(m)
                | Readiness::PdsUnreachable(m) => m.clone(),
            };
            assert_eq!(
                live_ready(Some("root"), Some(readiness)),
                (status, reason, expected_message)
            );
        }
    }

    #[test]
    fn a_superseded_requester_is_not_ready_and_names_the_runner() {
        let (ready, reason, message) = live_ready(Some("older"), None);
        assert_eq!((ready, reason), (S::False, cond::SUPERSEDED));
        assert!(message.contains("older"), "{message}");
    }
}

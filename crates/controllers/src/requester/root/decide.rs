//! The pure half of the root reconciler: from a Requester, what the caches
//! and its market say and the time, the status to write, what to delete in
//! the root delete order, and when to look again. Nothing here does I/O or
//! reads a clock; `act` gathers the inputs and performs the plan.
//!
//! # Guarantees
//! - The finalizer goes ([`DeletePlan::Done`]) only when no Infra and no
//!   ComputeContract of the namespace is left, or at once ([`DeletePlan::LetGo`])
//!   when another Requester runs the namespace.
//! - No contract is deleted while an Infra of the namespace remains (their
//!   own finalizers release and delete their contracts), and only contracts
//!   finished without a guest are ever deleted here.
//! - Ready is True only for the Requester that runs its namespace, with a
//!   market that was built and can rent.

use std::sync::Arc;
use std::time::Duration;

use api::{ConditionStatus as S, Requester, RequesterStatus, names};
use chrono::{DateTime, Utc};
use kube::ResourceExt;

use crate::cache::{CachedContract, CachedInfra};
use crate::market_adapter::{self, Readiness};
use crate::requester::conditions as cond;
use crate::requester::contract::ttl::cached_finished_without_guest;

/// How often a deleting Requester checks on its Infras and contracts.
pub const CLEANUP_POLL: Duration = Duration::from_secs(2);

/// Where a Requester stands, from the object alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Deleted and no longer held by the finalizer: nothing is left to do.
    Released,
    /// Live without the finalizer: add it first (the write wakes a reconcile).
    AddFinalizer,
    /// Live with the finalizer: keep its market and status ([`live`]).
    Live,
    /// Deleted, held by the finalizer: one step of the root delete order ([`deleting`]).
    Deleting,
}

/// Where `requester` stands.
#[must_use]
pub fn stage(requester: &Requester) -> Stage {
    let held = requester
        .finalizers()
        .iter()
        .any(|f| f == names::REQUESTER_FINALIZER);
    match (requester.metadata.deletion_timestamp.is_some(), held) {
        (true, false) => Stage::Released,
        (true, true) => Stage::Deleting,
        (false, false) => Stage::AddFinalizer,
        (false, true) => Stage::Live,
    }
}

/// Whether a live Requester's market must be asked how ready it is: unless
/// another Requester (`runner`) runs the namespace, whose market is the one
/// that rents.
#[must_use]
pub fn asks_market(requester: &Requester, runner: Option<&str>) -> bool {
    runner.is_none_or(|runner| runner == requester.name_any())
}

/// What [`live`] reads.
#[derive(Debug, Clone)]
pub struct LiveInputs<'a> {
    /// The Requester as read.
    pub requester: &'a Requester,
    /// The name of the Requester that runs the namespace, if any.
    pub runner: Option<&'a str>,
    /// What its market says; `None` when another Requester runs the namespace.
    pub readiness: Option<Readiness>,
    /// How many ComputeContracts the namespace has.
    pub contracts: usize,
    /// The injected clock's time.
    pub now: DateTime<Utc>,
}

/// What a live Requester's reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub struct LivePlan {
    /// The status to write; `None` when it is unchanged.
    pub write: Option<RequesterStatus>,
    /// The write changes the contract count alone (paced by `count_pace`).
    pub count_only: bool,
    /// When to look again; `None` waits for a change.
    pub requeue: Option<Duration>,
}

/// The status of a live Requester and when to look again.
#[must_use]
pub fn live(inputs: LiveInputs<'_>) -> LivePlan {
    let requester = inputs.requester;
    let written = requester.status.clone().unwrap_or_default();
    let mut status = written.clone();
    status.observed_generation = requester.metadata.generation;
    status.contracts = u32::try_from(inputs.contracts).unwrap_or(u32::MAX);
    status.market = requester.spec.market.kind();
    let (ready, reason, message) = live_ready(inputs.runner, inputs.readiness);
    cond::set(
        &mut status.conditions,
        cond::READY,
        ready,
        reason,
        &message,
        requester.metadata.generation,
        inputs.now,
    );
    let requeue = market_adapter::recheck_after(&requester.spec.market, ready == S::True);
    let count_only = RequesterStatus {
        contracts: written.contracts,
        ..status.clone()
    } == written;
    LivePlan {
        write: (requester.status.as_ref() != Some(&status)).then_some(status),
        count_only,
        requeue,
    }
}

/// The Ready condition of a live Requester: `runner` is the name of the
/// Requester that runs its namespace, `readiness` what its market says
/// (`None` when another Requester runs the namespace).
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

/// What [`deleting`] reads: the Requester and what is left of its namespace.
#[derive(Debug, Clone, Copy)]
pub struct DeletingInputs<'a> {
    /// The deleted Requester, as read.
    pub requester: &'a Requester,
    /// The name of the Requester that runs the namespace, if any.
    pub runner: Option<&'a str>,
    /// Every Infra of the namespace.
    pub infras: &'a [Arc<CachedInfra>],
    /// Every ComputeContract of the namespace.
    pub contracts: &'a [Arc<CachedContract>],
    /// The injected clock's time.
    pub now: DateTime<Utc>,
}

/// One step of the root delete order.
#[derive(Debug, Clone)]
pub enum DeletePlan<'a> {
    /// Another Requester runs the namespace: remove the finalizer at once.
    LetGo,
    /// Delete these, write the status, and look again after [`CLEANUP_POLL`].
    Step {
        /// Infras not yet being deleted.
        infras: Vec<&'a CachedInfra>,
        /// Contracts finished without a guest, once no Infra remains.
        contracts: Vec<&'a CachedContract>,
        /// The status to write; `None` when it is unchanged.
        write: Option<RequesterStatus>,
    },
    /// Nothing is left: write the status, then remove the finalizer.
    Done {
        /// The status to write; `None` when it is unchanged.
        write: Option<RequesterStatus>,
    },
}

/// One step of the root delete order of a deleted Requester.
#[must_use]
pub fn deleting(inputs: DeletingInputs<'_>) -> DeletePlan<'_> {
    let requester = inputs.requester;
    if inputs.runner != Some(requester.name_any().as_str()) {
        return DeletePlan::LetGo;
    }
    let infras: Vec<&CachedInfra> = inputs
        .infras
        .iter()
        .map(AsRef::as_ref)
        .filter(|i| !i.is_deleting())
        .collect();
    let contracts: Vec<&CachedContract> = if inputs.infras.is_empty() {
        inputs
            .contracts
            .iter()
            .map(AsRef::as_ref)
            .filter(|c| !c.is_deleting() && cached_finished_without_guest(c))
            .collect()
    } else {
        Vec::new()
    };
    let mut status = requester.status.clone().unwrap_or_default();
    status.contracts = u32::try_from(inputs.contracts.len()).unwrap_or(u32::MAX);
    cond::set(
        &mut status.conditions,
        cond::READY,
        S::False,
        cond::DELETING,
        &format!(
            "deleting in the root delete order: {} Infras and {} ComputeContracts remain; releases are \
             still being sent",
            inputs.infras.len(),
            inputs.contracts.len()
        ),
        requester.metadata.generation,
        inputs.now,
    );
    let write = (requester.status.as_ref() != Some(&status)).then_some(status);
    if inputs.infras.is_empty() && inputs.contracts.is_empty() {
        return DeletePlan::Done { write };
    }
    DeletePlan::Step {
        infras,
        contracts,
        write,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

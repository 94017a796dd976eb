//! The Infra controller: the ONLY writer of ComputeContract spec.
//!
//! Watches Infras and the ComputeContracts they own (both from the shared
//! cache of the contract namespace), and reads NodeClaims (all namespaces;
//! a claim that may let a held contract go wakes its Infra, see [`claims`])
//! and the AtprotoRecords it owns ([`record`]). For each entry of an Infra's
//! `spec.contracts` it server-side applies the ComputeContract
//! `<infra>-<entry>` (field manager `socialweb/infra`, forced); a contract that
//! matches no entry is released and deleted once Released; on Infra deletion
//! the release finalizer runs the Infra delete order (docs/infra-lifecycle.md). Writes the Infra's status
//! (one patch, only on change) and Events (only failures a person acts on).
//!
//! # Expected flow
//!
//! [`decide`] (pure) turns the Infra and its cached contracts into an
//! [`decide::InfraPlan`]; `act` writes it. `reconcile` wraps kube-runtime's
//! finalizer helper, which adds [`api::names::INFRA_RELEASE_FINALIZER`] first.
//!
//! # Guarantees
//!
//! No ComputeContract is deleted before its status.phase is Released; the
//! finalizer is removed only once every contract is gone from the cache.

pub mod act;
pub mod claims;
pub mod conditions;
pub mod decide;
pub mod events;
pub mod finalized;
pub mod objects;
pub mod problems;
pub mod record;
pub mod rows;
pub mod vanished;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::names::INFRA_RELEASE_FINALIZER;
use api::{AtprotoRecord, Infra};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Error as FinalizerError, Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Resource as _, ResourceExt};

use crate::cache::{
    CacheReadiness, CachedClaim, CachedContract, CachedInfra, Claims, Indexes, Labelled,
    SharedCaches,
};
use crate::reconciler::{self, Identity, Shell};
use crate::{Error, Result};
use decide::InfraPlan;

/// The `controller` label of this reconciler's metrics.
const METRICS_LABEL: &str = "infra";
/// How soon an Infra whose cached copy (or one of its contracts') its own
/// write replaced looks again, should that write's event not come (a broken watch).
const STALE_RECHECK: Duration = Duration::from_secs(1);

/// The name the controller reports Events under.
pub const REPORTER: &str = "socialweb-infra";

/// What this reconciler needs from the manager.
pub type Context = crate::reconciler::ReconcilerContext;

/// The names the Infra reconciler reports and writes under.
pub const IDENTITY: Identity = Identity {
    reporter: REPORTER,
    manager: api::names::INFRA_MANAGER,
};

/// The state each reconcile sees: the context and the contracts' cache.
struct Reconciler {
    ctx: Arc<Context>,
    contracts: Store<CachedContract>,
    indexes: Indexes,
    claims: Claims,
    records: Store<AtprotoRecord>,
    /// The versions this controller's own writes replaced.
    own: OwnWrites,
    /// When each Infra's status was last written: progress alone waits.
    pace: crate::status_pace::StatusPace,
    /// Contracts the cache showed being deleted: once gone from it, not read again.
    vanished: vanished::Vanished,
    /// Infras whose finalizer it removed: their cached copy is not finalized again.
    finalized: finalized::Finalized,
    ready: CacheReadiness,
}

/// The versions this controller's own writes replaced, by kind of write
/// ([`crate::own_writes`]).
#[derive(Debug, Default)]
pub struct OwnWrites {
    /// Infras whose status it wrote.
    pub statuses: crate::own_writes::OwnWrites,
    /// Contracts it deleted that their finalizer keeps for now.
    pub deletes: crate::own_writes::OwnWrites,
    /// Contracts it applied over a cached copy (a release, an update).
    pub applies: crate::own_writes::OwnWrites,
}

impl Shell for Reconciler {
    fn context(&self) -> &Context {
        &self.ctx
    }
}

/// The Infra a contract belongs to: the one its Infra label names, in its namespace.
fn infra_of_contract(contract: Arc<CachedContract>) -> Option<ObjectRef<CachedInfra>> {
    let name = contract.label(api::names::INFRA_NAME_LABEL)?;
    let namespace = contract.meta().namespace.as_deref()?;
    Some(ObjectRef::new(name).within(namespace))
}

/// The Infra controller over the shared caches.
///
/// Subscribes to the Infra and ComputeContract caches when called (so call it
/// before [`SharedCaches::run`]); the returned future runs the controller with
/// `ctx.concurrency` and ends on SIGTERM/Ctrl+C or when the caches' streams end.
pub fn controller(
    ctx: Arc<Context>,
    caches: &SharedCaches,
) -> impl Future<Output = ()> + Send + 'static {
    let controller =
        Controller::for_shared_stream(caches.infras.subscribe(), caches.infras.store())
            // By the Infra label, not the ownerReference: the cache keeps
            // only a digest of a contract's owners (plan 0018), and the label
            // is what this controller finds its contracts by.
            .watches_shared_stream(caches.contracts.subscribe(), infra_of_contract)
            .owns_shared_stream(caches.atproto_records.subscribe())
            .watches_shared_stream(caches.nodeclaims.subscribe(), {
                let namespace = ctx.contract_namespace.clone();
                move |claim: Arc<CachedClaim>| claims::infra_to_wake(&claim, &namespace)
            });
    let concurrency = ctx.concurrency;
    let state = Arc::new(Reconciler {
        ctx,
        contracts: caches.contracts.store(),
        indexes: caches.indexes.clone(),
        claims: caches.nodeclaims.kept(),
        records: caches.atproto_records.store(),
        own: OwnWrites::default(),
        pace: crate::status_pace::StatusPace::default(),
        vanished: vanished::Vanished::default(),
        finalized: finalized::Finalized::default(),
        ready: caches.readiness(),
    });
    reconciler::run(
        controller,
        METRICS_LABEL,
        reconciler::fan_in_queue(concurrency),
        reconcile,
        state,
        None,
    )
}

/// The contracts of `infra` in the cache: same namespace, labelled with its
/// name, by name (from the index: no scan of every contract).
fn owned_contracts(state: &Reconciler, infra: &Infra) -> Vec<Arc<CachedContract>> {
    let namespace = infra.namespace();
    let mut contracts: Vec<Arc<CachedContract>> = state
        .indexes
        .contracts_by_infra
        .objects(&infra.name_any(), &state.contracts)
        .into_iter()
        .filter(|c| c.namespace() == namespace)
        .collect();
    contracts.sort_by_key(|c| c.name_any());
    contracts
}

fn action(plan: &InfraPlan) -> Action {
    plan.requeue
        .map_or_else(Action::await_change, Action::requeue)
}

#[tracing::instrument(skip_all, fields(namespace = %cached.namespace().unwrap_or_default(), infra = %cached.name_any()))]
async fn reconcile(cached: Arc<CachedInfra>, state: Arc<Reconciler>) -> Result<Action> {
    // Until the contracts' cache holds its initial list, existing contracts
    // would look missing and be applied again from scratch.
    state.ready.wait().await;
    let ctx = &state.ctx;
    let _timer = ctx.metrics.reconcile_started(METRICS_LABEL);
    if state
        .finalized
        .is_done(cached.as_ref(), INFRA_RELEASE_FINALIZER)
    {
        // Its finalizer is removed and the Infra gone; the cache has not
        // heard yet. Its DELETED event drops it.
        return Ok(Action::await_change());
    }
    if state.own.statuses.is_behind(cached.as_ref()) {
        // Its own last status write replaced this copy: deciding from it
        // would write that status again (a 409). That write's event wakes it.
        return Ok(Action::requeue(STALE_RECHECK));
    }
    // Decided from whole: the cache keeps it compactly, not in part.
    let infra = Arc::new(cached.infra());
    drop(cached);
    let namespace = infra
        .namespace()
        .unwrap_or_else(|| ctx.contract_namespace.clone());
    let object = format!("Infra {namespace}/{}", infra.name_any());
    let cached = owned_contracts(&state, &infra);
    // Every copy is asked (not `any`), so records the cache caught up with go.
    let behind = cached
        .iter()
        .filter(|c| state.own.applies.is_behind(c.as_ref()))
        .count();
    if behind > 0 {
        // Its own apply replaced a cached contract (a release): deciding from
        // that copy would send it again. The apply's event wakes it.
        return Ok(Action::requeue(STALE_RECHECK));
    }
    state
        .vanished
        .note(&namespace, cached.iter().map(Arc::as_ref));
    let mut contracts = marked_as_own_deletes_left_them(cached, &state.own.deletes, ctx.now());
    let mut gone = Vec::new();
    let unreadable = read_unseen(&state, &namespace, &infra, &mut contracts, &mut gone).await;
    let mut plan = decide_from(&state, &infra, &contracts, &unreadable, false);
    let infra = if plan.confirm_infra {
        match confirm(ctx, &namespace, &infra).await {
            Confirmed::Gone => return Ok(Action::await_change()),
            Confirmed::Live => {
                plan = decide_from(&state, &infra, &contracts, &unreadable, true);
                infra
            }
            Confirmed::Deleting(fresh) => {
                plan = decide_from(&state, &fresh, &contracts, &unreadable, true);
                fresh
            }
            // The plan creates none of those contracts; it is decided again soon.
            Confirmed::Unknown => infra,
        }
    } else {
        infra
    };
    pace_status(&state, &infra, &mut plan);
    if plan.status.is_some() {
        state.vanished.forget(&namespace, &gone);
    }
    // spec.record: the AtprotoRecord goes after every contract and before the
    // finalizer (the Infra delete order, docs/infra-lifecycle.md).
    let existing_record = record::observe(ctx, &state.records, &infra, plan.finalized).await?;
    let record_plan = record::decide(&infra, existing_record.as_deref(), plan.finalized);
    if plan.finalized && !record_plan.gone {
        plan.finalized = false;
    }
    plan.requeue = earliest(plan.requeue, record_plan.requeue);

    // The finalizer helper removes the finalizer as soon as its cleanup returns Ok,
    // so while contracts remain the deleting path acts here and waits for a change.
    let has_finalizer = infra
        .finalizers()
        .iter()
        .any(|f| f == INFRA_RELEASE_FINALIZER);
    if infra.metadata.deletion_timestamp.is_some() && has_finalizer && !plan.finalized {
        act_all(ctx, &state.own, &infra, &plan, &record_plan).await?;
        return Ok(action(&plan));
    }

    let api: Api<Infra> = Api::namespaced(ctx.client.clone(), &namespace);
    // With a deletionTimestamp, the finalizer is there and the plan is
    // finalized: the helper removes the finalizer once the cleanup is Ok.
    let removes_finalizer = infra.metadata.deletion_timestamp.is_some() && has_finalizer;
    let decided_from = Arc::clone(&infra);
    let outcome = finalizer(&api, INFRA_RELEASE_FINALIZER, infra, |event| async {
        match event {
            FinalizerEvent::Apply(infra) | FinalizerEvent::Cleanup(infra) => {
                act_all(ctx, &state.own, &infra, &plan, &record_plan).await?;
                Ok(action(&plan))
            }
        }
    })
    .await;
    if removes_finalizer && outcome.is_ok() {
        state.finalized.record(decided_from.as_ref());
    }
    outcome.or_else(|source| match source {
        // The cache was behind: an earlier reconcile already removed the
        // finalizer and the Infra is gone. Nothing is left to do.
        FinalizerError::RemoveFinalizer(kube::Error::Api(status)) if status.code == 404 => {
            Ok(Action::await_change())
        }
        source => Err(Error::Finalizer {
            object,
            source: Box::new(source),
        }),
    })
}

/// The claims' view of `infra`'s entries and the plan decided from them.
fn decide_from(
    state: &Reconciler,
    infra: &Infra,
    contracts: &[Arc<CachedContract>],
    unreadable: &BTreeSet<String>,
    infra_confirmed_live: bool,
) -> InfraPlan {
    let seen = claims::observe(
        infra,
        &decide::leaving_entries(infra, contracts),
        &state.claims,
    );
    decide::decide(&decide::Observed {
        infra,
        contracts,
        unreadable,
        claims: &seen,
        now: state.ctx.now(),
        infra_confirmed_live,
    })
}

/// Holds back a status that only moves the contracts' progress when the
/// last status write is under [`crate::status_pace::WRITE_EVERY`] old: a
/// scale-up of n contracts writes its Infra a few times, not once per
/// contract phase (plan 0012 S6). It is written on the requeue.
fn pace_status(state: &Reconciler, infra: &Infra, plan: &mut InfraPlan) {
    if plan.status.is_none() {
        return;
    }
    let uid = infra.metadata.uid.clone().unwrap_or_default();
    if plan.finalized {
        state.pace.forget(&uid);
        return;
    }
    if let Some(wait) =
        state
            .pace
            .wait_before_writing(&uid, plan.progress_only, state.ctx.clock.now())
    {
        plan.status = None;
        plan.requeue = earliest(plan.requeue, Some(wait));
    }
}

/// What a direct read of an Infra found.
enum Confirmed {
    /// Not being deleted.
    Live,
    /// Being deleted: the Infra as read.
    Deleting(Arc<Infra>),
    /// Gone.
    Gone,
    /// The read failed.
    Unknown,
}

/// Reads `infra` from the API server (not the cache), after its listed
/// contracts were read and some found gone ([`decide::Observed::infra_confirmed_live`]).
async fn confirm(ctx: &Context, namespace: &str, infra: &Infra) -> Confirmed {
    match crate::write::read::<Infra>(&ctx.client, namespace, &infra.name_any()).await {
        Ok(Some(fresh)) if fresh.metadata.deletion_timestamp.is_some() => {
            tracing::debug!("the Infra is being deleted; its cached copy did not show it yet");
            Confirmed::Deleting(Arc::new(fresh))
        }
        Ok(Some(_)) => Confirmed::Live,
        Ok(None) => Confirmed::Gone,
        Err(error) => {
            tracing::debug!(%error, "cannot read the Infra; trying again soon");
            Confirmed::Unknown
        }
    }
}

/// `contracts` (cached) with a deletionTimestamp on each copy that one of this
/// controller's deletes replaced: the cache has not caught up with the delete,
/// and deciding from the copy before it would send the delete again, a 409.
fn marked_as_own_deletes_left_them(
    contracts: Vec<Arc<CachedContract>>,
    own_deletes: &crate::own_writes::OwnWrites,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<Arc<CachedContract>> {
    contracts
        .into_iter()
        .map(|contract| {
            // Asked of every copy, so a record the cache caught up with is forgotten.
            if own_deletes.is_behind(&*contract) && !contract.is_deleting() {
                let mut marked = (*contract).clone();
                marked.meta_mut().deletion_timestamp = Some(crate::time::to_time(now));
                Arc::new(marked)
            } else {
                contract
            }
        })
        .collect()
}

/// Writes the contracts' plan, then the AtprotoRecord's; the first error is returned.
async fn act_all(
    ctx: &Context,
    own: &OwnWrites,
    infra: &Infra,
    plan: &InfraPlan,
    record_plan: &record::RecordPlan,
) -> Result<()> {
    let contracts = act::act(ctx, infra, plan, own).await;
    let records = record::act(ctx, infra, record_plan).await;
    contracts.and(records)
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The contracts the status lists but the cache does not show, read directly
/// (by name); those that exist are added to `contracts`. Returns the names
/// whose read failed: one failed read must not stop the reconcile, or a long
/// list under steady API errors never shrinks (the status that shortens it is
/// written by this very reconcile). One the cache showed being deleted and
/// no longer holds is gone without a read ([`vanished`]): it is pushed to
/// `gone`, forgotten once a status is written.
async fn read_unseen(
    state: &Reconciler,
    namespace: &str,
    infra: &Infra,
    contracts: &mut Vec<Arc<CachedContract>>,
    gone: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut unreadable = BTreeSet::new();
    for name in decide::unseen_contracts(infra, contracts) {
        let in_store = state
            .contracts
            .get(&ObjectRef::new(&name).within(namespace))
            .is_some();
        if !in_store && state.vanished.is_gone(namespace, &name) {
            gone.push(name);
            continue;
        }
        match crate::write::read::<CachedContract>(&state.ctx.client, namespace, &name).await {
            Ok(Some(found)) => {
                tracing::debug!(contract = %name, "not in the cache yet; read directly");
                contracts.push(Arc::new(found));
            }
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(contract = %name, %error, "cannot read; trying again soon");
                unreadable.insert(name);
            }
        }
    }
    unreadable
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::requester::test_fixtures::contract;

    fn at(name: &str, uid: &str, version: &str) -> Arc<CachedContract> {
        let mut copy = contract();
        copy.metadata.name = Some(name.to_owned());
        copy.metadata.uid = Some(uid.to_owned());
        copy.metadata.resource_version = Some(version.to_owned());
        Arc::new(CachedContract::from(&copy))
    }

    #[test]
    fn a_cached_copy_an_own_delete_replaced_shows_the_deletion() {
        let own = crate::own_writes::OwnWrites::default();
        // The delete of a-1 at version 5 left it marked at version 6 (its finalizer keeps it).
        let mut marked = (*at("a", "a-1", "6")).clone();
        marked.meta_mut().deletion_timestamp = Some(crate::time::to_time(chrono::Utc::now()));
        own.wrote(Some("5"), &marked);
        let now = chrono::Utc::now();

        let seen = marked_as_own_deletes_left_them(
            vec![at("a", "a-1", "5"), at("b", "b-1", "5")],
            &own,
            now,
        );
        assert!(
            seen[0].is_deleting(),
            "the copy from before the delete is taken as deleted: not deleted again"
        );
        assert!(!seen[1].is_deleting(), "another contract");

        // Once the cache shows the mark, the record is forgotten.
        let caught_up = marked_as_own_deletes_left_them(vec![Arc::new(marked)], &own, now);
        assert!(caught_up[0].is_deleting());
        assert!(!own.is_behind(&*at("a", "a-1", "5")), "forgotten");
    }
}

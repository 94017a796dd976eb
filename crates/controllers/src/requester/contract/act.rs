//! The thin, effectful half of the contract controller: reads the contract
//! from the API server, runs [`decide`] and performs what it says: the
//! receipt annotation, the status, the market call, an Event on a
//! transition, the TTL delete, and the removal of the release finalizer once
//! a deleted contract is Released.
//!
//! The cache's copy only says which contract to look at: every reconcile
//! that gets past the cheap checks reads the whole contract (one GET, never
//! a list) and decides from the server's copy, so no write or market call is
//! built from a cached copy (plan 0018: the cache may then keep less of a
//! contract than a decision reads).
//!
//! A status is written before a call that rents ([`Command::rents`]: that
//! guarded write stops a copy that went stale meanwhile from renting twice),
//! before the finalizer goes, and once when the reconcile ends; across a
//! read or a release it is carried to the answer, so a release and its
//! confirmation, or an acceptance and the guest's first report, are one
//! write. A reconcile whose cached copy this controller's own write already
//! replaced waits for the cache ([`crate::own_writes`]) instead of reading.

use std::sync::Arc;
use std::time::Duration;

use api::{ComputeContractStatus, Receipt, names};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use market::RfpId;
use serde_json::json;
use tracing::{debug, info, warn};

use super::decide::{
    Command, ContractEvent, Inputs, MarketFailure, MarketView, Observation, Operation, decide,
    release_finished, transition_event,
};
use super::ttl::{self, Ttl};
use crate::cache::CachedContract;
use crate::market_adapter::mapping::{contract_key, from_market, request_for, to_market};
use crate::requester::Runtime;
use crate::requester::WholeContract;
use crate::requester::markets::{MarketHandle, select_requester};
use crate::write::{self, Seen};
use crate::{Error, Result};

/// Most decide/act rounds in one reconcile; the rest happens on the requeue.
const MAX_STEPS: usize = 8;
/// How soon a contract whose Requester's market cannot be built looks again.
const MARKET_RETRY: Duration = Duration::from_secs(10);
/// How soon a contract whose cached copy an own write replaced looks again,
/// should the event of that write not come (a broken watch).
const STALE_RECHECK: Duration = Duration::from_secs(1);

/// Reconciles one ComputeContract. See [`super::decide`] for the lifecycle.
///
/// # Errors
/// A failed write to the API server (a conflict is a quick requeue). Market
/// failures are not errors: they are recorded in status and retried.
#[tracing::instrument(skip_all, fields(namespace = %contract.namespace().unwrap_or_default(), contract = %contract.name_any()))]
pub(in crate::requester) async fn reconcile_contract(
    contract: Arc<CachedContract>,
    rt: Arc<Runtime>,
) -> Result<Action> {
    rt.wait_until_ready().await;
    let ctx = &rt.ctx;
    let _timer = ctx
        .metrics
        .reconcile_started(crate::requester::CONTRACT_METRICS_LABEL);
    let namespace = contract.namespace().unwrap_or_default();
    ctx.metrics
        .set_contract_phase_counts(rt.indexes.contract_phases(&namespace));
    if rt.own_writes.is_behind(contract.as_ref()) {
        // This controller already wrote over this copy, and the event of
        // that write wakes the contract once the cache has it: reading the
        // contract now would only decide the same step twice.
        return Ok(Action::requeue(STALE_RECHECK));
    }
    // The contract as decided so far: the server's copy (metadata and
    // resourceVersion, which guard the writes) with the status last decided,
    // written or not yet.
    let Some(mut current) = read_contract(ctx, &contract).await? else {
        // Gone since the cache saw it: its deletion event says the rest.
        return Ok(Action::await_change());
    };
    // A contract already being deleted waits for its release, not for its TTL
    // (deleting it again would change nothing, and wake nothing).
    let verdict = if current.metadata.deletion_timestamp.is_some() {
        Ttl::NotFinished
    } else {
        ttl::verdict(&current, ctx.now())
    };
    if matches!(verdict, Ttl::Expired) {
        delete_expired(&ctx.client, &current).await?;
        return Ok(Action::await_change());
    }
    let (view, handle, market_retry) = market_view(&rt, &current, &namespace).await;
    // The status the server holds, as far as this reconcile knows.
    let mut on_server = current.status.clone();
    let mut observation = Observation::Nothing;
    for _ in 0..MAX_STEPS {
        let inputs = Inputs {
            contract: &current,
            market: &view,
            timing: &ctx.timing,
            now: ctx.now(),
        };
        let step = decide(inputs, observation);
        if let Some(receipt) = &step.record_receipt {
            let read = current.metadata.resource_version.clone();
            let Some(mut written) =
                write_receipt_annotation(&ctx.client, &current, receipt).await?
            else {
                return Ok(Action::await_change());
            };
            rt.own_writes.wrote(read.as_deref(), &written);
            on_server = written.status.take();
            written.status = current.status.take();
            current = written;
        }
        current.status = Some(step.status.clone());
        // A status decided before a call that rents (publish, accept, adopt)
        // is written before it: that write, guarded by the resourceVersion,
        // is what stops a stale copy from renting twice. Before a read or a
        // release (which may be sent again) the status is carried to the
        // answer and written once, with it.
        let write_now = step.remove_finalizer || step.command.as_ref().is_none_or(Command::rents);
        if write_now && current.status != on_server {
            let Some(written) = write_status(&rt, &current, on_server.as_ref()).await? else {
                // Gone meanwhile (the cache was behind its deletion): nothing is left to run.
                return Ok(Action::await_change());
            };
            current = written;
            on_server = current.status.clone();
        }
        if step.remove_finalizer {
            remove_release_finalizer(&rt, &current).await?;
            if let Some(handle) = &handle {
                handle.forget_rfp(&contract_key(&current));
            }
            return Ok(Action::await_change());
        }
        let Some(command) = step.command else {
            // The TTL of the contract as written: the event of this
            // reconcile's own write (a Released status) wakes nobody.
            return Ok(requeue(
                step.requeue
                    .into_iter()
                    .chain(ttl_wait(&current, ctx.now()))
                    .chain(market_retry)
                    .min(),
            ));
        };
        let Some(handle) = handle.as_ref() else {
            // decide only asks for a market call when the view is Ready.
            return Ok(Action::await_change());
        };
        let started = std::time::Instant::now();
        let operation = command.operation();
        observation = perform(handle, &current, command).await;
        ctx.metrics
            .observe_market(operation.as_str(), started.elapsed());
    }
    if current.status != on_server
        && write_status(&rt, &current, on_server.as_ref())
            .await?
            .is_none()
    {
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(Duration::from_secs(1)))
}

/// Writes `current`'s status over `on_server` (guarded by `current`'s
/// resourceVersion), records the write, and publishes the transition's Event
/// and metric. `None` when the contract is gone.
async fn write_status(
    rt: &Runtime,
    current: &WholeContract,
    on_server: Option<&ComputeContractStatus>,
) -> Result<Option<WholeContract>> {
    let Some(status) = current.status.clone() else {
        return Ok(Some(current.clone()));
    };
    let Some(written) =
        write::replace_status(&rt.ctx.client, MANAGER, current, status.clone()).await?
    else {
        return Ok(None);
    };
    rt.own_writes
        .wrote(current.metadata.resource_version.as_deref(), &written);
    if let Some(note) = transition_event(on_server, &status) {
        publish_event(rt, &written, note).await;
    }
    if let Some(outcome) = release_finished(on_server, &status) {
        rt.ctx.metrics.contract_released(outcome);
    }
    Ok(Some(written))
}

/// The contract as the server holds it now; `None` when it is gone.
///
/// Read, not taken from the cache: the cache may be behind a write of
/// another process, or of this one the cache has not yet seen, and a
/// decision from a copy behind would publish an RFP again or write a 409.
async fn read_contract(
    ctx: &crate::requester::Context,
    contract: &CachedContract,
) -> Result<Option<WholeContract>> {
    let namespace = contract.namespace().unwrap_or_default();
    crate::write::read(&ctx.client, &namespace, &contract.name_any()).await
}

/// How long until a finished contract's TTL deletes it (zero: at once); `None`
/// while it is not finished, has an owner, or is being deleted already.
fn ttl_wait(contract: &WholeContract, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if contract.metadata.deletion_timestamp.is_some() {
        return None;
    }
    match ttl::verdict(contract, now) {
        Ttl::Wait(wait) => Some(wait),
        Ttl::Expired => Some(Duration::ZERO),
        Ttl::NotFinished | Ttl::Owned => None,
    }
}

fn requeue(after: Option<Duration>) -> Action {
    after.map_or_else(Action::await_change, |d| {
        Action::requeue(d.max(Duration::from_millis(200)))
    })
}

/// The market the contract's namespace offers, as decide sees it, its
/// handle, and how soon to look again when the Requester's market cannot be
/// built now (its Secrets or servers may come back without any change the
/// contract would hear of).
async fn market_view(
    rt: &Runtime,
    contract: &WholeContract,
    namespace: &str,
) -> (MarketView, Option<MarketHandle>, Option<Duration>) {
    let requester = {
        let requesters = rt.requesters.state();
        select_requester(requesters.iter().map(AsRef::as_ref), namespace).cloned()
    };
    let Some(requester) = requester else {
        let reason = format!(
            "no Requester in namespace {namespace}: create one (kind Requester) to run this contract"
        );
        return (MarketView::Missing { reason }, None, None);
    };
    let requester = &requester;
    let name = requester.name_any();
    let unusable = |error: &dyn std::fmt::Display| {
        let reason = format!("Requester {name} cannot run contracts: {error}");
        (MarketView::Missing { reason }, None, Some(MARKET_RETRY))
    };
    // Read once per process (the Requester reconciler reads them again).
    if let Err(error) = rt
        .ctx
        .markets
        .read_credentials(&rt.ctx.client, requester, false)
        .await
    {
        return unusable(&error);
    }
    let handle = match rt.ctx.markets.for_requester(requester) {
        Ok(handle) => handle,
        Err(error) => return unusable(&error),
    };
    let max_in_flight = usize::try_from(requester.spec.max_in_flight).unwrap_or(usize::MAX);
    // From the index: counting by a scan of every contract, for every
    // contract's reconcile, made a scale-up cost n^2.
    let in_flight = rt.indexes.contracts_in_flight_besides(
        namespace,
        &kube::runtime::reflector::ObjectRef::new(&contract.name_any()).within(namespace),
    );
    let view = MarketView::Ready {
        requester: name,
        bid_window: Duration::from_secs(u64::from(requester.spec.bid_window_seconds)),
        slot_free: in_flight < max_in_flight,
        root_deleting: requester.metadata.deletion_timestamp.is_some(),
    };
    (view, Some(handle), None)
}

/// The contract's RFP id: remembered, or asked for again with an idempotent publish.
async fn rfp_id(handle: &MarketHandle, contract: &WholeContract) -> Result<RfpId, Observation> {
    let key = contract_key(contract);
    if let Some(id) = handle.rfp(&key) {
        return Ok(id);
    }
    match handle.market.publish_rfp(request_for(contract)).await {
        Ok(id) => {
            handle.remember_rfp(key, id.clone());
            Ok(id)
        }
        Err(error) => Err(failed(Operation::Publish, &error)),
    }
}

fn failed(operation: Operation, error: &market::MarketError) -> Observation {
    warn!(?operation, category = error.category(), %error, "market call failed");
    Observation::Failed {
        operation,
        failure: MarketFailure::from_error(error),
    }
}

/// Makes one market call and reports what the market said.
async fn perform(handle: &MarketHandle, contract: &WholeContract, command: Command) -> Observation {
    let market = &handle.market;
    let operation = command.operation();
    debug!(?operation, "market call");
    match command {
        Command::Publish => match market.publish_rfp(request_for(contract)).await {
            Ok(id) => {
                handle.remember_rfp(contract_key(contract), id);
                Observation::Published
            }
            Err(error) => failed(operation, &error),
        },
        Command::CollectBids => match rfp_id(handle, contract).await {
            Ok(id) => match market.collect_bids(&id).await {
                Ok(bids) => Observation::Bids(bids),
                Err(error) => failed(operation, &error),
            },
            Err(observation) => observation,
        },
        Command::Accept(bid) => match rfp_id(handle, contract).await {
            Ok(id) => match market.accept(&id, &bid).await {
                Ok(receipt) => {
                    handle.forget_rfp(&contract_key(contract));
                    Observation::Accepted {
                        bid,
                        receipt: from_market(receipt),
                    }
                }
                Err(error) => failed(operation, &error),
            },
            Err(observation) => observation,
        },
        Command::GuestStatus(receipt) => match market.guest_status(&to_market(&receipt)).await {
            Ok(status) => Observation::Guest(status),
            Err(error) => failed(operation, &error),
        },
        Command::Release(receipt) => match market.release(&to_market(&receipt)).await {
            Ok(outcome) => {
                info!(uri = %receipt.uri, ?outcome, "release sent");
                Observation::ReleaseSent(outcome)
            }
            Err(error) => failed(operation, &error),
        },
        Command::Lookup(receipt) => match market.lookup(&to_market(&receipt)).await {
            Ok(found) => Observation::Lookup(found),
            Err(error) => failed(operation, &error),
        },
        Command::Adopt(receipt) => match market.adopt(&to_market(&receipt)).await {
            Ok(info) => Observation::Adopted(info),
            Err(error) => failed(operation, &error),
        },
    }
}

/// The field manager of every write of the Requester controller.
const MANAGER: &str = crate::requester::IDENTITY.manager;

/// Records the receipt in the annotation (a merge patch of that key alone,
/// guarded by the resourceVersion read); `None` when the contract is gone.
async fn write_receipt_annotation(
    client: &kube::Client,
    contract: &WholeContract,
    receipt: &Receipt,
) -> Result<Option<WholeContract>> {
    let value = super::whole::receipt_annotation(receipt).map_err(|e| Error::Invalid {
        object: write::describe_object(contract),
        reason: format!("receipt does not serialize: {e}"),
    })?;
    let metadata = serde_json::Map::from_iter([(
        "annotations".to_owned(),
        json!({ names::RECEIPT_ANNOTATION: value }),
    )]);
    let updated = write::patch_metadata(client, MANAGER, &Seen::of(contract), metadata).await?;
    if updated.is_some() {
        info!(uri = %receipt.uri, "receipt recorded in the annotation");
    }
    Ok(updated)
}

/// Removes the release finalizer from a deleted, Released contract, which
/// lets it go. Guarded by the resourceVersion of the object decide saw
/// Released, so a stale view is refused (409) instead of dropping the
/// finalizer of a newer object.
/// The removal is recorded: a reconcile of the copy it replaced (queued
/// meanwhile) would send it again to a contract that is gone.
async fn remove_release_finalizer(rt: &Runtime, contract: &WholeContract) -> Result<()> {
    let (_, written) = write::remove_finalizer_written::<WholeContract>(
        &rt.ctx.client,
        MANAGER,
        &Seen::of(contract),
        names::CONTRACT_RELEASE_FINALIZER,
    )
    .await?;
    if let Some(written) = &written {
        rt.own_writes
            .wrote(contract.metadata.resource_version.as_deref(), written);
    }
    info!("released contract let go: release finalizer removed");
    Ok(())
}

/// Deletes a finished contract whose TTL ran out: exactly the object read (uid
/// and resourceVersion), so one that changed since is decided again.
async fn delete_expired(client: &kube::Client, contract: &WholeContract) -> Result<()> {
    if write::delete_if_present::<WholeContract>(client, &Seen::of(contract)).await? {
        info!("finished contract deleted after ttlSecondsAfterFinished");
    }
    Ok(())
}

async fn publish_event(rt: &Runtime, contract: &WholeContract, event: ContractEvent) {
    if let Err(error) = rt
        .ctx
        .recorder
        .publish(&event.to_event(), &contract.object_ref(&()))
        .await
    {
        warn!(reason = event.reason(), %error, "cannot publish an event");
    }
}

//! The record controller: publishes each Infra's declaration as an atproto
//! record, through its AtprotoRecord.
//!
//! Watches AtprotoRecords of the contract namespace, and Infras and
//! Requesters (spec changes only) mapped to the AtprotoRecords they touch;
//! reads ComputeContracts from the shared cache. Writes: the record in the
//! repository of the Requester that runs the namespace (`putRecord`,
//! `deleteRecord`), the AtprotoRecord's status (field manager
//! `socialweb/record`) and its finalizer, and Events. Never the Infra, and
//! never the AtprotoRecord's spec (the Infra controller's).
//!
//! # Expected flow
//!
//! [`decide`] (pure) turns the object, its Infra and the Infra's remaining
//! contracts into a [`decide::RecordPlan`]; `act` reads the account's app
//! password, makes the one PDS call and writes the status it led to.
//!
//! # Guarantees
//!
//! The record key and collection are the object's spec, derived from the
//! Infra, so a restart at any step writes the same record again (putRecord
//! replaces it) or deletes it again (absent counts as done): never a second
//! record, never one left behind that should go.

pub mod account;
pub mod act;
pub mod conditions;
pub mod decide;
pub mod events;

use std::future::Future;
use std::sync::Arc;

use api::names::INFRA_NAME_LABEL;
use api::{AtprotoRecord, Requester};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::cache::{CacheReadiness, CachedContract, CachedInfra, Labelled, SharedCaches};
use crate::reconciler::{self, Identity, ReconcilerContext, Shell};
use crate::requester::markets::select_requester;
use crate::{Clock, Result};

/// The `controller` label of this reconciler's metrics.
const METRICS_LABEL: &str = "record";

/// The name the controller reports Events under.
pub const REPORTER: &str = "socialweb-record";

/// The names the record controller reports and writes under.
pub const IDENTITY: Identity = Identity {
    reporter: REPORTER,
    manager: api::names::RECORD_MANAGER,
};

/// How many AtprotoRecords are reconciled at once: few, since each is a PDS
/// call at most and a PDS limits its writers.
pub const CONCURRENCY: u16 = 4;

/// What the record controller needs: the shared context and the sessions of
/// the Requesters' accounts.
pub struct Context {
    /// Client, clock, Events, namespace, concurrency, metrics, stop.
    pub shared: ReconcilerContext,
    /// One logged-in session per Requester account.
    pub sessions: account::Sessions,
}

/// The record controller's context: Events reported as [`REPORTER`], a concurrency of 4.
#[must_use]
pub fn context(
    client: Client,
    clock: Arc<dyn Clock>,
    contract_namespace: impl Into<String>,
) -> Context {
    Context::with_shared(IDENTITY.context(client, clock, contract_namespace))
}

impl Context {
    /// The record controller's context over an already configured shared one.
    #[must_use]
    pub fn with_shared(shared: ReconcilerContext) -> Self {
        Self {
            shared,
            sessions: account::Sessions::default(),
        }
    }
}

/// The state each reconcile sees: the context and the caches it reads.
struct Reconciler {
    ctx: Arc<Context>,
    infras: Store<CachedInfra>,
    contracts: Store<CachedContract>,
    requesters: Store<Requester>,
    ready: CacheReadiness,
}

/// The record controller over the shared caches.
///
/// Subscribes when called (so call it before [`SharedCaches::run`]); the
/// returned future runs it with `ctx.shared.concurrency` until the stop
/// signal or the end of the caches' streams.
pub fn controller(
    ctx: Arc<Context>,
    caches: &SharedCaches,
) -> impl Future<Output = ()> + Send + 'static {
    let by_requester = caches.atproto_records.store();
    let controller = Controller::for_shared_stream(
        caches.atproto_records.subscribe(),
        caches.atproto_records.store(),
    )
    // The object is named as its Infra: a declaration change is one reconcile.
    .watches_shared_stream(
        caches.infras.subscribe_spec_changes(),
        |infra: Arc<CachedInfra>| {
            Some(ObjectRef::<AtprotoRecord>::new(&infra.name_any()).within(&infra.namespace()?))
        },
    )
    // A Requester fixed (its account, its Secret's name) is tried again at once.
    .watches_shared_stream(
        caches.requesters.subscribe_spec_changes(),
        move |requester: Arc<Requester>| {
            let namespace = requester.namespace();
            by_requester
                .state()
                .iter()
                .filter(|r| r.namespace() == namespace)
                .map(|r| ObjectRef::from_obj(r.as_ref()))
                .collect::<Vec<_>>()
        },
    );
    let concurrency = ctx.shared.concurrency;
    let state = Arc::new(Reconciler {
        ctx,
        infras: caches.infras.store(),
        contracts: caches.contracts.store(),
        requesters: caches.requesters.store(),
        ready: caches.readiness(),
    });
    reconciler::run(
        controller,
        METRICS_LABEL,
        reconciler::queue(concurrency),
        reconcile,
        state,
        None,
    )
}

impl Shell for Reconciler {
    fn context(&self) -> &ReconcilerContext {
        &self.ctx.shared
    }
}

#[tracing::instrument(skip_all, fields(namespace = %record.namespace().unwrap_or_default(), record = %record.name_any()))]
async fn reconcile(record: Arc<AtprotoRecord>, state: Arc<Reconciler>) -> Result<Action> {
    // A half-listed cache would show the Infra's contracts gone too early.
    state.ready.wait().await;
    let ctx = &state.ctx;
    let _timer = ctx.shared.metrics.reconcile_started(METRICS_LABEL);
    let namespace = record
        .namespace()
        .unwrap_or_else(|| ctx.shared.contract_namespace.clone());
    let infra = state
        .infras
        .get(&ObjectRef::new(&record.spec.infra_name).within(&namespace))
        .map(|cached| cached.infra());
    let contracts_left = state
        .contracts
        .state()
        .iter()
        .filter(|c| {
            c.namespace().as_deref() == Some(namespace.as_str())
                && c.label(INFRA_NAME_LABEL) == Some(record.spec.infra_name.as_str())
        })
        .count();
    let plan = decide::decide(&decide::Observed {
        record: &record,
        infra: infra.as_ref(),
        contracts_left,
        now: crate::time::now(ctx.shared.clock.as_ref()),
    });
    let requesters = state.requesters.state();
    let requester = select_requester(requesters.iter().map(AsRef::as_ref), &namespace);
    act::act(ctx, &record, requester, &plan).await
}

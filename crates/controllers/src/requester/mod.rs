//! The Requester controller: runs every ComputeContract of the contract
//! namespace against the namespace's market, and keeps the root delete order
//! with the Requester object's finalizer.
//!
//! Watches ComputeContracts, Requesters and Infras (shared caches); writes
//! ComputeContract status (status subresource, field manager
//! `socialweb/requester`), the receipt annotation, and removes the contract's
//! release finalizer once a deleted contract is Released; writes Requester
//! status and finalizer, and deletes Infras (root delete order) and finished
//! contracts (TTL, root delete order). It never writes a ComputeContract's spec.
//! The contract controller hears its triggers through a window of keys
//! ([`crate::admission`]), so a restart on a fleet does not queue every
//! contract in kube-runtime's scheduler at once.
//!
//! - [`contract`]: the ComputeContract lifecycle (Pending -> Bidding ->
//!   Accepted -> Deployed -> Releasing -> Released, or Failed): its pure
//!   [`decide`], the thin `act`, and the [`ttl`]; a deleted contract is
//!   released first, then its finalizer
//!   ([`api::names::CONTRACT_RELEASE_FINALIZER`]) lets it go.
//! - `root`: the Requester object: its status, its finalizer and the root
//!   delete order; `root::ignored` tells a Requester outside the contract
//!   namespace that it runs nothing, and why.
//! - [`markets`]: one market per Requester; [`conditions`]: the condition
//!   types and reasons both write.

pub mod conditions;
pub mod contract;
pub mod markets;

mod root;

#[cfg(test)]
mod error_policy_tests;
#[cfg(test)]
pub(crate) mod test_fixtures;

use std::sync::Arc;

use api::Requester;
use futures::StreamExt as _;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};

use crate::admission::{self, Admission};
use crate::cache::index::{object_key, ref_key};
use crate::cache::{CachedContract, CachedInfra, Indexes};
use crate::reconciler::{self, Identity, ReconcilerContext, Shell};
use crate::{CacheReadiness, Clock, SharedCaches};

// The contract lifecycle's public paths as the tests and the manager name them.
pub use contract::decide::Timing;
pub use contract::whole::WholeContract;
pub use contract::{decide, ttl};
pub use markets::Markets;

/// The `controller` metric label of the contract reconciler.
pub const CONTRACT_METRICS_LABEL: &str = "requester";
/// The `controller` metric label of the Requester (root) reconciler.
pub const ROOT_METRICS_LABEL: &str = "requester_root";

/// Name the controller reports Events under.
pub const REPORTER: &str = "socialweb-requester";

/// The names the Requester reconcilers report and write under.
pub const IDENTITY: Identity = Identity {
    reporter: REPORTER,
    manager: api::names::REQUESTER_MANAGER,
};

/// What the Requester controller needs from the manager: the context every
/// reconciler has (its fields read through, as `ctx.client`), plus the
/// markets and the timing of the contract lifecycle.
#[derive(Debug)]
pub struct Context {
    /// Client, clock, recorder, namespace, concurrency (contracts and
    /// Requesters, separately), metrics and stop, as every reconciler's.
    pub shared: ReconcilerContext,
    /// The markets of the Requesters (share one across restarts in tests).
    pub markets: Arc<Markets>,
    /// Poll and retry intervals.
    pub timing: Timing,
}

impl std::ops::Deref for Context {
    type Target = ReconcilerContext;

    fn deref(&self) -> &ReconcilerContext {
        &self.shared
    }
}

impl std::ops::DerefMut for Context {
    fn deref_mut(&mut self) -> &mut ReconcilerContext {
        &mut self.shared
    }
}

impl Context {
    /// A context with default concurrency (4), timing, and metrics registered
    /// nowhere (set `metrics` to the manager's to export them).
    #[must_use]
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        markets: Arc<Markets>,
        contract_namespace: impl Into<String>,
    ) -> Self {
        Self::with_shared(IDENTITY.context(client, clock, contract_namespace), markets)
    }

    /// The Requester's context around `shared` (built from [`IDENTITY`]), with default timing.
    #[must_use]
    pub fn with_shared(shared: ReconcilerContext, markets: Arc<Markets>) -> Self {
        Self {
            shared,
            markets,
            timing: Timing::default(),
        }
    }
}

/// The context and the caches the reconcilers read.
pub(crate) struct Runtime {
    ctx: Arc<Context>,
    contracts: Store<CachedContract>,
    requesters: Store<Requester>,
    infras: Store<CachedInfra>,
    indexes: Indexes,
    /// When each Requester's status was last written.
    count_pace: crate::status_pace::StatusPace,
    /// The contract versions this controller's own writes replaced and made.
    own_writes: crate::own_writes::OwnWrites,
    ready: CacheReadiness,
}

impl Shell for Runtime {
    fn context(&self) -> &ReconcilerContext {
        &self.ctx.shared
    }
}

impl Runtime {
    /// Resolves once every cache this controller reads holds its initial list.
    pub(crate) async fn wait_until_ready(&self) {
        self.ready.wait().await;
    }
}

/// Every object of `store` in `namespace`.
fn in_namespace<K>(store: &Store<K>, namespace: &str) -> Vec<Arc<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.namespace().as_deref() == Some(namespace))
        .collect()
}

/// Every object of `store` in `namespace`, as controller keys.
fn keys_in<K>(store: &Store<K>, namespace: Option<String>) -> Vec<ObjectRef<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    in_namespace(store, namespace.as_deref().unwrap_or_default())
        .iter()
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// The three controllers: contracts (watching Requesters, and woken by the
/// guest watch when a Deployed contract's guest changes), Requesters (watching
/// contracts and Infras, for the status count and the root delete order), and
/// the Requesters outside the contract namespace (told they are ignored).
///
/// Subscribes to the caches when called; run the returned future, then spawn
/// [`SharedCaches::run`]. The future ends on SIGTERM/Ctrl+C (letting running
/// reconciles finish); dropping it stops both controllers at once and cancels
/// their reconciles.
pub fn controller(
    ctx: Arc<Context>,
    caches: &SharedCaches,
) -> impl Future<Output = ()> + Send + use<> {
    let rt = Arc::new(Runtime {
        ctx: Arc::clone(&ctx),
        contracts: caches.contracts.store(),
        requesters: caches.requesters.store(),
        infras: caches.infras.store(),
        indexes: caches.indexes.clone(),
        count_pace: crate::status_pace::StatusPace::default(),
        own_writes: crate::own_writes::OwnWrites::default(),
        ready: caches.readiness(),
    });
    let concurrency = ctx.concurrency;
    let contract_store = caches.contracts.store();
    // The contracts whose guest the guest watch found changed.
    let (wake, woken) = futures::channel::mpsc::unbounded();
    // Not on the events of its own writes: the reconcile that wrote decided
    // on from what the write answered and scheduled what follows, so each
    // such event woke the contract once more for nothing (plan 0016 C4).
    let own = Arc::clone(&rt);
    let changes = caches.contracts.subscribe().filter(move |contract| {
        let own_event = own.own_writes.is_own_event(contract.as_ref());
        if own_event {
            // The phase gauge follows every event, as the reconcile this one
            // no longer wakes made it (the cache holds the write by now).
            let namespace = contract.namespace().unwrap_or_default();
            own.ctx
                .metrics
                .set_contract_phase_counts(own.indexes.contract_phases(&namespace));
        }
        std::future::ready(!own_event)
    });
    // Every trigger goes through one window (crate::admission): a manager
    // started on a fleet triggers every contract at once, twice (their list
    // and the Requester's), and kube-runtime's scheduler would keep tables
    // for all of them for good.
    let triggers = futures::stream::select_all([
        changes
            .map(|contract| object_key(contract.as_ref()))
            .boxed(),
        // Not on the Requester's status writes: each would reconcile every contract.
        (caches.requesters.subscribe_spec_changes())
            .flat_map(move |requester: Arc<Requester>| {
                let namespace = requester.namespace().unwrap_or_default();
                let keys: Vec<_> = in_namespace(&contract_store, &namespace)
                    .iter()
                    .map(|contract| object_key(contract.as_ref()))
                    .collect();
                futures::stream::iter(keys)
            })
            .boxed(),
        woken.map(|contract| ref_key(&contract)).boxed(),
    ]);
    let admission = Admission::new(
        admission::DEFAULT_WINDOW,
        rt.ctx.metrics.reconcile_waiting(CONTRACT_METRICS_LABEL),
    );
    let contracts =
        Controller::for_shared_stream(futures::stream::pending(), caches.contracts.store())
            .reconcile_on(admission.admit(triggers.boxed()));
    let guest_watch = contract::guest_watch::run(Arc::clone(&rt), wake);
    let contracts = reconciler::run(
        contracts,
        CONTRACT_METRICS_LABEL,
        reconciler::queue(concurrency),
        contract::act::reconcile_contract,
        Arc::clone(&rt),
        Some(admission),
    );
    let by_contract = caches.requesters.store();
    let by_infra = caches.requesters.store();
    let requesters =
        Controller::for_shared_stream(caches.requesters.subscribe(), caches.requesters.store())
            // Only when a contract comes or goes (its count) or its deletion or
            // finalizers change (the root delete order), not on every status step.
            .watches_shared_stream(
                caches.contracts.subscribe_spec_changes(),
                move |contract: Arc<CachedContract>| keys_in(&by_contract, contract.namespace()),
            )
            .watches_shared_stream(caches.infras.subscribe(), move |infra: Arc<CachedInfra>| {
                keys_in(&by_infra, infra.namespace())
            });
    let requesters = reconciler::run(
        requesters,
        ROOT_METRICS_LABEL,
        reconciler::queue(concurrency),
        root::act::reconcile_requester,
        Arc::clone(&rt),
        None,
    );
    let ignored = Controller::for_shared_stream(
        caches.outside_requesters.subscribe(),
        caches.outside_requesters.store(),
    );
    let ignored = reconciler::run(
        ignored,
        root::ignored::METRICS_LABEL,
        reconciler::queue(1),
        root::ignored::reconcile,
        rt,
        None,
    );
    async move {
        futures::join!(contracts, requesters, ignored, guest_watch);
    }
}

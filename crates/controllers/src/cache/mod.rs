//! The one shared cache every reconciler reads.
//!
//! Each kind has ONE reflector (one watch on the API server) whose store all
//! reconcilers read and whose events fan out to every controller that
//! subscribed (kube-runtime's shared streams). A reconcile reads these stores
//! and never lists from the API server.
//!
//! # Expected flow
//!
//! 1. [`SharedCaches::new`] creates the stores and writers.
//! 2. Each reconciler's `controller()` calls [`Shared::subscribe`] (synchronously).
//! 3. [`SharedCaches::run`] drives every reflector.
//!
//! # Guarantees
//!
//! A subscriber made before `run` sees every object of the initial list.
//!
//! # Assumptions
//!
//! Every subscription is polled: the fan-out buffer applies backpressure, so
//! a subscriber nobody polls stalls its kind's reflector.
//!
//! # Why our own fan-out
//!
//! kube-runtime's `store_shared` broadcasts object references and its
//! subscriber stream looks each one up in the store; when the object was
//! deleted in between, the stream returns `Pending` without registering a
//! waker (kube-runtime 5.0 `ReflectHandle::poll_next`), and that controller
//! stops hearing about the kind until something else polls it. Under load
//! this lost whole reconcile chains (a claim's finalizer never removed after
//! its contract was deleted). This fan-out sends the objects themselves, so
//! nothing is looked up and deletions reach the mappers too: a Cluster hears
//! that its contract is gone without polling for it.
//!
//! # Why our own readiness
//!
//! kube-runtime's `Store::wait_until_ready` shares one oneshot receiver among
//! all its waiters, and a oneshot remembers only the last waker: with several
//! reconciles waiting at once, all but one could wait for ever. A reconcile
//! waits on [`CacheReadiness`] (a `tokio::sync::watch`, which wakes every
//! waiter) instead; the only `Store::wait_until_ready` left is the one each
//! `Controller` makes on its own primary store, one waiter per store.
//!
//! # Why each object is decoded on its own
//!
//! One object the manager cannot decode must not fail the list of its kind
//! (that stopped every tenant's reconciles): [`decode`] says how it is
//! skipped, kept at its last readable version, counted in
//! `socialweb_cache_undecodable_objects` and marked with a Warning Event.

pub mod claim;
pub mod claims;
pub mod contract;
pub mod decode;
mod derived;
mod fan_out;
mod guest;
pub mod index;
mod indexes;
pub mod infra;
pub mod join_secret;
pub mod keep;
mod labelled;
mod packed;
pub(crate) mod projection;
mod receipt;
mod uid;

use std::{borrow::Cow, collections::HashMap, fmt::Debug, sync::Arc, sync::Mutex};

use api::{AtprotoRecord, Requester, names};
use async_broadcast::{InactiveReceiver, Sender};
use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        events::{Event, EventType, Reporter},
        reflector::{ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use api::Cluster;
pub use claim::{
    CachedClaim, CachedClaimStatus, CachedCondition, find_cached_condition, set_cached_condition,
};
pub use claims::Claims;
pub use contract::{CachedContract, CachedContractSpec, CachedContractStatus, Machine};
use decode::{Decoded, Lenient, Undecodable};
use fan_out::{Relist, fan_out_of};
pub use guest::CachedGuest;
pub use index::Index;
use index::Indexer;
pub use indexes::Indexes;
pub use infra::CachedInfra;
pub use join_secret::{CachedJoinSecret, JoinSecrets, WatchedJoinSecret};
use keep::{Keep, KubeStore};
pub use labelled::Labelled;
pub use receipt::CachedReceipt;

use crate::event_recorder::Recorder;
use crate::metrics::Metrics;

/// The name the shared cache reports its Events under.
pub const REPORTER: &str = "socialweb-cache";

/// How many events a slow subscriber may lag behind before the reflector waits for it.
const FAN_OUT_BUFFER: usize = 1024;

/// One reflector of kind `K`: what keeps its objects (by default a
/// kube-runtime store, see [`keep`]) and its fan-out.
pub struct Shared<K, S = KubeStore<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    S: Keep<K>,
{
    /// What the reconciles read.
    reader: S::Reader,
    /// Taken by [`SharedCaches::run`]; subscriptions are made before that.
    keep: Mutex<Option<S>>,
    fan_out: Sender<Arc<K>>,
    /// Keeps the channel open while no controller has subscribed yet.
    _open: InactiveReceiver<Arc<K>>,
    /// Turns true once the store holds the initial list.
    ready: watch::Sender<bool>,
    api: Api<Decoded<K>>,
    config: watcher::Config,
    /// Updated by the reflector with the store.
    indexes: Vec<Arc<dyn Indexer<K>>>,
}

impl<K> Shared<K, KubeStore<K>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// A read handle on the cache of this kind.
    #[must_use]
    pub fn store(&self) -> Store<K> {
        self.reader.clone()
    }

    /// [`Shared::subscribe`], passing on an object only when something other
    /// than its status changed (see [`spec_changes`]).
    pub fn subscribe_spec_changes(&self) -> BoxStream<'static, Arc<K>> {
        spec_changes(self.subscribe(), self.store())
    }
}

impl<K, S> Shared<K, S>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    S: Keep<K>,
{
    fn new(api: Api<Decoded<K>>, config: watcher::Config) -> Self {
        let keep = S::default();
        let (mut fan_out, open) = async_broadcast::broadcast(FAN_OUT_BUFFER);
        // With no subscriber the event is dropped instead of stalling the reflector.
        fan_out.set_await_active(false);
        Self {
            reader: keep.reader(),
            keep: Mutex::new(Some(keep)),
            fan_out,
            _open: open.deactivate(),
            ready: watch::Sender::new(false),
            api,
            config,
            indexes: Vec::new(),
        }
    }

    /// A read handle on what this kind's cache keeps.
    #[must_use]
    pub fn kept(&self) -> S::Reader {
        self.reader.clone()
    }

    /// Keeps `index` up to date with this kind's store.
    fn indexed_by(mut self, index: Arc<dyn Indexer<K>>) -> Self {
        self.indexes.push(index);
        self
    }

    /// The objects of this kind as they change, for `Controller::for_shared_stream`,
    /// `owns_shared_stream` and `watches_shared_stream`.
    ///
    /// # Guarantees
    ///
    /// Called before [`SharedCaches::run`], the stream starts with the initial
    /// list. It carries every applied object and every deleted one (its last
    /// state), after the store has taken the change; after a re-list, the
    /// objects that vanished while the watch was down come as well.
    /// Called after `run`, it is empty and an error is logged: that is a wiring bug.
    pub fn subscribe(&self) -> BoxStream<'static, Arc<K>> {
        let started = self
            .keep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none();
        if started {
            tracing::error!(
                kind = %K::kind(&()),
                "subscribed to a shared cache after it started: this controller will see no events"
            );
            return futures::stream::empty().boxed();
        }
        self.fan_out.new_receiver().boxed()
    }

    /// The future that keeps this kind's reflector up to date; `None` once taken.
    fn take_reflector(&self, reporting: Reporting) -> Option<BoxFuture<'static, ()>> {
        let mut keep = self
            .keep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        let kind = kind_label::<K>();
        let fan_out = self.fan_out.clone();
        let ready = self.ready.clone();
        let indexes = self.indexes.clone();
        let mut events = watcher(self.api.clone(), self.config.clone())
            .default_backoff()
            .boxed();
        Some(Box::pin(async move {
            // The keys a re-list delivered: to tell who vanished meanwhile.
            let mut relist = Relist::default();
            let mut lenient = Lenient::<K>::default();
            reporting.metrics.set_undecodable(kind, 0);
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        // The watcher retries by itself with backoff; the store keeps its last state.
                        let error = loggable(&error);
                        tracing::warn!(kind = %kind, %error, "watch failed; retrying");
                        continue;
                    }
                };
                let converted = lenient.convert(event, &keep);
                if let Some(bad) = converted.report {
                    reporting.undecodable::<K>(kind, &bad).await;
                }
                reporting
                    .metrics
                    .set_undecodable(kind, lenient.undecodable());
                let Some(event) = converted.event else {
                    continue;
                };
                let vanished = relist.observe(&event, &keep);
                take_event(&mut keep, &indexes, &event);
                if matches!(event, watcher::Event::InitDone) {
                    ready.send_replace(true);
                }
                for object in fan_out_of(event, &keep, vanished) {
                    // An error means nobody subscribed: nothing to tell.
                    let _ = fan_out.broadcast_direct(object).await;
                }
            }
        }))
    }
}

/// Applies `event` to `keep`, then to `indexes`, handing them the version
/// of the object `keep` held before (by which an index moves it out of its
/// old group) and its key, made once for them all.
fn take_event<K, S>(keep: &mut S, indexes: &[Arc<dyn Indexer<K>>], event: &watcher::Event<K>)
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    S: Keep<K>,
{
    let previous = match event {
        watcher::Event::Apply(object) | watcher::Event::Delete(object) if !indexes.is_empty() => {
            keep.get(&ObjectRef::from_obj(object))
        }
        _ => None,
    };
    keep.apply(event);
    match event {
        watcher::Event::Apply(object) => {
            let key = index::object_key(object);
            for index in indexes {
                index.applied(&key, previous.as_deref(), object);
            }
        }
        watcher::Event::Delete(object) => {
            // An object its store did not hold is in no index either.
            if let Some(previous) = &previous {
                let key = index::object_key(object);
                for index in indexes {
                    index.deleted(&key, previous);
                }
            }
        }
        watcher::Event::InitDone if !indexes.is_empty() => {
            let objects: Vec<(index::Key, Arc<K>)> = keep
                .state()
                .into_iter()
                .map(|object| (index::object_key(object.as_ref()), object))
                .collect();
            for index in indexes {
                index.relisted(&objects);
            }
        }
        watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::InitDone => {}
    }
}

/// A watch error as it may be logged: a response that does not decode keeps only where
/// decoding failed, since serde quotes the offending value and the objects may be Secrets.
#[must_use]
pub fn loggable(error: &watcher::Error) -> String {
    let (watcher::Error::InitialListFailed(kube::Error::SerdeError(serde))
    | watcher::Error::WatchStartFailed(kube::Error::SerdeError(serde))
    | watcher::Error::WatchFailed(kube::Error::SerdeError(serde))) = error
    else {
        return error.to_string();
    };
    format!(
        "cannot decode the response: {:?} error at line {}, column {} (the value is withheld: objects may be Secrets)",
        serde.classify(),
        serde.line(),
        serde.column()
    )
}

/// The label of kind `K` in metrics: a fixed name, bounded by the kinds the manager watches.
fn kind_label<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()) {
        Cow::Borrowed(kind) => kind,
        Cow::Owned(_) => "Other",
    }
}

/// Where the reflectors report the objects they cannot decode.
#[derive(Clone)]
struct Reporting {
    metrics: Metrics,
    recorder: Recorder,
}

impl Reporting {
    /// Counts, logs and marks with a Warning Event one version of an object
    /// that did not decode. Names the field, never its value.
    async fn undecodable<K: Resource<DynamicType = ()>>(
        &self,
        kind: &'static str,
        bad: &Undecodable,
    ) {
        self.metrics.decode_failed(kind);
        let namespace = bad.meta.namespace.clone().unwrap_or_default();
        let name = bad.meta.name.clone().unwrap_or_default();
        tracing::warn!(
            kind,
            %namespace,
            %name,
            field = %bad.field,
            problem = %bad.problem,
            "cannot decode this object: it is left out of the cache (its last readable version is kept) until it is fixed"
        );
        let reference = ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(kind.to_owned()),
            name: bad.meta.name.clone(),
            namespace: bad.meta.namespace.clone(),
            uid: bad.meta.uid.clone(),
            resource_version: bad.meta.resource_version.clone(),
            ..ObjectReference::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: "Undecodable".to_owned(),
            note: Some(format!(
                "the manager cannot read this {kind}: field {} {}. Until it is fixed the \
                 manager acts on its last readable version, or leaves it alone if it never \
                 read one",
                bad.field, bad.problem
            )),
            action: "Decode".to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            // A courtesy to a person: losing it must not stop the cache.
            tracing::warn!(kind, %error, "could not publish the Undecodable Event");
        }
    }
}

/// Passes on an object only when something other than its status changed:
/// first seen, a new generation (spec, or marked for deletion), other
/// finalizers, or gone (no longer in `store`, which takes each change before
/// the subscribers hear of it).
///
/// For mappers that fan one object out to many keys (a Requester to every
/// contract of its namespace, to every Cluster): the Requester rewrites its
/// status each time a contract is created or deleted, and reconciling every
/// contract for each of those would make a scale-up of n nodes cost n^2
/// reconciles.
///
/// # Why it remembers hashes
///
/// It remembers every object of its kind (the Requester's root watches every
/// contract through it): an `ObjectRef` key (four strings) and a copy of the
/// finalizers took about 430 bytes a contract, 4.2 MiB of the manager's heap
/// at 10,000 (heaptrack, plan 0017). Each object is now a 64-bit hash of its
/// namespace and name with a 64-bit hash of its signature, 16 bytes. Two
/// objects whose name hashes collide (about one chance in 10^11 among 10,000,
/// the hasher randomly keyed) share one entry, which can only make an event
/// pass that a separate entry would have dropped, or drop one whose signature
/// equals the other object's: a mapper woken once more or once less, never a
/// wrong write.
pub fn spec_changes<K>(
    objects: BoxStream<'static, Arc<K>>,
    store: Store<K>,
) -> BoxStream<'static, Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    use std::hash::BuildHasher as _;
    let hasher = std::hash::RandomState::new();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    objects
        .filter(move |object| {
            let meta = object.meta();
            let key = hasher.hash_one((meta.namespace.as_deref(), meta.name.as_deref()));
            let changed = if store.get(&ObjectRef::from_obj(object.as_ref())).is_none() {
                seen.remove(&key);
                true
            } else {
                let signature = hasher.hash_one((
                    meta.generation,
                    meta.finalizers.as_deref().unwrap_or_default(),
                ));
                seen.insert(key, signature) != Some(signature)
            };
            futures::future::ready(changed)
        })
        .boxed()
}

/// The caches of every kind the manager reads.
pub struct SharedCaches {
    /// Kept by the reflectors with the stores.
    pub indexes: Indexes,
    /// Where undecodable objects are counted and marked.
    reporting: Reporting,
    /// Infras of the contract namespace, each text kept once ([`CachedInfra`]).
    pub infras: Shared<CachedInfra>,
    /// ComputeContracts of the contract namespace.
    pub contracts: Shared<CachedContract>,
    /// Requesters of the contract namespace.
    pub requesters: Shared<Requester>,
    /// Requesters of every other namespace: they run nothing, and are told so.
    /// Not part of [`CacheReadiness`]: no reconcile decides from them.
    pub outside_requesters: Shared<Requester>,
    /// Join Secrets of the contract namespace (those labelled with a contract
    /// entry), kept by Infra ([`JoinSecrets`]).
    pub join_secrets: Shared<WatchedJoinSecret, JoinSecrets>,
    /// AtprotoRecords of the contract namespace.
    pub atproto_records: Shared<AtprotoRecord>,
    /// Clusters of every namespace.
    pub clusters: Shared<Cluster>,
    /// NodeClaims of every namespace, kept by Cluster ([`Claims`]).
    pub nodeclaims: Shared<CachedClaim, Claims>,
}

impl SharedCaches {
    /// Creates the caches; nothing is watched until [`SharedCaches::run`].
    #[must_use]
    pub fn new(client: Client, contract_namespace: &str) -> Self {
        let any = watcher::Config::default;
        let reporter = Reporter {
            controller: REPORTER.to_owned(),
            instance: None,
        };
        let indexes = Indexes::new();
        Self {
            reporting: Reporting {
                metrics: Metrics::default(),
                // Nothing is decided from this Event's time: the real clock.
                recorder: Recorder::new(
                    client.clone(),
                    reporter,
                    Arc::new(crate::time::SystemClock),
                ),
            },
            infras: Shared::new(Api::namespaced(client.clone(), contract_namespace), any()),
            contracts: Shared::new(Api::namespaced(client.clone(), contract_namespace), any())
                .indexed_by(indexes.contracts_by_infra.clone())
                .indexed_by(indexes.contracts_by_phase.clone()),
            requesters: Shared::new(Api::namespaced(client.clone(), contract_namespace), any()),
            outside_requesters: Shared::new(
                Api::all(client.clone()),
                watcher::Config::default()
                    .fields(&format!("metadata.namespace!={contract_namespace}")),
            ),
            join_secrets: Shared::new(
                Api::namespaced(client.clone(), contract_namespace),
                watcher::Config::default().labels(names::CONTRACT_LABEL),
            ),
            atproto_records: Shared::new(
                Api::namespaced(client.clone(), contract_namespace),
                any(),
            ),
            clusters: Shared::new(Api::all(client.clone()), any()),
            nodeclaims: Shared::new(Api::all(client), any()),
            indexes,
        }
    }

    /// Counts undecodable objects in `metrics` (the manager's).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.reporting.metrics = metrics;
        self
    }

    /// Drives every reflector until the process stops.
    ///
    /// Spawn it after every controller has subscribed.
    pub fn run(&self) -> impl Future<Output = ()> + Send + 'static {
        let reporting = || self.reporting.clone();
        let reflectors: Vec<BoxFuture<'static, ()>> = [
            self.infras.take_reflector(reporting()),
            self.contracts.take_reflector(reporting()),
            self.requesters.take_reflector(reporting()),
            self.outside_requesters.take_reflector(reporting()),
            self.join_secrets.take_reflector(reporting()),
            self.atproto_records.take_reflector(reporting()),
            self.clusters.take_reflector(reporting()),
            self.nodeclaims.take_reflector(reporting()),
        ]
        .into_iter()
        .flatten()
        .collect();
        async move {
            futures::future::join_all(reflectors).await;
        }
    }

    /// A handle that tells when every cache holds its initial list.
    #[must_use]
    pub fn readiness(&self) -> CacheReadiness {
        CacheReadiness {
            kinds: vec![
                self.infras.ready.subscribe(),
                self.contracts.ready.subscribe(),
                self.requesters.ready.subscribe(),
                self.join_secrets.ready.subscribe(),
                self.atproto_records.ready.subscribe(),
                self.clusters.ready.subscribe(),
                self.nodeclaims.ready.subscribe(),
            ],
        }
    }

    /// Resolves once every cache holds its initial list.
    pub async fn wait_until_ready(&self) {
        self.readiness().wait().await;
    }
}

/// Whether every shared cache holds its initial list; any number of
/// reconciles may wait on it at once.
#[derive(Clone, Debug)]
pub struct CacheReadiness {
    kinds: Vec<watch::Receiver<bool>>,
}

impl CacheReadiness {
    /// A readiness of the caches whose readiness `kinds` say.
    #[cfg(test)]
    pub(crate) fn of(kinds: Vec<watch::Receiver<bool>>) -> Self {
        Self { kinds }
    }

    /// Resolves once every cache holds its initial list (at once afterwards).
    ///
    /// A reconcile must not decide from a cache without its initial list: the
    /// objects not yet listed would look deleted (claims gone, contracts
    /// missing) and the decision would release live machines.
    pub async fn wait(&self) {
        if !self.is_ready() {
            tracing::debug!("waiting for every cache's initial list before deciding");
        }
        for kind in &self.kinds {
            // A closed channel means the caches were dropped: the process is stopping.
            let _ = kind.clone().wait_for(|ready| *ready).await;
        }
    }

    /// Whether every cache holds its initial list now.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.kinds.iter().all(|kind| *kind.borrow())
    }
}

#[cfg(test)]
mod tests;

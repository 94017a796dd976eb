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

use std::{fmt::Debug, sync::Arc, sync::Mutex};

use api::{ComputeContract, Infra, NodeClaim, Requester, names};
use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, Store, store::Writer},
        watcher,
    },
};
use serde::de::DeserializeOwned;

use api::Cluster;

/// How many events a slow subscriber may lag behind before the reflector waits for it.
const FAN_OUT_BUFFER: usize = 1024;

/// One reflector of kind `K`: its store and its fan-out.
pub struct Shared<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store: Store<K>,
    /// Taken by [`SharedCaches::run`]; subscriptions are made from it before that.
    writer: Mutex<Option<Writer<K>>>,
    api: Api<K>,
    config: watcher::Config,
}

impl<K> Shared<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    fn new(api: Api<K>, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store_shared(FAN_OUT_BUFFER);
        Self {
            store,
            writer: Mutex::new(Some(writer)),
            api,
            config,
        }
    }

    /// A read handle on the cache of this kind.
    #[must_use]
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// The objects of this kind as they change, for `Controller::for_shared_stream`,
    /// `owns_shared_stream` and `watches_shared_stream`.
    ///
    /// # Guarantees
    ///
    /// Called before [`SharedCaches::run`], the stream starts with the initial list.
    /// Called after, it is empty and an error is logged: that is a wiring bug.
    pub fn subscribe(&self) -> BoxStream<'static, Arc<K>> {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match writer.as_ref().and_then(Writer::subscribe) {
            Some(handle) => handle.boxed(),
            None => {
                tracing::error!(
                    kind = %K::kind(&()),
                    "subscribed to a shared cache after it started: this controller will see no events"
                );
                futures::stream::empty().boxed()
            }
        }
    }

    /// The future that keeps this kind's reflector up to date; `None` once taken.
    fn take_reflector(&self) -> Option<BoxFuture<'static, ()>> {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        let kind = K::kind(&()).to_string();
        let stream = watcher(self.api.clone(), self.config.clone()).default_backoff();
        Some(Box::pin(reflector::reflector(writer, stream).for_each(
            move |event| {
                if let Err(error) = event {
                    // The watcher retries by itself with backoff; the store keeps its last state.
                    tracing::warn!(kind = %kind, %error, "watch failed; retrying");
                }
                futures::future::ready(())
            },
        )))
    }
}

/// The caches of every kind the manager reads.
pub struct SharedCaches {
    /// Infras of the contract namespace.
    pub infras: Shared<Infra>,
    /// ComputeContracts of the contract namespace.
    pub contracts: Shared<ComputeContract>,
    /// Requesters of the contract namespace.
    pub requesters: Shared<Requester>,
    /// Join Secrets of the contract namespace (those labelled with a contract entry).
    pub join_secrets: Shared<Secret>,
    /// Clusters of every namespace.
    pub clusters: Shared<Cluster>,
    /// NodeClaims of every namespace.
    pub nodeclaims: Shared<NodeClaim>,
}

impl SharedCaches {
    /// Creates the caches; nothing is watched until [`SharedCaches::run`].
    #[must_use]
    pub fn new(client: Client, contract_namespace: &str) -> Self {
        let any = watcher::Config::default;
        Self {
            infras: Shared::new(Api::namespaced(client.clone(), contract_namespace), any()),
            contracts: Shared::new(Api::namespaced(client.clone(), contract_namespace), any()),
            requesters: Shared::new(Api::namespaced(client.clone(), contract_namespace), any()),
            join_secrets: Shared::new(
                Api::namespaced(client.clone(), contract_namespace),
                watcher::Config::default().labels(names::CONTRACT_LABEL),
            ),
            clusters: Shared::new(Api::all(client.clone()), any()),
            nodeclaims: Shared::new(Api::all(client), any()),
        }
    }

    /// Drives every reflector until the process stops.
    ///
    /// Spawn it after every controller has subscribed.
    pub fn run(&self) -> impl Future<Output = ()> + Send + 'static {
        let reflectors: Vec<BoxFuture<'static, ()>> = [
            self.infras.take_reflector(),
            self.contracts.take_reflector(),
            self.requesters.take_reflector(),
            self.join_secrets.take_reflector(),
            self.clusters.take_reflector(),
            self.nodeclaims.take_reflector(),
        ]
        .into_iter()
        .flatten()
        .collect();
        async move {
            futures::future::join_all(reflectors).await;
        }
    }

    /// Resolves once every cache holds its initial list.
    pub async fn wait_until_ready(&self) {
        // A dropped writer means the process is stopping; readiness no longer matters then.
        let _ = futures::join!(
            self.infras.store.wait_until_ready(),
            self.contracts.store.wait_until_ready(),
            self.requesters.store.wait_until_ready(),
            self.join_secrets.store.wait_until_ready(),
            self.clusters.store.wait_until_ready(),
            self.nodeclaims.store.wait_until_ready(),
        );
    }
}

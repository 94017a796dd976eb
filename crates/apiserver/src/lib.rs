//! An embedded Kubernetes API server: in memory (optionally durable on disk), speaking the
//! Kubernetes REST protocol over HTTPS on loopback, faithful enough for the unmodified `kube`
//! client, kube-runtime controllers, kubectl and Helm.
//!
//! One bearer token, made at start and written into the kubeconfig, grants everything;
//! requests without it get 401 ([`auth`]). The certificate authority clients trust is
//! made at start too ([`tls`]). Plain HTTP is only served when asked for.
//!
//! Entry points: [`ApiServer::builder`] (library use, the manager's `dev` mode),
//! [`testing::TestServer`] (tests), and the `apiserver` binary.

// Handlers return `Result<_, ApiError>`; the error is a full Status (~170 bytes) built only on
// failure paths, where its size does not matter.
#![allow(clippy::result_large_err)]

pub mod audit;
pub mod auth;
pub mod debug;
pub mod faults;
pub mod fields;
pub mod handlers;
pub mod paths;
pub mod private_fs;
pub mod protobuf;
pub mod registry;
pub mod reviews;
pub mod schema;
pub mod selectors;
pub mod semantics;
mod server;
pub mod status;
pub mod store;
pub mod testing;
pub mod tls;

pub use server::{ApiServer, ApiServerBuilder, ServerError, kubeconfig_yaml};

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::json;

use crate::audit::Audit;
use crate::faults::Faults;
use crate::registry::{CRD_STORAGE, Registry};
use crate::store::{Change, ChangeType, Expect, Store};

/// Tunables.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often watches get a BOOKMARK (the real server: about a minute).
    pub bookmark_interval: Duration,
    /// How many change events are kept to resume watches.
    pub event_window: usize,
    /// Write-ahead log records between snapshots.
    pub compact_every: u64,
    /// How many requests the request log keeps (0: none; counters are always kept).
    pub request_log_cap: usize,
    /// The request log keeps only writes (create, update, patch, delete,
    /// deletecollection): a benchmark of thousands of nodes keeps every write
    /// without holding every read too.
    pub request_log_writes_only: bool,
    /// How many writes the history keeps for tests (0: none). Each entry keeps that
    /// version of the object alive, so long-running servers leave it at 0.
    pub history_cap: usize,
    /// How long an Event lives after its last write (zero: for ever); kube-apiserver's
    /// `--event-ttl`, one hour by default.
    pub event_ttl: Duration,
    /// The resources (storage keys, `<group>/<plural>`) whose writes the history keeps;
    /// empty: all. With a data directory, this history is also kept on disk and
    /// survives a restart ([`store::history_log`]); the debug endpoints serve it.
    pub history_resources: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            // Each kept event keeps its object versions alive; resumes older than this
            // get 410 and relist, as after a real server's watch-cache window.
            event_window: 20_000,
            compact_every: 10_000,
            request_log_cap: 0,
            request_log_writes_only: false,
            history_cap: 0,
            event_ttl: Duration::from_secs(3600),
            history_resources: Vec::new(),
        }
    }
}

/// Shared server state.
pub struct App {
    /// Objects.
    pub store: Store,
    /// Served resources.
    pub registry: RwLock<Registry>,
    /// Request log and counters.
    pub audit: Audit,
    /// Fault injection.
    pub faults: Faults,
    /// Tunables.
    pub options: Options,
    /// Wakes the background controllers.
    pub kick: tokio::sync::Notify,
    /// Cancelled when the server stops: watches end, connections close.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The shared logs the watches read.
    pub feeds: handlers::feed::Feeds,
}

impl App {
    /// Builds the state, recovering from `data_dir` when given.
    ///
    /// # Errors
    /// When the data directory cannot be opened.
    pub fn new(
        options: Options,
        data_dir: Option<&std::path::Path>,
    ) -> Result<Arc<Self>, ServerError> {
        let store =
            match data_dir {
                Some(dir) => Store::open(dir, options.event_window, options.compact_every)
                    .map_err(|source| ServerError::DataDir {
                        path: dir.to_path_buf(),
                        source,
                    })?,
                None => Store::in_memory(options.event_window),
            };
        store.set_history_cap(options.history_cap);
        store.set_event_ttl(options.event_ttl);
        if !options.history_resources.is_empty() {
            store.set_history_resources(Some(
                options
                    .history_resources
                    .iter()
                    .map(|r| Arc::from(r.as_str()))
                    .collect(),
            ));
            if let Some(dir) = data_dir {
                store
                    .keep_history_in(dir)
                    .map_err(|source| ServerError::DataDir {
                        path: dir.to_path_buf(),
                        source,
                    })?;
            }
        }
        let app = Arc::new(Self {
            store,
            registry: RwLock::new(Registry::with_builtins()),
            audit: Audit::new(options.request_log_cap).writes_only(options.request_log_writes_only),
            faults: Faults::default(),
            options,
            kick: tokio::sync::Notify::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
            feeds: handlers::feed::Feeds::default(),
        });
        app.recover_crds();
        app.ensure_system_namespaces();
        Ok(app)
    }

    fn recover_crds(&self) {
        let (_, table) = self.store.snapshot(&Arc::from(CRD_STORAGE));
        let mut registry = self.registry.write();
        for crd in table.values() {
            if let Err(e) = registry.register_crd(&crd.value()) {
                tracing::warn!(crd = %crd.name(), error = ?e, "stored CRD could not be served");
            }
        }
    }

    fn ensure_system_namespaces(&self) {
        let storage = registry::storage_key("", "namespaces");
        let Some(res) = self.registry.read().get("", "v1", "namespaces") else {
            return;
        };
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let key = (String::new(), name.to_string());
            if self.store.get(&storage, &key).is_some() {
                continue;
            }
            let Ok(object) =
                semantics::prepare::create(&res, json!({"metadata": {"name": name}}), None)
            else {
                continue;
            };
            // Recovery runs before serving: nobody waits on this write's durability.
            let _ = self
                .store
                .write(&storage, &key, store::Op::Put(object), Expect::Absent);
        }
    }

    /// Work after a committed write: serve or retire CRDs, wake the controllers.
    pub fn after_write(&self, change: &Change) {
        if &*change.storage == CRD_STORAGE {
            let value = change.object.value();
            let mut registry = self.registry.write();
            match change.change {
                ChangeType::Deleted => registry.unregister_crd(change.object.name()),
                _ => {
                    if let Err(e) = registry.register_crd(&value) {
                        tracing::warn!(crd = %change.object.name(), error = ?e, "CRD could not be served");
                    }
                }
            }
        }
        // The store recorded what the garbage collector must look at; namespaces and CRDs
        // are looked at on every pass.
        let relevant = self.store.has_gc_work()
            || &*change.storage == registry::NAMESPACE_STORAGE
            || &*change.storage == CRD_STORAGE;
        if relevant {
            self.kick.notify_one();
        }
    }
}

//! An embedded Kubernetes API server: in memory (optionally durable on disk), speaking the
//! Kubernetes REST protocol over HTTP on loopback, faithful enough for the unmodified `kube`
//! client, kube-runtime controllers, kubectl and Helm.
//!
//! It has NO authentication and NO authorization: bind it to loopback only.
//!
//! Entry points: [`ApiServer::builder`] (library use, the manager's `dev` mode),
//! [`testing::TestServer`] (tests), and the `apiserver` binary.

// Handlers return `Result<_, ApiError>`; the error is a full Status (~170 bytes) built only on
// failure paths, where its size does not matter.
#![allow(clippy::result_large_err)]

pub mod audit;
pub mod faults;
pub mod fields;
pub mod handlers;
pub mod paths;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selectors;
pub mod semantics;
pub mod status;
pub mod store;
pub mod testing;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::audit::Audit;
use crate::faults::{FaultConfig, Faults};
use crate::registry::{CRD_STORAGE, Registry};
use crate::store::{Change, ChangeType, Expect, Store};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The data directory could not be opened or recovered.
    #[error("cannot open data directory {path}")]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The listening socket could not be bound.
    #[error("cannot bind {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A non-loopback address without explicit permission.
    #[error(
        "refusing to bind non-loopback address {0} without allow_non_loopback: the server has no authentication"
    )]
    NonLoopback(IpAddr),
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

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
    /// How many writes the history keeps for tests (0: none). Each entry keeps that
    /// version of the object alive, so long-running servers leave it at 0.
    pub history_cap: usize,
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
            history_cap: 0,
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
        let app = Arc::new(Self {
            store,
            registry: RwLock::new(Registry::with_builtins()),
            audit: Audit::new(options.request_log_cap),
            faults: Faults::default(),
            options,
            kick: tokio::sync::Notify::new(),
            shutdown: tokio_util::sync::CancellationToken::new(),
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
                tracing::warn!(crd = %crd.name, error = ?e, "stored CRD could not be served");
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
                ChangeType::Deleted => registry.unregister_crd(&change.object.name),
                _ => {
                    if let Err(e) = registry.register_crd(&value) {
                        tracing::warn!(crd = %change.object.name, error = ?e, "CRD could not be served");
                    }
                }
            }
        }
        let object = &change.object;
        let relevant = change.change == ChangeType::Deleted
            || object.deleting
            || !object.owners.is_empty()
            || change
                .previous
                .as_ref()
                .is_some_and(|p| p.deleting || !p.owners.is_empty())
            || &*change.storage == registry::NAMESPACE_STORAGE
            || &*change.storage == CRD_STORAGE;
        if relevant {
            self.kick.notify_one();
        }
    }
}

/// Builds an [`ApiServer`].
#[derive(Debug, Clone)]
pub struct ApiServerBuilder {
    bind: IpAddr,
    port: u16,
    allow_non_loopback: bool,
    data_dir: Option<PathBuf>,
    options: Options,
    faults: FaultConfig,
}

impl Default for ApiServerBuilder {
    fn default() -> Self {
        Self {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            allow_non_loopback: false,
            data_dir: None,
            options: Options::default(),
            faults: FaultConfig::default(),
        }
    }
}

impl ApiServerBuilder {
    /// The port (0: any free port).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The bind address (default 127.0.0.1).
    #[must_use]
    pub fn bind_address(mut self, addr: IpAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Allows a non-loopback bind address (the server has no authentication).
    #[must_use]
    pub fn allow_non_loopback(mut self, allow: bool) -> Self {
        self.allow_non_loopback = allow;
        self
    }

    /// Persists objects in this directory (default: memory only).
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Tunables.
    #[must_use]
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Initial fault settings.
    #[must_use]
    pub fn faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }

    /// Binds and starts serving in the background.
    ///
    /// # Errors
    /// See [`ServerError`].
    pub async fn serve(self) -> Result<ApiServer, ServerError> {
        if !self.bind.is_loopback() && !self.allow_non_loopback {
            return Err(ServerError::NonLoopback(self.bind));
        }
        let app = App::new(self.options, self.data_dir.as_deref())?;
        app.faults.set(self.faults);
        let addr = SocketAddr::new(self.bind, self.port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        let router = axum::Router::new()
            .fallback(handlers::handle)
            .with_state(app.clone());
        let stop = app.shutdown.clone();
        let server = tokio::spawn(async move {
            // Graceful: in-flight requests finish; watches end on the same signal.
            let serving =
                axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned());
            if let Err(e) = serving.await {
                tracing::error!(error = %e, "api server stopped");
            }
        });
        let controllers = tokio::spawn(semantics::gc::run(app.clone()));
        tracing::warn!(%local, "embedded Kubernetes API server listening with NO authentication");
        Ok(ApiServer {
            app,
            addr: local,
            tasks: vec![server, controllers],
        })
    }
}

/// A running server; stops when dropped.
pub struct ApiServer {
    app: Arc<App>,
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl ApiServer {
    /// A builder.
    #[must_use]
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder::default()
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The shared state (store, registry, audit, faults).
    #[must_use]
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// A kubeconfig document pointing at this server.
    #[must_use]
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(&self.url())
    }

    /// Writes a kubeconfig for kubectl and kube clients.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<(), ServerError> {
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| ServerError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Waits until the server task ends (it runs until dropped or aborted).
    pub async fn wait(mut self) {
        if let Some(server) = self.tasks.first_mut() {
            let _ = server.await;
        }
    }
}

impl ApiServer {
    /// Stops serving: watches end, connections close after their current request, the
    /// background controllers stop. Also done on drop.
    pub fn stop(&self) {
        self.app.shutdown.cancel();
        // The controllers hold no connection: they can stop at once.
        for task in self.tasks.iter().skip(1) {
            task.abort();
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A kubeconfig document for `url` (no credentials: the server has none).
#[must_use]
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: embedded\n  cluster:\n    server: {url}\ncontexts:\n- name: embedded\n  context:\n    cluster: embedded\n    user: embedded\n    namespace: default\ncurrent-context: embedded\nusers:\n- name: embedded\n  user: {{}}\npreferences: {{}}\n"
    )
}

//! In-process server for tests: `TestServer::start().await`, a `kube::Client` for it, a
//! kubeconfig file, and access to the write history, request log, counters and faults.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::audit::{Counters, RequestRecord};
use crate::faults::FaultConfig;
use crate::store::{Change, ChangeType};
use crate::{ApiServer, ApiServerBuilder, App, Options, ServerError};

/// One write as tests see it.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    /// ADDED, MODIFIED or DELETED.
    pub change: ChangeType,
    /// `<group>/<plural>` ("/configmaps" for core).
    pub resource: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The write's resourceVersion.
    pub resource_version: u64,
    change_ref: Arc<Change>,
}

impl HistoryEntry {
    /// The object after the write.
    #[must_use]
    pub fn object(&self) -> Value {
        self.change_ref.object.value()
    }
}

/// Options for a [`TestServer`].
#[derive(Debug)]
pub struct TestServerBuilder {
    data_dir: Option<PathBuf>,
    faults: FaultConfig,
    options: Options,
}

impl Default for TestServerBuilder {
    fn default() -> Self {
        Self {
            data_dir: None,
            faults: FaultConfig::default(),
            options: Options {
                request_log_cap: 100_000,
                history_cap: 200_000,
                ..Options::default()
            },
        }
    }
}

impl TestServerBuilder {
    /// Persists in `dir` (default: memory).
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Initial faults.
    #[must_use]
    pub fn faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }

    /// Watch bookmark interval (default 60 s; tests may want it short).
    #[must_use]
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.options.bookmark_interval = every;
        self
    }

    /// Size of the watch resume window.
    #[must_use]
    pub fn event_window(mut self, events: usize) -> Self {
        self.options.event_window = events;
        self
    }

    /// Write-ahead log records between snapshots (durable servers).
    #[must_use]
    pub fn compact_every(mut self, records: u64) -> Self {
        self.options.compact_every = records;
        self
    }

    /// Starts the server.
    ///
    /// # Errors
    /// See [`ServerError`].
    pub async fn start(self) -> Result<TestServer, ServerError> {
        let mut builder: ApiServerBuilder = ApiServer::builder()
            .options(self.options)
            .faults(self.faults);
        if let Some(dir) = &self.data_dir {
            builder = builder.data_dir(dir);
        }
        let server = builder.serve().await?;
        let dir = tempfile::tempdir().map_err(|source| ServerError::Kubeconfig {
            path: PathBuf::from("<tempdir>"),
            source,
        })?;
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig)?;
        Ok(TestServer {
            server,
            _dir: dir,
            kubeconfig,
        })
    }
}

/// A server for one test; stops on drop.
pub struct TestServer {
    server: ApiServer,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl TestServer {
    /// Starts an in-memory server on a free loopback port.
    ///
    /// # Errors
    /// See [`ServerError`].
    pub async fn start() -> Result<Self, ServerError> {
        Self::builder().start().await
    }

    /// A builder with options.
    #[must_use]
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    /// A kube client for this server (default namespace `default`).
    ///
    /// # Panics
    /// Never in practice: the URL is always valid.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        let uri: http::Uri = self.url().parse().unwrap_or_default();
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.read_timeout = Some(Duration::from_secs(300));
        // A client for an http URL never fails to build.
        kube::Client::try_from(config)
            .unwrap_or_else(|e| unreachable!("kube client for a plain http url: {e}"))
    }

    /// `http://127.0.0.1:<port>`.
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// A kubeconfig file for kubectl.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server state.
    #[must_use]
    pub fn app(&self) -> &Arc<App> {
        self.server.app()
    }

    /// Every write so far, oldest first.
    #[must_use]
    pub fn history(&self) -> Vec<HistoryEntry> {
        self.app()
            .store
            .history()
            .into_iter()
            .map(|c| HistoryEntry {
                change: c.change,
                resource: c.storage.to_string(),
                namespace: c.object.namespace.clone(),
                name: c.object.name.clone(),
                resource_version: c.rv,
                change_ref: c,
            })
            .collect()
    }

    /// The request log.
    #[must_use]
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.app().audit.requests()
    }

    /// Request counters.
    #[must_use]
    pub fn counters(&self) -> Counters {
        self.app().audit.counters()
    }

    /// Replaces the fault settings.
    pub fn set_faults(&self, faults: FaultConfig) {
        self.app().faults.set(faults);
    }

    /// Forgets the watch window and list snapshots: resumed watches and continues get 410.
    pub fn compact(&self) {
        self.app().store.compact();
    }
}

//! In-process server for tests: `TestServer::start().await`, a `kube::Client` for it, a
//! kubeconfig file, and access to the write history, request log, counters and faults.
//!
//! A test server is what users run: HTTPS with its own CA and a bearer token, both in
//! its kubeconfig and in [`TestServer::client`]. [`TestServer::connect_raw`] opens a
//! connection for tests that write HTTP by hand.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::audit::{Counters, RequestRecord};
use crate::faults::FaultConfig;
use crate::store::history_log::HistoryRecord;
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
    /// The entry of a record of the debug history (`GET /debug/history` of a server
    /// in another process), or None when the record is not one a write can have.
    #[must_use]
    pub fn from_record(record: &HistoryRecord) -> Option<Self> {
        let change = Arc::new(record.to_change()?);
        Some(Self {
            change: change.change,
            resource: record.resource.clone(),
            namespace: change.object.namespace().to_owned(),
            name: change.object.name().to_owned(),
            resource_version: change.rv,
            change_ref: change,
        })
    }

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
    plain_http: bool,
}

impl Default for TestServerBuilder {
    fn default() -> Self {
        Self {
            data_dir: None,
            plain_http: false,
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

    /// How many requests the request log keeps (default 100,000), and whether
    /// it keeps only writes; the counters count every request either way.
    #[must_use]
    pub fn request_log(mut self, cap: usize, writes_only: bool) -> Self {
        self.options.request_log_cap = cap;
        self.options.request_log_writes_only = writes_only;
        self
    }

    /// How many writes [`TestServer::history`] keeps (default 200,000); each
    /// keeps its version of the object alive, so a benchmark of memory wants 0.
    #[must_use]
    pub fn history_cap(mut self, writes: usize) -> Self {
        self.options.history_cap = writes;
        self
    }

    /// Serves plain HTTP instead of HTTPS (the token still applies).
    #[must_use]
    pub fn plain_http(mut self) -> Self {
        self.plain_http = true;
        self
    }

    /// Starts the server.
    ///
    /// # Errors
    /// See [`ServerError`].
    pub async fn start(self) -> Result<TestServer, ServerError> {
        let mut builder: ApiServerBuilder = ApiServer::builder()
            .options(self.options)
            .faults(self.faults)
            .plain_http(self.plain_http);
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

/// Sends `request` as it is through a kube client of `config` (which adds only its token
/// and headers), and returns the status code and the body as JSON (Null when it is not).
///
/// # Panics
/// When the server cannot be reached: a broken test setup.
pub async fn send(config: kube::Config, request: http::Request<Vec<u8>>) -> (u16, Value) {
    let client = kube::Client::try_from(config)
        .unwrap_or_else(|e| panic!("a kube client for the test server: {e}"));
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap_or_else(|e| panic!("send a request to the test server: {e}"));
    let code = response.status().as_u16();
    let body = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap_or_else(|e| panic!("read the test server's answer: {e}"));
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// A connection [`TestServer::connect_raw`] opens.
pub trait RawConnection: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> RawConnection for T {}

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
    /// When kube cannot build a client for the server's own CA: a broken test setup.
    #[must_use]
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config())
            .unwrap_or_else(|e| panic!("a kube client for the test server: {e}"))
    }

    /// The client configuration [`Self::client`] uses (URL, CA, token, namespace
    /// `default`), for tests that add headers or build their own client.
    #[must_use]
    pub fn config(&self) -> kube::Config {
        self.server.client_config()
    }

    /// `https://127.0.0.1:<port>` (`http://` with plain HTTP).
    #[must_use]
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// `127.0.0.1:<port>`, for a `Host` header.
    #[must_use]
    pub fn authority(&self) -> String {
        self.server.addr().to_string()
    }

    /// The value of the `Authorization` header every request must carry.
    #[must_use]
    pub fn authorization(&self) -> String {
        format!("Bearer {}", self.server.token().expose())
    }

    /// The bearer token.
    #[must_use]
    pub fn token(&self) -> &str {
        self.server.token().expose()
    }

    /// The CA certificate (PEM), None with plain HTTP.
    #[must_use]
    pub fn ca_pem(&self) -> Option<&str> {
        self.server.tls().map(crate::tls::TlsIdentity::ca_pem)
    }

    /// A fresh connection to the server, TLS done when the server serves HTTPS, for
    /// tests that write HTTP/1.1 by hand (send `Host:` [`Self::authority`] and
    /// `Authorization:` [`Self::authorization`]).
    ///
    /// # Panics
    /// When the server cannot be reached: a broken test setup.
    pub async fn connect_raw(&self) -> Box<dyn RawConnection> {
        let tcp = tokio::net::TcpStream::connect(self.server.addr())
            .await
            .unwrap_or_else(|e| panic!("connect to the test server: {e}"));
        let Some(tls) = self.server.tls() else {
            return Box::new(tcp);
        };
        let config = tls
            .client_config()
            .unwrap_or_else(|e| panic!("a TLS client for the test server: {e}"));
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let name = rustls::pki_types::ServerName::IpAddress(self.server.addr().ip().into());
        let stream = connector
            .connect(name, tcp)
            .await
            .unwrap_or_else(|e| panic!("TLS handshake with the test server: {e}"));
        Box::new(stream)
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
                namespace: c.object.namespace().to_owned(),
                name: c.object.name().to_owned(),
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

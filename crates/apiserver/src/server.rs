//! Starting the server: [`ApiServerBuilder`] binds, makes the token and the TLS identity,
//! and serves; [`ApiServer`] is the running server, its clients and its kubeconfig.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::middleware::from_fn_with_state;
use axum::serve::ListenerExt;
use axum_server::accept::NoDelayAcceptor;
use base64::Engine;
use tokio::task::JoinHandle;

use crate::auth::{self, AllowedHosts, BearerToken, Gate, TokenError};
use crate::faults::FaultConfig;
use crate::tls::{TlsError, TlsIdentity};
use crate::{App, Options, debug, handlers, private_fs, semantics};

/// How long a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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
        "refusing to bind non-loopback address {0} without allow_non_loopback: anyone who can reach it may try the token"
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
    /// The TLS identity could not be made.
    #[error("cannot set up TLS")]
    Tls(#[from] TlsError),
    /// The bearer token could not be read or made.
    #[error("cannot set up the bearer token")]
    Token(#[from] TokenError),
    /// A kube client for the server could not be built.
    #[error("cannot build a client for the server")]
    Client(#[source] kube::Error),
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
    plain_http: bool,
    token: Option<BearerToken>,
    token_file: Option<PathBuf>,
    allowed_hosts: Vec<String>,
    debug_endpoints: bool,
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
            plain_http: false,
            token: None,
            token_file: None,
            allowed_hosts: Vec::new(),
            debug_endpoints: false,
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

    /// Allows a non-loopback bind address.
    #[must_use]
    pub fn allow_non_loopback(mut self, allow: bool) -> Self {
        self.allow_non_loopback = allow;
        self
    }

    /// Persists objects in this directory (default: memory only). The CA and the token
    /// are kept there too, so a restarted server keeps its clients.
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

    /// Serves plain HTTP instead of HTTPS (the token still applies).
    #[must_use]
    pub fn plain_http(mut self, plain: bool) -> Self {
        self.plain_http = plain;
        self
    }

    /// Uses this bearer token (default: [`Self::token_file`], else `<data dir>/token`,
    /// else a new random one).
    #[must_use]
    pub fn token(mut self, token: BearerToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Reads the bearer token from this file, or writes a new one there (0600) when it
    /// does not exist.
    #[must_use]
    pub fn token_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.token_file = Some(path.into());
        self
    }

    /// Also accepts requests whose `Host` names this host (a name or an IP address),
    /// and puts it in the serving certificate. Loopback names are always accepted.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Serves the debug endpoints under `/debug/` ([`crate::debug`]: fault injection,
    /// forced compaction, the write history). Off by default: they make the server fail
    /// on purpose.
    #[must_use]
    pub fn debug_endpoints(mut self, on: bool) -> Self {
        self.debug_endpoints = on;
        self
    }

    fn resolve_token(&self) -> Result<BearerToken, TokenError> {
        if let Some(token) = &self.token {
            return Ok(token.clone());
        }
        match (&self.token_file, &self.data_dir) {
            (Some(path), _) => BearerToken::load_or_create(path),
            (None, Some(dir)) => BearerToken::load_or_create(&dir.join(auth::TOKEN_FILE)),
            (None, None) => Ok(BearerToken::generate()),
        }
    }

    /// Binds and starts serving in the background.
    ///
    /// # Errors
    /// See [`ServerError`].
    pub async fn serve(self) -> Result<ApiServer, ServerError> {
        if !self.bind.is_loopback() && !self.allow_non_loopback {
            return Err(ServerError::NonLoopback(self.bind));
        }
        let app = App::new(self.options.clone(), self.data_dir.as_deref())?;
        app.faults.set(self.faults.clone());
        let token = self.resolve_token()?;
        let mut hosts = self.allowed_hosts.clone();
        if !self.bind.is_loopback() && !self.bind.is_unspecified() {
            hosts.push(self.bind.to_string());
        }
        let tls = if self.plain_http {
            None
        } else {
            Some(TlsIdentity::new(&hosts, self.data_dir.as_deref())?)
        };
        let addr = SocketAddr::new(self.bind, self.port);
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| ServerError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr, source })?;
        let gate = Arc::new(Gate {
            token: token.clone(),
            hosts: AllowedHosts::new(&hosts),
        });
        let mut router = axum::Router::new();
        if self.debug_endpoints {
            tracing::warn!("debug endpoints on: /debug/ can inject faults");
            router = router.nest("/debug", debug::router());
        }
        let router = router
            .fallback(handlers::handle)
            .with_state(app.clone())
            .layer(from_fn_with_state(gate, auth::guard))
            .into_make_service_with_connect_info::<SocketAddr>();
        let stop = app.shutdown.clone();
        // Every connection sends without Nagle's delay (TCP_NODELAY), as
        // kube-apiserver's do: Go sets it on every TCP connection. Without
        // it a client with few requests in flight waited on its own delayed
        // ACK before each small answer: one Cluster of 1,000 claims reached
        // Deployed after 10.7 s, against 3.5 s with it (bench-scale
        // --throughput --clusters 1 --nodes 1000).
        let server = match &tls {
            Some(identity) => {
                let handle = axum_server::Handle::new();
                let config =
                    axum_server::tls_rustls::RustlsConfig::from_config(identity.server_config());
                let acceptor = axum_server::tls_rustls::RustlsAcceptor::new(config)
                    .handshake_timeout(HANDSHAKE_TIMEOUT)
                    .acceptor(NoDelayAcceptor::new());
                let serving = axum_server::from_tcp(listener)
                    .map_err(|source| ServerError::Bind { addr, source })?
                    .acceptor(acceptor)
                    .handle(handle.clone())
                    .serve(router);
                tokio::spawn(async move {
                    // Graceful: in-flight requests finish; watches end on the same signal.
                    let stopping = async move {
                        stop.cancelled().await;
                        handle.graceful_shutdown(None);
                    };
                    let (served, ()) = tokio::join!(serving, stopping);
                    if let Err(e) = served {
                        tracing::error!(error = %e, "api server stopped");
                    }
                })
            }
            None => {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .map_err(|source| ServerError::Bind { addr, source })?
                    .tap_io(|stream| {
                        if let Err(error) = stream.set_nodelay(true) {
                            tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
                        }
                    });
                tokio::spawn(async move {
                    let serving = axum::serve(listener, router)
                        .with_graceful_shutdown(stop.cancelled_owned());
                    if let Err(e) = serving.await {
                        tracing::error!(error = %e, "api server stopped");
                    }
                })
            }
        };
        let controllers = tokio::spawn(semantics::gc::run(app.clone()));
        let scheme = if tls.is_some() { "https" } else { "http" };
        tracing::info!(%local, scheme, "embedded Kubernetes API server listening");
        Ok(ApiServer {
            app,
            addr: local,
            token,
            tls,
            tasks: vec![server, controllers],
        })
    }
}

/// A running server; stops when dropped.
pub struct ApiServer {
    app: Arc<App>,
    addr: SocketAddr,
    token: BearerToken,
    tls: Option<TlsIdentity>,
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

    /// `https://<addr>` (`http://` with plain HTTP); an unspecified bind address is
    /// reached through 127.0.0.1.
    #[must_use]
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{addr}")
    }

    /// The bearer token every request must carry. Never log it.
    #[must_use]
    pub fn token(&self) -> &BearerToken {
        &self.token
    }

    /// The TLS identity (None with plain HTTP).
    #[must_use]
    pub fn tls(&self) -> Option<&TlsIdentity> {
        self.tls.as_ref()
    }

    /// The shared state (store, registry, audit, faults).
    #[must_use]
    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// A kube client configuration for this server: its URL, CA and token, namespace
    /// `default`, and a read timeout long enough for watches.
    ///
    /// # Panics
    /// Never: the URL is built from a socket address.
    #[must_use]
    pub fn client_config(&self) -> kube::Config {
        let uri: http::Uri = self
            .url()
            .parse()
            .unwrap_or_else(|e| unreachable!("a URL made of a socket address parses: {e}"));
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        // Watches are long polls; the default read timeout would cut them.
        config.read_timeout = Some(Duration::from_secs(300));
        config.root_cert = self.tls.as_ref().map(|tls| vec![tls.ca_der().to_vec()]);
        config.auth_info.token = Some(self.token.expose().to_string().into());
        config
    }

    /// A kube client for this server (see [`Self::client_config`]).
    ///
    /// # Errors
    /// When kube cannot build its TLS configuration.
    pub fn client(&self) -> Result<kube::Client, ServerError> {
        kube::Client::try_from(self.client_config()).map_err(ServerError::Client)
    }

    /// A kubeconfig document for this server: URL, CA and token.
    #[must_use]
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig_yaml(
            &self.url(),
            &self.token,
            self.tls.as_ref().map(TlsIdentity::ca_pem),
        )
    }

    /// Writes the kubeconfig for kubectl and kube clients, readable only by this user
    /// (it holds the token).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ServerError> {
        private_fs::write(path, self.kubeconfig_yaml().as_bytes()).map_err(|source| {
            ServerError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            }
        })
    }

    /// Waits until the server task ends (it runs until dropped or aborted).
    pub async fn wait(mut self) {
        if let Some(server) = self.tasks.first_mut() {
            let _ = server.await;
        }
    }

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

/// A kubeconfig document for the server at `url`: the token as the user's credential
/// and, for HTTPS, the CA (PEM) as `certificate-authority-data`.
#[must_use]
pub fn kubeconfig_yaml(url: &str, token: &BearerToken, ca_pem: Option<&str>) -> String {
    let mut cluster = serde_json::json!({"server": url});
    if let Some(pem) = ca_pem {
        cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    let document = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": cluster}],
        "contexts": [{"name": "embedded", "context": {
            "cluster": "embedded", "user": "embedded", "namespace": "default",
        }}],
        "current-context": "embedded",
        "users": [{"name": "embedded", "user": {"token": token.expose()}}],
        "preferences": {},
    });
    // A JSON value of strings and maps always serializes.
    serde_yaml::to_string(&document).unwrap_or_default()
}

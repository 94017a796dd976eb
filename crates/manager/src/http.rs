//! The manager's one HTTP port: `/metrics`, `/healthz` and `/readyz`.
//!
//! - `/metrics`: the registry in OpenMetrics text, for Prometheus.
//! - `/healthz`: 200 while the process serves requests at all (liveness probe).
//!   It does not look at the API server or the lease: a network partition must
//!   not get every replica restarted at once.
//! - `/readyz`: 200 once the wiring says so through [`Readiness`], else 503
//!   (readiness probe). The wiring sets it when the caches have synced on the
//!   leader, and at once on a follower (a follower is ready to take over without
//!   leading; otherwise a rolling update would wait forever for the second replica).
//!
//! The port is `--http-addr` (default `0.0.0.0:8080`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The default listen address of the HTTP port.
pub const DEFAULT_HTTP_ADDR: &str = "0.0.0.0:8080";

/// The content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Flags of the HTTP port; flatten into a subcommand's args.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Address of the port serving /metrics, /healthz and /readyz.
    #[arg(long, default_value = DEFAULT_HTTP_ADDR, env = "HTTP_ADDR")]
    pub http_addr: SocketAddr,
}

/// Whether this replica is ready; shared between the wiring (writer) and `/readyz` (reader).
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// A flag that starts not ready.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks the replica ready or not ready.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Copies `ready` into this flag until its sender is gone (e.g. the controllers'
    /// "caches synced" channel); the flag keeps the last value afterwards.
    pub async fn follow(&self, mut ready: tokio::sync::watch::Receiver<bool>) {
        loop {
            self.set(*ready.borrow_and_update());
            if ready.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether `/readyz` answers 200.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Why the HTTP port failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address could not be bound (in use, no permission, bad interface).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
    /// The server stopped with an I/O error.
    #[error("http server on {addr} failed: {source}")]
    Serve {
        /// The bound address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A bound, not yet serving, HTTP port; binding first lets a caller learn the port of `:0`.
#[derive(Debug)]
pub struct HttpServer {
    listener: TcpListener,
    addr: SocketAddr,
}

impl HttpServer {
    /// Binds `addr`.
    ///
    /// # Errors
    ///
    /// [`HttpError::Bind`] when the address cannot be bound.
    pub async fn bind(addr: SocketAddr) -> Result<Self, HttpError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        Ok(Self { listener, addr })
    }

    /// The bound address (with the real port when `:0` was asked for).
    #[must_use]
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` resolves, then finishes the requests in flight and returns.
    ///
    /// # Errors
    ///
    /// [`HttpError::Serve`] when accepting connections fails for good.
    pub async fn serve(
        self,
        registry: Arc<Registry>,
        readiness: Readiness,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HttpError> {
        self.serve_router(
            router(registry, readiness),
            "/metrics, /healthz and /readyz",
            shutdown,
        )
        .await
    }

    /// Serves `router` (logged as serving `what`) until `shutdown` resolves,
    /// then finishes the requests in flight and returns; the market port
    /// serves its own router on a port bound the same way.
    ///
    /// # Errors
    ///
    /// [`HttpError::Serve`] when accepting connections fails for good.
    pub async fn serve_router(
        self,
        router: Router,
        what: &str,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HttpError> {
        let addr = self.addr;
        tracing::info!(%addr, "serving {what}");
        // Answers leave at once (TCP_NODELAY), as Go's servers send theirs.
        let listener = self.listener.tap_io(|stream| {
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
            }
        });
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|source| HttpError::Serve { addr, source })
    }
}

/// Binds `addr` and serves `/metrics`, `/healthz` and `/readyz` until `shutdown` resolves.
///
/// # Errors
///
/// [`HttpError::Bind`] when the address cannot be bound, [`HttpError::Serve`] when serving fails.
pub async fn serve(
    addr: SocketAddr,
    registry: Arc<Registry>,
    readiness: Readiness,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HttpError> {
    HttpServer::bind(addr)
        .await?
        .serve(registry, readiness, shutdown)
        .await
}

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    readiness: Readiness,
}

fn router(registry: Arc<Registry>, readiness: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AppState {
            registry,
            readiness,
        })
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot encode metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: caches not synced yet\n",
        )
    }
}

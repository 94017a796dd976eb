//! The manager's client to the API server: kube's client over HTTP/2.
//!
//! kube-client 5 builds its hyper client for HTTP/1.1 only (kube-rs/kube#1923),
//! so every request in flight and every watch holds a TCP connection of its
//! own, with its buffers and its connection task. The manager keeps six
//! watches and reconciles up to about 50 keys at once: at 10,000 nodes it held
//! about 100 connections to the API server, about 5 MiB of its heap (plan 0018
//! R6). client-go talks HTTP/2 to kube-apiserver, which offers it over TLS:
//! every request and watch is a stream on one connection.
//!
//! [`api_client`] builds the same service stack as kube's
//! `ClientBuilder::try_from(Config)` (the base URI, the retry of 429/503/504,
//! the auth, the extra headers: kube's own layers, through [`ConfigExt`]) on a
//! hyper client that offers h2 over TLS (ALPN `h2`, `http/1.1`) and keeps
//! HTTP/1.1 for a server that does not take it and for plain `http://`. Only
//! the connector and the pool are ours, configured as client-go's transport:
//! - a 4 MiB window a stream and 1 GiB for the connection, so that a watch
//!   whose reader waits (a busy fan-out) stops its own stream and never the
//!   connection every other request rides on;
//! - a PING after 30 s without a frame and 15 s for its answer, so that a dead
//!   connection is found and replaced (HTTP/1.1 found it per request, by
//!   kube's socket timeouts);
//! - HTTP/1.1 connections idle for 90 s closed (hyper's default, which kube's
//!   pool never applies: it has no timer).
//!
//! Configurations this stack does not cover go to kube's own builder, over
//! HTTP/1.1: a proxy, and an exec plugin (when it hands out a client
//! certificate, kube dates the client by the certificate's expiry). The one
//! layer of kube's stack left out is its per-request `HTTP` debug span.

use std::time::Duration;

use hyper_util::{
    client::legacy::{Client as HyperClient, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use kube::client::{Body, ConfigExt, retry::RetryPolicy};
use tower::{BoxError, ServiceBuilder, retry::RetryLayer};

/// A stream's receive window: client-go's (`transportDefaultStreamFlow`).
const STREAM_WINDOW: u32 = 4 << 20;
/// The connection's receive window: client-go's (`transportDefaultConnFlow`).
const CONNECTION_WINDOW: u32 = 1 << 30;
/// A PING after this long without a frame: client-go's `ReadIdleTimeout`.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);
/// How long the PING's answer may take: client-go's `PingTimeout`.
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an HTTP/1.1 connection stays pooled unused: hyper's default.
const IDLE_CONNECTION: Duration = Duration::from_secs(90);

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ApiClientError {
    /// kube refused a part of the configuration (TLS, auth, headers).
    #[error("build the client to the API server from its configuration: {0}")]
    Config(#[from] kube::Error),
    /// The TLS server name does not parse.
    #[error("the configured TLS server name {name:?} is not a DNS name or an IP address")]
    ServerName {
        /// The configured name.
        name: String,
    },
}

/// A client to the API server of `config`, over HTTP/2 when the server offers
/// it (see the [module docs](self)).
///
/// # Errors
/// When kube refuses the TLS, auth or header configuration, or the TLS server
/// name does not parse.
pub fn api_client(config: kube::Config) -> Result<kube::Client, ApiClientError> {
    if config.proxy_url.is_some() || config.auth_info.exec.is_some() {
        return Ok(kube::Client::try_from(config)?);
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(config.connect_timeout);
    // One connection carries every request: a small frame must not wait for an ACK.
    http.set_nodelay(true);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    let tls = match &config.tls_server_name {
        Some(name) => {
            let resolved = name
                .clone()
                .try_into()
                .map_err(|_| ApiClientError::ServerName { name: name.clone() })?;
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(resolved))
        }
        None => tls,
    };
    let connector = tls.enable_all_versions().wrap_connector(http);
    let hyper: HyperClient<_, Body> = HyperClient::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_CONNECTION)
        .timer(TokioTimer::new())
        .http2_initial_stream_window_size(STREAM_WINDOW)
        .http2_initial_connection_window_size(CONNECTION_WINDOW)
        .http2_keep_alive_interval(PING_AFTER_IDLE)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

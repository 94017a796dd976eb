//! A thin XRPC client: `GET /xrpc/<nsid>?params` (query) and
//! `POST /xrpc/<nsid>` with a JSON body (procedure), errors read from the
//! `{error, message}` body, a timeout on every call.
//!
//! Written over reqwest rather than atrium-xrpc/atrium-api: those generate
//! every Bluesky lexicon (a long build on a 2-core CI) for the ten methods we
//! call, and the market's own NSIDs are in no generated crate anyway.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result, Secret};

/// How a call authenticates.
#[derive(Debug, Clone)]
pub enum Auth {
    /// `Authorization: Bearer <jwt>` (an access JWT, or a service-auth JWT).
    Bearer(Secret<String>),
    /// HTTP Basic, as the PDS admin endpoints take (`admin:<password>`).
    Basic {
        /// The user name (`admin`).
        username: String,
        /// The password.
        password: Secret<String>,
    },
}

/// The default timeout of a call (the reference's client uses 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// An XRPC client for one service (a PDS, a bidder, a relay).
#[derive(Debug, Clone)]
pub struct XrpcClient {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
}

/// A reqwest client as this crate uses it (rustls, no proxy surprises).
///
/// # Errors
/// [`Error::Transport`] when the TLS backend cannot be set up.
pub fn http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("socialweb-atproto/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Transport {
            nsid: "client".to_owned(),
            reason: e.to_string(),
            timed_out: false,
        })
}

impl XrpcClient {
    /// A client for the service at `base_url` (`https://host[:port]`).
    #[must_use]
    pub fn new(http: reqwest::Client, base_url: &str, timeout: Duration) -> Self {
        Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            timeout,
        }
    }

    /// The service's base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The shared HTTP client (to build clients for other services).
    #[must_use]
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Calls a query (`GET`).
    ///
    /// # Errors
    /// [`Error::Xrpc`] for an error status, [`Error::Transport`] when the call
    /// fails or the answer is not the expected JSON.
    pub async fn query<T: DeserializeOwned>(
        &self,
        nsid: &str,
        params: &[(&str, &str)],
        auth: Option<&Auth>,
    ) -> Result<T> {
        let request = self.http.get(self.url(nsid)).query(params);
        self.send(nsid, request, auth).await
    }

    /// Calls a procedure (`POST`, JSON body).
    ///
    /// # Errors
    /// As [`XrpcClient::query`].
    pub async fn procedure<I: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        nsid: &str,
        input: &I,
        auth: Option<&Auth>,
    ) -> Result<T> {
        let request = self.http.post(self.url(nsid)).json(input);
        self.send(nsid, request, auth).await
    }

    /// Calls a procedure that takes no input (`POST` without a body; a
    /// PDS refuses a body where the lexicon declares none).
    ///
    /// # Errors
    /// As [`XrpcClient::query`].
    pub async fn procedure_without_input<T: DeserializeOwned>(
        &self,
        nsid: &str,
        auth: Option<&Auth>,
    ) -> Result<T> {
        let request = self.http.post(self.url(nsid));
        self.send(nsid, request, auth).await
    }

    fn url(&self, nsid: &str) -> String {
        format!("{}/xrpc/{nsid}", self.base)
    }

    async fn send<T: DeserializeOwned>(
        &self,
        nsid: &str,
        mut request: reqwest::RequestBuilder,
        auth: Option<&Auth>,
    ) -> Result<T> {
        request = match auth {
            Some(Auth::Bearer(token)) => request.bearer_auth(token.expose()),
            Some(Auth::Basic { username, password }) => {
                request.basic_auth(username, Some(password.expose()))
            }
            None => request,
        };
        let transport = |e: &reqwest::Error| Error::Transport {
            nsid: nsid.to_owned(),
            // without_url: the URL is ours and harmless, but keep messages
            // short; the method name says what failed.
            reason: strip_url(e),
            timed_out: e.is_timeout(),
        };
        let response = request
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| transport(&e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| transport(&e))?;
        if !status.is_success() {
            return Err(error_from_body(nsid, status.as_u16(), &body));
        }
        let body: &[u8] = if body.is_empty() { b"null" } else { &body };
        serde_json::from_slice(body).map_err(|e| Error::Transport {
            nsid: nsid.to_owned(),
            reason: format!("answer is not the expected json: {e}"),
            timed_out: false,
        })
    }
}

fn strip_url(e: &reqwest::Error) -> String {
    let mut reason = e.to_string();
    if let Some(url) = e.url() {
        reason = reason.replace(url.as_str(), "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        reason.push_str(": ");
        reason.push_str(&inner.to_string());
        source = inner.source();
    }
    reason
}

#[derive(serde::Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// Builds the error of a non-2xx answer from its `{error, message}` body.
fn error_from_body(nsid: &str, status: u16, body: &[u8]) -> Error {
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    let (error, message) = match parsed {
        Some(ErrorBody { error, message }) => (
            error.unwrap_or_else(|| "Unknown".to_owned()),
            message.unwrap_or_default(),
        ),
        None => (
            "Unknown".to_owned(),
            String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
        ),
    };
    Error::Xrpc {
        nsid: nsid.to_owned(),
        status,
        error,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_read_whatever_their_shape() {
        let e = error_from_body("m", 400, br#"{"error":"InvalidRequest","message":"bad"}"#);
        assert_eq!(e.xrpc_error(), Some("InvalidRequest"));
        assert!(!e.is_retryable());
        // The reference's 500 body.
        let e = error_from_body("m", 500, br#"{"ok":false,"error":"internal error"}"#);
        assert_eq!(e.xrpc_error(), Some("internal error"));
        assert!(e.is_retryable());
        let e = error_from_body("m", 502, b"<html>bad gateway</html>");
        assert_eq!(e.xrpc_error(), Some("Unknown"));
        assert!(e.to_string().contains("bad gateway"));
        assert!(error_from_body("m", 401, b"").is_auth());
    }
}

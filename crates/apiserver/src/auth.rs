//! Who may talk to the server: the holder of one bearer token, through a loopback `Host`,
//! with a declared body format.
//!
//! The server is a development server on a shared machine: without these, another local
//! user (or a web page, through DNS rebinding) could read every Secret and delete
//! anything. Every request passes [`guard`] before any handler:
//!
//! 1. its `Host` (or HTTP/2 `:authority`) must name a loopback address, `localhost`, or
//!    a host the server was told to accept: 403 otherwise. A page on `evil.example` whose
//!    name resolves to 127.0.0.1 still sends `Host: evil.example`;
//! 2. it must carry `Authorization: Bearer <token>`: 401 otherwise, with the `Status`
//!    body kube-apiserver sends. `/healthz`, `/livez`, `/readyz` and `/version` answer
//!    without credentials (as kube-apiserver's `system:public-info-viewer` role lets
//!    anonymous users), but a wrong token is 401 there too;
//! 3. a body must say what it is: a Kubernetes write (POST, PUT, PATCH) or any request
//!    with a body and no `Content-Type` is 415. (kube-apiserver reads a create without
//!    Content-Type as JSON; this server does not, so a browser's `fetch` of a Blob,
//!    which sends no Content-Type and needs no CORS preflight, cannot write.)
//!
//! The token holder is allowed everything (there is no authorization beyond it); its
//! identity is [`USER_NAME`] in [`USER_GROUPS`], which the review APIs report. It cannot
//! act as another user: `Impersonate-*` headers (`kubectl --as`) are 403, since the server
//! could not say what that user may do.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::{Method, header};
use subtle::ConstantTimeEq;

use crate::private_fs;
use crate::status::ApiError;

/// The user the token authenticates (what `kubectl auth whoami` prints).
pub const USER_NAME: &str = "embedded-admin";
/// Its groups: `system:masters` is the group a real cluster never asks permission for.
pub const USER_GROUPS: &[&str] = &["system:masters", "system:authenticated"];
/// The token's file in a data directory.
pub const TOKEN_FILE: &str = "token";

/// Paths anyone may read without a token, as kube-apiserver's `system:public-info-viewer`.
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

/// The bearer token. Its `Debug` form never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// A token that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Empty, or with characters an HTTP header cannot carry.
    #[error(
        "a bearer token must be 16 to 1024 visible ASCII characters without spaces (the file {0} holds something else)"
    )]
    Malformed(String),
    /// The file could not be read or written.
    #[error("cannot use the token file {path}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl BearerToken {
    /// 32 random bytes from the thread's CSPRNG, base64url: 43 characters.
    #[must_use]
    pub fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        Self(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }

    /// A token from its text.
    ///
    /// # Errors
    /// [`TokenError::Malformed`] unless 16 to 1024 visible ASCII characters.
    pub fn new(token: impl Into<String>, origin: &str) -> Result<Self, TokenError> {
        let token = token.into();
        let usable =
            (16..=1024).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic());
        if usable {
            Ok(Self(token))
        } else {
            Err(TokenError::Malformed(origin.to_string()))
        }
    }

    /// The token in `path` (surrounding whitespace ignored); when the file does not exist,
    /// a new token written there (0600).
    ///
    /// # Errors
    /// See [`TokenError`].
    pub fn load_or_create(path: &Path) -> Result<Self, TokenError> {
        let file_error = |source| TokenError::File {
            path: path.to_path_buf(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Self::new(text.trim(), &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let token = Self::generate();
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    private_fs::create_dir(dir).map_err(file_error)?;
                }
                private_fs::write(path, format!("{}\n", token.0).as_bytes()).map_err(file_error)?;
                Ok(token)
            }
            Err(e) => Err(file_error(e)),
        }
    }

    /// The token itself, for a kubeconfig or a client. Never log it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    #[must_use]
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(presented).into()
    }
}

/// Host names and addresses a request may name besides the loopback ones.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
    addresses: Vec<IpAddr>,
}

impl AllowedHosts {
    /// Loopback names, plus `extra` (names or IP addresses).
    #[must_use]
    pub fn new(extra: &[String]) -> Self {
        let mut hosts = Self::default();
        for host in extra {
            let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
            match host.parse::<IpAddr>() {
                Ok(ip) => hosts.addresses.push(ip),
                Err(_) => hosts.names.push(host.trim_end_matches('.').to_string()),
            }
        }
        hosts
    }

    /// Whether an authority (`host[:port]`, `[v6]:port`) names an allowed host.
    #[must_use]
    pub fn allows(&self, authority: &str) -> bool {
        let host = host_of(authority).to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return ip.is_loopback() || self.addresses.contains(&ip);
        }
        host == "localhost" || self.names.iter().any(|name| name == host)
    }
}

/// The host part of an authority: `[::1]:80` -> `::1`, `a:80` -> `a`, `a` -> `a`.
fn host_of(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        // More than one colon without brackets: a bare IPv6 address.
        Some((host, _)) if !host.contains(':') => host,
        _ => authority,
    }
}

/// What [`guard`] checks against.
#[derive(Debug)]
pub struct Gate {
    /// The one token.
    pub token: BearerToken,
    /// The accepted `Host` values beyond loopback.
    pub hosts: AllowedHosts,
}

/// The request guard (see the module docs): Host, then token, then Content-Type.
pub async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    match check(&gate, &request) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

fn check(gate: &Gate, request: &Request) -> Result<(), ApiError> {
    let authority = request
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            request
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_default();
    if !gate.hosts.allows(&authority) {
        return Err(ApiError::forbidden(format!(
            "this server answers only requests addressed to a loopback host (localhost, 127.0.0.1, [::1]) or one it was told to accept, not {authority:?}"
        )));
    }
    let path = request.uri().path();
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| bearer_of(value.as_bytes()));
    match presented {
        Some(Some(token)) if gate.token.matches(token) => {}
        None if is_public(path) => {}
        _ => return Err(ApiError::new(401, "Unauthorized", "Unauthorized")),
    }
    // The token holder may do everything, but as nobody else: acting as another user
    // (kubectl --as) cannot be authorized here, so it is refused rather than ignored.
    if request
        .headers()
        .keys()
        .any(|name| name.as_str().starts_with("impersonate-"))
    {
        return Err(ApiError::forbidden(
            "impersonation is not supported: the embedded API server knows only its token holder",
        ));
    }
    let has_body = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|n| n.trim() != "0")
        || request.headers().contains_key(header::TRANSFER_ENCODING);
    let is_api_write = (path.starts_with("/api/") || path.starts_with("/apis/"))
        && matches!(
            *request.method(),
            Method::POST | Method::PUT | Method::PATCH
        );
    let declared = request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| !v.as_bytes().trim_ascii().is_empty());
    if (has_body || is_api_write) && !declared {
        return Err(ApiError::unsupported_media_type(""));
    }
    Ok(())
}

/// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive).
fn bearer_of(value: &[u8]) -> Option<&[u8]> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().as_bytes())
        .filter(|t| !t.is_empty())
}

fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.iter().any(|public| {
        path == *public
            || path
                .strip_prefix(public)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_allowed_and_others_are_not() {
        let hosts = AllowedHosts::new(&["dev.example.test".into(), "10.1.2.3".into()]);
        for allowed in [
            "localhost",
            "localhost:6443",
            "LOCALHOST.:1",
            "127.0.0.1:6443",
            "127.1.2.3",
            "[::1]:6443",
            "::1",
            "dev.example.test:443",
            "10.1.2.3:6443",
        ] {
            assert!(hosts.allows(allowed), "{allowed}");
        }
        for refused in [
            "",
            "evil.example:6443",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.1.2.4",
            "[::2]:1",
            "0.0.0.0:6443",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header_and_compared_exactly() {
        let token = BearerToken::new("0123456789abcdef-token", "test").unwrap();
        assert_eq!(
            bearer_of(b"Bearer 0123456789abcdef-token"),
            Some(b"0123456789abcdef-token".as_slice())
        );
        assert!(token.matches(bearer_of(b"bearer  0123456789abcdef-token ").unwrap()));
        assert!(!token.matches(b"0123456789abcdef-toke"));
        assert!(!token.matches(b"0123456789abcdef-tokenX"));
        assert_eq!(bearer_of(b"Basic abc"), None);
        assert_eq!(bearer_of(b"Bearer "), None);
    }

    #[test]
    fn generated_tokens_differ_and_never_show_in_debug_output() {
        let a = BearerToken::generate();
        let b = BearerToken::generate();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 43);
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn malformed_tokens_are_refused() {
        assert!(BearerToken::new("short", "t").is_err());
        assert!(BearerToken::new("with a space inside it", "t").is_err());
        assert!(BearerToken::new("x".repeat(1025), "t").is_err());
    }

    #[test]
    fn a_token_file_is_created_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/token");
        let first = BearerToken::load_or_create(&path).unwrap();
        let second = BearerToken::load_or_create(&path).unwrap();
        assert_eq!(first, second);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn only_health_and_version_paths_are_public() {
        assert!(is_public("/healthz"));
        assert!(is_public("/readyz/ping"));
        assert!(is_public("/version"));
        assert!(!is_public("/versions"));
        assert!(!is_public("/api/v1/secrets"));
        assert!(!is_public("/healthzz"));
    }
}

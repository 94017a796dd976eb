//! The crate's one error type.

/// Everything that can go wrong in this crate.
///
/// Messages are lowercase and never contain a secret (an app password, a
/// signing key, an access or refresh JWT): those travel in [`crate::Secret`],
/// whose `Debug` is redacted, and are never formatted into a message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A DID, did:key, AT-URI, NSID, TID or CID that does not parse.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was being parsed ("did:key", "at-uri", ...).
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// A record that cannot be encoded in the atproto data model.
    #[error("cannot encode record as dag-cbor: {0}")]
    Encode(String),
    /// An attestation signature that does not verify.
    #[error("attestation signature invalid: {0}")]
    BadSignature(String),
    /// A service-auth JWT the receiver must reject (401 `Unauthorized`).
    #[error("service auth rejected: {0}")]
    Unauthorized(String),
    /// A valid service-auth JWT whose issuer may not do this (403
    /// `Forbidden`): the issuer is not the author of the referenced record.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The DID document could not be fetched or has no usable entry.
    #[error("cannot resolve {did}: {reason}")]
    Resolve {
        /// The DID being resolved.
        did: String,
        /// Why resolution failed.
        reason: String,
    },
    /// The requested record does not exist (XRPC `RecordNotFound`, or a 404).
    #[error("record not found: {uri}")]
    RecordNotFound {
        /// The AT-URI asked for.
        uri: String,
    },
    /// The server answered an XRPC call with an error status and body.
    #[error("{nsid} answered {status} {error}: {message}")]
    Xrpc {
        /// The method called.
        nsid: String,
        /// The HTTP status.
        status: u16,
        /// The `error` field of the body (e.g. `InvalidRequest`, `AuthRequired`).
        error: String,
        /// The `message` field of the body (may be empty).
        message: String,
    },
    /// The call did not complete: connection refused, reset, timed out, or
    /// the answer was not the expected JSON.
    #[error("{nsid} failed: {reason}")]
    Transport {
        /// The method called.
        nsid: String,
        /// What happened (never includes a request header or body).
        reason: String,
        /// True when the request timed out.
        timed_out: bool,
    },
}

impl Error {
    pub(crate) fn invalid(what: &'static str, reason: impl std::fmt::Display) -> Self {
        Self::Invalid {
            what,
            reason: reason.to_string(),
        }
    }

    /// Whether trying the same call again later can succeed: transport
    /// failures, 5xx, 429 and 408.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transport { .. } | Self::Resolve { .. } => true,
            Self::Xrpc { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            _ => false,
        }
    }

    /// Whether the server refused our credentials (401, or the XRPC errors
    /// `AuthRequired`, `ExpiredToken`, `InvalidToken`, `AuthenticationRequired`).
    #[must_use]
    pub fn is_auth(&self) -> bool {
        match self {
            Self::Xrpc { status, error, .. } => {
                *status == 401
                    || matches!(
                        error.as_str(),
                        "AuthRequired" | "ExpiredToken" | "InvalidToken" | "AuthenticationRequired"
                    )
            }
            Self::Unauthorized(_) => true,
            _ => false,
        }
    }

    /// The XRPC `error` name, when the server sent one.
    #[must_use]
    pub fn xrpc_error(&self) -> Option<&str> {
        match self {
            Self::Xrpc { error, .. } => Some(error),
            Self::RecordNotFound { .. } => Some("RecordNotFound"),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The one error type of the reconcilers.

use std::time::Duration;

/// Everything a reconcile can fail with.
///
/// Each variant carries the context a person needs to act on it; the
/// [`Error::category`] is the bounded label used for metrics and Events.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API server failed.
    #[error("{action} failed: {source}")]
    Kube {
        /// What the reconciler was doing, e.g. `apply ComputeContract socialweb-system/nodes-…`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },

    /// A call to the market failed.
    #[error("market {operation} for {contract} failed: {source}")]
    Market {
        /// The market operation (`publish`, `accept`, `release`, …).
        operation: &'static str,
        /// The ComputeContract it was for, as `namespace/name`.
        contract: String,
        /// The market's error.
        #[source]
        source: market::MarketError,
    },

    /// An object cannot be reconciled as it is; the message says what to fix.
    #[error("{object} is invalid: {reason}")]
    Invalid {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// What is wrong and what to change.
        reason: String,
    },

    /// The finalizer helper failed to add or remove a finalizer, or its cleanup failed.
    #[error("finalizer of {object}: {source}")]
    Finalizer {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The helper's error.
        #[source]
        source: Box<kube::runtime::finalizer::Error<Error>>,
    },

    /// The market configuration of a Requester cannot be built.
    #[error("requester {requester} has no usable market: {reason}")]
    NoMarket {
        /// The Requester, as `namespace/name`.
        requester: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// Wraps a client error with what was being done.
    pub fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source,
        }
    }

    /// The error of a step taken to `purpose`: a client error's action
    /// says so (`read ComputeContract ns/name to release it`).
    #[must_use]
    pub fn to(self, purpose: &str) -> Self {
        match self {
            Self::Kube { action, source } => Self::Kube {
                action: format!("{action} to {purpose}"),
                source,
            },
            other => other,
        }
    }

    /// A bounded label for metrics and Events: never an object name or a value.
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::Kube { .. } if self.is_conflict() => "conflict",
            Self::Kube { .. } => "kube",
            Self::Market { source, .. } => source.category(),
            Self::Invalid { .. } => "invalid",
            Self::Finalizer { .. } => "finalizer",
            Self::NoMarket { .. } => "no_market",
        }
    }

    /// A write lost a race with another writer (HTTP 409): requeue and read again, it is not a fault.
    #[must_use]
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Kube {
                source: kube::Error::Api(status),
                ..
            } => status.code == 409,
            Self::Finalizer { source, .. } => matches!(
                source.as_ref(),
                kube::runtime::finalizer::Error::ApplyFailed(inner)
                    | kube::runtime::finalizer::Error::CleanupFailed(inner) if inner.is_conflict()
            ),
            _ => false,
        }
    }

    /// How long to wait before trying again after this error.
    ///
    /// Conflicts retry at once (the cache has news); market errors worth
    /// retrying back off briefly; anything a person must fix waits longer.
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        match self {
            _ if self.is_conflict() => Duration::from_millis(100),
            Self::Market { source, .. } if source.is_retryable() => Duration::from_secs(2),
            Self::Invalid { .. } | Self::NoMarket { .. } => Duration::from_secs(60),
            _ => Duration::from_secs(5),
        }
    }
}

/// The reconcilers' result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_taken_to_a_purpose_says_so_and_stays_what_it_was() {
        let source = kube::Error::SerdeError(serde::de::Error::custom("no"));
        let error = Error::kube("read ComputeContract ns/a", source).to("release it");
        assert!(
            error
                .to_string()
                .starts_with("read ComputeContract ns/a to release it failed"),
            "{error}"
        );
        assert_eq!(
            error.category(),
            Error::kube("x", kube::Error::SerdeError(serde::de::Error::custom("no"))).category()
        );
        let invalid = Error::Invalid {
            object: "o".into(),
            reason: "r".into(),
        };
        assert_eq!(invalid.to("p").to_string(), "o is invalid: r");
    }
}

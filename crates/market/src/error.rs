//! The one error type of the market port.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{ContractKey, RfpId};

/// An operation of the market port, named in errors and fault knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// [`crate::Market::publish_rfp`].
    Publish,
    /// [`crate::Market::collect_bids`].
    CollectBids,
    /// [`crate::Market::accept`].
    Accept,
    /// [`crate::Market::guest_status`].
    GuestStatus,
    /// [`crate::Market::release`].
    Release,
    /// [`crate::Market::lookup`].
    Lookup,
    /// [`crate::Market::adopt`].
    Adopt,
}

impl Operation {
    /// Every operation, for tests and metrics.
    pub const ALL: [Self; 7] = [
        Self::Publish,
        Self::CollectBids,
        Self::Accept,
        Self::GuestStatus,
        Self::Release,
        Self::Lookup,
        Self::Adopt,
    ];

    /// A snake_case name, usable as a metric label.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Publish => "publish",
            Self::CollectBids => "collect_bids",
            Self::Accept => "accept",
            Self::GuestStatus => "guest_status",
            Self::Release => "release",
            Self::Lookup => "lookup",
            Self::Adopt => "adopt",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a market call failed.
///
/// Messages name the operation and the object, never a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MarketError {
    /// The market could not be reached or refused for now; retry with backoff.
    #[error("market unavailable during {operation}: {reason}")]
    Unavailable {
        /// The call that failed.
        operation: Operation,
        /// What went wrong.
        reason: String,
    },
    /// The RFP id was never issued by this market.
    #[error("unknown rfp {rfp}")]
    UnknownRfp {
        /// The id that was not found.
        rfp: RfpId,
    },
    /// The bid is no longer offered (the bidder left or is at capacity, or its
    /// terms changed); collect bids again.
    #[error("bid of {bidder} on {rfp} is no longer offered")]
    BidWithdrawn {
        /// The RFP the bid was for.
        rfp: RfpId,
        /// The bidder whose offer is gone.
        bidder: String,
    },
    /// The RFP was already accepted with another bidder's bid.
    #[error("rfp {rfp} was already accepted with the bid of {winner}")]
    RfpClosed {
        /// The RFP.
        rfp: RfpId,
        /// The bidder whose bid won.
        winner: String,
    },
    /// The receipt is malformed or does not match the market's agreement.
    #[error("invalid receipt {uri}: {reason}")]
    InvalidReceipt {
        /// The receipt's uri.
        uri: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The market knows no guest for the receipt: treat the guest as gone.
    #[error("no guest for receipt {uri}")]
    GuestNotFound {
        /// The receipt's uri.
        uri: String,
    },
    /// The RFP can never be answered as it is.
    #[error("invalid request for proposal of contract {contract}: {reason}")]
    InvalidRequest {
        /// The contract the RFP was for.
        contract: ContractKey,
        /// What is wrong with it.
        reason: String,
    },
    /// The market's configuration is unusable.
    #[error("invalid market configuration: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: String,
    },
    /// The market's state could not be read or written.
    #[error("cannot {action} market state at {path}")]
    State {
        /// `read` or `write`.
        action: &'static str,
        /// The state file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The market's state file exists but cannot be decoded.
    #[error("corrupt market state at {path}")]
    CorruptState {
        /// The state file.
        path: PathBuf,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },
}

impl MarketError {
    /// True when the same call may succeed later (retry with backoff); false
    /// when only a different call can help.
    #[must_use]
    pub const fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::State { .. })
    }

    /// True when the error means the guest is gone (a release is complete).
    #[must_use]
    pub const fn is_not_found(&self) -> bool {
        matches!(self, Self::GuestNotFound { .. })
    }

    /// A short, stable label for metrics and events.
    #[must_use]
    pub const fn category(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "unavailable",
            Self::UnknownRfp { .. } => "unknown_rfp",
            Self::BidWithdrawn { .. } => "bid_withdrawn",
            Self::RfpClosed { .. } => "rfp_closed",
            Self::InvalidReceipt { .. } => "invalid_receipt",
            Self::GuestNotFound { .. } => "guest_not_found",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::State { .. } => "state_io",
            Self::CorruptState { .. } => "corrupt_state",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_errors_are_retryable() {
        let unavailable = MarketError::Unavailable {
            operation: Operation::Release,
            reason: "connection reset".to_owned(),
        };
        assert!(unavailable.is_retryable());
        assert_eq!(unavailable.category(), "unavailable");
        assert_eq!(
            unavailable.to_string(),
            "market unavailable during release: connection reset"
        );
        let unknown = MarketError::UnknownRfp {
            rfp: RfpId::new("rfp-x"),
        };
        assert!(!unknown.is_retryable());
        let invalid = MarketError::InvalidReceipt {
            uri: "u".to_owned(),
            reason: "r".to_owned(),
        };
        assert!(!invalid.is_retryable());
        assert!(!invalid.is_not_found());
        assert!(
            MarketError::GuestNotFound {
                uri: "u".to_owned()
            }
            .is_not_found()
        );
    }

    #[test]
    fn operation_labels_are_distinct() {
        let mut labels: Vec<_> = Operation::ALL.iter().map(|op| op.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), Operation::ALL.len());
    }
}

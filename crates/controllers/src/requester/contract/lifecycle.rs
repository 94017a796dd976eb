//! The vocabulary of the contract lifecycle: timing, the market as decide
//! sees it, the commands it asks for and the answers it gets back.

use std::time::Duration;

use api::Receipt;
use market::{Bid, GuestInfo, GuestStatus, ReleaseOutcome};

/// How long the contract controller waits between polls and retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    /// First retry delay after a failed market call; doubled per attempt.
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Poll interval while a guest boots.
    pub boot_poll: Duration,
    /// Poll interval while a Deployed guest has not reported its node identity.
    pub register_poll: Duration,
    /// How often the guest watch asks the market, in one call, about the
    /// guests of every Deployed contract whose node registered (such a
    /// contract schedules no poll of its own); bounds how late a lost guest
    /// is seen.
    pub guest_poll: Duration,
    /// Poll interval while waiting for the market to confirm a release.
    pub release_poll: Duration,
    /// How often a contract waiting for a free `maxInFlight` slot looks again.
    pub slot_wait: Duration,
    /// Failed release attempts after which the phase shows Failed (retries go on).
    pub release_failed_after: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            retry_base: Duration::from_secs(5),
            retry_max: Duration::from_secs(300),
            boot_poll: Duration::from_secs(2),
            register_poll: Duration::from_secs(5),
            guest_poll: Duration::from_secs(60),
            release_poll: Duration::from_secs(2),
            slot_wait: Duration::from_secs(5),
            release_failed_after: 5,
        }
    }
}

impl Timing {
    /// The delay before attempt `attempts + 1`: `retry_base * 2^(attempts-1)`, capped.
    #[must_use]
    pub fn backoff(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(20);
        self.retry_base
            .saturating_mul(1_u32 << doublings)
            .min(self.retry_max)
    }
}

/// What the contract's namespace offers to run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarketView {
    /// No Requester runs this namespace; `reason` says what to do.
    Missing {
        /// A message a person can act on.
        reason: String,
    },
    /// The Requester `requester` runs the contract.
    Ready {
        /// The Requester's name.
        requester: String,
        /// `spec.bidWindowSeconds`.
        bid_window: Duration,
        /// Whether fewer than `spec.maxInFlight` other contracts bid or boot.
        slot_free: bool,
        /// The Requester is being deleted: every guest is released.
        root_deleting: bool,
    },
}

/// The kind of a market call, to say which one failed: the market port's own.
pub use market::Operation;

/// A market call `act` makes for the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Publish the contract's request for proposal (idempotent per contract).
    Publish,
    /// Collect the bids of the contract's request for proposal.
    CollectBids,
    /// Accept this bid on the contract's request for proposal.
    Accept(Bid),
    /// Ask the provider about the guest.
    GuestStatus(Receipt),
    /// Release the guest.
    Release(Receipt),
    /// Look the guest up (`None` = gone).
    Lookup(Receipt),
    /// Take over the guest.
    Adopt(Receipt),
}

impl Command {
    /// Whether the call rents (publishes, accepts, takes over): the status
    /// decided before it is written before it, so a stale copy of the
    /// contract cannot make it a second time. The others read, or release
    /// (which is sent again until the market confirms, and harmless twice).
    #[must_use]
    pub const fn rents(&self) -> bool {
        matches!(self, Self::Publish | Self::Accept(_) | Self::Adopt(_))
    }

    /// The operation this command performs.
    #[must_use]
    pub const fn operation(&self) -> Operation {
        match self {
            Self::Publish => Operation::Publish,
            Self::CollectBids => Operation::CollectBids,
            Self::Accept(_) => Operation::Accept,
            Self::GuestStatus(_) => Operation::GuestStatus,
            Self::Release(_) => Operation::Release,
            Self::Lookup(_) => Operation::Lookup,
            Self::Adopt(_) => Operation::Adopt,
        }
    }
}

/// How a market call failed, as far as the lifecycle cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Try the same call again later.
    Retryable,
    /// The guest is gone (counts as released).
    NotFound,
    /// The market does not know the request for proposal: publish again.
    UnknownRfp,
    /// The bid is no longer offered, or another bid won: collect again.
    BidGone,
    /// A receipt does not verify at this market.
    InvalidReceipt,
    /// The request can never be answered as it is.
    InvalidRequest,
    /// Anything else; retried with backoff.
    Other,
}

/// A failed market call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarketFailure {
    /// What kind of failure it is.
    pub kind: FailureKind,
    /// The market's message (names objects, never secrets).
    pub message: String,
}

impl MarketFailure {
    /// Classifies a market error.
    #[must_use]
    pub fn from_error(error: &market::MarketError) -> Self {
        use market::MarketError as E;
        let kind = match error {
            _ if error.is_not_found() => FailureKind::NotFound,
            _ if error.is_retryable() => FailureKind::Retryable,
            E::UnknownRfp { .. } => FailureKind::UnknownRfp,
            E::BidWithdrawn { .. } | E::RfpClosed { .. } => FailureKind::BidGone,
            E::InvalidReceipt { .. } => FailureKind::InvalidReceipt,
            E::InvalidRequest { .. } => FailureKind::InvalidRequest,
            _ => FailureKind::Other,
        };
        Self {
            kind,
            message: error.to_string(),
        }
    }
}

/// What the market answered to the last [`Command`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// No call was made yet in this reconcile.
    Nothing,
    /// The request for proposal is published.
    Published,
    /// The bids so far, cheapest first.
    Bids(Vec<Bid>),
    /// `bid` was accepted and the market returned this verified receipt.
    Accepted {
        /// The accepted bid.
        bid: Bid,
        /// Its receipt.
        receipt: Receipt,
    },
    /// What the provider says about the guest.
    Guest(GuestStatus),
    /// The release was sent, and what the market could say about it.
    ReleaseSent(ReleaseOutcome),
    /// The guest as the market knows it; `None` = gone.
    Lookup(Option<GuestInfo>),
    /// The guest of `spec.adopt` was taken over.
    Adopted(GuestInfo),
    /// A call failed.
    Failed {
        /// Which call.
        operation: Operation,
        /// How.
        failure: MarketFailure,
    },
}

//! The condition types and reasons the Requester controller writes.
//!
//! A ComputeContract carries up to five conditions:
//! - `Bidding`: True while bids are collected; its `lastTransitionTime` is the
//!   start of the bid window. False with why a contract waits (no Requester,
//!   too many in flight, no bids) or `BidAccepted`.
//! - `Accepted`: Unknown while the winning bid is being accepted, True once the
//!   receipt is verified and recorded.
//! - `Deployed`: False while the guest boots (or when it failed), True once it is
//!   on the network.
//! - `Released`: present once the guest must go: False while the release is
//!   sent or retried, True once it is done, its reason saying how far the
//!   market could tell: `GuestGone` (confirmed gone), `ReleaseAcknowledged`
//!   (the provider took it; the protocol confirms nothing more) or
//!   `ReleaseUnconfirmed` (the provider took it, but its records show it was
//!   lost: a person must ask the provider to stop the machine).
//! - `Ready`: derived; True only in phase Deployed.

use api::{Condition, ConditionStatus, set_condition};
use chrono::{DateTime, Utc};

use crate::message::cap;
use crate::time::to_time;

/// Condition type: bids are being collected (its lastTransitionTime starts the window).
pub const BIDDING: &str = "Bidding";
/// Condition type: the winning bid's receipt is verified and recorded.
pub const ACCEPTED: &str = "Accepted";
/// Condition type: the guest is on the network.
pub const DEPLOYED: &str = "Deployed";
/// Condition type: the guest is confirmed gone.
pub const RELEASED: &str = "Released";
/// Condition type: derived; the contract's machine is usable.
pub const READY: &str = "Ready";

/// The reasons the contract's and the Requester's conditions give
/// (PascalCase values, one constant each).
pub mod reason {
    /// The namespace has no Requester to run the contract.
    pub const NO_REQUESTER: &str = "NoRequester";
    /// `maxInFlight` contracts are already bidding or booting.
    pub const MAX_IN_FLIGHT: &str = "MaxInFlight";
    /// The contract lacks the release finalizer, so nothing is rented for it.
    pub const NO_RELEASE_FINALIZER: &str = "NoReleaseFinalizer";
    /// The request for proposal is out.
    pub const RFP_PUBLISHED: &str = "RfpPublished";
    /// The bid window closed without a bid.
    pub const NO_BIDS: &str = "NoBids";
    /// The winning bid is being accepted.
    pub const ACCEPTING: &str = "Accepting";
    /// The winning bid was accepted and its receipt verified.
    pub const BID_ACCEPTED: &str = "BidAccepted";
    /// A running guest was taken over (`spec.adopt`).
    pub const ADOPTED: &str = "Adopted";
    /// The guest named in `spec.adopt` cannot be taken over.
    pub const ADOPT_FAILED: &str = "AdoptFailed";
    /// The guest named in `spec.adopt` belongs to another account than
    /// the contract's `ownerDid`: it is not taken over (nor released).
    pub const ADOPT_REFUSED: &str = "AdoptRefused";
    /// The guest is booting.
    pub const BOOTING: &str = "Booting";
    /// The guest is reachable.
    pub const ON_NETWORK: &str = "OnNetwork";
    /// The guest is reachable and reported its node identity.
    pub const NODE_REGISTERED: &str = "NodeRegistered";
    /// The provider failed to boot the guest.
    pub const BOOT_FAILED: &str = "BootFailed";
    /// The guest disappeared at the provider without a release.
    pub const GUEST_LOST: &str = "GuestLost";
    /// The release was sent; waiting for the market to confirm.
    pub const RELEASING: &str = "Releasing";
    /// Sending the release (or confirming it) failed; it is retried.
    pub const RELEASE_FAILED: &str = "ReleaseFailed";
    /// The market confirmed the guest is gone.
    pub const GUEST_GONE: &str = "GuestGone";
    /// The provider acknowledged the release and nothing since says the
    /// guest runs; the market has no confirmation (the atproto market).
    pub const RELEASE_ACKNOWLEDGED: &str = "ReleaseAcknowledged";
    /// The provider acknowledged the release but the market sees it was
    /// lost (the provider restarted and forgot the contract, or the guest still
    /// reports); the machine may run on until a person has the provider stop it.
    pub const RELEASE_UNCONFIRMED: &str = "ReleaseUnconfirmed";
    /// Nothing was rented, so there is nothing to release.
    pub const NOTHING_RENTED: &str = "NothingRented";
    /// The market refuses the request as it is; the spec must change.
    pub const INVALID_REQUEST: &str = "InvalidRequest";
    /// The market returned or holds a receipt that does not verify.
    pub const INVALID_RECEIPT: &str = "InvalidReceipt";
    /// A market call failed and is retried with backoff.
    pub const MARKET_UNAVAILABLE: &str = "MarketUnavailable";
    /// Ready: the guest is on the network.
    pub const DEPLOYED: &str = "Deployed";

    /// Requester Ready: the market is built from the spec.
    pub const MARKET_CONFIGURED: &str = "MarketConfigured";
    /// Requester Ready: the spec names no usable market.
    pub const NO_MARKET: &str = "NoMarket";
    /// Requester Ready: the market has no bidder, so nothing can be rented.
    pub const NO_BIDDERS: &str = "NoBidders";
    /// Requester Ready: a Secret, or a key of it, that the market's spec names does not exist.
    pub const SECRET_MISSING: &str = "SecretMissing";
    /// Requester Ready: the market refused the account's credentials, or the signing key does not parse.
    pub const INVALID_CREDENTIALS: &str = "InvalidCredentials";
    /// Requester Ready: the account's PDS does not answer.
    pub const PDS_UNREACHABLE: &str = "PdsUnreachable";
    /// Requester Ready: the Requester is outside the contract namespace,
    /// which is the only one this manager runs.
    pub const OUTSIDE_CONTRACT_NAMESPACE: &str = "OutsideContractNamespace";
    /// Requester Ready: an older Requester of the namespace runs the contracts.
    pub const SUPERSEDED: &str = "Superseded";
    /// Requester Ready: the Requester is being deleted in the root delete order.
    pub const DELETING: &str = "Deleting";
}

// The contract tests name the reasons as `cond::X` beside the condition types.
pub use reason::*;

/// Sets a condition, keeping its lastTransitionTime while its status is unchanged.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) {
    set_condition(
        conditions,
        Condition::new(
            type_,
            status,
            reason,
            cap(message),
            generation,
            to_time(now),
        ),
    );
}

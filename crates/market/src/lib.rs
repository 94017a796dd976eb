//! The compute market port and its adapters.
//!
//! A Requester reconciler rents machines ("guests") on a compute market through
//! the [`Market`] port: it publishes a [`RequestForProposal`] for a contract,
//! collects [`Bid`]s while its bid window is open (the caller owns the window
//! timing; the market never sleeps), accepts the cheapest one and gets a
//! verified [`Receipt`], polls the guest's [`GuestStatus`] until it is on the
//! network, and finally releases it (the market's `vm.delete`).
//!
//! This crate knows nothing about Kubernetes: the controller maps its API types
//! onto the plain types here. [`LocalMarket`] is the embedded, seeded,
//! deterministic market used by default and by the tests; [`atproto`] rents
//! real machines on the publicdomainrelay atproto compute market.
//!
//! # Guarantees every implementation gives
//! - Publishing is idempotent per [`ContractKey`]: a second publish for the same
//!   contract returns the same [`RfpId`] and never opens a second RFP.
//! - Accepting is idempotent per RFP: accepting the winning bid again returns
//!   the same receipt, so a restart between accept and recording the receipt
//!   never rents a second guest.
//! - Releasing is idempotent: releasing a guest that is already gone is `Ok`.
//! - [`Market::lookup`] returning `None` means the guest is gone, or (for a
//!   market that cannot confirm it, [`ReleaseOutcome::Acknowledged`]) that
//!   its release was acknowledged and nothing seen since says it still runs.
//! - Errors say whether a retry can help ([`MarketError::is_retryable`]).
//! - Every identifier a market needs after a restart is either in the
//!   [`Receipt`] the caller keeps or derived again from the contract key: no
//!   market keeps state only in the memory of the process.
//!
//! # Markets that cannot be asked
//! The atproto market has no status query and no release confirmation: a
//! provider only pushes events (`vm.onNetwork`, `registerIdentity`) and
//! acknowledges a release before it tears the machine down. The port says so
//! rather than pretending:
//! - [`GuestStatus::Booting`] means "accepted, no event yet"; a provider that
//!   stays silent past the market's provisioning timeout is reported
//!   [`GuestStatus::Failed`], so the caller releases it and sees why.
//! - [`Market::release`] returns [`ReleaseOutcome::Acknowledged`] instead of
//!   [`ReleaseOutcome::Confirmed`]; a guest seen running after that is
//!   reported again by [`Market::lookup`] and [`Market::guest_status`].
//! - [`Market::release`] returns [`ReleaseOutcome::Unconfirmed`] when the
//!   provider's records show the release was lost (it restarted since it
//!   minted the receipt, or the guest reports after the release).

#![deny(missing_docs)]

pub mod atproto;
mod clock;
mod error;
pub mod local;
mod price;
mod types;

pub use atproto::{AtprotoMarket, AtprotoMarketConfig};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{MarketError, Operation};
pub use local::{LocalBidder, LocalMarket, LocalMarketConfig};
pub use price::{Amount, AmountError, Frequency, Price};
pub use types::{
    Bid, ContractKey, GuestInfo, GuestStatus, Location, Receipt, RecordRef, ReleaseOutcome,
    RequestForProposal, Resources, RfpId,
};

use async_trait::async_trait;

/// The port a Requester drives a contract through.
///
/// Object safe: use it as `Arc<dyn Market>` from tokio tasks.
///
/// # Expected flow
/// `publish_rfp` -> `collect_bids` (repeatedly, for as long as the caller's bid
/// window lasts) -> [`cheapest`] -> `accept` -> `guest_status` until
/// [`GuestStatus::is_on_network`] -> ... -> `release` -> `lookup` returns `None`.
/// A guest rented elsewhere is taken over with `adopt` instead of the first
/// three steps.
#[async_trait]
pub trait Market: Send + Sync {
    /// Publishes a request for proposal for one contract.
    ///
    /// Idempotent per `rfp.contract`: publishing again for the same contract
    /// returns the same id and keeps the first request's terms.
    ///
    /// # Errors
    /// [`MarketError::InvalidRequest`] for a request no bidder could ever
    /// answer (e.g. zero cpus); retryable errors when the market is unavailable.
    async fn publish_rfp(&self, rfp: RequestForProposal) -> Result<RfpId, MarketError>;

    /// Returns the bids received so far for an RFP, cheapest first.
    ///
    /// Once the RFP was accepted, the only bid is the accepted one (so a caller
    /// that restarted mid-way accepts it again and gets the same receipt).
    ///
    /// # Errors
    /// [`MarketError::UnknownRfp`] for an id this market never issued;
    /// [`MarketError::Unavailable`] when the market could not ask any bidder
    /// (it names each bidder and why), retryable.
    async fn collect_bids(&self, rfp: &RfpId) -> Result<Vec<Bid>, MarketError>;

    /// Accepts a bid and returns the verified receipt of the agreement.
    ///
    /// A bid without a [`Bid::record`] (rebuilt from what the caller kept)
    /// names the bidder's current bid on the RFP. Verifying the receipt is the
    /// market's own: the local market checks the agreement's content id, the
    /// atproto market the receipt's signature and its binding to our accept.
    ///
    /// # Errors
    /// [`MarketError::UnknownRfp`]; [`MarketError::BidWithdrawn`] when the bid is
    /// no longer offered (collect again); [`MarketError::RfpClosed`] when the RFP
    /// was already accepted with another bidder; [`MarketError::InvalidReceipt`]
    /// when the receipt does not match the agreement.
    async fn accept(&self, rfp: &RfpId, bid: &Bid) -> Result<Receipt, MarketError>;

    /// Reports what the provider says about the guest of a receipt.
    ///
    /// A released guest reports [`GuestStatus::Terminated`]. A market without
    /// a status query answers from the events it received: `Booting` until
    /// the first, `Failed` when none came within its provisioning timeout.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`]; [`MarketError::GuestNotFound`] for a
    /// receipt this market does not know (see [`MarketError::is_not_found`]).
    async fn guest_status(&self, receipt: &Receipt) -> Result<GuestStatus, MarketError>;

    /// [`Market::guest_status`] of many guests at once, the answers in the
    /// order of `receipts`: the guest watch asks about a thousand guests a
    /// call, so a quiet fleet is polled at the cost of a call per thousand
    /// guests, not one per contract.
    ///
    /// The default asks [`Market::guest_status`] once per receipt (a market
    /// without a batch query, such as atproto, whose answers come from events
    /// it already holds); a market that can answer in one read overrides it.
    async fn guest_statuses(&self, receipts: &[Receipt]) -> Vec<Result<GuestStatus, MarketError>> {
        let mut answers = Vec::with_capacity(receipts.len());
        for receipt in receipts {
            answers.push(self.guest_status(receipt).await);
        }
        answers
    }

    /// Releases the guest of a receipt (the market's `vm.delete`).
    ///
    /// Idempotent: releasing a guest that is already gone is `Ok`, and so is
    /// sending a release again. `Ok` says what is known:
    /// [`ReleaseOutcome::Confirmed`] (the guest is stopped) or
    /// [`ReleaseOutcome::Acknowledged`] (the provider took the request; the
    /// protocol cannot confirm more) or [`ReleaseOutcome::Unconfirmed`] (the
    /// provider took it, but the market sees it was lost: a person must ask
    /// the provider to stop the machine).
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`]; retryable errors when the release could
    /// not be sent or was not acknowledged (retry with backoff, never drop it).
    async fn release(&self, receipt: &Receipt) -> Result<ReleaseOutcome, MarketError>;

    /// Looks the guest of a receipt up; `None` means the guest is gone (or,
    /// at a market that cannot confirm it, its release was acknowledged and
    /// nothing since says it still runs).
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`]; retryable errors when unavailable.
    async fn lookup(&self, receipt: &Receipt) -> Result<Option<GuestInfo>, MarketError>;

    /// Takes over a running guest named by a receipt, after checking it exists.
    ///
    /// # Errors
    /// [`MarketError::InvalidReceipt`]; [`MarketError::GuestNotFound`] when the
    /// guest does not exist or was released.
    async fn adopt(&self, receipt: &Receipt) -> Result<GuestInfo, MarketError>;
}

/// Picks the winning bid: the lowest cost per hour of use
/// ([`Price::cmp_per_hour`]), ties broken by the bidder's DID and then the
/// bid's record, so the choice is the same after a restart and in any order.
///
/// Bids in different currencies are compared by their amounts as they are;
/// a caller that mixes currencies must filter first.
#[must_use]
pub fn cheapest(bids: &[Bid]) -> Option<&Bid> {
    bids.iter().min_by(|a, b| {
        a.price
            .cmp_per_hour(&b.price)
            .then_with(|| a.bidder.cmp(&b.bidder))
            .then_with(|| a.record.cmp(&b.record))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bid(bidder: &str, cost: u64) -> Bid {
        Bid::new(bidder, Price::hourly(cost, "EUR"))
    }

    #[test]
    fn cheapest_picks_lowest_cost_then_lowest_did() {
        let bids = vec![bid("did:b", 5), bid("did:c", 3), bid("did:a", 3)];
        assert_eq!(cheapest(&bids).map(|b| b.bidder.as_str()), Some("did:a"));
        assert_eq!(cheapest(&[]), None);
    }

    #[test]
    fn market_is_object_safe() {
        fn takes(_: &std::sync::Arc<dyn Market>) {}
        let _ = takes;
    }
}

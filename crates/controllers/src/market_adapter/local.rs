//! The local market arm of the seam: `spec.market.local` to a
//! [`market::LocalMarket`], its bidders kept in step with the spec.
//!
//! # Assumptions
//! `seed` and `stateDir` are read when the market is first built; changing
//! them later needs a manager restart (bidders are applied at once with
//! [`LocalMarket::set_bidders`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use market::{LocalMarket, LocalMarketConfig};

use super::Readiness;
use crate::Clock;

/// The local market of `spec`: `injected` (its bidders set from the spec) or a new one on `clock`.
///
/// # Errors
/// The market's own error, said as a person reads it (a bidder that does not validate, an
/// unreadable state directory).
pub fn build(
    spec: &api::LocalMarket,
    clock: &Arc<dyn Clock>,
    injected: Option<&Arc<LocalMarket>>,
) -> Result<Arc<LocalMarket>, String> {
    let bidders = spec.bidders.iter().map(local_bidder).collect();
    if let Some(market) = injected {
        market.set_bidders(bidders).map_err(|e| e.to_string())?;
        return Ok(Arc::clone(market));
    }
    let config = LocalMarketConfig {
        seed: spec.seed,
        bidders,
        state_dir: spec.state_dir.as_ref().map(PathBuf::from),
        node_register_delay: Duration::ZERO,
    };
    LocalMarket::new(config, Arc::clone(clock))
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Applies a changed spec (it was `old`) to the running `market` of `requester`.
///
/// # Errors
/// The new bidders do not validate; the market keeps the old ones.
pub fn reconfigure(
    market: &LocalMarket,
    old: Option<&api::LocalMarket>,
    new: &api::LocalMarket,
    requester: &str,
) -> Result<(), String> {
    if old.map(|o| &o.bidders) != Some(&new.bidders) {
        market
            .set_bidders(new.bidders.iter().map(local_bidder).collect())
            .map_err(|e| e.to_string())?;
        tracing::info!(%requester, bidders = new.bidders.len(), "market bidders reconfigured");
    }
    if old.is_some_and(|o| o.seed != new.seed || o.state_dir != new.state_dir) {
        tracing::warn!(%requester, "seed and stateDir of a running market change only after a restart");
    }
    Ok(())
}

/// Ready once the market has a bidder: a market nobody bids on rents nothing.
#[must_use]
pub fn readiness(spec: &api::LocalMarket) -> Readiness {
    match spec.bidders.len() {
        0 => Readiness::NoBidders(
            "the local market has no bidders, so no contract can be rented: add bidders to \
             spec.market.local.bidders"
                .to_owned(),
        ),
        bidders => Readiness::Ready(format!(
            "the local market is configured with {bidders} bidders"
        )),
    }
}

/// Maps a bidder of the Requester's spec onto the local market's bidder.
#[must_use]
pub fn local_bidder(bidder: &api::LocalBidder) -> market::LocalBidder {
    market::LocalBidder::new(bidder.did.clone(), bidder.cost, bidder.currency.clone())
        .with_capacity(bidder.capacity)
        .with_boot_delay(Duration::from_millis(u64::from(bidder.boot_delay_millis)))
        .with_failure_rate_per_mille(bidder.failure_rate)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bidders_map_onto_the_local_market() {
        let bidder = api::LocalBidder {
            did: "did:web:a".to_owned(),
            cost: 7,
            currency: "EUR".to_owned(),
            capacity: 3,
            boot_delay_millis: 250,
            failure_rate: 1000,
        };
        let mapped = local_bidder(&bidder);
        assert_eq!(mapped.capacity, 3);
        assert_eq!(mapped.boot_delay, Duration::from_millis(250));
        assert_eq!(mapped.failure_rate_per_mille, 1000);
        assert_eq!((mapped.cost, mapped.currency.as_str()), (7, "EUR"));
    }

    #[test]
    fn a_market_without_bidders_is_not_ready() {
        let mut spec = api::LocalMarket::default();
        let Readiness::NoBidders(message) = readiness(&spec) else {
            panic!("ready without bidders")
        };
        assert!(message.contains("spec.market.local.bidders"), "{message}");
        spec.bidders
            .push(crate::requester::test_fixtures::bidder("did:web:a"));
        assert_eq!(
            readiness(&spec),
            Readiness::Ready("the local market is configured with 1 bidders".to_owned())
        );
    }
}

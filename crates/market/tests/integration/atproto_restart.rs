//! A restart at each market step neither rents twice nor loses a release:
//! a fresh adapter instance (new memory, new inbox, same account and scope)
//! carries on from what the repositories hold, and the fake bidder's
//! machine counters show one machine per contract, stopped by its release.

use crate::atproto_support;

use std::time::Duration;

use atproto::market as m;
use atproto_fake::{Fault, Service};
use atproto_support::{Harness, eventually, first_bid, request, usd_hourly};
use market::{AtprotoMarket, Market, Receipt, ReleaseOutcome};

const RESEND: Duration = Duration::from_secs(120);

/// Releases, checks the one machine stopped and the guest is gone.
async fn release_and_check(h: &Harness, market: &AtprotoMarket, receipt: &Receipt) {
    assert_eq!(
        market.release(receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged
    );
    h.quiet().await;
    let counters = h.bidder(0).counters();
    assert_eq!(
        (
            counters.machines_started,
            counters.machines_stopped,
            counters.running
        ),
        (1, 1, 0),
        "{counters:?}"
    );
    assert_eq!(market.lookup(receipt).await.unwrap(), None);
}

#[tokio::test]
async fn after_the_rfp_is_written_but_not_sent() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_RFP, Fault::unauthorized());
    let first = h.market();
    let rfp = first.publish_rfp(request("c")).await.unwrap();
    first.settled().await;
    drop(first);

    let market = h.market();
    assert_eq!(market.publish_rfp(request("c")).await.unwrap(), rfp);
    assert_eq!(h.own_records(m::RFP), 1, "no second request");
    let asked = market.collect_bids(&rfp).await.unwrap_err();
    assert!(asked.is_retryable(), "{asked}");
    market.settled().await;
    let bid = market.collect_bids(&rfp).await.unwrap().remove(0);
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    release_and_check(&h, &market, &receipt).await;
}

#[tokio::test]
async fn after_the_bids_are_received() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let first = h.market();
    let (rfp, bid) = first_bid(&first, "c").await;
    drop(first);

    let market = h.market();
    let again = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(again, vec![bid.clone()], "found in the bidder's repository");
    market.settled().await;
    assert_eq!(
        h.bidder(0).counters().bids,
        1,
        "a bidder with a bid is not asked again"
    );
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    release_and_check(&h, &market, &receipt).await;
}

#[tokio::test]
async fn after_the_accept_is_written_but_not_sent() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let first = h.market();
    let (rfp, bid) = first_bid(&first, "c").await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::unauthorized());
    assert!(first.accept(&rfp, &bid).await.is_err());
    drop(first);

    let market = h.market();
    let waiting = market.accept(&rfp, &bid).await.unwrap_err();
    assert!(
        waiting.to_string().contains("waiting for the receipt"),
        "{waiting}"
    );
    assert_eq!(h.bidder(0).counters().machines_started, 0);
    h.clock.advance(RESEND);
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    assert_eq!(h.own_records(m::ACCEPT), 1);
    release_and_check(&h, &market, &receipt).await;
}

#[tokio::test]
async fn after_submit_accept_is_processed_and_its_answer_lost() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let first = h.market();
    let (rfp, bid) = first_bid(&first, "c").await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::LoseAnswer);
    assert!(first.accept(&rfp, &bid).await.is_err());
    drop(first);

    let market = h.market();
    h.clock.advance(RESEND * 2);
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    assert_eq!(market.accept(&rfp, &bid).await.unwrap(), receipt);
    release_and_check(&h, &market, &receipt).await;
}

#[tokio::test]
async fn after_submit_accept_is_answered_late() {
    let mut h = Harness::start(vec![usd_hourly(0.05)]).await;
    let bidding = h.market();
    let (rfp, bid) = first_bid(&bidding, "c").await;
    drop(bidding);
    // The process that accepts gives up before the bidder answers.
    h.config.timeouts.call = Duration::from_secs(1);
    let first = h.market();
    h.net.faults.once(
        Service::Bidder,
        m::SUBMIT_ACCEPT,
        Fault::Stall(Duration::from_millis(2500)),
    );
    assert!(first.accept(&rfp, &bid).await.is_err());
    drop(first);

    h.config.timeouts.call = Duration::from_secs(5);
    let market = h.market();
    let receipt = eventually("the late receipt", || async {
        market.accept(&rfp, &bid).await.ok()
    })
    .await;
    release_and_check(&h, &market, &receipt).await;
}

#[tokio::test]
async fn after_the_release_is_written_but_not_acknowledged() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let first = h.market();
    let (rfp, bid) = first_bid(&first, "c").await;
    let receipt = first.accept(&rfp, &bid).await.unwrap();
    h.quiet().await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_EVENT, Fault::internal());
    assert!(first.release(&receipt).await.unwrap_err().is_retryable());
    assert_eq!(h.bidder(0).counters().running, 1);
    drop(first);

    let market = h.market();
    release_and_check(&h, &market, &receipt).await;
    assert_eq!(h.own_records(m::EVENT), 1, "one release, sent twice");
    assert_ne!(
        market.publish_rfp(request("c")).await.unwrap(),
        rfp,
        "the released round is closed"
    );
}

#[tokio::test]
async fn after_the_release_is_acknowledged() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let first = h.market();
    let (rfp, bid) = first_bid(&first, "c").await;
    let receipt = first.accept(&rfp, &bid).await.unwrap();
    h.quiet().await;
    release_and_check(&h, &first, &receipt).await;
    drop(first);

    let market = h.market();
    assert_eq!(market.lookup(&receipt).await.unwrap(), None);
    assert_eq!(
        market.release(&receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged
    );
    let rented_again = market.publish_rfp(request("c")).await.unwrap();
    assert_ne!(rented_again, rfp);
}
